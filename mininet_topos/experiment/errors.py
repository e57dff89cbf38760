"""Errors of the experiment package: one hierarchy, messages name the field and value."""
from __future__ import annotations

__all__ = ["ExperimentError", "RunError", "SpecError"]


class ExperimentError(Exception):
    """Base class of every error raised by ``mininet_topos.experiment``."""


class SpecError(ExperimentError):
    """An experiment spec is malformed or out of range; the message names the field."""


class RunError(ExperimentError):
    """An experiment could not be run (a node, process or network step failed)."""
