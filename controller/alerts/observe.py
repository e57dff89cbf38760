"""What each rule kind watches, read from the controller's snapshot (its state dict).

Each function returns ``{subject: value}`` for one tick; a subject missing from a tick
counts as "condition false" for the engine (a link with no packets has no loss rate).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from .rules import RuleKind

Observations = dict[str, float]


def link_loss(state: Mapping[str, Any]) -> Observations:
    """Recent loss rate per directed link (the loss map's last bins)."""
    lm = state.get("lossmap") or {}
    out: Observations = {}
    for name, rate in zip(lm.get("links", ()), lm.get("recent_rate", ()), strict=False):
        if rate is not None and not math.isnan(float(rate)):
            out[str(name)] = float(rate)
    return out


def queue(state: Mapping[str, Any]) -> Observations:
    """Packets queued per switch egress port (the newest INT hop record)."""
    return {f"{h['switch']}:{h['egress_port']}": float(h.get("qlen_pkts") or 0)
            for h in state.get("hops", ()) if "switch" in h and "egress_port" in h}


def report_gaps(state: Mapping[str, Any]) -> Observations:
    """Telemetry Reports lost so far (the engine turns the total into a per-tick delta)."""
    coll = state.get("collector") or {}
    return {"collector": float(coll.get("reports_lost") or 0)}


def culprit(state: Mapping[str, Any]) -> Observations:
    """The diagnosis' top culprit, valued by its confidence."""
    d = state.get("diagnosis") or {}
    top = (d.get("culprits") or [None])[0]
    if not top:
        return {}
    return {f"{top.get('type', '?')} {top.get('component', '?')}: {top.get('kind', '?')}":
            float(top.get("confidence") or 1.0)}


OBSERVERS: dict[RuleKind, Callable[[Mapping[str, Any]], Observations]] = {
    RuleKind.LINK_LOSS: link_loss,
    RuleKind.QUEUE: queue,
    RuleKind.REPORT_GAPS: report_gaps,
    RuleKind.CULPRIT: culprit,
}

# kinds whose observation is a running total; the rule applies to its growth per tick
CUMULATIVE = frozenset({RuleKind.REPORT_GAPS})
