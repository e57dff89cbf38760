"""Run-time helpers the generated code calls, and the per-packet context it shares.

Kept apart from the compiler: these run per packet, the compiler once per program.
"""
from __future__ import annotations

from typing import Any

from softswitch.trace import TraceEvent


class PacketContext:
    """Per-packet scratch state shared by the generated code of one program.

    The pipeline resets it before each block runs; generated code reads the
    packet length, time and unparsed payload from it. An architecture subclasses
    it with the slots of the requests its externs record (clone, resubmit ...)
    and clears them in `reset_requests`. One per compiled program (never
    module-level)."""

    __slots__ = ("length", "now_us", "payload", "trace")

    def __init__(self) -> None:
        self.trace: list[TraceEvent] | None = None
        self.length = 0
        self.now_us = 0
        self.payload = b""
        self.reset_requests()

    def reset_requests(self) -> None:
        """Forget the requests the last block recorded (none in the base)."""


def _div(a: int, b: int) -> int:
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _mod(a: int, b: int) -> int:
    return a % b if b else 0


def _shl(a: int, b: int, w: int) -> int:
    return a << b if b < w else 0


def _lookahead_hdr(r: Any, cls: type) -> Any:
    h = cls()
    pos = r.bitpos
    h._extract(r)
    r.bitpos = pos
    return h
