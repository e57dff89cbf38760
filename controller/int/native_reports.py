"""Telemetry Report decoding in C (``reports.c``): one native pass per receive round.

``ReportDecoder.decode_pool`` keeps the checks per shape (lengths and bitmaps, once
per round) and the counters, and hands the per-report work here: the shape key of
every datagram read straight from the receive pool, the group headers for the
sequence accounting, and the copy of every valid report into ``REPORT_DTYPE`` /
``HOP_DTYPE`` records.  That replaces some forty numpy passes per round (column
gathers, the row copy of every datagram, one pass per field and hop).  The results
equal the numpy path's (tests/controller_int/test_pool_paths.py); without gcc
``available()`` is False and the decoder uses numpy.
"""
from __future__ import annotations

import ctypes
import functools

import numpy as np

from controller.int.native import build
from controller.int.records import FIELD_NODE_ID, HOP_DTYPE, REPORT_DTYPE
from formats.int_fields import WordOffsets
from formats.telemetry_report import FIXED_LEN, REPORT_VERSION

__all__ = ["KEY_N", "available", "classify", "fill", "heads", "layout_parts", "scan",
           "seq_run"]

# reports.c's classify knows the fixed part and the version
assert FIXED_LEN == 20 and REPORT_VERSION == 2

_P = ctypes.c_void_p
_I = ctypes.c_int64
KEY_N = 17   # decode._KEY, then the datagram's words

_SAMPLE_FIELDS = ("arrival_ns", "source", "reporter", "seq", "src_ip", "dst_ip", "sport",
                  "dport", "dest_qp", "psn", "opcode", "has_bth", "hop_count", "e_bit",
                  "ins_bitmap", "ds_bitmap")
_SAMPLE_SIZES = (8, 1, 4, 4, 4, 4, 2, 2, 4, 4, 1, 1, 1, 1, 2, 2)
_HOP_FIELDS = (("sample", 4), ("hop_index", 1), ("fields", 2), ("node_id", 4))


def _offsets(dtype: np.dtype, names: tuple[str, ...], sizes: tuple[int, ...]) -> np.ndarray:
    """Byte offsets of ``names``, checking their sizes are what the C writes."""
    known = dtype.fields
    assert known is not None
    for name, size in zip(names, sizes, strict=True):
        if known[name][0].itemsize != size:
            raise TypeError(f"reports.c writes {name} as {size} bytes, the dtype has "
                            f"{known[name][0]}")
    return np.array([known[n][1] for n in names], np.int64)


_S_OFF = _offsets(REPORT_DTYPE, _SAMPLE_FIELDS, _SAMPLE_SIZES)
_H_OFF = _offsets(HOP_DTYPE, tuple(n for n, _ in _HOP_FIELDS), tuple(s for _, s in _HOP_FIELDS))
# addresses once: ``.ctypes.data`` costs a microsecond or more a call
_S_OFF_P, _H_OFF_P = _S_OFF.ctypes.data, _H_OFF.ctypes.data
_SIGNATURES = {
    "report_heads": (None, [_P, _I, _I, _P, _P, _P]),
    "report_scan": (None, [_P, _I, _P, _I, _P, _P]),
    "seq_run": (None, [_P, _I, _I, _P]),
    "report_classify": (None, [_P, _I, _I, _P, _P]),
    "report_fill": (None, [_P, _I, _P, _I, _P, _I, _P, _P, _I, _P, _P, _I, _P,
                           _P, _I, _I, _P, _I, _I]),
}


def _load() -> ctypes.CDLL | None:
    return build("reports", "Telemetry Reports decode in numpy", _SIGNATURES)


def available() -> bool:
    """True when reports.c is (or could be) built and loaded."""
    return _load() is not None


def _pool(buf: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, int, np.ndarray]:
    """(rows with bytes contiguous, row stride, uint32 lengths) of a pool."""
    if buf.ndim != 2 or buf.dtype != np.uint8 or buf.strides[1] != 1:
        buf = np.ascontiguousarray(buf, np.uint8)
    return buf, buf.strides[0], np.ascontiguousarray(lens, np.uint32)


def heads(buf: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(group header words 0-1 as an (n, 2) uint32 matrix, rows with a v2 group header
    of at least 8 bytes) of every row of a pool."""
    lib = _load()
    assert lib is not None
    b, stride, ln = _pool(buf, lens)
    n = len(ln)
    out = np.empty((n, 2), np.uint32)
    ok = np.empty(n, np.bool_)
    lib.report_heads(b.ctypes.data, stride, n, ln.ctypes.data, out.ctypes.data, ok.ctypes.data)
    return out, ok


def classify(buf: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Per row of a pool, what ``decode_pool`` does with it: 0 no datagram, 1 short,
    2 unaligned, 3 bad version, 4 report length beyond the datagram, 5 one report,
    6 several (coalesced)."""
    lib = _load()
    assert lib is not None
    b, stride, ln = _pool(buf, lens)
    cls = np.empty(len(ln), np.uint8)
    lib.report_classify(b.ctypes.data, stride, len(ln), ln.ctypes.data, cls.ctypes.data)
    return cls


def seq_run(seq: np.ndarray, mod: int, last: int, highest: int) -> tuple[int, int, int, int]:
    """One switch's sequence numbers of a round (``SeqTracker.update``): (last,
    highest, late, duplicates) after them, from ``last`` and ``highest``."""
    lib = _load()
    assert lib is not None
    s = np.ascontiguousarray(seq, np.int64)
    state = np.array([last, highest, 0, 0], np.int64)
    lib.seq_run(s.ctypes.data, len(s), mod, state.ctypes.data)
    return int(state[0]), int(state[1]), int(state[2]), int(state[3])


def scan(buf: np.ndarray, lens: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The shape key (``decode._KEY``, then the words) of each of ``rows``: (n, KEY_N)."""
    lib = _load()
    assert lib is not None
    b, stride, ln = _pool(buf, lens)
    rows = np.ascontiguousarray(rows, np.int64)
    keys = np.empty((len(rows), KEY_N), np.uint32)
    lib.report_scan(b.ctypes.data, stride, rows.ctypes.data, len(rows), ln.ctypes.data,
                    keys.ctypes.data)
    return keys


@functools.lru_cache(maxsize=4096)
def layout_parts(layout: WordOffsets) -> tuple[np.ndarray, int, int]:
    """A layout as reports.c reads it: parts (word offset, words, shift, bits,
    destination offset, size), the presence flags of its fields, the parts' address
    (the array stays in this cache)."""
    known = HOP_DTYPE.fields
    assert known is not None
    rows, flags = [], 0
    for f, off in layout.fields:
        flags |= f.flag
        for p, sh in zip(f.parts, f.shifts(), strict=True):
            dt, doff = known[p.col][:2]
            rows.append((off, f.words, sh, p.bits, doff, dt.itemsize))
    parts = np.array(rows, np.int64).reshape(-1, 6)
    return parts, flags, parts.ctypes.data


def fill(buf: np.ndarray, lens: np.ndarray, rows: np.ndarray, arrival_ns: int,
         geometry: np.ndarray, hop: WordOffsets, sink: WordOffsets, n_hops: int
         ) -> tuple[np.ndarray, np.ndarray]:
    """(samples, hops) of ``rows``, one valid shape (``geometry`` in reports.c's G_*
    order, from ``ReportDecoder``'s checks)."""
    lib = _load()
    assert lib is not None
    b, stride, ln = _pool(buf, lens)
    rows = np.ascontiguousarray(rows, np.int64)
    n = len(rows)
    samples = np.zeros(n, REPORT_DTYPE)
    hops = np.zeros(n * n_hops, HOP_DTYPE)
    hp, hflags, hp_p = layout_parts(hop)
    sp, sflags, sp_p = layout_parts(sink)
    g = np.ascontiguousarray(geometry, np.int64)
    lib.report_fill(b.ctypes.data, stride, rows.ctypes.data, n, ln.ctypes.data, arrival_ns,
                    g.ctypes.data, samples.ctypes.data, REPORT_DTYPE.itemsize, _S_OFF_P,
                    hops.ctypes.data, HOP_DTYPE.itemsize, _H_OFF_P,
                    hp_p, len(hp), hflags, sp_p, len(sp), sflags)
    return samples, hops


NODE_FLAG = FIELD_NODE_ID
