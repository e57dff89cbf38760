"""The native delay line's command line and params file: bad input gets a clear error
naming what and where, exit status 1, no crash (no root needed: it fails before it
opens an interface)."""
import subprocess
from pathlib import Path

import pytest

from mininet_topos.delayline import WanParams
from mininet_topos.wan.delayline_link import NATIVE_LINE, native_line_built, native_params_text

pytestmark = pytest.mark.skipif(not native_line_built(),
                                reason="make -C mininet_topos/wan/native has not run")


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(NATIVE_LINE), *args], capture_output=True, text=True, check=False,
                          timeout=10)


@pytest.mark.parametrize(("args", "message"), [
    (["--a", "x0", "--b", "y0", "--delay-ms", "300"], "delay_ms 300 out of range 0..200"),
    (["--a", "x0", "--b", "y0", "--delay-ms", "ten"], "delay_ms=ten not understood"),
    (["--a", "x0", "--b", "y0", "--rate-mbps", "-1"], "rate_mbps -1 out of range"),
    (["--a", "x0", "--b", "y0", "--delay-ms", "5", "--jitter-ms", "6"],
     "jitter_ms 6 out of range 0..delay_ms (5)"),
    (["--a", "x0", "--b", "y0", "--queue-pkts", "0"], "queue_pkts 0 out of range 1..1000000"),
    (["--a", "x0", "--b", "y0", "--loss", "bernoulli:0.1"], "this delay line applies no loss"),
    (["--a", "x0"], "--a and --b are required"),
    (["--a", "x0", "--b"], "--b needs a value"),
    (["--a", "nosuchif0", "--b", "nosuchif1"], "cannot open interface nosuchif0"),
])
def test_bad_arguments_name_the_field(args, message):
    r = run(*args)
    assert r.returncode == 1 and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and "Segmentation" not in r.stderr


def test_bad_params_file_names_the_line(tmp_path: Path):
    f = tmp_path / "p.txt"
    f.write_text("# a comment\ndelay_ms=5\nrate_mbps fast\n")
    r = run("--a", "x0", "--b", "y0", "--params", str(f))
    assert r.returncode == 1 and f"params file {f} line 3: expected key=value" in r.stderr
    f.write_text("delay_ms=5\nspeed=3\n")
    r = run("--a", "x0", "--b", "y0", "--params", str(f))
    assert f"params file {f} line 2: speed=3 not understood" in r.stderr
    r = run("--a", "x0", "--b", "y0", "--params", str(tmp_path / "missing"))
    assert r.returncode == 1 and "No such file or directory" in r.stderr


def test_params_text_round_trips_every_field(tmp_path: Path):
    """What WanLink writes is what the line reads back (its ranges checked again)."""
    params = WanParams(delay_ms=12.5, jitter_ms=0.25, rate_mbps=950.0, queue_pkts=4000,
                       reorder=True, seed=7)
    f = tmp_path / "p.txt"
    f.write_text(native_params_text(params))
    # the interfaces do not exist, so it stops there: after the params were accepted
    r = run("--a", "nosuchif0", "--b", "nosuchif1", "--params", str(f))
    assert "cannot open interface nosuchif0" in r.stderr, r.stderr
    assert native_params_text(params).splitlines() == [
        "delay_ms=12.5", "jitter_ms=0.25", "rate_mbps=950.0", "queue_pkts=4000",
        "reorder=1", "seed=7", "loss=none"]


def test_help_names_the_options():
    r = run("--help")
    assert r.returncode == 0 and "--rate-mbps" in r.stdout and "example:" in r.stdout
