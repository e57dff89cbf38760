"""Errors of the running controller (start-up problems the CLI reports and exits on)."""
from __future__ import annotations


class RunError(Exception):
    """The controller cannot start: bad option, topology, pipeline or a port in use."""
