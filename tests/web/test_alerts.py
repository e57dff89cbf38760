"""Alert rules and the firing/resolved state machine, table-driven on snapshots."""
from __future__ import annotations

import pytest

from controller.alerts import AlertEngine, AlertRule, AlertRuleError, RuleKind, parse_rules


def _state(*, loss: float | None = None, qlen: int = 0, reports_lost: int = 0,
           culprit: str | None = None) -> dict:
    return {"lossmap": {"links": ["s1:2->s2:2"], "recent_rate": [loss]},
            "hops": [{"switch": "s1", "egress_port": 2, "qlen_pkts": qlen}],
            "collector": {"reports_lost": reports_lost},
            "diagnosis": {"culprits": [{"type": "link", "component": culprit, "kind": "gray_loss",
                                        "confidence": 0.9}]} if culprit else None}


@pytest.mark.parametrize(("rule", "states", "expect"), [
    # link loss above 1 %: fires at once, resolves after clear_s of no loss
    (AlertRule(name="l", kind=RuleKind.LINK_LOSS, above=0.01, clear_s=2),
     [_state(loss=0.0), _state(loss=0.05), _state(loss=0.05), _state(loss=0.0), _state(loss=0.0),
      _state(loss=0.0)],
     [None, "firing", "firing", "firing", "firing", "resolved"]),
    # a link with no traffic has no rate: not an alert
    (AlertRule(name="l", kind=RuleKind.LINK_LOSS, above=0.01),
     [_state(loss=None)], [None]),
    # queue above 10 for 2 s: a one-tick spike is only pending and never fires
    (AlertRule(name="q", kind=RuleKind.QUEUE, above=10, for_s=2),
     [_state(qlen=20), _state(qlen=0), _state(qlen=20), _state(qlen=20), _state(qlen=20)],
     ["pending", None, "pending", "pending", "firing"]),
    # report gaps: the growth of the lost counter per tick
    (AlertRule(name="g", kind=RuleKind.REPORT_GAPS, above=0),
     [_state(reports_lost=5), _state(reports_lost=5), _state(reports_lost=9), _state(reports_lost=9)],
     [None, None, "firing", "resolved"]),
    # a culprit named
    (AlertRule(name="c", kind=RuleKind.CULPRIT),
     [_state(), _state(culprit="s1:2->s2:2"), _state()],
     [None, "firing", "resolved"]),
])
def test_rule_transitions(rule: AlertRule, states: list[dict], expect: list[str | None]) -> None:
    eng = AlertEngine(rules=(rule,))
    seen = []
    for t, st in enumerate(states):
        eng.evaluate(st, now_unix_s=float(t))
        snap = eng.snapshot()
        now = [a["state"] for a in snap["active"]]
        if not now and snap["resolved"] and snap["resolved"][0]["resolved_unix_s"] == float(t):
            now = ["resolved"]
        seen.append(now[0] if now else None)
    assert seen == expect


def test_flapping_link_fires_once_within_clear_time() -> None:
    eng = AlertEngine(rules=(AlertRule(name="l", kind=RuleKind.LINK_LOSS, above=0.01, clear_s=3),))
    for t in range(12):
        eng.evaluate(_state(loss=0.05 if t % 2 == 0 else 0.0), now_unix_s=float(t))
    assert eng.fired_total == 1
    assert [a["state"] for a in eng.snapshot()["active"]] == ["firing"]


def test_snapshot_lists_rules_and_values() -> None:
    eng = AlertEngine(rules=(AlertRule(name="l", kind=RuleKind.LINK_LOSS, above=0.01),))
    changed = eng.evaluate(_state(loss=0.2), now_unix_s=100.0)
    assert [(a.rule, a.subject, a.state, a.value) for a in changed] == [("l", "s1:2->s2:2", "firing", 0.2)]
    snap = eng.snapshot()
    assert snap["rules"] == [{"name": "l", "kind": "link_loss", "above": 0.01, "for_s": 0.0, "clear_s": 0.0}]
    assert snap["fired_total"] == 1


def test_a_firing_alert_keeps_its_value_through_ticks_without_data() -> None:
    """No data this tick is not a 0 % loss: the value shown stays the last measured."""
    eng = AlertEngine(rules=(AlertRule(name="l", kind=RuleKind.LINK_LOSS, above=0.01, clear_s=5),))
    eng.evaluate(_state(loss=0.03), now_unix_s=0.0)
    eng.evaluate(_state(loss=None), now_unix_s=1.0)
    assert [(a["state"], a["value"]) for a in eng.snapshot()["active"]] == [("firing", 0.03)]
    eng.evaluate(_state(loss=0.002), now_unix_s=2.0)
    assert [(a["state"], a["value"]) for a in eng.snapshot()["active"]] == [("firing", 0.002)]


@pytest.mark.parametrize(("data", "message"), [
    ({"alerts": [{"name": "x", "kind": "nope"}]}, "kind 'nope'"),
    ({"alerts": [{"name": "x", "kind": "queue", "above": "ten"}]}, "above must be a number"),
    ({"alerts": [{"name": "x", "kind": "queue", "above": -1}]}, "must be >= 0"),
    ({"alerts": [{"name": "x", "kind": "queue", "when": 3}]}, "unknown field(s) when"),
    ({"alerts": [{"name": "x", "kind": "queue"}, {"name": "x", "kind": "queue"}]}, "defined twice"),
    ({"alerts": "queue"}, "expected a list"),
    ({"alerts": [3]}, "rule 1 is not a mapping"),
])
def test_bad_rules_are_named(data: object, message: str) -> None:
    with pytest.raises(AlertRuleError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_rules(data)


def test_rule_file_round_trip(tmp_path) -> None:
    f = tmp_path / "alerts.yaml"
    f.write_text("alerts:\n  - {name: deep, kind: queue, above: 32, for_s: 3}\n")
    from controller.alerts import load_rules
    assert load_rules(f) == (AlertRule(name="deep", kind=RuleKind.QUEUE, above=32, for_s=3),)
    with pytest.raises(AlertRuleError, match="cannot read"):
        load_rules(tmp_path / "missing.yaml")
