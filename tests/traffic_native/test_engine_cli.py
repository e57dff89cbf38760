"""The engine behind the CLI, experiment specs and the C API's bandwidth test.

SIGTERM ends a rank on either engine with its summary written; the runner also stops
on its stop flag (a KeyboardInterrupt swallowed by a finaliser must not leave a rank
running until its timeout); ``workload.engine`` reaches ``--engine``; tn_write_bw runs
between two processes."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from traffic.endpoint import EndpointConfig
from traffic.native_endpoint import engine_available
from traffic.runner import QpParams, RankRunner
from traffic.workloads import Pattern, make_plan, parse_size_dist

ROOT = Path(__file__).resolve().parents[2]
ENGINES = ["python"] + (["native"] if engine_available() else [])


@pytest.mark.parametrize("engine", ENGINES)
def test_sigterm_ends_a_waiting_rank_with_its_summary(tmp_path: Path, engine: str) -> None:
    ctl, out = tmp_path / "ctl.sock", tmp_path / "r1.json"
    p = subprocess.Popen([sys.executable, "-m", "traffic", "p2p", "--hosts",
                          "127.0.78.1,127.0.78.2", "--rank", "1", "-c", "5", "--control",
                          str(ctl), "-o", str(out), "--engine", engine],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert p.stdout is not None
        assert p.stdout.readline().startswith("ready rank 1")
        p.send_signal(signal.SIGTERM)
        p.send_signal(signal.SIGTERM)  # a second signal must not cost the summary
        stdout, err = p.communicate(timeout=60)  # a bound, not a speed check
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130 and "interrupted" in err
    summary = json.loads(out.read_text())
    assert summary["interrupted"] and summary["engine"] == engine
    assert json.loads(stdout.strip().splitlines()[-1])["engine"] == engine
    assert not ctl.exists()


@pytest.mark.parametrize("engine", ENGINES)
def test_runner_stops_on_its_flag(engine: str) -> None:
    plan = make_plan(Pattern.P2P, rank=1, nranks=2, qps=1, count=3,
                     sizes=parse_size_dist("4K"), seed=1, prefill=None)
    runner = RankRunner(plan, ["127.0.79.1", "127.0.79.2"], EndpointConfig(ip="127.0.79.2"),
                        QpParams(), engine=engine)
    calls = []

    def stop() -> bool:
        calls.append(1)
        return len(calls) > 3

    summary = runner.run(timeout_s=600, stop=stop)
    assert summary["interrupted"] and not summary["finished"]


def test_experiment_specs_choose_the_engine() -> None:
    from mininet_topos.experiment import SpecError, spec_from_dict
    from mininet_topos.experiment.workload import traffic_argv

    workload: dict[str, object] = {"kind": "p2p", "hosts": ["h1", "h5"]}
    base: dict[str, object] = {"name": "t", "topology": "two-dc", "workload": workload}
    spec = spec_from_dict(base)
    assert spec.workload.engine == "auto"
    native = spec_from_dict({**base, "workload": {**workload, "engine": "native"}})
    argv = traffic_argv(native, python="python", rank=0, ips=["10.0.0.1", "10.0.0.2"],
                        out=Path("r0.json"), control=None, start_at=0.0)
    assert argv[argv.index("--engine") + 1] == "native"
    with pytest.raises(SpecError, match="workload.engine"):
        spec_from_dict({**base, "workload": {**workload, "engine": "rust"}})


def _write_bw_pair(net: str, args: list[str], env: dict[str, str] | None = None
                   ) -> tuple[subprocess.CompletedProcess[str], subprocess.Popen[str], str, str]:
    """tn_write_bw's server on ``net``.2 and client on ``net``.1 with the same ``args``:
    the client's result, the server process, its stdout and stderr (the server is
    ended by PID if it outlives the test)."""
    bw = str(ROOT / "traffic/native/bin/tn_write_bw")
    srv = subprocess.Popen([bw, "--server", "--local", f"{net}.2", "--peer", f"{net}.1", *args],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        cli = subprocess.run([bw, "--local", f"{net}.1", "--peer", f"{net}.2", *args],
                             capture_output=True, text=True, timeout=60, check=False, env=env)
        out, err = srv.communicate(timeout=60)
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
    return cli, srv, out, err


@pytest.mark.skipif(not (ROOT / "traffic/native/bin/tn_write_bw").exists(),
                    reason="native engine not built (make -C traffic/native)")
def test_tn_write_bw_between_two_processes_on_loopback() -> None:
    cli, srv, out, _ = _write_bw_pair("127.0.80", ["-s", "100000", "-n", "50", "-q", "2",
                                                   "-r", "2e9"])
    assert cli.returncode == 0 and srv.returncode == 0, cli.stderr
    # bytes, iterations (messages of both QPs), Gb/s, Mpps, retransmissions, bad messages
    row = out.strip().splitlines()[3].split()
    assert row[0] == "100000" and row[1] == "100" and row[-1] == "0"
    assert float(cli.stdout.strip().splitlines()[3].split()[2]) > 0


@pytest.mark.skipif(not (ROOT / "traffic/native/bin/tn_write_bw").exists(),
                    reason="native engine not built (make -C traffic/native)")
def test_tn_write_bw_with_segmentation_offload_says_what_it_coalesced() -> None:
    cli, srv, out, _ = _write_bw_pair("127.0.82", ["-s", "1M", "-n", "20", "--gso"])
    assert cli.returncode == 0 and srv.returncode == 0, cli.stderr
    assert out.strip().splitlines()[3].split()[-1] == "0"  # no bad message
    sends = cli.stdout.strip().splitlines()[4].split()
    reads = out.strip().splitlines()[4].split()
    # " GSO: <sends> sends of <frames> frames; GRO: <reads> reads of <frames> frames"
    assert sends[0] == "GSO:" and int(sends[1]) > 0 and int(sends[4]) > int(sends[1])
    assert reads[6] == "GRO:" and int(reads[7]) > 0 and int(reads[10]) >= 20 * 1024 // 2


@pytest.mark.skipif(not (ROOT / "traffic/native/bin/tn_write_bw").exists(),
                    reason="native engine not built (make -C traffic/native)")
def test_tn_write_bw_names_engine_knobs_it_ignores() -> None:
    """A C program has no Python check in front of the engine: a TN_ENGINE_* value the
    engine cannot use runs the default and is named on stderr, once per engine."""
    env = {**os.environ, "TN_ENGINE_LEAD_MAX_US": "2000", "TN_ENGINE_SPIN": "yes",
           "TN_ENGINE_SPIN_BUDGET": "", "TN_ENGINE_RT": "1"}
    cli, srv, _, srv_err = _write_bw_pair("127.0.81", ["-s", "20000", "-n", "5", "-q", "1",
                                                       "-r", "1e9"], env)
    assert cli.returncode == 0 and srv.returncode == 0, cli.stderr
    for err in (cli.stderr, srv_err):
        assert err.count('TN_ENGINE_LEAD_MAX_US="2000" ignored (it takes microseconds, '
                         '20..1000); the default applies') == 1, err
        assert err.count('TN_ENGINE_SPIN="yes" ignored (it takes 0 or 1)') == 1, err
        assert "TN_ENGINE_RT" not in err and "SPIN_BUDGET" not in err, err


@pytest.mark.root
@pytest.mark.bpf
@pytest.mark.slow
@pytest.mark.skipif(not engine_available(), reason="native engine not built")
def test_recovery_sweep_runs_auto_on_the_native_engine(tmp_path: Path) -> None:
    """Issue 27: `engine: native` runs mode auto in the engine too (the plans decided
    in Python per message), on namespaces with the WAN delay line and eBPF loss."""
    from mininet_topos.experiment.recovery_sweep import RecoverySweep, run_sweep

    sw = RecoverySweep(losses=["ge:5%/3"], rtt_ms=[20], modes=["auto"], size="64K",
                       count=6, rate="50M", timeout_s=30, engine="native")
    summary = run_sweep(sw, tmp_path, log=lambda *_: None)
    (row,) = summary["recovery"]
    assert row["endpoint"] == "native" and row["finished"] and row["messages"] == 6, row
    assert row["repaired_pkts"] > 0 and sum(row["schemes"].values()) == 6, row
    assert all(s.startswith(("fec", "tail")) for s in row["schemes"]), row["schemes"]
