"""The start gate: no rank sends before every rank can receive (traffic/startgate.py)."""
from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from traffic import startgate
from traffic.errors import TrafficError


def test_the_launcher_sees_each_marker_and_the_ranks_read_one_time(tmp_path: Path) -> None:
    start = tmp_path / "start"
    assert startgate.wait_all_ready(start, 2, timeout_s=0.05) == [0, 1]
    startgate.mark_ready(start, 1)
    assert startgate.wait_all_ready(start, 2, timeout_s=0.05) == [0]
    # a rank process that exited is not waited for
    assert startgate.wait_all_ready(start, 2, timeout_s=60, alive=lambda: False) == [0]
    startgate.mark_ready(start, 0)
    assert startgate.wait_all_ready(start, 2, timeout_s=0) == []
    with pytest.raises(TrafficError, match="no start time in .*start within 0.05 s"):
        startgate.wait_start(start, 0.05)
    startgate.release(start, 1234.5)
    assert startgate.wait_start(start, 1) == 1234.5
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "start", "start.ready-0", "start.ready-1"]   # no temporary file left
    startgate.clear(start)   # a re-run into the same folder waits again
    assert list(tmp_path.iterdir()) == []


def test_the_launcher_releases_a_moment_after_the_last_marker(tmp_path: Path) -> None:
    start = tmp_path / "start"
    for r in range(3):
        startgate.mark_ready(start, r)
    before = time.time()
    at, missing = startgate.start_together(start, 3, timeout_s=0)
    assert missing == [] and at >= before + 0.16   # 0.1 s + 20 ms a rank
    assert startgate.wait_start(start, 1) == pytest.approx(at, abs=1e-6)
    # a planned start later than that is kept; missing ranks are named, not waited for
    startgate.clear(start)
    startgate.mark_ready(start, 0)
    at, missing = startgate.start_together(start, 2, timeout_s=60, alive=lambda: False,
                                           not_before=before + 100)
    assert missing == [1] and at == before + 100


def _rank(rank: int, hosts: str, start: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "traffic", "allreduce", "--hosts", hosts, "--rank", str(rank),
         "-s", "256K", "-c", "1", "--rate", "200M", "--start-file", str(start),
         "--timeout", "60", "-o", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def test_a_rank_that_binds_late_loses_no_first_window(tmp_path: Path) -> None:
    """Real ranks on loopback: rank 1 binds 1.5 s before rank 0.  Released together by
    the gate, neither sends to an unbound peer, so nothing is retransmitted (with a
    fixed start time rank 1's first window went to a closed port)."""
    net = f"127.{secrets.randbelow(200) + 20}.{secrets.randbelow(250) + 1}"
    hosts = f"{net}.10,{net}.11"
    start = tmp_path / "start"
    procs = [_rank(1, hosts, start, tmp_path / "r1.json")]
    try:
        deadline = time.monotonic() + 60
        while not startgate.ready_path(start, 1).exists() and time.monotonic() < deadline:
            assert procs[0].poll() is None, procs[0].communicate()[1][-2000:]
            time.sleep(0.02)
        time.sleep(1.5)
        procs.append(_rank(0, hosts, start, tmp_path / "r0.json"))
        _at, missing = startgate.start_together(
            start, 2, timeout_s=60, alive=lambda: all(p.poll() is None for p in procs))
        assert missing == []
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err[-2000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for r in (0, 1):
        s = json.loads((tmp_path / f"r{r}.json").read_text())
        assert s["finished"] and s["collective"]["result_ok"] is True, s["collective"]
        req = s["endpoint"]["requesters"]
        assert [q["retx_pkts"] for q in req.values()] == [0], req
        assert s["endpoint"]["endpoint"]["unknown_qp"] == 0
