"""The dead-link rule from a link's two ends' port counters (`findings_from_silence`),
row by row: what its upstream egress sent and its downstream ingress received over the
last polls, and whether that names the direction dead.  Then the rule through the
policy: a stalled ring all-reduce (every other link silent) still gets its dead link
rerouted, at once."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
import pytest

from controller.mitigate import Fabric, Guard, Policy, SilenceRule, findings_from_silence
from controller.topology.generators import leaf_spine

NAMES = ["s1:1->s3:2", "s3:2->s1:1"]
ENDS = np.array([10.0, 10.5, 11.0])


@dataclass(frozen=True)
class Row:
    why: str
    sent: list[int]        # per interval, oldest first (of the direction s1:1->s3:2)
    received: list[int]
    dead: bool


ROWS = [
    Row("retransmissions never arrive", [40, 5, 4], [40, 0, 0], True),
    Row("a hung sender backing off: few packets, still none arrive", [9, 3, 1], [9, 0, 0], True),
    Row("the onset inside the older interval: its packets before still arrived", [40, 5, 4], [30, 1, 0], False),
    Row("sent late in one interval, received by the next ingress read", [0, 600, 0], [0, 0, 600], False),
    Row("the newest interval's sends may arrive after this poll's ingress read", [40, 0, 600], [40, 0, 0], False),
    Row("one packet arrives: alive (5 % loss passes some)", [40, 20, 20], [40, 19, 0], False),
    Row("idle link: nothing sent, nothing received", [40, 0, 0], [40, 0, 0], False),
    Row("too few sent to tell", [40, 2, 9], [40, 0, 0], False),
    Row("healthy", [40, 30, 30], [40, 30, 30], False),
    Row("an end not read in an interval: no evidence", [40, -1, 5], [40, -1, 0], False),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.why for r in ROWS])
def test_silence_rule(row: Row) -> None:
    sent = np.array([row.sent, [0, 0, 0]])
    recv = np.array([row.received, [0, 0, 0]])
    got = findings_from_silence(names=NAMES, sent=sent, received=recv, poll_end_s=ENDS)
    assert [(f.kind, f.component, f.source) for f in got] == \
        ([("link_down", "s1:1->s3:2", "counters")] if row.dead else [])
    if row.dead:
        assert got[0].onset == 10.0 and got[0].evidence["received"] == 0
        assert got[0].evidence["sent"] == row.sent[-2]


def test_silence_needs_as_many_intervals_as_the_rule() -> None:
    one = np.array([[5], [0]])
    assert findings_from_silence(names=NAMES, sent=one, received=one * 0, poll_end_s=ENDS[:1]) == []
    three = np.array([[9, 5, 5], [0, 0, 0]])
    got = findings_from_silence(names=NAMES, sent=three, received=three * 0, poll_end_s=ENDS,
                                rule=SilenceRule(polls=3, min_sent=10))
    assert [f.component for f in got] == ["s1:1->s3:2"] and got[0].onset is None
    assert got[0].evidence["sent"] == 14


def test_a_dead_link_under_a_stalled_job_is_rerouted_at_once() -> None:
    """The ring hangs on the dead link: every other direction carries nothing, only the
    stuck sender's retransmissions leave s3 on the dead link; one round reroutes."""
    topo = leaf_spine(2, n_spines=2, hosts_per_leaf=1)
    fab = Fabric(topo)
    dead = next(ln for ln in topo.links if ln.role.value == "fabric")
    names = [f"{dead.a}->{dead.b}", f"{dead.b}->{dead.a}"]
    sent = np.array([[50, 3, 2], [50, 0, 0]])
    recv = np.array([[50, 0, 0], [50, 0, 0]])
    found = findings_from_silence(names=names, sent=sent, received=recv, poll_end_s=ENDS)
    pol = Policy(fabric=fab, guard=Guard(hold_down_s=10.0))
    acts = pol.step(found, 11.0)
    assert [(a.verb, a.target, a.kind, a.source) for a in acts] == \
        [("reroute", dead.name, "link_down", "counters")]
    # traffic is off the link: nothing sent, nothing named; undone after the hold-down
    assert pol.step([], 12.0) == [] and pol.avoided() == {dead.name}
    assert [a.verb for a in pol.step([], 21.0)] == ["undo"]


def test_a_dead_link_that_comes_back_is_not_gray_loss_until_it_delivered_a_while() -> None:
    """The poller keeps a direction that fell silent as `recovering` until it delivered
    at CLEAN_POLLS polls; the loss map's gray rule skips it (its first packet back shows
    everything it swallowed as one sequence jump)."""
    from controller.runner.links import CLEAN_POLLS, LinkPoller

    topo = leaf_spine(2, n_spines=2, hosts_per_leaf=1)
    lp = LinkPoller(topo=topo, switches={})
    n = len(lp.links)
    row = 0
    sent, recv, t = np.zeros(n, np.int64), np.zeros(n, np.int64), 0.0

    def poll(ds: int, dr: int) -> None:
        nonlocal t
        sent[:] += 100
        recv[:] += 100           # every other direction healthy
        sent[row] += ds - 100
        recv[row] += dr - 100
        t += 0.5
        lp._polls.append((t, sent.copy(), recv.copy()))
        lp._track_silence()

    poll(100, 100)
    poll(100, 100)
    assert lp.recovering() == frozenset()
    poll(20, 0)                     # dead: stamped, nothing arrives
    poll(5, 0)
    assert lp.recovering() == {lp.links[row].name}
    poll(0, 0)                      # rerouted: nothing sent, still recovering
    for _ in range(CLEAN_POLLS - 1):
        poll(100, 100)
        assert lp.recovering() == {lp.links[row].name}
    poll(100, 100)
    assert lp.recovering() == frozenset()

    from controller.mitigate import findings_from_lossmap
    names = [d.name for d in lp.links]
    lost = np.zeros((n, 2))
    lost[row] = [300, 300]
    lm = partial(findings_from_lossmap, names=names, links=[d.link for d in lp.links], lost=lost,
                 delivered=np.full((n, 2), 1000.0), bin_start_s=np.array([1.0, 2.0]), bin_s=1.0)
    assert [f.component for f in lm()] == [names[row]]
    assert lm(recovering={names[row]}) == []
