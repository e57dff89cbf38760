"""The erasure code the Python endpoint encodes and decodes with.

Why a choice: :mod:`traffic.fec` (numpy) is the reference, and at 1 KiB symbols it costs
~4 us per (data symbol x repair): a (32, 7) block takes ~1 ms to encode, an interleaved
group of eight of them ~8 ms, paid at the group's end, on the message's critical path
(more on a loaded host).  The native library's code (:mod:`traffic.native.ec`, ISA-L)
produces the same bytes 30-200 times faster, so the Python endpoint uses it when the
library is built and encodes correctly, and the reference otherwise.  Either end of a
QP may use either (same code).  ``TRAFFIC_FEC_CODEC=numpy`` pins the reference.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from functools import cache
from types import ModuleType

from traffic import fec as _reference
from traffic.errors import TrafficError

__all__ = ["MAX_K", "MAX_M", "decode", "encode", "name", "prepare"]

MAX_K = _reference.MAX_K
MAX_M = _reference.MAX_M


@cache
def _impl() -> ModuleType:
    if os.environ.get("TRAFFIC_FEC_CODEC", "").lower() == "numpy":
        return _reference
    try:
        from traffic.native import ec
        probe = [bytes(range(7, 71)), bytes(range(100, 164)), bytes(64)]
        if (ec.MAX_K >= MAX_K and ec.MAX_M >= MAX_M
                and ec.encode(probe, 3) == _reference.encode(probe, 3)):
            return ec
    except (ImportError, OSError, RuntimeError, TrafficError):
        return _reference  # not built, not loadable: the reference
    return _reference


def name() -> str:
    """``isa-l`` or ``numpy`` (shown in the endpoint's summary)."""
    return "numpy" if _impl() is _reference else "isa-l"


def prepare(k: int, m: int) -> None:
    """Build the code's tables for (k, m) now, not at the first block."""
    if _impl() is _reference:
        _reference.prepare(k, m)


def encode(data: Sequence[bytes | bytearray], m: int) -> list[bytes]:
    """``m`` repair symbols of equal-length data symbols (see :func:`traffic.fec.encode`)."""
    return _impl().encode(data, m)


def decode(count: int, m: int, data: Mapping[int, bytes],
           repair: Mapping[int, bytes]) -> dict[int, bytes]:
    """The missing data symbols of a block (see :func:`traffic.fec.decode`)."""
    return _impl().decode(count, m, data, repair)
