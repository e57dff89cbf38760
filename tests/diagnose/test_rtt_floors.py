"""The senders' round trips as slow-receiver evidence (controller/diagnose/rtt.py).

Table-driven on records of a four-rank ring (rank r sends to r + 1): each pair's
recent floor of srtt, and how strongly the floors say one host holds what it
receives.  Then the diagnosis itself: a hold that transfer times cannot show (the
pairs at the host were as slow before it) is named from the round trips, and pairs
flagged slow at a host whose settled round trips show nothing held keep 40 % of the
case they made for it (``RTT_NOT_HELD``).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from controller.diagnose import Evidence, diagnose
from controller.diagnose.engine import RTT_NOT_HELD
from controller.diagnose.rtt import RECENT_N, SETTLED_S, Floors, held_share, recent_floors
from controller.topology.load import load_topology
from traffic.collog.records import CollRecord

T0 = 1.7e9
PAIRS = [(0, 1), (1, 2), (2, 3), (3, 0)]


def _sends(srtt_of: Callable[[tuple[int, int], int], float | None], *, n: int = 10,
           dur_of: Callable[[tuple[int, int], int], float] = lambda key, i: 0.5
           ) -> list[CollRecord]:
    """``n`` transfers per pair on each of its two QPs, one every 0.6 s, with srtt
    ``srtt_of(pair, i)`` and duration ``dur_of(pair, i)``."""
    out = []
    for i in range(n):
        for key in PAIRS:
            for qp in (0, 1):
                start = T0 + 0.6 * i
                out.append(CollRecord(rank=key[0], peer=key[1], comm="allreduce-4",
                                      op="allreduce", seq=i, step=0, dir="send",
                                      bytes=1 << 19, qpn=key[0] << 16 | key[1] << 8 | qp,
                                      start=start, end=start + dur_of(key, i),
                                      srtt=srtt_of(key, i)))
    return out


def test_a_floor_is_the_least_of_the_last_sends_all_after_the_onset() -> None:
    recs = _sends(lambda key, i: 0.05 + 0.01 * (i % 3))
    floors = recent_floors(recs, since=T0)
    assert set(floors.recent) == set(PAIRS)
    assert floors.recent[(0, 1)] == pytest.approx(0.05)
    assert all(floors.settled.values())
    # the last RECENT_N sends (two transfers of two QPs) started from 4.8 s in: an onset
    # less than SETTLED_S before them leaves floors not settled yet, a later one none
    first = T0 + 0.6 * (10 - RECENT_N // 2)
    late = recent_floors(recs, since=first - SETTLED_S / 2)
    assert set(late.recent) == set(PAIRS) and not any(late.settled.values())
    assert recent_floors(recs, since=first + 0.01).recent == {}


def test_sends_without_a_round_trip_or_unfinished_have_no_floor() -> None:
    recs = _sends(lambda key, i: None if key == (2, 3) else 0.02)
    assert (2, 3) not in recent_floors(recs, since=T0).recent


def test_sends_that_resent_every_packet_have_no_floor() -> None:
    """A hold longer than the timeout: every packet resent before its ACK came back, so
    no ACK gave a round-trip sample and the srtt stayed the one from before (a CI trial:
    a host holding 0.3 s, its pairs' 128-packet sends resent 250-390 packets each at an
    srtt of 22 ms, and the stale floor said nothing was held).  Such a pair has no
    floor (the round trips cannot say); a send that resent a few has one."""
    recs = _sends(lambda key, i: 0.02)
    for r in recs:
        if r.peer == 2:
            r.retx = r.bytes // 1024           # every packet once
        elif r.peer == 3:
            r.retx = 3                         # a few: its other ACKs still sampled
    floors = recent_floors(recs, since=T0)
    assert (1, 2) not in floors.recent and (2, 3) in floors.recent
    assert held_share(floors, {(0, 1)}, {(1, 2)}, set(PAIRS)) is None


INTO_H1, OUT_OF_H1 = {(0, 1)}, {(1, 2)}

# (recent floors, settled, median round trips where not the floor, expected share or
# None, why)
HELD = [
    ({(0, 1): 0.9, (1, 2): 1.0, (2, 3): 0.05, (3, 0): 0.2}, True, {}, 1.0,
     "both pairs at the host held ~1 s, the others' floors 0.2 s at most"),
    ({(0, 1): 0.9, (1, 2): 0.08, (2, 3): 0.05, (3, 0): 0.2}, True, {}, 0.0,
     "only the data into it lifted: a path's queue, not a held packet"),
    ({(0, 1): 0.9, (1, 2): 1.0, (2, 3): 0.8, (3, 0): 0.9}, True, {}, 0.0,
     "every pair lifted together: the machine stalled, no host"),
    ({(0, 1): 0.09, (1, 2): 0.09, (2, 3): 0.001, (3, 0): 0.001}, True, {}, 0.0,
     "lifted 90x but under 0.1 s: a queue can do that"),
    ({(0, 1): 0.45, (1, 2): 0.5, (2, 3): 0.1, (3, 0): 0.2}, True, {}, 0.5,
     "2.25x the others: half the evidence"),
    ({(0, 1): 0.9, (1, 2): 0.08, (2, 3): 0.05, (3, 0): 0.2}, False, {}, None,
     "nothing held yet, but the sends after the onset still carry the old srtt"),
    ({(0, 1): 0.45, (1, 2): 0.5, (2, 3): 0.1, (3, 0): 0.2}, False, {}, None,
     "half held, not settled: the round trips cannot say yet"),
    ({(0, 1): 0.9, (1, 2): 1.0, (2, 3): 0.05, (3, 0): 0.2}, False, {}, 1.0,
     "a whole hold shows before the floors settle"),
    ({(0, 1): 0.9, (2, 3): 0.05, (3, 0): 0.2}, True, {}, None,
     "no floor on its own sends: the round trips cannot say"),
    ({(0, 1): 0.9, (1, 2): 1.0, (2, 3): 0.05}, True, {}, None,
     "another pair without a floor: no comparison with every other pair"),
    ({(0, 1): 0.33, (1, 2): 0.27, (2, 3): 0.05, (3, 0): 0.07}, True, {(3, 0): 0.37}, 0.0,
     ("floors 3.7x the others' recent ones, but under what is typical for them (a "
      "fault-free Python-target trial)")),
]


@pytest.mark.parametrize(("recent", "settled", "typical", "want", "why"), HELD,
                         ids=[h[4] for h in HELD])
def test_held_share(recent: dict, settled: bool, typical: dict, want: float | None,
                    why: str) -> None:
    floors = Floors(recent=recent, settled={p: settled for p in recent},
                    typical={p: typical.get(p, v) for p, v in recent.items()})
    got = held_share(floors, INTO_H1, OUT_OF_H1, set(PAIRS))
    assert (got is None) == (want is None), (why, got)
    if want is not None:
        assert got == pytest.approx(want), why


TOPO = load_topology("mininet_topos/topofiles/two_dc.yaml")
HOSTS = ["h1", "h3", "h5", "h7"]


def _evidence(recs: list[CollRecord]) -> Evidence:
    ip = {h.name: h.ipv4 for h in TOPO.hosts}
    for r in recs:
        r.host = ip[HOSTS[r.rank]]
    return Evidence(topo=TOPO, records=recs, now=max(r.end or r.start for r in recs) + 0.1)


def test_a_hold_that_transfer_times_hide_is_named_from_the_round_trips() -> None:
    # h3 (rank 1) holds every packet 0.9 s from transfer 4 on; the transfers at it took
    # as long before (the switches' drops, resent) as after: no pair is slow
    def srtt(key: tuple[int, int], i: int) -> float:
        held = i >= 4 and 1 in key
        return (0.9 if held else 0.0) + 0.03 + 0.01 * ((i + key[0]) % 4)
    d = diagnose(_evidence(_sends(srtt, n=12, dur_of=lambda key, i: 1.5 if 1 in key else 0.5)))
    assert d.culprits, "no fault named"
    top = d.culprits[0]
    assert (top.type, top.component, top.kind) == ("host", "h3", "slow_receiver")
    assert top.evidence["rtt_held"] == pytest.approx(1.0)


def test_slow_pairs_at_a_host_that_held_nothing_keep_40_percent_of_their_case() -> None:
    # the pairs into and out of h5 (rank 2) are 3x slower from transfer 4 on, but their
    # round trips stay as low as everyone's: nothing at h5 held them
    def dur(key: tuple[int, int], i: int) -> float:
        return 1.5 if i >= 4 and 2 in key else 0.5
    recs = _sends(lambda key, i: 0.05 + 0.01 * ((i + key[0]) % 4), n=12, dur_of=dur)
    d = diagnose(_evidence(recs))
    slow = [c for c in d.culprits if c.kind == "slow_receiver" and c.component == "h5"]
    base = diagnose(_evidence([replace(r, srtt=None) for r in recs]))
    before = [c for c in base.culprits if c.kind == "slow_receiver" and c.component == "h5"]
    assert before, "without round trips the transfer times alone name h5"
    assert slow and slow[0].evidence["rtt_held"] == 0.0
    assert slow[0].confidence == pytest.approx(RTT_NOT_HELD * before[0].confidence)

