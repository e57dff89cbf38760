"""Errors of the switch process (ports, traffic manager, options), one hierarchy.

All derive from `SoftswitchError` so a caller that handles the switch's errors
handles these too; each message names the port, interface or option and the bad value.
"""
from __future__ import annotations

from softswitch.errors import SoftswitchError


class SwitchdError(SoftswitchError):
    """The switch process cannot do what it was asked (bad option, missing interface)."""


class PortError(SwitchdError):
    """A port could not be opened, read or written."""


class OptionError(SwitchdError):
    """A command-line or constructor option is malformed or out of range."""


class ProgramError(SwitchdError):
    """The P4 program given on the command line does not load; the message is the
    compiler's own ``file:line:col: error: ...`` text."""
