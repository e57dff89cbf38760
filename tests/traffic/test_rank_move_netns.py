"""Moving a rank of a running ring all-reduce to a spare host (traffic.rankmove): four
ranks and a standby in five namespaces on one bridge; rank 2 moves to the spare in the
middle of the job, the other ranks keep running, and every rank's data check (the
spare's too) passes.  Forged or impossible move commands get a counted rejection that
names what is wrong, and change nothing."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.traffic.netns_util import finish, ring_with_standby, star
from traffic.collog import read_logs
from traffic.control import request
from traffic.errors import ControlError
from traffic.rankmove import move_rank

ITERS = 200
MOVED = 2


def _wait(pred, timeout_s: float, what: str) -> None:
    end = time.monotonic() + timeout_s
    while not pred():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.05)


def _iter_of(path: str) -> int:
    try:
        return int(request(path, {"cmd": "collective"}, 1.0)["collective"]["iter"])
    except (ControlError, KeyError, TypeError, ValueError):  # busy or not bound yet: again
        return -1


@pytest.mark.timeout(180)
def test_a_rank_moves_to_a_spare_and_the_job_completes_verified(tmp_path: Path) -> None:
    with star(5, subnet_prefix="10.79.0") as hosts:
        ranks, spare = hosts[:4], hosts[4]
        args = ["-s", "256K", "-c", str(ITERS), "--rate", "50M", "--engine", "python",
                "--timeout", "120", "--coll-log", str(tmp_path / "coll")]
        with ring_with_standby(ranks, spare, tmp_path, args) as (ctl, sctl, procs):
            # forged and impossible commands: each refused, naming what, nothing changes
            bad = {
                "rank 9 outside the ring": {"rank": 9, "to": spare.ip, "at_iter": 30},
                f"{ranks[0].ip} is already the host of rank 0":
                    {"rank": MOVED, "to": ranks[0].ip, "at_iter": 30},
                "iteration outside 1..199": {"rank": MOVED, "to": spare.ip, "at_iter": ITERS},
                "is not an IPv4 address": {"rank": MOVED, "to": "10.79.0.300", "at_iter": 30},
                "unknown key(s) ['force']":
                    {"rank": MOVED, "to": spare.ip, "at_iter": 30, "force": True},
            }
            for what, cmd in bad.items():
                rep = request(ctl[1], {"cmd": "move_rank", **cmd}, 5.0)
                assert what in json.dumps(rep), (what, rep)
            rep = request(sctl, {"cmd": "move_rank", "rank": MOVED, "to": "10.79.0.99",
                                 "at_iter": 30}, 5.0)
            assert rep["move_rank"]["status"] == "rejected"
            assert "10.79.0.99 is not this standby's address" in rep["move_rank"]["error"]
            # the move, once the job is under way
            _wait(lambda: _iter_of(ctl[MOVED]) >= 3, 60, "the job to reach iteration 3")
            res = move_rank(ctl, sctl, MOVED, spare.ip, margin_s=1.0, timeout_s=10.0)
            assert res.ok, res.as_dict()
            at = res.at_iter
            assert at is not None and 3 < at < ITERS
            finish(procs, 150)
        summaries = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(4)]
        sp = json.loads((tmp_path / "spare.json").read_text())
        for s in [*summaries, sp]:
            assert s["finished"] and s["collective"]["result_ok"] is True, s["collective"]
        coll = [s["collective"] for s in summaries]
        # the moved rank ran 0..at-1, the spare at..end; the others every iteration
        assert coll[MOVED]["iterations"] == at and coll[MOVED]["move"]["role"] == "moved"
        assert sp["rank"] == MOVED and sp["hosts"][MOVED] == spare.ip
        assert (sp["collective"]["first_iteration"], sp["collective"]["iterations"]) \
            == (at, ITERS - at)
        assert sp["collective"]["move"]["role"] == "spare"
        for r in (0, 1, 3):
            assert coll[r]["iterations"] == ITERS
        assert [coll[r]["move"]["role"] for r in (0, 1, 3)] == ["bystander", "sender",
                                                                 "receiver"]
        # the refusals were counted where they were sent, and changed nothing
        # (the malformed address and the unknown key were refused by the parser already)
        assert len(coll[1]["move_rejects"]) == 3
        assert summaries[1]["endpoint"]["endpoint"]["control_errors"] == 5
        # the collective log has every step of every rank once, the moved rank's from
        # both of its hosts (the spare appends to the same rank file)
        recs = read_logs([tmp_path / "coll"])
        for d in ("send", "recv"):
            got = sorted((r.rank, r.seq, r.step) for r in recs if r.dir == d)
            assert got == [(r, i, s) for r in range(4) for i in range(ITERS) for s in range(6)], d
        assert all(r.end is not None for r in recs)
        assert {r.host for r in recs if r.rank == MOVED and r.seq >= at} == {spare.ip}
