"""Exception hierarchy of the software switch back end.

One root class, `SoftswitchError`, so callers can catch everything the switch
raises on bad input; each subclass names a layer (packet I/O, compiled program,
runtime API, STF runner) so the message can say where the problem was found.
"""
from __future__ import annotations

import enum


class SoftswitchError(Exception):
    """Root of every error the software switch raises on bad input or state."""


class PacketError(SoftswitchError):
    """A packet could not be read or written as asked (bad offset, width, data)."""


class PacketTooShort(PacketError):
    """An extract/lookahead/advance wanted more bits than the packet has left.

    Caught by the parser runner and turned into `error.PacketTooShort`, as BMv2 does.
    """


class VarbitLengthError(PacketError):
    """A varbit extract was given a length BMv2 refuses, before reading anything.

    ``error_name`` is the P4 error the parser runner records: ``ParserInvalidArgument``
    for a length that is not a whole number of bytes, ``HeaderTooShort`` for one
    larger than the field's maximum.
    """

    def __init__(self, error_name: str, message: str) -> None:
        super().__init__(message)
        self.error_name = error_name


class StackOutOfBounds(SoftswitchError):
    """A header stack was indexed outside its size (parser: error.StackOutOfBounds)."""


class ParserErrorSignal(SoftswitchError):
    """Raised inside generated parser code by verify() or a failed select.

    Carries the P4 error name (e.g. ``NoMatch``); the parser runner stops the parser,
    records the error in standard_metadata.parser_error and lets the packet go on.
    """

    def __init__(self, error_name: str, code: int, where: str = "") -> None:
        super().__init__(f"parser error {error_name}{' in ' + where if where else ''}")
        self.error_name = error_name
        self.code = code


class ExitSignal(SoftswitchError):
    """Raised by a P4 ``exit`` statement; caught where the top-level block was called.

    ``exit`` still copies out ``out``/``inout`` arguments (BMv2 and p4c do): each
    callee with scalar outs stores their values in ``outs`` on the way up, and its
    caller writes them back before passing the signal on.
    """

    outs: tuple = ()


class DropSignal(SoftswitchError):
    """A failed ``assert``/``assume``: the packet is dropped with this reason."""


class CompileError(SoftswitchError):
    """The checked program uses something the back end cannot compile."""


class ExternError(SoftswitchError):
    """An extern was used with bad arguments (index out of range, unknown algorithm)."""


class StfError(SoftswitchError):
    """An STF file could not be read or run (bad syntax, unknown table or action)."""


class RuntimeErrorCode(enum.Enum):
    """Why a runtime API call was refused; a P4Runtime adapter maps each to a gRPC code."""

    DUPLICATE_ENTRY = "duplicate entry"          # ALREADY_EXISTS
    NOT_FOUND = "not found"                      # NOT_FOUND
    BAD_MATCH_KEY = "bad match key"              # INVALID_ARGUMENT
    BAD_ACTION = "bad action"                    # INVALID_ARGUMENT
    BAD_ACTION_PARAMS = "bad action parameters"  # INVALID_ARGUMENT
    BAD_PRIORITY = "bad priority"                # INVALID_ARGUMENT
    TABLE_FULL = "table full"                    # RESOURCE_EXHAUSTED
    INDEX_OUT_OF_RANGE = "index out of range"    # INVALID_ARGUMENT / OUT_OF_RANGE
    BAD_VALUE = "bad value"                      # INVALID_ARGUMENT
    CONST_TABLE = "table is const"               # PERMISSION_DENIED / INVALID_ARGUMENT
    IN_USE = "still in use"                      # FAILED_PRECONDITION
    UNSUPPORTED = "unsupported"                  # UNIMPLEMENTED


class RuntimeApiError(SoftswitchError):
    """A runtime API call was refused; nothing was changed. `code` says why."""

    def __init__(self, code: RuntimeErrorCode, message: str) -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
