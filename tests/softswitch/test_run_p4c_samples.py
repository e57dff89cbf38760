"""softswitch.tools.run_p4c_samples: finds the v1model STF samples of a p4c checkout,
runs each in its own process and counts outcomes (pass, runt, differs, error)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "p4" / "examples" / "ipv4_forward"


def test_counts_samples_by_outcome(tmp_path: Path) -> None:
    d = tmp_path / "testdata" / "p4_16_samples"
    d.mkdir(parents=True)
    program = EXAMPLE.with_suffix(".p4").read_text(encoding="utf-8")
    for name, stf in (("good-bmv2", EXAMPLE.with_suffix(".stf").read_text(encoding="utf-8")),
                      ("runt-bmv2", "packet 0 0102\n"),   # dropped: not IPv4
                      ("wrong-bmv2", "packet 0 000000000001 000000000002 0800\nexpect 0 ff\n"),
                      ("bad-bmv2", "frobnicate\n")):
        (d / f"{name}.p4").write_text(program, encoding="utf-8")
        (d / f"{name}.stf").write_text(stf, encoding="utf-8")
    (d / "psa-only.p4").write_text("#include <psa.p4>\n", encoding="utf-8")   # not v1model: skipped
    (d / "psa-only.stf").write_text("", encoding="utf-8")
    passes = tmp_path / "passes.txt"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, "-m", "softswitch.tools.run_p4c_samples", str(tmp_path),
                          "--write-passes", str(passes)], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=300, check=True)
    lines = res.stdout.splitlines()
    assert "pass     good-bmv2" in lines, res.stdout
    assert "pass     runt-bmv2" in lines, res.stdout          # the Python target runs short frames
    assert any(ln.startswith("differs  wrong-bmv2") for ln in lines), res.stdout
    assert any(ln.startswith("error    bad-bmv2") for ln in lines), res.stdout
    assert lines[-1].startswith("# 4 samples in ") and lines[-1].endswith(
        "pass 2, refused 0, runt 0, error 1, differs 1"), res.stdout
    assert passes.read_text(encoding="utf-8").split() == ["good-bmv2", "runt-bmv2"]


def test_runt_frames_are_counted_before_running_on_the_kernel_target(tmp_path: Path) -> None:
    from softswitch.tools.run_p4c_samples import run_one, sends_runt
    stf = tmp_path / "s.stf"
    stf.write_text("packet 0 0102 03\nexpect 0 0102 03\n", encoding="utf-8")
    assert sends_runt(stf)
    out = run_one(tmp_path / "s.p4", stf, "ebpf", 10.0)
    assert (out.kind, out.reason) == ("runt", "a frame under 14 bytes")
    stf.write_text("packet 0 " + "00" * 14 + "\n", encoding="utf-8")
    assert not sends_runt(stf)
