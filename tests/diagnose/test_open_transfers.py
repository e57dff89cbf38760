"""Transfers still open count at their age so far, a lower bound of their time
(table-driven, ``transfers.analyse``).

Why: on the Python target a slow receiver's transfers take 2-4 s, and a pair was
judged slow only once three windows of them had *finished*; their age already says
they take at least that long.  The floor every pair is judged against (the least
slowed pair in the window: a loaded machine stalls every transfer at once) comes from
pairs known so far: enough finished transfers, or open ones already slow - a pair
whose transfers just started says nothing yet."""
from __future__ import annotations

import pytest

from controller.diagnose.transfers import analyse
from traffic.collog.records import CollRecord

T0 = 1_700_000_000.0
LATE = (6.0, 6.5, 7.0)   # starts (s after T0) of the transfers after the onset


def _pair(a: int, b: int, late_end: float | None) -> list[CollRecord]:
    """Six 1 s transfers a second apart (the baseline), then one per window at
    ``LATE``, each ``late_end`` s long (None: still open), two QPs each."""
    recs = []
    spans = [(float(i), 1.0) for i in range(6)] + [(s, late_end) for s in LATE]
    for start, d in spans:
        recs += [CollRecord(rank=a, comm="c", op="allreduce", seq=int(start * 2), dir="send",
                            peer=b, qpn=q, start=T0 + start,
                            end=None if d is None else T0 + start + d) for q in (1, 2)]
    return recs


# (what, the late transfers of pair 0->1 (None: open), the other pairs', seconds after
# the last start the ring is judged, pairs flagged slow)
CASES = [
    ("open 2.6-3.6x its baseline, the others done in 1 s", None, 1.0, 2.6, {(0, 1)}),
    ("open 1.4-2.4x: below the flag in two windows of three", None, 1.0, 1.4, set()),
    ("every pair open as long: a stall of all, no pair's", None, None, 2.6, set()),
    ("finished 3x its baseline (as before)", 3.0, 1.0, 4.0, {(0, 1)}),
]


@pytest.mark.parametrize(("what", "mine", "others", "after", "slow"), CASES,
                         ids=[c[0] for c in CASES])
def test_open_transfers(what: str, mine: float | None, others: float | None, after: float,
                        slow: set[tuple[int, int]]) -> None:
    recs = _pair(0, 1, mine)
    for a, b in ((1, 2), (2, 3), (3, 0)):
        recs += _pair(a, b, others)
    v = analyse(recs, T0 + LATE[-1] + after)
    assert v.bad_pairs == slow, what
    assert not any(p.hung for p in v.pairs.values())
