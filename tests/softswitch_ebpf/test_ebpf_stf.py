"""The project's STF tests on --target ebpf: the kernel program runs each packet
(BPF_PROG_TEST_RUN) and must give the expected outputs; a test whose program uses a
construct the target does not support yet is refused with the construct's location."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest
from ebpf_helpers import ALL_STF, INCLUDE, ROOT, RUNS_ON_EBPF

from softswitch.stf import StfRunner, parse_stf
from softswitch.targets.python.switch import Switch

pytestmark = [pytest.mark.bpf, pytest.mark.root]


@pytest.mark.parametrize("program, test", ALL_STF, ids=[p.stem for p, _ in ALL_STF])
def test_stf_passes_or_is_refused_with_a_location(program, test) -> None:
    if program.stem not in RUNS_ON_EBPF:
        res = subprocess.run([sys.executable, "-m", "softswitch", "stf", "--target", "ebpf",
                              "-I", str(INCLUDE), str(program), str(test)],
                             check=False, capture_output=True, text=True, cwd=ROOT, timeout=180)
        assert res.returncode == 2, res.stdout + res.stderr
        assert re.search(r":\d+:\d+: error: unsupported on --target ebpf: ", res.stderr) \
            or "not supported on --target ebpf" in res.stderr, res.stderr
        return
    with Switch.from_file(program, include_dirs=[str(INCLUDE)], target="ebpf") as sw:
        res = StfRunner(sw, strict=True).run(parse_stf(test.read_text(), str(test)), str(test))
    assert res.ok, "\n".join(res.failures)
    assert res.packets_checked > 0


def test_stf_cli_on_ebpf_target() -> None:
    res = subprocess.run([sys.executable, "-m", "softswitch", "stf", "--target", "ebpf",
                          str(ROOT / "p4/examples/ipv4_forward.p4"),
                          str(ROOT / "p4/examples/ipv4_forward.stf")],
                         check=False, capture_output=True, text=True, cwd=ROOT, timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.strip().endswith("6 packets sent, 2 checked, 0 failures")


def test_a_wrong_expectation_fails_on_ebpf(tmp_path) -> None:
    """The kernel program's output is really compared (a changed checksum byte fails)."""
    text = (ROOT / "p4/examples/ipv4_forward.stf").read_text().replace("3f1164c9", "3f1164ca")
    with Switch.from_file(ROOT / "p4/examples/ipv4_forward.p4", target="ebpf") as sw:
        res = StfRunner(sw).run(parse_stf(text, "x.stf"), "x.stf")
    assert len(res.failures) == 1 and "differs" in res.failures[0]


def test_dump_c_prints_the_loaded_program() -> None:
    res = subprocess.run([sys.executable, "-m", "softswitch", "stf", "--target", "ebpf", "--dump-c", "-",
                          str(ROOT / "p4/examples/ipv4_forward.p4"),
                          str(ROOT / "p4/examples/ipv4_forward.stf")],
                         check=False, capture_output=True, text=True, cwd=ROOT, timeout=180)
    assert res.returncode == 0, res.stderr
    assert "int p4_pipeline(P4_CTX *ctx)" in res.stdout and "#define P4_CTX struct __sk_buff" in res.stdout
    assert "BPF_LPM_TRIE(tbl_MyIngress_ipv4_lpm" in res.stdout
    assert res.stdout.rstrip().endswith("0 failures")
