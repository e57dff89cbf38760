"""Errors of the experiment package: the test bed's hierarchy and the spec's own."""
from __future__ import annotations

from mininet_topos.testbed.errors import ExperimentError, RunError

__all__ = ["ExperimentError", "RunError", "SpecError"]


class SpecError(ExperimentError):
    """An experiment spec is malformed or out of range; the message names the field."""
