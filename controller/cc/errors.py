"""Errors of the congestion-control package.

One hierarchy so callers can catch ``CcError`` for anything this package rejects;
each message names the object, the bad value and where it was found.
"""
from __future__ import annotations


class CcError(Exception):
    """Base class of every error raised by ``controller.cc``."""


class ParameterError(CcError, ValueError):
    """A parameter (eta, stage count, rate, interval ...) is out of its range."""


class TelemetryError(CcError, ValueError):
    """Telemetry arrays have the wrong shape, dtype or values."""


class FlowIndexError(CcError, IndexError):
    """A flow index is outside the engine's flow table."""
