"""Run-time helpers the generated code calls (the per-packet context it shares is
the architecture contract's `softswitch.architecture.PacketContext`).

Kept apart from the compiler: these run per packet, the compiler once per program.
"""
from __future__ import annotations

from typing import Any


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
