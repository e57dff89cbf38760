"""The rank-move rows of the mitigation policy: a slow receiver host or a straggler rank
-> ``move_rank`` to a spare of the same leaf (least loaded, not itself named), behind
the guard (confidence, confirmation, budget; a move is never undone); no job file or
no such spare -> advice.  The mitigator makes the move (act) or only logs it (advise).

Topology: leaf-spine, 3 leaves (s3: h1-h3, s4: h4-h6, s5: h7-h9), 2 spines."""
from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from controller.intent import IntentOptions
from controller.mitigate import (
    Action,
    Fabric,
    Finding,
    Guard,
    Job,
    JobError,
    MitigationMode,
    Mitigator,
    Policy,
)
from controller.topology.generators import leaf_spine

LS = leaf_spine(3, n_spines=2, hosts_per_leaf=3)
GUARD = Guard(min_confidence=0.5, confirm_s=0.5, hold_down_s=10.0, clear_s=3.0, budget_per_min=3)


def job(ranks: list[str], spares: list[str]) -> Job:
    return Job.from_dict({"ranks": ranks, "spares": spares,
                          "controls": {h: f"/nonexistent/ctl-{h}" for h in [*ranks, *spares]}}, LS)


JOB = job(["h1", "h4", "h7"], ["h2", "h3", "h5", "h8"])


def F(kind: str, component: str, type_: str, conf: float = 0.9, **ev: object) -> Finding:
    return Finding(kind=kind, type=type_, component=component, confidence=conf, onset=0.0,
                   source="diagnosis", evidence=ev)


@dataclass
class Row:
    name: str
    findings: list[Finding]
    verb: str | None              # the decision by t=1 (after the confirmation), None: nothing
    target: str = ""
    spare: str | None = None      # the spare a move picks
    why: str = ""                 # in the reason of a "none"
    job: Job | None = JOB
    load: dict[str, float] = field(default_factory=dict)


ROWS = [
    Row("straggler rank: moved to the spare of its leaf", [F("straggler", "1", "rank")], "move_rank",
        "rank 1", "h5"),
    Row("slow receiver host: its rank moved", [F("slow_receiver", "h7", "host")], "move_rank", "rank 2", "h8"),
    Row("two spares on the leaf: the least loaded", [F("straggler", "0", "rank")], "move_rank", "rank 0",
        "h3", load={"h2": 5e6, "h3": 1e6}),
    Row("two spares, equal load: the first by name", [F("straggler", "0", "rank")], "move_rank", "rank 0",
        "h2"),
    Row("the spare is named slow too: the other one", [F("straggler", "0", "rank"),
                                                      F("slow_receiver", "h2", "host", ranks=[])],
        "move_rank", "rank 0", "h3"),
    Row("no healthy spare on the leaf: advice", [F("straggler", "1", "rank"),
                                                F("slow_receiver", "h5", "host", ranks=[])],
        "none", "rank 1", why="no free, healthy spare host on s4"),
    Row("no spare on the leaf at all: advice", [F("straggler", "1", "rank")], "none", "rank 1",
        why="no free, healthy spare host on s4", job=job(["h1", "h4", "h7"], ["h2", "h8"])),
    Row("no job file: advice naming the rank", [F("straggler", "2", "rank")], "none", "rank 2",
        why="no job file", job=None),
    Row("no job file, a host with one rank: advice", [F("slow_receiver", "h5", "host", ranks=[1])], "none",
        "rank 1", why="no job file", job=None),
    Row("a host that runs no rank: advice", [F("slow_receiver", "h6", "host")], "none", "host h6",
        why="no single rank known there"),
    Row("a rank outside the job: advice", [F("straggler", "7", "rank")], "none", "rank 7",
        why="no single rank known there"),
    Row("below the confidence threshold: nothing", [F("straggler", "1", "rank", conf=0.3)], None),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_rank_move_table(row: Row) -> None:
    p = Policy(fabric=Fabric(LS), guard=GUARD, job=row.job)
    first = p.step(row.findings, 0.0, load=row.load)
    acts = [a for a in first + p.step(row.findings, 1.0, load=row.load) if a.target.startswith(("rank", "host h6"))]
    if row.verb is None:
        assert acts == []
        return
    [a] = acts
    assert (a.verb, a.target) == (row.verb, row.target), a.reason
    if a.verb == "move_rank":
        assert first == [] or all(x.target != a.target for x in first)   # waited for the confirmation
        assert a.evidence["spare"] == row.spare and a.evidence["leaf"] == JOB.leaves[a.evidence["from_host"]]
        assert row.spare is not None and a.evidence["spare_ip"] == JOB.ips[row.spare]
        assert row.spare in a.reason
    else:
        assert row.why in a.reason


def test_a_move_is_made_once_never_undone_and_the_spare_is_then_taken() -> None:
    p = Policy(fabric=Fabric(LS), guard=GUARD, job=job(["h1", "h2", "h4"], ["h3"]))
    f = [F("straggler", "0", "rank")]
    p.step(f, 0.0)
    [a] = p.step(f, 1.0)
    assert (a.verb, a.evidence["spare"]) == ("move_rank", "h3")
    p.moved(0, "h3")
    assert p.step(f, 2.0) == []                       # still named: held, not repeated
    assert p.step([], 600.0, healthy={}) == []        # never undone (the rank lives on h3)
    # the spare is taken: the other rank of that leaf can only be advised
    g = [F("straggler", "1", "rank")]
    p.step(g, 601.0)
    [b] = p.step(g, 602.0)
    assert b.verb == "none" and "no free, healthy spare host on s3" in b.reason
    # a finding at the rank's new host names the same rank: held, no second move
    h = [F("slow_receiver", "h3", "host")]
    assert p.step(h, 603.0) == [] and p.step(h, 604.0) == []
    assert p.active["rank 0"].last_seen == 604.0
    # an operator's word (the job set right, e.g. restarted): the move is undone and the
    # spare is free again
    [u] = p.clear(700.0, ["rank 0"])
    assert (u.verb, u.undoes, u.avoid) == ("undo", a.seq, ()) and p.placed == {}
    p.step(f, 701.0)
    [c] = p.step(f, 702.0)
    assert (c.verb, c.evidence["spare"]) == ("move_rank", "h3")


def test_the_budget_holds_a_move_back_and_says_so() -> None:
    p = Policy(fabric=Fabric(LS), guard=Guard(confirm_s=0.5, budget_per_min=1), job=JOB)
    [r] = p.step([Finding(kind="link_down", type="link", component=Fabric(LS).switch_links("s1")[0], confidence=0.9, onset=0.0,
                          source="counters")], 0.0)
    assert r.verb == "reroute"
    f = [F("straggler", "1", "rank")]
    p.step(f, 0.1)
    [a] = p.step(f, 1.0)
    assert a.verb == "none" and a.reason.startswith("budget: 1 actions") and "move_rank rank 1" in a.reason


@pytest.mark.parametrize("bad, what", [
    ({"ranks": ["h1", "hx"], "spares": [], "controls": {}}, "hx not in the topology"),
    ({"ranks": ["h1"], "spares": ["h1"], "controls": {"h1": "/x"}}, "a spare runs none"),
    ({"ranks": ["h1"], "spares": ["h2"], "controls": {"h1": "/x"}}, "no socket for h2"),
    ({"ranks": "h1", "controls": {}}, "ranks must be a list"),
    ([], "expected a JSON object"),
])
def test_a_bad_job_file_is_refused_naming_what(bad: object, what: str) -> None:
    with pytest.raises(JobError, match=what):
        Job.from_dict(bad, LS)


@pytest.mark.parametrize("mode, outcome, calls", [(MitigationMode.ACT, "written", 1),
                                                  (MitigationMode.ADVISE, "advised", 0)])
def test_the_mitigator_moves_on_act_and_only_logs_on_advise(mode: MitigationMode, outcome: str,
                                                            calls: int) -> None:
    made: list[Action] = []

    def mover(a: Action) -> str | None:
        made.append(a)
        return None
    m = Mitigator(topo=LS, options=IntentOptions(), switches={}, mode=mode, guard=GUARD, job=JOB, mover=mover)
    f = [F("straggler", "1", "rank")]
    m.step(f, 0.0)
    [a] = m.step(f, 1.0)
    assert (a.verb, a.outcome, len(made)) == ("move_rank", outcome, calls)
    assert m.policy.placed == ({1: "h5"} if calls else {})
    [row] = [x for x in m.take_unexported() if x["verb"] == "move_rank"]
    assert row["evidence"]["spare"] == "h5" and row["reason"] and row["at"] == 1.0


def test_a_failed_move_is_logged_with_its_cause() -> None:
    m = Mitigator(topo=LS, options=IntentOptions(), switches={}, mode=MitigationMode.ACT, guard=GUARD, job=JOB,
                  mover=lambda a: "rank 1: too late")
    f = [F("straggler", "1", "rank")]
    m.step(f, 0.0)
    [a] = m.step(f, 1.0)
    assert a.outcome == "failed: rank 1: too late" and m.policy.placed == {}


def test_the_job_mover_reports_a_rank_it_cannot_reach() -> None:
    """The default mover (the job's sockets, traffic.rankmove): nothing listens there."""
    m = Mitigator(topo=LS, options=IntentOptions(), switches={}, mode=MitigationMode.ACT, guard=GUARD, job=JOB)
    f = [F("straggler", "1", "rank")]
    m.step(f, 0.0)
    [a] = m.step(f, 1.0)
    assert a.outcome.startswith("failed: rank 0 did not say where it is")
    assert a.evidence["move"]["ok"] is False
