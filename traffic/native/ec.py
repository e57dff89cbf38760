"""The native erasure code (``ec.h``, Intel ISA-L) with :mod:`traffic.fec`'s API.

Same code, same bytes: ``encode(data, m)`` and ``decode(count, m, data, repair)`` take
and return what :func:`traffic.fec.encode` and :func:`traffic.fec.decode` do and raise
:class:`~traffic.errors.FecError` for the same faults, so either end of a QP may use
either.  One ISA-L context per thread (a context caches the tables of the last
(k, m) and is not shared between threads).
"""
from __future__ import annotations

import ctypes
import threading
from collections.abc import Mapping, Sequence
from functools import cache

from traffic.errors import FecError
from traffic.native import load_library

__all__ = ["MAX_K", "MAX_M", "coefficients", "decode", "encode"]

MAX_K = 128  # TN_EC_MAX_K
MAX_M = 16   # TN_EC_MAX_M
_ERRORS = {-1: "bad arguments", -2: "too few symbols", -3: "singular system"}

_P = ctypes.POINTER(ctypes.c_char_p)


@cache
def _lib() -> ctypes.CDLL:
    """The library with this header's argument and result types declared."""
    lib = load_library()
    lib.tn_ec_new.argtypes = []
    lib.tn_ec_new.restype = ctypes.c_void_p
    lib.tn_ec_free.argtypes = [ctypes.c_void_p]
    lib.tn_ec_free.restype = None
    lib.tn_ec_coefficient.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.tn_ec_coefficient.restype = ctypes.c_uint8
    lib.tn_ec_encode.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_size_t,
                                 _P, _P]
    lib.tn_ec_encode.restype = ctypes.c_int
    lib.tn_ec_decode.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_size_t,
                                 _P, _P, _P]
    lib.tn_ec_decode.restype = ctypes.c_int
    buf, cbuf, i, n = ctypes.POINTER(ctypes.c_char), ctypes.c_char_p, ctypes.c_int, ctypes.c_size_t
    lib.tn_ec_encode_packed.argtypes = [ctypes.c_void_p, i, i, n, cbuf, buf]
    lib.tn_ec_encode_packed.restype = ctypes.c_int
    lib.tn_ec_decode_packed.argtypes = [ctypes.c_void_p, i, i, n, buf, cbuf, cbuf, cbuf]
    lib.tn_ec_decode_packed.restype = ctypes.c_int
    return lib


class _Handle:
    """One thread's ISA-L context, freed with the thread's locals."""

    def __init__(self) -> None:
        lib = _lib()
        self._free = lib.tn_ec_free   # held: module globals may be gone at exit
        self.ptr: int = lib.tn_ec_new() or 0
        if not self.ptr:
            raise MemoryError("tn_ec_new: out of memory")

    def __del__(self) -> None:
        if getattr(self, "ptr", 0):
            self._free(self.ptr)


_local = threading.local()


def _ctx() -> int:
    h = getattr(_local, "handle", None)
    if h is None:
        h = _local.handle = _Handle()
    return h.ptr


def _check(count: int, m: int) -> None:
    if not 1 <= count <= MAX_K:
        raise FecError(f"FEC block: data count {count} outside 1..{MAX_K}")
    if not 0 <= m <= MAX_M:
        raise FecError(f"FEC block: repair count m={m} outside 0..{MAX_M}")


def coefficients(count: int, m: int) -> tuple[tuple[int, ...], ...]:
    """The m x count repair coefficient matrix (row 0 all ones), as the C code has it."""
    _check(count, m)
    c = _lib().tn_ec_coefficient
    return tuple(tuple(int(c(j, i)) for i in range(count)) for j in range(m))


def _length(symbols: Sequence[bytes | bytearray], where: str) -> int:
    n = len(symbols[0])
    if any(len(s) != n for s in symbols):
        raise FecError(f"{where}: symbols differ in length: {sorted({len(s) for s in symbols})}")
    if n == 0:
        raise FecError(f"{where}: empty symbols (0 bytes)")
    return n


def encode(data: Sequence[bytes | bytearray], m: int) -> list[bytes]:
    """Return m repair symbols for equal-length data symbols (as ``traffic.fec.encode``)."""
    if not data:
        raise FecError("FEC encode: empty block")
    _check(len(data), m)
    n = _length(data, "FEC encode")
    if m == 0:
        return []
    out = ctypes.create_string_buffer(m * n)
    rc = _lib().tn_ec_encode_packed(_ctx(), len(data), m, n, b"".join(data), out)
    if rc < 0:
        raise FecError(f"FEC encode: {_ERRORS.get(rc, rc)} (block of {len(data)}+{m})")
    raw = out.raw
    return [raw[j * n:(j + 1) * n] for j in range(m)]


def decode(count: int, m: int, data: Mapping[int, bytes], repair: Mapping[int, bytes]
           ) -> dict[int, bytes]:
    """Recover the missing data symbols of a block (as ``traffic.fec.decode``).

    ``data`` maps data index (0..count-1) to symbol, ``repair`` maps repair index
    (0..m-1) to symbol.  Returns {index: symbol} for the data symbols that were missing.
    """
    _check(count, m)
    bad = [i for i in data if not 0 <= i < count] + [j for j in repair if not 0 <= j < m]
    if bad:
        raise FecError(f"FEC decode: symbol index {bad[0]} outside the block of {count}+{m}")
    missing = [i for i in range(count) if i not in data]
    if not missing:
        return {}
    if len(missing) > len(repair):
        raise FecError(
            f"FEC decode: {len(missing)} data symbols missing but only {len(repair)} "
            f"repair symbols received (block of {count}+{m})")
    n = _length([*data.values(), *repair.values()], "FEC decode")
    zero = bytes(n)
    block = ctypes.create_string_buffer(b"".join([data.get(i, zero) for i in range(count)]),
                                        count * n)
    rc = _lib().tn_ec_decode_packed(
        _ctx(), count, m, n, block, bytes(i in data for i in range(count)),
        b"".join([repair.get(j, zero) for j in range(m)]), bytes(j in repair for j in range(m)))
    if rc < 0:
        raise FecError(f"FEC decode: {_ERRORS.get(rc, rc)} (block of {count}+{m})")
    raw = block.raw
    return {i: raw[i * n:(i + 1) * n] for i in missing}
