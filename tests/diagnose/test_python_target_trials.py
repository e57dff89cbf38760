"""The diagnosis on real trials of the Python target, at set times after the onset
(table-driven).

Each folder under ``testbed_trials/`` is one trial of ``python -m mininet_topos
experiment faults --switch softswitch --trials 30`` (seeds 11 and 12, issue #24's
runs), as the harness saved it: the ranks' collective logs, the controller's exports
(link counters, INT), the ground truth and the time the run diagnosed it.  The Python
switches carry the ring's 1 MB steps in 1-2 s and the controller reads the link
counters every 2-4 s, so what matters is what the diagnosis says *when*: the
evidence is cut at ``onset + at_s`` as a live diagnosis would have seen it
(``Evidence.until``), which is how the harness measures onset -> top-1.

The rows that the rules before this table missed:

* a link down was named only once a transfer over it was *hung*, 10x its pair's
  baseline: 10-20 s after the onset on these 1-2 s transfers (trial 2: 10.25 s).  A
  transfer open 3x its baseline over a link read silent in both directions names it;
* a slow receiver's transfers counted only once finished: their age so far is a lower
  bound of their time (trial 0: 2.75 s -> 1.25 s);
* 13 packets lost somewhere in a Python switch (flow PSN gaps, no link loss, no queue)
  named a tiny queue in a fault-free trial, at exactly the report floor.

* a slow receiver that replaced a slowness already there (trial 26 of a later run):
  no rule on transfer times could see it; the senders' round trips (``srtt`` in the
  send records, ``rtt.py``) do, and they clear a fault-free host whose pairs the
  loaded switches slowed (trial 1 of that run).

And one that must stay as it was: a slow receiver stalls its senders too, with the
link into it silent between their retransmission timeouts (one direction only: its
own ACKs still come back); no dead link there."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from controller.diagnose import Evidence, diagnose
from controller.diagnose.evidence import load_telemetry
from controller.topology.load import load_topology
from traffic.collog import read_logs

HERE = Path(__file__).resolve().parent / "testbed_trials"
TOPO = load_topology(Path(__file__).resolve().parents[2] / "mininet_topos" / "topofiles"
                     / "two_dc.yaml")


def _trial(name: str) -> tuple[Evidence, float]:
    """(the trial's evidence as diagnosed at the end of the run, its onset: the first
    transfer's start where there was no fault)."""
    d = HERE / name
    records = read_logs([d / "collectives"])
    truth = json.loads((d / "ground_truth.json").read_text())
    at = json.loads((d / "run.json").read_text())["diagnosed_at"]
    ev = Evidence(topo=TOPO, records=records, telemetry=load_telemetry(d, TOPO), now=at)
    onset = truth["onset_unix"] if truth else min(r.start for r in records)
    return ev, onset


def _either_way(link: str) -> set[str]:
    a, _, b = link.partition("->")
    return {f"link {link}", f"link {b}->{a}"}


# (trial, seconds after the onset (None: the run's own diagnosis time), expected top-1
# keys (empty: no fault), its kind, what the row is about)
CASES = [
    ("py_s11_t002", 4.0, _either_way("s8:3->s5:2"), "link_down",
     "leaf-spine link down in DC2: a transfer stalled 3x its baseline, both ways silent"),
    ("py_s12_t027", 2.0, _either_way("s5:2->s8:3"), "link_down",
     "the same link down, read silent at the first round after the onset"),
    ("py_s11_t000", 2.0, {"host h3"}, "slow_receiver",
     "h3 holds packets 1.4 s: its pairs' open transfers are already 2x their baseline"),
    ("py_s11b_t018", None, set(), None,
     "fault-free: 13 PSN gaps of one pair's flows, no link loss, no queue"),
    ("py_s11b_t025", None, {"host h1"}, "slow_receiver",
     ("h1 holds packets: s1:1->s3:3 silent 2 s under a stalled transfer, its reverse "
      "direction delivering; no dead link")),
    ("py_s11c_t026", None, {"host h1"}, "slow_receiver",
     ("h1 holds packets 0.87 s, but the data into it took as long before the onset: "
      "named from the round trips (srtt) of both pairs at it, 3x every other pair's")),
    ("py_s11c_t001", None, set(), None,
     ("fault-free: both pairs at h5 slowed by the loaded switches, their round trips as "
      "low as the others': no slow receiver")),
    ("py_s11c_t013", None, set(), None,
     ("fault-free: s7:3's backlog (41 packets, 5 of 16 INT samples, the ring's 3.7 of 100 "
      "Mbit/s through it) is the Python switch's scheduling, not a standing queue")),
    ("py_s11d_t001", None, set(), None,
     ("fault-free: the data into h1 slowed, h1 named at 0.34 before; its pairs' settled "
      "round-trip floors 1.3x the others' median round trip: a third of a hold")),
    ("py_s12c_t004", None, set(), None,
     ("fault-free: no pair slowed; the pairs at h3 ended with recent round-trip floors "
      "3.7x the others', but under the others' median round trip: no hold")),
]


@pytest.mark.parametrize(("trial", "at_s", "want", "kind", "why"), CASES,
                         ids=[c[0] for c in CASES])
def test_python_target_trial(trial: str, at_s: float | None, want: set[str],
                             kind: str | None, why: str) -> None:
    ev, onset = _trial(trial)
    d = diagnose(ev if at_s is None else ev.until(onset + at_s))
    got = [(c.key, c.kind) for c in d.culprits[:3]]
    if not want:
        assert not d.fault, (why, got)
        return
    assert d.culprits, (why, "no fault")
    assert d.culprits[0].key in want and d.culprits[0].kind == kind, (why, got)
