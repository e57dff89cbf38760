"""The hop and flow table updates in C (``tables.c``): one native pass per round.

``state.HopTable`` / ``state.FlowTable`` keep the grouping (a lexsort) and the key ->
slot lookup (``SlotMap``) in numpy and hand the rest here: some thirty numpy passes
and the random writes into the history rings become one loop over the records.  The
results equal the numpy path's (tests/controller_int/test_native_tables.py); without
gcc ``available()`` is False and the tables use numpy.
"""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

import numpy as np

from controller.int.native import build
from controller.int.records import (
    FIELD_EGRESS_TS,
    FIELD_HOP_LATENCY,
    FIELD_LINE_RATE,
    FIELD_QUEUE,
    FIELD_QUEUE_BYTES,
    FIELD_TX_BYTES,
    HOP_DTYPE,
    REPORT_DTYPE,
)

if TYPE_CHECKING:
    from controller.int.state import FlowTable, HopTable

__all__ = ["available", "flow_update", "hop_group", "hop_update", "slot_probe"]

_P = ctypes.c_void_p
_I = ctypes.c_int64
_U = ctypes.c_uint32

#: (name, dtype) of the record fields tables.c reads, in its HO_* / SO_* order.
_HOP_FIELDS = (("sample", "<u4"), ("hop_index", "u1"), ("fields", "<u2"), ("node_id", "<u4"),
               ("egress_port", "<u2"), ("hop_latency_us", "<u4"), ("queue_pkts", "<u4"),
               ("egress_ts_us", "<u8"), ("tx_bytes", "<u4"), ("queue_bytes", "<u4"),
               ("line_rate_mbps", "<u4"))
_SAMPLE_FIELDS = (("arrival_ns", "<i8"), ("psn", "<u4"), ("has_bth", "u1"),
                  ("hop_count", "u1"))


def _offsets(dtype: np.dtype, fields: tuple[tuple[str, str], ...]) -> np.ndarray:
    """Byte offsets of ``fields``, checking their types are what the C reads."""
    out = []
    known = dtype.fields
    assert known is not None
    for name, kind in fields:
        ft, off = known[name][:2]
        if ft != np.dtype(kind):
            raise TypeError(f"tables.c reads {name} as {kind}, the dtype has {ft}")
        out.append(off)
    return np.array(out, np.int64)


_HOP_OFF = _offsets(HOP_DTYPE, _HOP_FIELDS)
_SAMPLE_OFF = _offsets(REPORT_DTYPE, _SAMPLE_FIELDS)
# their addresses once: reading ``.ctypes.data`` costs a microsecond or more a call
_HOP_OFF_P = _HOP_OFF.ctypes.data
_SAMPLE_OFF_P = _SAMPLE_OFF.ctypes.data
_SIGNATURES = {
    "hop_update": (None, [_P, _I, _P, _P, _P, _I, _P, _P, _P, _I, _P, _I,
                          _U, _U, _U, _U, _U, _U, _P]),
    "hop_group": (ctypes.c_int64, [_P, _I, _P, _I, _P, _P, _P]),
    "slot_probe": (None, [_P, _I, _I, _P, _P, _I, _P, _P]),
    "flow_update": (ctypes.c_int, [_P, _I, _P, _I, _P, _I, _P, _I, _P, _P, _P, _P, _I,
                                   _P, _I, _P, _P, _P, _P, _P]),
}


def _load() -> ctypes.CDLL | None:
    return build("tables", "the hop and flow tables update in numpy", _SIGNATURES)


def available() -> bool:
    """True when tables.c is (or could be) built and loaded."""
    return _load() is not None


def _ptr(a: np.ndarray) -> int:
    return a.ctypes.data


_HOP_COLS = ("qlen_bytes", "qlen_pkts", "tx_bytes", "has_tx", "tx_rate_bps", "line_rate_bps",
             "hop_latency_ns", "egress_ts_us", "last_update_ns", "samples", "write_pos",
             "ring_ts_us", "ring_qlen_bytes", "ring_qlen_pkts", "ring_tx_rate_bps",
             "ring_hop_latency_ns")
_FLOW_COLS = ("hop_count", "path_node", "path_port", "path_slot", "samples", "last_psn",
              "path_changes", "last_update_ns", "write_pos", "ring_arrival_ns", "ring_psn",
              "ring_max_qlen_bytes", "ring_path_latency_ns")


def _columns(t: object, names: tuple[str, ...]) -> np.ndarray:
    """The table's column addresses in the C enum's order (HT_* / FT_*), kept while the
    table holds the same arrays (reading ``.ctypes.data`` of 16 arrays every round was
    a tenth of the update)."""
    arrays = [getattr(t, n) for n in names]
    hit = getattr(t, "_native_cols", None)
    if hit is None or any(a is not b for a, b in zip(arrays, hit[0])):
        for n, a in zip(names, arrays):
            if not a.flags.c_contiguous:
                raise ValueError(f"table column {n} is not contiguous")
        hit = (arrays, np.array([_ptr(a) for a in arrays], np.uintp))
        t._native_cols = hit  # type: ignore[attr-defined]
    return hit[1]


def hop_update(t: HopTable, hops: np.ndarray, arrival_ns: np.ndarray, order: np.ndarray,
               starts: np.ndarray, slots_u: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Everything of ``HopTable.update`` after the slot lookup; returns each record's slot."""
    lib = _load()
    assert lib is not None
    hops = np.ascontiguousarray(hops)
    arrival = np.ascontiguousarray(arrival_ns, np.int64)
    order = np.ascontiguousarray(order, np.int64)
    starts = np.ascontiguousarray(starts, np.int64)
    gslot = np.ascontiguousarray(slots_u, np.int64)
    gnew = np.ascontiguousarray(new, np.uint8)
    cols = _columns(t, _HOP_COLS)
    out = np.empty(len(hops), np.int64)
    lib.hop_update(_ptr(hops), hops.dtype.itemsize, _HOP_OFF_P, _ptr(arrival), _ptr(order),
                   len(hops), _ptr(starts), _ptr(gslot), _ptr(gnew), len(starts), _ptr(cols),
                   t.depth, FIELD_TX_BYTES, FIELD_EGRESS_TS, FIELD_QUEUE_BYTES, FIELD_QUEUE,
                   FIELD_LINE_RATE, FIELD_HOP_LATENCY, _ptr(out))
    return out


def hop_group(hops: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """HopTable's grouping of HOP_DTYPE records: (order by (key, egress ts) as
    ``np.lexsort`` gives it, first position of each key in it, the keys ascending),
    or None when some hop's timestamps fall within the batch (then lexsort)."""
    lib = _load()
    assert lib is not None
    hops = np.ascontiguousarray(hops)
    n = len(hops)
    order = np.empty(n, np.int64)
    starts = np.empty(n, np.int64)
    uniq = np.empty(n, np.uint64)
    ng = lib.hop_group(_ptr(hops), hops.dtype.itemsize, _HOP_OFF_P, n, _ptr(order),
                       _ptr(starts), _ptr(uniq))
    if ng == -2:
        raise MemoryError("tables.c: out of memory for the hops' grouping")
    if ng < 0:
        return None
    return order, starts[:ng], uniq[:ng]


def slot_probe(keys: np.ndarray, tkeys: np.ndarray, tslot: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """``SlotMap._probe`` key by key: (slots or -1, first free position on the probe
    sequence) of ``keys`` ((width, n) uint64) in the table ``tkeys`` / ``tslot``."""
    lib = _load()
    assert lib is not None
    keys = np.ascontiguousarray(keys, np.uint64)
    width, n = keys.shape
    if not (tkeys.flags.c_contiguous and tslot.flags.c_contiguous):
        raise ValueError("slot table arrays are not contiguous")
    slots = np.empty(n, np.int64)
    free_at = np.empty(n, np.int64)
    lib.slot_probe(_ptr(keys), n, width, _ptr(tkeys), _ptr(tslot), len(tslot), _ptr(slots),
                   _ptr(free_at))
    return slots, free_at


def flow_update(t: FlowTable, samples: np.ndarray, hops: np.ndarray, hop_slots: np.ndarray,
                inv: np.ndarray, slots_u: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Everything of ``FlowTable.update`` after the slot lookup; returns each sample's slot."""
    lib = _load()
    assert lib is not None
    samples = np.ascontiguousarray(samples)
    hops = np.ascontiguousarray(hops)
    hop_slots = np.ascontiguousarray(hop_slots, np.int64)
    inv = np.ascontiguousarray(inv, np.int64)
    gslot = np.ascontiguousarray(slots_u, np.int64)
    gnew = np.ascontiguousarray(new, np.uint8)
    n, nu = len(samples), len(gslot)
    cols = _columns(t, _FLOW_COLS)
    maxq = np.zeros(n, np.uint32)
    lat = np.zeros(n, np.float64)
    last_idx = np.full(nu, -1, np.int64)
    last_h = np.full(nu, -1, np.int64)
    out = np.empty(n, np.int64)
    rc = lib.flow_update(_ptr(samples), samples.dtype.itemsize, _SAMPLE_OFF_P, n,
                         _ptr(hops), hops.dtype.itemsize, _HOP_OFF_P, len(hops),
                         _ptr(hop_slots), _ptr(inv), _ptr(gslot), _ptr(gnew), nu, _ptr(cols),
                         t.depth, _ptr(maxq), _ptr(lat), _ptr(last_idx), _ptr(last_h), _ptr(out))
    if rc == -1:
        raise ValueError("hop record refers to a sample outside its batch")
    if rc:
        raise MemoryError("tables.c: out of memory for the flows' new paths")
    return out
