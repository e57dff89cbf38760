"""Exceptions of controller.export (one hierarchy)."""
from __future__ import annotations


class ExportError(Exception):
    """Base of every error raised by controller.export."""


class LineProtocolError(ExportError):
    """A point cannot be written or a line cannot be parsed (names the value)."""


class SinkError(ExportError):
    """A write to a sink failed."""


class TransientSinkError(SinkError):
    """The server is unreachable, overloaded or failing: retry later (data is spooled)."""


class PermanentSinkError(SinkError):
    """The server refused the data itself (e.g. bad line protocol): retrying cannot help."""


class ProbeError(ExportError):
    """The server at a URL could not be identified."""


class ConfigError(ExportError):
    """An exporter parameter is invalid (names it and the value)."""
