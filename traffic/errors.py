"""One exception hierarchy for the traffic package; messages name object, value, place."""
from __future__ import annotations


class TrafficError(Exception):
    """Base class of every error raised by the traffic package."""


class ConfigError(TrafficError, ValueError):
    """A QP, endpoint or workload setting is out of range or inconsistent."""


class FecError(TrafficError):
    """An erasure-code block cannot be built or repaired."""


class ControlError(TrafficError, ValueError):
    """A control message (rate or FEC feedback) is malformed."""


class WorkloadError(TrafficError):
    """A workload could not finish (timeout, peer missing, corrupted data)."""
