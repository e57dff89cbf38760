"""Alert rules: what is watched, above which value, for how long.

A rule file (YAML or JSON) is a list under ``alerts``::

    alerts:
      - {name: link-loss, kind: link_loss, above: 0.01}           # loss rate of a link direction
      - {name: deep-queue, kind: queue, above: 32, for_s: 3}      # packets in an egress queue
      - {name: report-gaps, kind: report_gaps, above: 0}          # Telemetry Reports lost
      - {name: culprit, kind: culprit}                            # the diagnosis named one

``for_s``: the condition must hold that long before the alert fires (0: at once);
``clear_s``: it must be false that long before the alert resolves (against flapping).
"""
from __future__ import annotations

import enum
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


class AlertRuleError(ValueError):
    """A rule file or rule that cannot be used; the message names the rule and the field."""


class RuleKind(enum.StrEnum):
    LINK_LOSS = "link_loss"       # subject: a directed link "s1:3->s2:1"; value: loss rate 0..1
    QUEUE = "queue"               # subject: "switch:port"; value: queue length in packets
    REPORT_GAPS = "report_gaps"   # subject: "collector"; value: Telemetry Reports lost since last tick
    CULPRIT = "culprit"           # subject: the diagnosis' culprit; value: its score (1 when none)


@dataclass(frozen=True, slots=True, kw_only=True)
class AlertRule:
    name: str
    kind: RuleKind
    above: float = 0.0
    for_s: float = 0.0
    clear_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": str(self.kind), "above": self.above,
                "for_s": self.for_s, "clear_s": self.clear_s}


DEFAULT_RULES: tuple[AlertRule, ...] = (
    AlertRule(name="link-loss", kind=RuleKind.LINK_LOSS, above=0.005, clear_s=2.0),
    AlertRule(name="deep-queue", kind=RuleKind.QUEUE, above=48, for_s=3.0, clear_s=2.0),
    AlertRule(name="report-gaps", kind=RuleKind.REPORT_GAPS, above=0, clear_s=5.0),
    AlertRule(name="culprit", kind=RuleKind.CULPRIT, above=0, clear_s=5.0),
)

_FIELDS = {"name", "kind", "above", "for_s", "clear_s"}


def _number(rule: str, key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AlertRuleError(f"alert rule {rule!r}: {key} must be a number, not {value!r}")
    if value < 0 or math.isnan(value):
        raise AlertRuleError(f"alert rule {rule!r}: {key} = {value} must be >= 0")
    return float(value)


def parse_rules(data: object, where: str = "rules") -> tuple[AlertRule, ...]:
    """Rules from parsed YAML/JSON: ``{"alerts": [...]}`` or the bare list."""
    items = data.get("alerts") if isinstance(data, Mapping) else data
    if not isinstance(items, Sequence) or isinstance(items, (str, bytes)):
        raise AlertRuleError(f"{where}: expected a list of rules under 'alerts'")
    rules: list[AlertRule] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise AlertRuleError(f"{where}: rule {i + 1} is not a mapping: {item!r}")
        name = str(item.get("name") or f"rule-{i + 1}")
        unknown = set(item) - _FIELDS
        if unknown:
            raise AlertRuleError(f"{where}: alert rule {name!r}: unknown field(s) "
                                 f"{', '.join(sorted(map(str, unknown)))}; known: "
                                 f"{', '.join(sorted(_FIELDS))}")
        try:
            kind = RuleKind(str(item.get("kind")))
        except ValueError:
            raise AlertRuleError(f"{where}: alert rule {name!r}: kind {item.get('kind')!r}; use one "
                                 f"of {', '.join(k.value for k in RuleKind)}") from None
        if name in seen:
            raise AlertRuleError(f"{where}: alert rule {name!r} is defined twice")
        seen.add(name)
        rules.append(AlertRule(name=name, kind=kind,
                               above=_number(name, "above", item.get("above", 0.0)),
                               for_s=_number(name, "for_s", item.get("for_s", 0.0)),
                               clear_s=_number(name, "clear_s", item.get("clear_s", 0.0))))
    return tuple(rules)


def load_rules(path: str | Path) -> tuple[AlertRule, ...]:
    """Rules from a YAML or JSON file (JSON is YAML)."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise AlertRuleError(f"alert rules {p}: cannot read: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text) if p.suffix != ".json" else json.loads(text)
    except (yaml.YAMLError, ValueError) as exc:
        raise AlertRuleError(f"alert rules {p}: not YAML/JSON: {exc}") from None
    return parse_rules(data, where=f"alert rules {p}")
