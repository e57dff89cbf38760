"""Moving a rank of a running ring all-reduce to a spare host (traffic.rankmove): four
ranks and a standby in five namespaces on one bridge; rank 2 moves to the spare in the
middle of the job, the other ranks keep running, and every rank's data check (the
spare's too) passes.  Forged or impossible move commands get a counted rejection that
names what is wrong, and change nothing."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.traffic.netns_util import PY, ROOT, star
from traffic import startgate
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
        addrs = ",".join(h.ip for h in ranks)
        start = tmp_path / "start"
        ctl = [str(tmp_path / f"ctl{r}") for r in range(4)]
        sctl = str(tmp_path / "ctl-spare")
        common = ["--hosts", addrs, "-s", "256K", "-c", str(ITERS), "--rate", "50M",
                  "--engine", "python", "--timeout", "120"]
        procs = []
        for r, h in enumerate(ranks):
            procs.append(h.popen(
                [PY, "-m", "traffic", "allreduce", *common, "--rank", str(r), "--control",
                 ctl[r], "--start-file", str(start), "-o", str(tmp_path / f"rank{r}.json")],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT))
        procs.append(spare.popen(
            [PY, "-m", "traffic", "allreduce", *common, "--standby", spare.ip, "--control",
             sctl, "-o", str(tmp_path / "spare.json")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT))
        try:
            _wait(lambda: Path(sctl).exists(), 30, "the standby's control socket")
            startgate.start_together(start, 4, timeout_s=60,
                                     alive=lambda: all(p.poll() is None for p in procs))
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
            _wait(lambda: Path(ctl[1]).exists(), 30, "rank 1's control socket")
            for what, args in bad.items():
                rep = request(ctl[1], {"cmd": "move_rank", **args}, 5.0)
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
            for p in procs:
                _out, err = p.communicate(timeout=150)
                assert p.returncode == 0, err[-3000:]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
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
