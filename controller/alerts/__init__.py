"""Alerts: rules on the telemetry with a firing/resolved state.

Why a package of its own: the same rules feed the live page, the state file and the
export, so they are evaluated once per controller tick from the controller's snapshot
(the dict `controller show` reads), never from the page.
"""
from __future__ import annotations

from .engine import Alert, AlertEngine
from .rules import DEFAULT_RULES, AlertRule, AlertRuleError, RuleKind, load_rules, parse_rules

__all__ = ["DEFAULT_RULES", "Alert", "AlertEngine", "AlertRule", "AlertRuleError", "RuleKind",
           "load_rules", "parse_rules"]
