"""The alert state machine: pending -> firing -> resolved, per (rule, subject).

Why ``for_s`` and ``clear_s``: a queue that touches the threshold for one sample is
not an incident, and a link whose loss rate hovers at the threshold must not fire and
resolve every second; the two delays make both quiet without hiding a real fault.
"""
from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .observe import CUMULATIVE, OBSERVERS
from .rules import DEFAULT_RULES, AlertRule


@dataclass(slots=True, kw_only=True)
class Alert:
    rule: str
    kind: str
    subject: str
    state: str                     # "pending" | "firing" | "resolved"
    value: float
    threshold: float
    since_unix_s: float            # when the condition became true
    fired_unix_s: float | None = None
    resolved_unix_s: float | None = None
    _false_since: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "kind": self.kind, "subject": self.subject,
                "state": self.state, "value": self.value, "threshold": self.threshold,
                "since_unix_s": self.since_unix_s, "fired_unix_s": self.fired_unix_s,
                "resolved_unix_s": self.resolved_unix_s}


@dataclass(slots=True, kw_only=True)
class AlertEngine:
    """Evaluates the rules once per tick on the controller's snapshot."""

    rules: tuple[AlertRule, ...] = DEFAULT_RULES
    keep_resolved: int = 50
    active: dict[tuple[str, str], Alert] = field(default_factory=dict)
    resolved: deque[Alert] = field(init=False)
    fired_total: int = 0
    _last_totals: dict[tuple[str, str], float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.resolved = deque(maxlen=self.keep_resolved)

    def _values(self, rule: AlertRule, state: Mapping[str, Any]) -> dict[str, float]:
        obs = OBSERVERS[rule.kind](state)
        if rule.kind not in CUMULATIVE:
            return obs
        out = {}
        for subject, total in obs.items():
            key = (rule.name, subject)
            prev = self._last_totals.get(key)
            self._last_totals[key] = total
            out[subject] = 0.0 if prev is None else max(0.0, total - prev)
        return out

    def evaluate(self, state: Mapping[str, Any], now_unix_s: float) -> list[Alert]:
        """Advance every alert; returns those that fired or resolved at this tick."""
        changed: list[Alert] = []
        with self._lock:
            for rule in self.rules:
                values = self._values(rule, state)
                true_now = {s: v for s, v in values.items() if v > rule.above}
                for subject, v in true_now.items():
                    key = (rule.name, subject)
                    a = self.active.get(key)
                    if a is None:
                        a = Alert(rule=rule.name, kind=str(rule.kind), subject=subject,
                                  state="pending", value=v, threshold=rule.above,
                                  since_unix_s=now_unix_s)
                        self.active[key] = a
                    a.value, a._false_since = v, None
                    if a.state == "pending" and now_unix_s - a.since_unix_s >= rule.for_s:
                        a.state, a.fired_unix_s = "firing", now_unix_s
                        self.fired_total += 1
                        changed.append(a)
                for key in [k for k in self.active if k[0] == rule.name and k[1] not in true_now]:
                    a = self.active[key]
                    # below the threshold now: its value; no data this tick: the last one
                    a.value = values.get(a.subject, a.value)
                    if a.state == "pending":
                        del self.active[key]
                        continue
                    if a._false_since is None:
                        a._false_since = now_unix_s
                    if now_unix_s - a._false_since >= rule.clear_s:
                        a.state, a.resolved_unix_s = "resolved", now_unix_s
                        del self.active[key]
                        self.resolved.append(a)
                        changed.append(a)
        return changed

    def snapshot(self) -> dict[str, Any]:
        """Firing and pending alerts, then the most recent resolved ones (newest first)."""
        with self._lock:
            return {"rules": [r.to_dict() for r in self.rules],
                    "active": [a.as_dict() for a in self.active.values()],
                    "resolved": [a.as_dict() for a in reversed(self.resolved)],
                    "fired_total": self.fired_total}


def firing(alerts: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [a for a in alerts if a.get("state") == "firing"]
