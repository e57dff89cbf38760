"""The dead-link rule from a link's two ends' sequence registers, row by row: what its
upstream egress stamped in the latest poll interval and how far the sequence its
downstream ingress expects moved by the confirming read (`findings_from_silence`); the
poller's side of it (which directions are candidates, the confirming read, which
directions are `recovering`) on a stand-in switch; and the rule through the policy: a
stalled ring all-reduce (every other link silent) still gets its dead link rerouted,
in the first round."""
from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pytest

from controller.mitigate import (
    Fabric,
    Guard,
    Policy,
    findings_from_link_loss,
    findings_from_silence,
)
from controller.runner.links import (
    CLEAN_POLLS,
    HEALTHY_MIN_PKTS,
    R_LOST,
    R_RX_EXPECTED,
    R_TX_SEQ,
    LinkPoller,
)
from controller.topology.generators import leaf_spine

NAMES = ["s1:1->s3:2", "s3:2->s1:1"]


@dataclass(frozen=True)
class Row:
    why: str
    sent: int          # stamped upstream in the latest interval (of s1:1->s3:2)
    arrived: int       # the downstream expected sequence moved by the confirming read (-1: no evidence)
    dead: bool


ROWS = [
    Row("stamped, nothing arrived by the confirming read", 12, 0, True),
    Row("a hung sender backing off: a few retransmissions, none arrive", 3, 0, True),
    Row("one packet arrived: alive (5 % loss passes some)", 40, 1, False),
    Row("idle: nothing stamped", 0, 0, False),
    Row("too few stamped to tell", 2, 0, False),
    Row("no candidate (something arrived at the poll's own read) or an end unread", 40, -1, False),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.why for r in ROWS])
def test_silence_rule(row: Row) -> None:
    got = findings_from_silence(names=NAMES, sent=np.array([row.sent, 0]), arrived=np.array([row.arrived, -1]),
                                since_s=10.0)
    assert [(f.kind, f.component, f.source, f.onset) for f in got] == \
        ([("link_down", "s1:1->s3:2", "counters", 10.0)] if row.dead else [])


def test_silence_refuses_misshapen_input() -> None:
    assert findings_from_silence(names=NAMES, sent=np.array([5]), arrived=np.array([0]), since_s=None) == []


class _Client:
    """A stand-in P4Runtime client: registers by id, read as the switch holds them now."""

    def __init__(self, regs: dict[int, dict[int, int]]) -> None:
        self.regs = regs
        self.digests: Any = _Empty()
        self.indexes_read: list[list[int] | None] = []

    def read_register(self, rid: int) -> dict[int, int]:
        return dict(self.regs.get(rid, {}))

    def read_registers(self, rids: list[int], indexes: list[int] | None = None
                       ) -> dict[int, dict[int, int]]:
        self.indexes_read.append(None if indexes is None else list(indexes))
        return {rid: {i: v for i, v in self.read_register(rid).items()
                      if indexes is None or i in indexes} for rid in rids}

    def read_counter(self, _cid: int) -> dict[int, tuple[int, int]]:
        return {}


class _Empty:
    def get_nowait(self) -> None:
        import queue
        raise queue.Empty


class _Schema:
    def __init__(self) -> None:
        self.ids = {R_TX_SEQ: 1, R_RX_EXPECTED: 2, R_LOST: 3}

    def register(self, name: str) -> Any:
        return type("R", (), {"id": self.ids.get(name, 9)})()

    def counter(self, name: str) -> Any:
        return type("C", (), {"id": 8})()


class _Switch:
    def __init__(self) -> None:
        self.client = _Client({})
        self.pipeline = object()
        self.schema = _Schema()


def _poller() -> tuple[LinkPoller, dict[str, _Switch]]:
    topo = leaf_spine(2, n_spines=2, hosts_per_leaf=1)
    sws = {s.name: _Switch() for s in topo.switches}
    return LinkPoller(topo=topo, switches=sws), sws   # type: ignore[arg-type]


def _set(lp: LinkPoller, sws: dict[str, _Switch], row: int, stamped: int, expected: int) -> None:
    d = lp.links[row]
    sws[d.src].client.regs.setdefault(1, {})[d.src_port] = stamped
    sws[d.dst].client.regs.setdefault(2, {})[d.dst_port] = expected


def test_the_poller_confirms_a_silent_direction_and_tracks_it_until_it_delivers() -> None:
    lp, sws = _poller()
    n = len(lp.links)
    for r in range(n):
        _set(lp, sws, r, 100, 100)
    lp.poll()
    assert lp.silence()[0] is None                        # one poll: no interval yet
    for name, sw in sws.items():   # each switch read for its link ports' cells only
        ports = {d.dst_port for d in lp.links if d.dst == name} | \
            {d.src_port for d in lp.links if d.src == name}
        assert sw.client.indexes_read, name
        assert all(ix and set(ix) <= ports for ix in sw.client.indexes_read), \
            (name, sw.client.indexes_read)
    for r in range(n):
        _set(lp, sws, r, 200, 200)                        # every direction delivered
    _set(lp, sws, 0, 150, 100)                            # direction 0: stamped 50, nothing arrived
    _set(lp, sws, 1, 100, 100)                            # direction 1: idle
    lp.poll()
    t0, t1, sent, arrived = lp.silence()
    assert t0 is not None and t1 is not None and t1 >= t0
    assert sent[0] == 50 and arrived[0] == 0               # confirmed silent
    assert sent[1] == 0 and arrived[1] == -1 and (arrived[2:] == -1).all()   # no candidates
    assert lp.recovering() == {lp.links[0].name}
    got = findings_from_silence(names=[d.name for d in lp.links], sent=sent, arrived=arrived, since_s=t0)
    assert [f.component for f in got] == [lp.links[0].name]
    # rerouted: nothing stamped, still recovering; back: CLEAN_POLLS polls of arrivals
    lp.poll()
    assert lp.recovering() == {lp.links[0].name}
    stamped = expected = 150
    for i in range(CLEAN_POLLS):
        assert lp.recovering() == {lp.links[0].name}, i
        stamped, expected = stamped + 10, max(expected, 150) + 10
        _set(lp, sws, 0, stamped, expected)
        lp.poll()
    assert lp.recovering() == frozenset()


def test_a_packet_counted_late_is_not_a_dead_link(monkeypatch: pytest.MonkeyPatch) -> None:
    """The poll's ingress read came before the packets arrived, the confirming read after."""
    lp, sws = _poller()
    _set(lp, sws, 0, 100, 100)
    lp.poll()
    _set(lp, sws, 0, 150, 100)
    real = LinkPoller._read_expected

    def arrive_then_read(self: LinkPoller, name: str) -> dict[int, int]:
        _set(lp, sws, 0, 150, 150)
        return real(self, name)
    monkeypatch.setattr(LinkPoller, "_read_expected", arrive_then_read)
    lp.poll()
    _t0, _t1, sent, arrived = lp.silence()
    assert sent[0] == 50 and arrived[0] == 50 and lp.recovering() == frozenset()


def test_a_dead_link_under_a_stalled_job_is_rerouted_at_once() -> None:
    """The ring hangs on the dead link: every other direction carries nothing, only the
    stuck sender's retransmissions leave s3 on the dead link; one round reroutes."""
    topo = leaf_spine(2, n_spines=2, hosts_per_leaf=1)
    fab = Fabric(topo)
    dead = next(ln for ln in topo.links if ln.role.value == "fabric")
    names = [f"{dead.a}->{dead.b}", f"{dead.b}->{dead.a}"]
    found = findings_from_silence(names=names, sent=np.array([4, 0]), arrived=np.array([0, -1]), since_s=10.0)
    pol = Policy(fabric=fab, guard=Guard(hold_down_s=10.0))
    acts = pol.step(found, 11.0)
    assert [(a.verb, a.target, a.kind, a.source) for a in acts] == \
        [("reroute", dead.name, "link_down", "counters")]
    # traffic is off the link: nothing stamped, nothing named, and no evidence it
    # healed either: it stays off (the undo no longer probes a link that may be dead)
    assert pol.step([], 12.0) == [] and pol.avoided() == {dead.name}
    assert pol.step([], 60.0) == [] and pol.avoided() == {dead.name}
    assert [a.verb for a in pol.clear(61.0)] == ["undo"]


def test_the_gray_rule_skips_a_recovering_direction() -> None:
    names = NAMES + ["s2:1->s3:3", "s3:3->s2:1"]
    lost = np.zeros((4, 2), dtype=np.int64)
    lost[0] = [300, 300]
    lm = partial(findings_from_link_loss, names=names, lost=lost, delivered=np.full((4, 2), 1000),
                 interval_start_s=np.array([1.0, 2.0]))
    assert [f.component for f in lm()] == [names[0]]
    assert lm(recovering={names[0]}) == []


def test_the_poller_counts_each_rounds_loss_and_delivery_from_the_sequence() -> None:
    """Delivered = the expected sequence's advance less the loss (a gap moves it by the
    gap); a late packet takes its loss back; the sequence wraps at 2^32; a register
    that goes back (a restarted switch) is no evidence."""
    lp, sws = _poller()
    d = lp.links[0]

    def at(expected: int, lost: int) -> None:
        sws[d.dst].client.regs.setdefault(2, {})[d.dst_port] = expected
        sws[d.dst].client.regs.setdefault(3, {})[d.dst_port] = lost
    at(2**32 - 1100, 0)
    lp.poll()
    at(2**32 - 100, 50)   # 1000 sequence numbers passed: 50 lost, 950 delivered
    lp.poll()
    at(0, 49)             # 100 more (wrapping), and one late packet took its loss back
    lp.poll()
    at(90, 59)            # 90 passed, 10 lost
    lp.poll()
    at(5, 0)              # reset
    lp.poll()
    starts, lost, deliv = lp.loss_window()
    assert list(lost[0]) == [50, 0, 10, -1] and list(deliv[0]) == [950, 101, 80, -1]
    assert len(starts) == 4 and (np.diff(starts) >= 0).all()
    assert (lost[1:] == 0).all() and (deliv[1:] == 0).all()     # idle directions: read, nothing moved
    assert lp.stream.snapshot().delivered.sum() == 950 + 101 + 80


def test_the_rounds_loss_is_judged_between_its_ingress_and_egress_reads() -> None:
    """``after_ingress`` sees this round's loss in `loss_window` before the egress ends
    are read (gray loss needs no more); after the round it is the last interval."""
    lp, sws = _poller()
    d = lp.links[0]
    regs = sws[d.dst].client.regs
    regs.setdefault(2, {})[d.dst_port], regs.setdefault(3, {})[d.dst_port] = 1000, 0
    lp.poll()
    regs[2][d.dst_port], regs[3][d.dst_port] = 2000, 50
    seen: list[tuple[int, int, int]] = []

    def hook() -> None:
        _starts, lost, deliv = lp.loss_window()
        seen.append((lost.shape[1], int(lost[0, -1]), int(deliv[0, -1])))
        sws[d.src].client.regs.setdefault(1, {})[d.src_port] = 7     # stamped after the hook
    lp.poll(after_ingress=hook)
    assert seen == [(1, 50, 950)]
    _starts, lost, deliv = lp.loss_window()
    assert lost.shape[1] == 1 and (lost[0, -1], deliv[0, -1]) == (50, 950)
    assert lp.silence()[2][0] == 7                     # the egress read came after the hook
    t = lp.timing()
    assert t["rounds"] == 2 and {"ingress_p50_s", "egress_p50_s", "confirm_p50_s", "period_p50_s"} <= set(t)


def test_the_rounds_of_a_direction_back_from_silence_are_no_loss_evidence() -> None:
    """The dead link's swallowed packets show as one jump when it comes back; the
    rounds while it is `recovering` are unknown (-1) in `loss_window`, so the jump never
    enters the gray-loss rule's window, even after the direction is clean again."""
    lp, sws = _poller()
    d = lp.links[0]
    src, dst = sws[d.src].client.regs, sws[d.dst].client.regs

    def at(stamped: int, expected: int, lost: int) -> None:
        src.setdefault(1, {})[d.src_port] = stamped
        dst.setdefault(2, {})[d.dst_port], dst.setdefault(3, {})[d.dst_port] = expected, lost
    at(100, 100, 0)
    lp.poll()
    at(500, 100, 0)                  # dead: 400 stamped, nothing arrived
    lp.poll()
    assert lp.recovering() == {d.name}
    at(1000, 1000, 800)              # back: one jump of 800 "lost"
    lp.poll()
    for i in range(CLEAN_POLLS):
        at(1100 + 100 * i, 1100 + 100 * i, 800)
        lp.poll()
    assert lp.recovering() == frozenset()
    _starts, lost, deliv = lp.loss_window()
    assert 800 not in lost[0] and lost[0].max() == 0 and (lost[0] == -1).sum() >= 2
    names = [x.name for x in lp.links]
    assert findings_from_link_loss(names=names, lost=lost, delivered=deliv, interval_start_s=_starts) == []


def test_a_link_is_shown_healthy_by_traffic_in_both_directions_with_no_loss() -> None:
    """`healthy`: per link, how long both directions delivered with no loss (at least
    `HEALTHY_MIN_PKTS` each); a loss or a silence starts it over, idle rounds neither
    extend nor end it, and a link that carries nothing is not in it (no evidence)."""
    lp, sws = _poller()
    fwd = lp.links[0]
    rev = next(i for i, d in enumerate(lp.links) if d.link == fwd.link and d is not fwd)
    regs: dict[int, tuple[Any, Any]] = {}
    for row in (0, rev):
        d = lp.links[row]
        regs[row] = (sws[d.src].client.regs, sws[d.dst].client.regs)

    def at(row: int, n: int, lost: int = 0) -> None:
        d = lp.links[row]
        src, dst = regs[row]
        src.setdefault(1, {})[d.src_port] = n
        dst.setdefault(2, {})[d.dst_port], dst.setdefault(3, {})[d.dst_port] = n, lost
    at(0, 0), at(rev, 0)
    lp.poll()
    assert lp.healthy(time.time()) == {}               # nothing carried: no evidence
    at(0, HEALTHY_MIN_PKTS)
    lp.poll()
    assert fwd.link not in lp.healthy(time.time())     # one direction only
    at(rev, HEALTHY_MIN_PKTS)
    lp.poll()
    t1 = lp._polls[1].t                                # the reverse direction's clean since
    assert lp.healthy(t1 + 20.0)[fwd.link] == pytest.approx(20.0, abs=1e-6)
    lp.poll()                                          # idle: the evidence stands
    assert fwd.link in lp.healthy(time.time())
    at(0, 2 * HEALTHY_MIN_PKTS, lost=3)                # a loss: starts over
    lp.poll()
    assert fwd.link not in lp.healthy(time.time())
