"""Errors of the test bed and the experiments on it: one hierarchy, messages name the
field and value (``mininet_topos.experiment`` adds :class:`SpecError`)."""
from __future__ import annotations

__all__ = ["ExperimentError", "RunError"]


class ExperimentError(Exception):
    """Base class of every error of the test bed, its experiments and its faults."""


class RunError(ExperimentError):
    """The test bed or an experiment could not be run (a node, process or network step
    failed)."""
