"""The mitigation policy, row by row: (finding(s), confidence, history) -> action or none.

Topologies: a leaf-spine with 2 spines (s1, s2) and 3 leaves (s3, s4, s5), one host
per leaf, so every leaf-to-leaf pair has two ways; a dumbbell (s1-s2, one fabric
link) where nothing can be routed around."""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pytest

from controller.mitigate import (
    Fabric,
    Finding,
    Guard,
    Policy,
    findings_from_diagnosis,
    findings_from_link_loss,
    loss_lower_bound,
)
from controller.topology.generators import dumbbell, leaf_spine

LS = leaf_spine(3, n_spines=2, hosts_per_leaf=1)
DB = dumbbell(2)
GUARD = Guard(min_confidence=0.5, confirm_s=0.5, hold_down_s=10.0, clear_s=3.0, budget_per_min=3)


def F(kind: str, component: str, type_: str = "link", conf: float = 0.9, source: str = "diagnosis") -> Finding:
    return Finding(kind=kind, type=type_, component=component, confidence=conf, onset=0.0, source=source)


@dataclass
class Row:
    name: str
    findings: list[Finding]
    verb: str | None            # the action of the round at t=1 (after confirmation), None: nothing
    target: str = ""
    avoid: tuple[str, ...] = ()
    topo: object = LS


ROWS = [
    Row("gray loss on a fabric link: reroute", [F("gray_loss", "s3:2->s1:1")], "reroute", "s1:1-s3:2",
        ("s1:1-s3:2",)),
    Row("the other direction names the same link", [F("gray_loss", "s1:1->s3:2")], "reroute", "s1:1-s3:2",
        ("s1:1-s3:2",)),
    Row("rate degraded: reroute", [F("rate_degraded", "s1:2->s4:2")], "reroute", "s1:2-s4:2"),
    Row("link down: reroute", [F("link_down", "s2:1->s3:3")], "reroute", "s2:1-s3:3"),
    Row("tiny queue at a fabric port: reroute off its link", [F("tiny_queue", "s1:1", "port")], "reroute",
        "s1:1-s3:2"),
    Row("below the confidence threshold: nothing", [F("gray_loss", "s3:2->s1:1", conf=0.3)], None),
    Row("congestion: none, left to the congestion control", [F("congestion", "s3:2->s1:1")], "none",
        "s1:1-s3:2"),
    Row("slow receiver: advice only", [F("slow_receiver", "h2", "host")], "none", "host h2"),
    Row("straggler rank: advice only", [F("straggler", "2", "rank")], "none", "rank 2"),
    Row("host link: no other way", [F("gray_loss", "h1:0->s3:1")], "none", "h1:0->s3:1"),
    Row("gray loss, single path: FEC", [F("gray_loss", "s1:3->s2:2")], "fec", "s1:3-s2:2",
        ("s1:3-s2:2",), DB),
    Row("link down, single path: none", [F("link_down", "s1:3->s2:2")], "none", "s1:3-s2:2", (), DB),
    Row("two links of one spine: drain it", [F("gray_loss", "s1:1->s3:2"), F("link_down", "s1:2->s4:2")],
        "drain", "s1", ("s1:1-s3:2", "s1:2-s4:2", "s1:3-s5:2")),
    Row("a spine named as a switch: drain", [F("tiny_queue", "s2", "switch")], "drain", "s2"),
    Row("a leaf with hosts: cannot be drained", [F("tiny_queue", "s3", "switch")], "none", "s3"),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_policy_table(row: Row) -> None:
    p = Policy(fabric=Fabric(row.topo), guard=GUARD)  # type: ignore[arg-type]
    first = p.step(row.findings, 0.0)
    acts = first + p.step(row.findings, 1.0)
    if row.verb is None:
        assert acts == []
        return
    assert len(acts) == 1, [a.as_dict() for a in acts]
    a = acts[0]
    assert (a.verb, a.target) == (row.verb, row.target), a.reason
    if row.avoid:
        assert a.avoid == row.avoid
    assert a.reason and a.at in (0.0, 1.0)
    # acting verbs wait for the confirmation unless the link is dead
    if a.verb in ("reroute", "fec", "drain"):
        assert bool(first) == any(f.kind == "link_down" for f in row.findings)
        assert p.avoided() | p.fec_links() == frozenset(a.avoid)


def test_a_dead_link_is_rerouted_in_the_first_round() -> None:
    p = Policy(fabric=Fabric(LS), guard=GUARD)
    [a] = p.step([F("link_down", "s3:2->s1:1")], 0.0)
    assert a.verb == "reroute" and a.at == 0.0


def test_a_finding_that_is_not_confirmed_is_forgotten() -> None:
    """Named once, then not: no action; named again later: its confirmation restarts."""
    p = Policy(fabric=Fabric(LS), guard=GUARD)
    assert p.step([F("gray_loss", "s3:2->s1:1")], 0.0) == []
    assert p.step([], 0.4) == []
    assert p.step([F("gray_loss", "s3:2->s1:1")], 0.8) == []
    assert [a.verb for a in p.step([F("gray_loss", "s3:2->s1:1")], 1.4)] == ["reroute"]


L = "s1:1-s3:2"          # the link of "s3:2->s1:1"


@dataclass
class UndoRow:
    name: str
    healthy: dict[str, float]   # the evidence at t (link -> seconds clean with traffic)
    t: float                    # when the policy is asked (the action at 0, named last at 0)
    named_at: float = 0.0       # the finding was last given then
    undone: bool = False


UNDO_ROWS = [
    UndoRow("no evidence (the routes keep traffic off the link): never undone", {}, 600.0),
    UndoRow("evidence shorter than healthy_s: kept off", {L: 9.9}, 30.0),
    UndoRow("evidence enough but the hold-down holds", {L: 12.0}, 9.0),
    UndoRow("evidence enough but named within clear_s", {L: 12.0}, 30.0, named_at=28.0),
    UndoRow("evidence for another link only", {"s2:1-s3:3": 60.0}, 30.0),
    UndoRow("held, not named, shown healthy: undone", {L: 10.0}, 30.0, undone=True),
]


@pytest.mark.parametrize("row", UNDO_ROWS, ids=lambda r: r.name)
def test_undo_only_on_evidence_that_the_link_is_healthy(row: UndoRow) -> None:
    p = Policy(fabric=Fabric(LS), guard=GUARD)
    f = [F("link_down", "s3:2->s1:1")]
    [a] = p.step(f, 0.0)
    if row.named_at:
        p.step(f, row.named_at)
    acts = p.step([], row.t, row.healthy)
    if row.undone:
        [u] = acts
        assert (u.verb, u.undoes, u.target) == ("undo", a.seq, L)
        assert "no loss" in u.reason and p.avoided() == frozenset()
    else:
        assert acts == [] and p.avoided() == {L}


def test_an_operator_clear_undoes_at_once_and_a_repeat_doubles_the_hold_down() -> None:
    p = Policy(fabric=Fabric(LS), guard=GUARD)
    f = [F("link_down", "s3:2->s1:1")]
    [a] = p.step(f, 0.0)
    assert a.hold_s == 10.0
    [u] = p.clear(2.0)
    assert (u.verb, u.undoes, u.target) == ("undo", a.seq, L) and "operator" in u.reason
    assert p.avoided() == frozenset() and p.clear(2.5) == []
    [b] = p.step(f, 3.0)                     # back: acted on again, held twice as long
    assert b.verb == "reroute" and b.hold_s == 20.0 and "again" in b.reason
    assert p.step([], 15.0, {L: 12.0}) == []
    assert [x.verb for x in p.step([], 23.0, {L: 12.0})] == ["undo"]


def test_an_action_still_named_is_not_undone() -> None:
    p = Policy(fabric=Fabric(LS), guard=GUARD)
    f = [F("link_down", "s3:2->s1:1")]
    p.step(f, 0.0)
    for t in range(1, 60):
        assert p.step(f, float(t), {L: 100.0}) == []
    assert p.avoided() == {L}


@pytest.mark.parametrize("every", [4, 30])
def test_a_flapping_link_is_acted_on_no_more_often_than_the_hold_down_allows(every: int) -> None:
    """A link bad for 1 s in every ``every`` s over 10 minutes, shown clean since its
    last bad second (as if traffic crossed it): actions spaced at least the (doubling)
    hold-down apart; flapping every 4 s it is never shown healthy for long enough, so
    it is acted on once and kept off."""
    p = Policy(fabric=Fabric(LS), guard=GUARD)
    times = []
    last_bad = 0.0
    for i in range(600):
        t = float(i)
        bad = i % every == 0
        if bad:
            last_bad = t
        for a in p.step([F("link_down", "s3:2->s1:1")] if bad else [], t, {L: t - last_bad}):
            if a.verb == "reroute":
                times.append((t, a.hold_s))
    if every == 4:
        assert len(times) == 1 and p.avoided() == {L}
    else:
        assert 3 <= len(times) <= 12, times
    for (t0, hold), (t1, _) in itertools.pairwise(times):
        assert t1 - t0 >= hold
    assert [h for _, h in times] == sorted(h for _, h in times)


def test_the_budget_caps_actions_per_minute_and_says_so_once() -> None:
    p = Policy(fabric=Fabric(leaf_spine(6, n_spines=4, hosts_per_leaf=1)), guard=GUARD)
    links = ["s1:1->s5:2", "s2:2->s6:3", "s3:3->s7:4", "s4:4->s8:5"]
    acts = []
    for t in range(5):
        acts += p.step([F("link_down", c) for c in links], float(t))
    verbs = [a.verb for a in acts]
    assert verbs.count("reroute") == 3
    assert verbs.count("none") == 1 and "budget" in acts[verbs.index("none")].reason
    # a minute later the budget has room again
    later = p.step([F("link_down", c) for c in links], 61.0)
    assert [a.verb for a in later] == ["reroute"]


def test_no_reroute_that_would_cut_a_host_off() -> None:
    """With s1:1-s3:2 avoided, the leaf s3 has one way left (s2): its other link
    cannot be avoided too; a gray loss there gets FEC instead, a dead one nothing."""
    p = Policy(fabric=Fabric(LS), guard=GUARD)
    p.step([F("link_down", "s3:2->s1:1")], 0.0)
    [a] = p.step([F("link_down", "s1:1->s3:2"), F("link_down", "s3:3->s2:1")], 1.0)
    assert (a.verb, a.target) == ("none", "s2:1-s3:3")
    p2 = Policy(fabric=Fabric(LS), guard=GUARD)
    p2.step([F("link_down", "s3:2->s1:1")], 0.0)
    p2.step([F("link_down", "s3:2->s1:1"), F("gray_loss", "s3:3->s2:1")], 1.0)
    [b] = p2.step([F("link_down", "s3:2->s1:1"), F("gray_loss", "s3:3->s2:1")], 2.0)
    assert (b.verb, b.target) == ("fec", "s2:1-s3:3")


def test_no_findings_no_actions() -> None:
    p = Policy(fabric=Fabric(LS), guard=GUARD)
    assert all(p.step([], float(t)) == [] for t in range(100))
    assert p.log == []


# -- findings ------------------------------------------------------------------------
def test_findings_from_a_diagnosis_skip_malformed_rows() -> None:
    d = {"fault": True, "culprits": [
        {"component": "s1:1->s3:2", "type": "link", "kind": "gray_loss", "confidence": 0.8, "onset": 12.5,
         "evidence": {"loss_rate": 0.05}},
        {"component": "s1:1->s3:2", "type": "link"},
        {"component": "h2", "type": "host", "kind": "slow_receiver", "confidence": "x", "onset": None}]}
    [f] = findings_from_diagnosis(d)
    assert (f.kind, f.component, f.confidence, f.onset, f.source) == ("gray_loss", "s1:1->s3:2", 0.8, 12.5,
                                                                     "diagnosis")
    assert findings_from_diagnosis({"fault": False, "culprits": []}) == []
    assert findings_from_diagnosis(None) == []


# -- gray loss from the link sequence counters, poll by poll ----------------------------
# Twelve directions (a fabric's worth): the one under test (row 0) and eleven others
# whose pooled loss is the background; columns are poll intervals, oldest first.
NAMES = [f"s{i}:1->s{i + 1}:2" for i in range(12)]
STARTS = np.arange(100.0, 108.0)      # eight polls, 1 s apart


@dataclass(frozen=True)
class LossRow:
    why: str
    lost: list[int]            # row 0's packets lost per poll (the last len() polls)
    delivered: list[int]       # row 0's delivered per poll
    named: bool
    onset: float | None = None
    background: float = 0.0    # every other direction's loss rate (1000 packets a poll)
    recovering: bool = False


LOSS_ROWS = [
    LossRow("5 % at the last poll of 1000: named at once", [0, 0, 0, 50], [1000, 1000, 1000, 950], True, 107.0),
    LossRow("5 % over the last two polls", [0, 0, 25, 25], [1000, 1000, 475, 475], True, 106.0),
    LossRow("the onset mid-poll: 2.5 % of a poll, then 5 %", [0, 0, 25, 50], [1000, 1000, 975, 950], True,
            106.0),
    LossRow("a poll of 20 packets losing 3 (15 %): too few to be sure", [0, 0, 0, 3], [1000, 1000, 1000, 17],
            False),
    LossRow("the same 15 % over four polls of 20: sure", [3, 3, 3, 3], [17, 17, 17, 17], True, 104.0),
    LossRow("1.2 % of 1000: not surely above 1 %", [0, 0, 0, 12], [1000, 1000, 1000, 988], False),
    LossRow("1.2 % of 40000 (a busy link): surely above 1 %", [0, 0, 0, 480], [1000, 1000, 1000, 39520], True,
            107.0),
    LossRow("4 % where everything loses 2 %: noise (threshold 6 %)", [40, 40, 40, 40], [960] * 4, False,
            background=0.02),
    LossRow("10 % where everything loses 2 %: named", [0, 0, 100, 100], [1000, 1000, 900, 900], True, 106.0,
            background=0.02),
    LossRow("4 lost of 20: under min_lost", [0, 0, 0, 4], [1000, 1000, 1000, 16], False),
    LossRow("idle", [0, 0, 0, 0], [0, 0, 0, 0], False),
    LossRow("a dead link back (one jump): recovering, not judged", [0, 0, 0, 700], [0, 0, 0, 300], False,
            recovering=True),
    LossRow("the loss left the window (older than max_polls)", [0, 80, 80, 0, 0, 0, 0, 0],
            [1000, 920, 920, 1000, 1000, 1000, 1000, 1000], False),
]


def _loss(row: LossRow) -> list[Finding]:
    k = len(row.lost)
    lost = np.zeros((len(NAMES), k), dtype=np.int64)
    deliv = np.full((len(NAMES), k), 1000, dtype=np.int64)
    lost[1:] = round(1000 * row.background)
    deliv[1:] -= lost[1:]
    lost[0], deliv[0] = row.lost, row.delivered
    return findings_from_link_loss(names=NAMES, lost=lost, delivered=deliv, interval_start_s=STARTS[-k:],
                                   recovering={NAMES[0]} if row.recovering else set())


@pytest.mark.parametrize("row", LOSS_ROWS, ids=[r.why for r in LOSS_ROWS])
def test_gray_loss_rule(row: LossRow) -> None:
    got = _loss(row)
    assert [f.component for f in got] == ([NAMES[0]] if row.named else [])
    if row.named:
        [f] = got
        assert (f.kind, f.type, f.source, f.onset) == ("gray_loss", "link", "lossmap", row.onset)
        assert 0.5 <= f.confidence <= 1.0
        assert f.evidence["lower_bound"] >= f.evidence["threshold"]


def test_gray_loss_rule_skips_unread_polls_and_misshapen_input() -> None:
    lost = np.zeros((len(NAMES), 3), dtype=np.int64)
    deliv = np.full((len(NAMES), 3), 1000, dtype=np.int64)
    lost[0] = [-1, 50, 50]          # an end not read at the first poll
    deliv[0] = [-1, 950, 950]
    [f] = findings_from_link_loss(names=NAMES, lost=lost, delivered=deliv, interval_start_s=STARTS[:3])
    assert f.evidence["lost"] == 100 and f.evidence["delivered"] == 1900
    assert findings_from_link_loss(names=NAMES, lost=lost, delivered=deliv, interval_start_s=STARTS[:2]) == []
    assert findings_from_link_loss(names=NAMES[:3], lost=lost, delivered=deliv, interval_start_s=STARTS[:3]) == []


def test_the_rule_names_no_dead_link() -> None:
    """A link that delivers nothing while the rest does may be dead, rerouted or idle
    between a job's steps: the loss counters cannot tell (the first test-bed runs
    drained a healthy spine after a reroute had silenced its links); the sequence
    registers' silence can (tests/mitigate/test_silence.py)."""
    lost = np.zeros((len(NAMES), 4), dtype=np.int64)
    deliv = np.full((len(NAMES), 4), 900, dtype=np.int64)
    deliv[0] = [900, 900, 0, 0]
    assert findings_from_link_loss(names=NAMES, lost=lost, delivered=deliv, interval_start_s=STARTS[:4]) == []


@pytest.mark.parametrize("lost,total", [(0, 1000), (5, 100), (50, 1000), (480, 40000), (3, 3)])
def test_the_lower_bound_is_below_the_rate_and_tightens_with_packets(lost: int, total: int) -> None:
    lb = float(loss_lower_bound(np.array([lost]), np.array([total]), 3.9)[0])
    assert 0.0 <= lb <= lost / total
    more = float(loss_lower_bound(np.array([lost * 10]), np.array([total * 10]), 3.9)[0])
    assert lb <= more <= lost / total


def test_no_false_gray_loss_on_healthy_binomial_noise() -> None:
    """Twelve directions at a healthy 0.2 % (random), 1000 packets a poll, 2000 rounds
    of the rule over four polls: nothing named."""
    rng = np.random.default_rng(7)
    for _ in range(2000):
        lost = rng.binomial(1000, 0.002, size=(len(NAMES), 4))
        assert findings_from_link_loss(names=NAMES, lost=lost, delivered=1000 - lost,
                                       interval_start_s=STARTS[:4]) == []


# -- the routes without the avoided links --------------------------------------------
def test_intent_without_a_link_changes_only_routes() -> None:
    from controller.intent import IntentError, compute_intent
    base = compute_intent(LS)
    off = compute_intent(LS, avoid=["s3:2-s1:1"])      # either order of the ends
    for sw in base:
        keep = [e for e in base[sw].entries if e.table != "SwitchIngress.ipv4_lpm"]
        assert keep == [e for e in off[sw].entries if e.table != "SwitchIngress.ipv4_lpm"]
    ports = {dict(e.match)["dst_addr"]: dict(e.params)["port"] for e in off["s3"].entries
             if e.table == "SwitchIngress.ipv4_lpm"}
    assert ports["10.0.2.1/32"] == ports["10.0.3.1/32"] == 3      # all over s2
    with pytest.raises(IntentError, match="host link"):
        compute_intent(LS, avoid=["h1:0-s3:1"])
