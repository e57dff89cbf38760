"""The senders' round-trip times: what a host that holds what it receives lifts.

A slow receiver (its CPU or receive path late) holds every packet it receives: the
data into it and the ACKs of its own sends.  Each send record carries the sending
QP's smoothed RTT as its transfer was acknowledged (``CollRecord.srtt``), so the pairs
into that host *and* out of it show a round trip lifted by the hold, in every transfer
while it lasts.  Transfer times alone can miss it: on a loaded software switch they
vary 2-4x without a fault, and the hold can replace a slowness that was there before
(issue #24's Python-target runs: a pair into h3 took 1.2-1.8 s before the onset by
resending what the switches dropped, 1.6 s after it with no resend).

Why the *floor* of a pair's recent round trips, not their mean: queues fill and drain
(a busy Python switch lifts a pair's srtt from 20 ms to 1 s and back within seconds,
fault or not), a hold does not drain: every transfer of both pairs at the host stays
above it.  Why against the other pairs' floors: a stall of the whole machine lifts
every pair together, which is no host's fault.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from traffic.collog.records import CollRecord
from traffic.qp_types import DEFAULT_MTU

__all__ = ["RECENT_N", "Floors", "held_share", "recent_floors"]

RECENT_N = 4          # a pair's floor: the least srtt of its last this many finished sends
HELD_MIN_S = 0.1      # a lift under this is a queue's, not a held packet's
HELD_X = 3.0          # lifted: at least this many times the other pairs' highest floor
TYPICAL_X = 2.0       # ... and this many times their highest median round trip
SETTLED_S = 1.0       # less than a whole hold is told once the floors' sends all started
                      # this long after the onset (the first ones still carry the old srtt)


@dataclass(frozen=True, slots=True)
class Floors:
    """Per (sender rank, receiver rank): the recent floor of its round trips, whether
    the sends it is of settled (see SETTLED_S), and its median round trip (every send)."""

    recent: dict[tuple[int, int], float]
    settled: dict[tuple[int, int], bool]
    typical: dict[tuple[int, int], float]


def recent_floors(records: list[CollRecord], since: float) -> Floors:
    """Each pair's floor: the least srtt of its last ``RECENT_N`` sends that finished
    with one, when all of them started at or after ``since`` (the slowdown's onset: a
    floor that mixes transfers from before it says nothing)."""
    by: dict[tuple[int, int], list[tuple[float, float, float]]] = defaultdict(list)
    for r in records:   # (end, start, srtt) of each finished send with a round trip
        if r.dir == "send" and r.peer is not None and r.end is not None and r.srtt is not None \
                and not _resent_all(r):
            by[(r.rank, r.peer)].append((r.end, r.start, r.srtt))
    out = Floors({}, {}, {})
    for key, sends in by.items():
        out.typical[key] = float(np.median([rtt for _, _, rtt in sends]))
        last = sorted(sends)[-RECENT_N:]
        first = min(start for _, start, _ in last)
        if len(last) == RECENT_N and first >= since:
            out.recent[key] = min(rtt for _, _, rtt in last)
            out.settled[key] = first >= since + SETTLED_S
    return out


def _resent_all(r: CollRecord) -> bool:
    """Whether the send resent as many packets as it carried: then no ACK could give a
    round-trip sample (an ACK of a resent packet is ambiguous, Karn's rule) and its srtt
    is the one from before.  A hold longer than the timeout makes exactly this (a CI
    trial: the pairs at a host holding 0.3 s resent each 128-packet send 250-390 times,
    their srtt stayed at 22 ms, and the stale floor argued against the hold)."""
    return bool(r.retx) and r.retx * DEFAULT_MTU >= r.bytes  # the records carry no MTU


def held_share(floors: Floors, into: set[tuple[int, int]], out_of: set[tuple[int, int]],
               active: set[tuple[int, int]]) -> float | None:
    """How strongly the round trips say a host holds packets: 1 when every pair into
    it and out of it has a floor of at least ``HELD_MIN_S``, ``HELD_X`` times the
    highest of the other pairs' floors and ``TYPICAL_X`` times the highest of their
    median round trips (a fault-free software switch lifts two pairs' recent floors
    above the others' now and then, but not above what is typical for them; and not
    against the pair's own past: the hold may replace a slowness that was there, issue
    #24's masked trials), falling to 0 at half those ratios; less than 1 only once their
    floors settled.  None when they cannot say: a pair at it or another ``active`` pair
    without a floor (logs without round trips, too soon after the onset, or every
    recent send resent all it carried)."""
    mine = (set(into) | set(out_of)) & active
    others = active - mine
    rec = floors.recent
    if not into or not out_of or not others or any(p not in rec for p in active):
        return None
    held = min(rec[p] for p in mine)
    other = max(rec[p] for p in others)
    typical = max(floors.typical.get(p, 0.0) for p in others)
    # (normalised: 1 where both ratios reach their bar)
    ratio = min(held / max(other, 1e-6) / HELD_X, held / max(typical, 1e-6) / TYPICAL_X)
    share = 0.0 if held < HELD_MIN_S else max(0.0, min(1.0, 2 * ratio - 1))
    if share < 1.0 and not all(floors.settled.get(p, False) for p in mine):
        return None
    return share
