"""``python -m controller.int``: runs, prints status, exports files, fails clearly."""
from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "controller.int", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)


def test_runs_and_writes_files(tmp_path: Path) -> None:
    r = _run("--report-port", "0", "--agent-port", "0", "--out", str(tmp_path),
             "--export-interval", "0.1", "0.2", "2")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:3] == ["time", "reports", "hops"] and len(lines) == 3
    assert (tmp_path / "csv" / "int_collector.csv").exists()


def test_port_in_use_exits_nonzero_with_message(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        r = _run("--report-port", str(port), "--agent-port", "0", "--out", str(tmp_path), "0.1", "1")
    assert r.returncode == 1
    assert f"cannot bind UDP 127.0.0.1:{port}" in r.stderr
