"""The demo command: prints a summary table and writes the PNG."""
from __future__ import annotations

import subprocess
import sys

from controller.cc.__main__ import main


def test_demo_prints_and_plots(tmp_path, capsys):
    assert main(["demo", "--flows", "4", "--ms", "1", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "HPCC" in out and "DCQCN" in out and "Jain" in out
    assert all(len(line) < 80 for line in out.splitlines() if "wrote" not in line)
    assert (tmp_path / "cc_incast.png").read_bytes()[:4] == b"\x89PNG"


def test_demo_rejects_bad_values_with_a_message(capsys):
    assert main(["demo", "--rtt-us", "1000", "--ms", "1"]) == 1
    assert "duration > 10 RTT" in capsys.readouterr().err
    r = subprocess.run([sys.executable, "-m", "controller.cc", "demo", "--flows", "0"],
                       check=False, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "flows 0 is outside 1.." in r.stderr
