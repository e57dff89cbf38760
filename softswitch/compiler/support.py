"""Run-time helpers the generated code calls, and the per-packet context it shares.

Kept apart from the compiler: these run per packet, the compiler once per program.
"""
from __future__ import annotations

import random
from typing import Any

from softswitch.trace import TraceEvent


class PacketContext:
    """Per-packet scratch state shared by the generated code of one program.

    The pipeline resets it before each block runs; generated code reads the
    packet length and time from it and records clone/resubmit/recirculate
    requests in it. One per compiled program (never module-level)."""

    __slots__ = (
        "checksum_error",
        "clone_fl",
        "clone_session",
        "clone_type",
        "length",
        "now_us",
        "payload",
        "recirc_fl",
        "resubmit_fl",
        "sm",
        "trace",
        "truncate",
    )

    def __init__(self) -> None:
        self.trace: list[TraceEvent] | None = None
        self.length = 0
        self.now_us = 0
        self.payload = b""
        self.sm: Any = None
        self.reset_requests()

    def reset_requests(self) -> None:
        self.clone_type = None
        self.clone_session = 0
        self.clone_fl = -1
        self.resubmit_fl = None
        self.recirc_fl = None
        self.truncate = 0
        self.checksum_error = 0


def _div(a: int, b: int) -> int:
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _mod(a: int, b: int) -> int:
    return a % b if b else 0


def _shl(a: int, b: int, w: int) -> int:
    return a << b if b < w else 0


def _hmod(h: int, base: int, maxv: int, mask: int) -> int:
    if maxv:
        return (base + h % maxv) & mask
    return base & mask


def _random(lo: int, hi: int) -> int:
    return random.randint(lo, hi) if hi >= lo else lo


def _lookahead_hdr(r: Any, cls: type) -> Any:
    h = cls()
    pos = r.bitpos
    h._extract(r)
    r.bitpos = pos
    return h


def _fmt_msg(msg: str, data: Any) -> str:
    vals = list(data) if isinstance(data, tuple) else [data]
    out = []
    parts = msg.split("{}")
    for i, p in enumerate(parts):
        out.append(p)
        if i < len(parts) - 1:
            out.append(str(vals[i]) if i < len(vals) else "{}")
    return "".join(out)
