"""Moving a rank of a running ring all-reduce to a spare host, without restarting the job.

Why it can be done at all: a data-parallel all-reduce leaves every rank with the same
reduced buffer and each rank's input is its own (here regenerated from (seed, rank)),
so a standby rank on a spare host (:mod:`traffic.standby`) can take rank R over at an
iteration boundary N: R finishes iterations 0..N-1 and stops; its ring peers re-point
the QPs of rank R to the spare from iteration N on (the sender R-1 makes fresh QPs at
the boundary, its old ones drain to R; the receiver R+1 accepts the same QP numbers
from the spare as steps of iteration N on); the spare runs N..end.  Every rank's data
check still compares its result with the sum, the spare's included.

The boundary N must lie ahead of every rank involved: the mover asks R-1, R and R+1
where they are and how long their iterations take (``{"cmd": "collective"}``) and
picks the furthest iteration plus a margin of time; a rank already past N refuses
(``too late``).  The commands go out in one burst (R, R+1, R-1, the spare, the
others: they only learn the new address), the replies are gathered after; a refusal
by R, R-1 or R+1 while others accepted would leave the job stuck (not undone yet:
the margin is what prevents it).
"""
from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from traffic.control import request_all

__all__ = ["MoveResult", "move_rank"]


@dataclass(slots=True)
class MoveResult:
    """What each rank (and the spare) answered; ``ok`` when all accepted."""

    rank: int
    to: str
    at_iter: int | None = None
    ok: bool = False
    error: str | None = None
    replies: dict[str, dict] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"rank": self.rank, "to": self.to, "at_iter": self.at_iter, "ok": self.ok,
                "error": self.error, "replies": self.replies}


def move_rank(controls: Sequence[str], spare_control: str, rank: int, to: str, *,
              margin_s: float = 2.0, timeout_s: float = 5.0) -> MoveResult:
    """Move ``rank`` of the ring whose ranks listen on ``controls`` (control socket paths,
    in rank order) to the standby at ``to`` listening on ``spare_control``.

    The boundary is ``margin_s`` seconds of iterations (at the slowest recent pace the
    ranks report, at least two iterations) past the furthest rank: the commands land
    within a send loop, but the ranks' replies to a busy controller can take long.
    """
    n = len(controls)
    res = MoveResult(rank=rank, to=to)
    if not 0 <= rank < n:
        res.error = f"rank {rank} outside the ring 0..{n - 1}"
        return res
    ring = sorted({(rank - 1) % n, rank, (rank + 1) % n})
    got = request_all([(controls[r], {"cmd": "collective"}) for r in ring], timeout_s)
    iters, paces = [], []
    for r in ring:
        rep = got[controls[r]]
        res.replies[f"progress{r}"] = rep
        prog = rep.get("collective")
        if not isinstance(prog, dict) or not isinstance(prog.get("iter"), int):
            res.error = f"rank {r} did not say where it is: {rep}"
            return res
        iters.append(prog["iter"])
        if isinstance(prog.get("iter_s"), (int, float)) and prog["iter_s"] > 0:
            paces.append(float(prog["iter_s"]))
    ahead = max(2, math.ceil(margin_s / min(paces))) if paces else 2
    res.at_iter = max(iters) + ahead
    total = min(int(got[controls[r]]["collective"].get("iterations") or 0) for r in ring)
    if res.at_iter >= total:  # nothing is sent: the job ends before the move could
        res.error = (f"iteration {res.at_iter} (the furthest rank's {max(iters)} plus "
                     f"{margin_s:g} s) is past the job's last ({total - 1})")
        return res
    cmd = {"cmd": "move_rank", "rank": rank, "to": to, "at_iter": res.at_iter}
    # the moved rank first (if it refuses, nothing changed), then its receiver (so the
    # spare's first steps find their QPs), its sender, the spare, the bystanders
    order = [rank, (rank + 1) % n, (rank - 1) % n]
    order = list(dict.fromkeys([*order, -1, *range(n)]))
    pairs = [(spare_control if r < 0 else controls[r], cmd) for r in order]
    t0 = time.monotonic()
    got = request_all(pairs, timeout_s)
    res.replies["after_s"] = {"s": round(time.monotonic() - t0, 4)}
    refused = []
    for r in order:
        who = "spare" if r < 0 else str(r)
        rep = got[spare_control if r < 0 else controls[r]]
        res.replies[who] = rep
        mv = rep.get("move_rank")
        if not isinstance(mv, dict) or mv.get("status") != "accepted":
            refused.append(f"{'the spare' if r < 0 else f'rank {r}'}: "
                           f"{mv.get('error') if isinstance(mv, dict) else rep.get('error', rep)}")
    if refused:
        res.error = "; ".join(refused)
        return res
    res.ok = True
    return res
