"""Errors of the front end: one hierarchy, each with a source location.

Rendered as ``file:line:col: error: message`` (the format compilers use, so editors and
CI logs can jump to the place).
"""
from __future__ import annotations

from .ast import UNKNOWN_LOC, SourceLoc


class P4Error(Exception):
    """A problem in a P4 program (syntax, name, type, unsupported construct)."""

    def __init__(self, loc: SourceLoc | None, message: str) -> None:
        self.loc = loc or UNKNOWN_LOC
        self.message = message
        super().__init__(self.render())

    @property
    def file(self) -> str:
        return self.loc.file

    @property
    def line(self) -> int:
        return self.loc.line

    @property
    def col(self) -> int:
        return self.loc.col

    def render(self) -> str:
        return f"{self.loc.file}:{self.loc.line}:{self.loc.col}: error: {self.message}"


class P4SyntaxError(P4Error):
    """The source does not follow the P4_16 grammar."""


class P4PreprocessError(P4Error):
    """The C preprocessor failed (missing include, bad directive)."""


class P4NameError(P4Error):
    """A name is undeclared or declared twice."""


class P4TypeError(P4Error):
    """Types or widths do not match, wrong argument count or direction."""


class P4Unsupported(P4Error):
    """A valid construct this front end does not support yet (message starts ``unsupported:``)."""

    def __init__(self, loc: SourceLoc | None, construct: str) -> None:
        super().__init__(loc, f"unsupported: {construct}")


class P4ErrorList(P4Error):
    """Several errors found in one pass (``errors`` in source order)."""

    def __init__(self, errors: list[P4Error]) -> None:
        self.errors = errors
        first = errors[0]
        Exception.__init__(self, "\n".join(e.render() for e in errors))
        self.loc = first.loc
        self.message = first.message

    def render(self) -> str:
        return "\n".join(e.render() for e in self.errors)
