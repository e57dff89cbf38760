"""Real sockets on loopback: a path that loses nothing sees no retransmission, and
every rank checks the data it received (a wrong result is an error exit).

Loopback loses nothing, so any retransmission here is spurious: a timer that fired
because a busy peer (or our own unread socket backlog) delayed the ACKs, or a window
declared lost from an ACK that was for the original, not the retransmission.
"""
from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")])}


def _traffic(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "traffic", *args], capture_output=True, check=False,
                          text=True, timeout=timeout, env=ENV)


def test_readme_allreduce_on_loopback_retransmits_nothing(tmp_path: Path) -> None:
    # the README's example, rate far above what the Python endpoint sustains
    r = _traffic("local", "allreduce", "-n", "4", "-s", "4M", "-c", "3", "--rate", "500M",
                 "-O", str(tmp_path))
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    ranks = [x for x in lines if "rank" in x]
    assert len(ranks) == 4
    for x in ranks:
        assert x["result_ok"] is True
    assert lines[-1]["result_ok"] is True
    summaries = [json.loads((tmp_path / f"rank{k}.json").read_text()) for k in range(4)]
    for d in summaries:
        for q in d["endpoint"]["requesters"].values():
            # nothing is declared lost from ACKs: a retransmission here comes only from
            # a timer that fired while a peer was descheduled longer than it (a host
            # loaded by others), one packet each, and most are recognised by their ACK
            assert q["retx_pkts"] == q["timeouts"] >= q["spurious_timeouts"], q
    for k, d in enumerate(summaries):   # what arrived twice is what a timer resent
        dups = sum(q["duplicates"] for q in d["endpoint"]["responders"].values())
        assert dups == sum(q["timeouts"] for x in summaries
                           for q in x["endpoint"]["requesters"].values()
                           if q["peer_ip"] == d["hosts"][k])


def test_ranks_with_different_seeds_fail_their_data_check(tmp_path: Path) -> None:
    net = f"127.{secrets.randbelow(200) + 20}.{secrets.randbelow(250) + 1}"
    hosts = f"{net}.10,{net}.11"
    start = f"{time.time() + 1.5:.3f}"
    procs = [subprocess.Popen(
        [sys.executable, "-m", "traffic", "p2p", "--hosts", hosts, "--rank", str(rank),
         "--start-at", start, "-s", "16K", "-c", "3", "--seed", str(seed),
         "-o", str(tmp_path / f"rank{rank}.json")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
        for rank, seed in ((1, 2), (0, 1))]
    outs = {p.args[p.args.index("--rank") + 1]: p.communicate(timeout=60) + (p.returncode,)
            for p in procs}
    out, err, rc = outs["1"]   # the receiver regenerates rank 0's data with the wrong seed
    assert rc == 3, (out, err)
    assert "WRONG DATA" in err
    d = json.loads((tmp_path / "rank1.json").read_text())
    assert d["collective"]["result_ok"] is False
    assert len(d["collective"]["bad_messages"]) == 3
    assert outs["0"][2] == 0   # the sender received nothing to check
