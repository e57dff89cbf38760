"""Errors of the intent layer (topology + options -> per-switch entries)."""
from __future__ import annotations


class IntentError(Exception):
    """The topology and the options do not give a consistent set of entries."""
