"""Errors of the loss-map package; messages name the object, the bad value and where."""
from __future__ import annotations


class LossMapError(Exception):
    """Base class of every error raised by ``controller.lossmap``."""


class LossInputError(LossMapError, ValueError):
    """Counters, events, records or paths have the wrong shape or values."""


class LossParameterError(LossMapError, ValueError):
    """A parameter (bin width, target loss, block size ...) is out of range."""


class LinkKeyError(LossMapError, KeyError):
    """A (switch, port) pair that no link of the topology uses."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""
