"""Errors of the topology package: one hierarchy, messages name object, field and value."""
from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "RoutingError",
    "TopologyError",
    "TopologyFormatError",
    "TopologyValidationError",
    "did_you_mean",
]


class TopologyError(Exception):
    """Base class of every error raised by ``controller.topology``."""


class TopologyFormatError(TopologyError):
    """The file or mapping could not be read as a topology (syntax, types, unknown keys)."""


class TopologyValidationError(TopologyError):
    """The topology is well formed but inconsistent or out of range.

    ``problems`` lists every problem found (the message shows them all), so one run
    of the checker tells the user everything that needs fixing.
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        head = "invalid topology: " if len(problems) == 1 else (
            f"invalid topology ({len(problems)} problems):\n  ")
        super().__init__(head + "\n  ".join(problems))


class RoutingError(TopologyError):
    """A route or path was asked for that the topology cannot give (unknown or unreachable)."""


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """Return ' (did you mean "x"?)' for the closest known name, or '' if none is close."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.5)
    return f' (did you mean "{close[0]}"?)' if close else ""
