"""Per-hop telemetry as the rate engines consume it.

The INT collector (``controller.int``) turns reports and host records into one
``HopSamples`` batch per decoding round: one row per sampled packet (one flow per
row), one column per hop. Column ``h`` is hop ``h`` counted from the sender (the
INT stack on the wire is newest first; the collector puts it in path order).
Units are in the field names; counters keep their on-wire width and wrap, the
engines take differences modulo the width.

Fields of ``HopSamples`` (n rows, H hop columns):

===============  ==========  =============================================
field            dtype       meaning
===============  ==========  =============================================
flow_idx         int64 (n)   row of the flow in the engine's flow table
n_hops           int64 (n)   hops present in this row (columns >= n_hops ignored)
arrival_ns       int64 (n)   when the telemetry reached the controller
                             (monotonic ns; drives per-RTT updates, loop latency)
node_id          uint32 (n,H) switch id per hop (a change resets that hop)
ts_ns            uint64 (n,H) egress timestamp of the hop, ns, modulo 2^ts_bits
qlen_bytes       float64(n,H) bytes queued at the egress port
tx_bytes         uint64 (n,H) bytes sent by the egress port, modulo 2^32
line_rate_bps    float64(n,H) egress port rate, bit/s
===============  ==========  =============================================
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from controller.cc.errors import TelemetryError

MAX_HOPS = 8
"""Deepest INT stack the formats allow (remaining hop count starts at 8)."""

V1MODEL_TS_MODULUS_NS = (1 << 48) * 1000
"""Wrap of v1model's 48-bit microsecond timestamps once scaled to ns; pass it as
``HpccParams.ts_modulus_ns`` when ``ts_ns`` comes from egress_global_timestamp."""


@dataclass(slots=True, kw_only=True)
class HopSamples:
    """One batch of per-hop telemetry, rows = sampled packets, columns = hops."""

    flow_idx: np.ndarray
    n_hops: np.ndarray
    arrival_ns: np.ndarray
    node_id: np.ndarray
    ts_ns: np.ndarray
    qlen_bytes: np.ndarray
    tx_bytes: np.ndarray
    line_rate_bps: np.ndarray

    def __post_init__(self) -> None:
        self.flow_idx = _as(self.flow_idx, np.int64, 1, "flow_idx")
        n = self.flow_idx.shape[0]
        self.n_hops = _as(self.n_hops, np.int64, 1, "n_hops")
        self.arrival_ns = _as(self.arrival_ns, np.int64, 1, "arrival_ns")
        self.node_id = _as(self.node_id, np.uint32, 2, "node_id")
        self.ts_ns = _as(self.ts_ns, np.uint64, 2, "ts_ns")
        self.qlen_bytes = _as(self.qlen_bytes, np.float64, 2, "qlen_bytes")
        self.tx_bytes = _as(self.tx_bytes, np.uint64, 2, "tx_bytes")
        self.line_rate_bps = _as(self.line_rate_bps, np.float64, 2, "line_rate_bps")
        hops = self.ts_ns.shape[1]
        for name in ("n_hops", "arrival_ns"):
            if getattr(self, name).shape != (n,):
                raise TelemetryError(
                    f"HopSamples.{name}: shape {getattr(self, name).shape} != ({n},) "
                    "(one value per row)")
        for name in ("node_id", "qlen_bytes", "tx_bytes", "line_rate_bps"):
            if getattr(self, name).shape != (n, hops):
                raise TelemetryError(
                    f"HopSamples.{name}: shape {getattr(self, name).shape} != ({n}, {hops}) "
                    "(rows x hops, like ts_ns)")
        if hops > MAX_HOPS:
            raise TelemetryError(f"HopSamples: {hops} hop columns, at most {MAX_HOPS} allowed")
        if n and (self.n_hops.min() < 0 or self.n_hops.max() > hops):
            bad = int(np.flatnonzero((self.n_hops < 0) | (self.n_hops > hops))[0])
            raise TelemetryError(
                f"HopSamples.n_hops[{bad}] = {int(self.n_hops[bad])} is outside 0..{hops}")
        present = self.present_mask()
        if np.any(present & ~(self.line_rate_bps > 0)):
            r, c = np.argwhere(present & ~(self.line_rate_bps > 0))[0]
            raise TelemetryError(
                f"HopSamples.line_rate_bps[{r}, {c}] = {self.line_rate_bps[r, c]!r}: "
                "a present hop needs a positive line rate")
        if np.any(present & ~(self.qlen_bytes >= 0)):
            r, c = np.argwhere(present & ~(self.qlen_bytes >= 0))[0]
            raise TelemetryError(
                f"HopSamples.qlen_bytes[{r}, {c}] = {self.qlen_bytes[r, c]!r} is negative or NaN")

    def __len__(self) -> int:
        return int(self.flow_idx.shape[0])

    @property
    def hops(self) -> int:
        """Number of hop columns."""
        return int(self.ts_ns.shape[1])

    def present_mask(self) -> np.ndarray:
        """Boolean (n, H): True where column h < n_hops of the row."""
        return np.arange(self.hops)[None, :] < self.n_hops[:, None]

    def take(self, rows: npt.ArrayLike) -> HopSamples:
        """A new batch holding only ``rows`` (an index or boolean array).

        The arrays were checked when this batch was made, so the copy skips the
        checks: the engine takes one such copy per sample of a flow in a batch."""
        r = np.atleast_1d(np.asarray(rows))
        out = HopSamples.__new__(HopSamples)
        out.flow_idx = self.flow_idx[r]
        out.n_hops = self.n_hops[r]
        out.arrival_ns = self.arrival_ns[r]
        out.node_id = self.node_id[r]
        out.ts_ns = self.ts_ns[r]
        out.qlen_bytes = self.qlen_bytes[r]
        out.tx_bytes = self.tx_bytes[r]
        out.line_rate_bps = self.line_rate_bps[r]
        return out


def _as(value: npt.ArrayLike, dtype: type, ndim: int, name: str) -> np.ndarray:
    arr = np.asarray(value)
    if arr.ndim != ndim:
        raise TelemetryError(f"HopSamples.{name}: expected {ndim}-D array, got shape {arr.shape}")
    if np.issubdtype(dtype, np.integer) and arr.dtype.kind == "f" and (
            not np.all(np.isfinite(arr)) or np.any(arr != np.floor(arr))):
        raise TelemetryError(f"HopSamples.{name}: non-integral values in an integer field")
    if np.issubdtype(dtype, np.unsignedinteger) and arr.dtype.kind in "if" and arr.size \
            and arr.min() < 0:
        raise TelemetryError(f"HopSamples.{name}: negative value {arr.min()} in an unsigned field")
    return np.ascontiguousarray(arr.astype(dtype, copy=False))


def hop_samples_from_records(
    *,
    row: npt.ArrayLike,
    hop_idx: npt.ArrayLike,
    flow_idx_per_row: npt.ArrayLike,
    arrival_ns_per_row: npt.ArrayLike,
    node_id: npt.ArrayLike,
    ts_ns: npt.ArrayLike,
    qlen_bytes: npt.ArrayLike,
    tx_bytes: npt.ArrayLike,
    line_rate_bps: npt.ArrayLike,
) -> HopSamples:
    """Scatter flat per-hop records (one entry per (row, hop)) into a ``HopSamples``.

    ``row`` says which sampled packet a record belongs to (0..n-1), ``hop_idx`` its
    position from the sender (0-based). Hops missing in a row end the row's path at
    the first gap, so a row's ``n_hops`` is the length of its contiguous prefix.
    """
    r = np.asarray(row, dtype=np.int64)
    h = np.asarray(hop_idx, dtype=np.int64)
    flows = np.asarray(flow_idx_per_row, dtype=np.int64)
    n = flows.shape[0]
    if r.shape != h.shape or r.ndim != 1:
        raise TelemetryError(f"hop records: row shape {r.shape} != hop_idx shape {h.shape}")
    if r.size and (r.min() < 0 or r.max() >= n):
        raise TelemetryError(f"hop records: row index {int(r.max())} outside 0..{n - 1}")
    if h.size and (h.min() < 0 or h.max() >= MAX_HOPS):
        raise TelemetryError(f"hop records: hop_idx {int(h.max())} outside 0..{MAX_HOPS - 1}")
    hops = int(h.max()) + 1 if h.size else 0
    shape = (n, hops)
    have = np.zeros(shape, dtype=bool)
    have[r, h] = True
    # contiguous prefix length per row: first missing column
    n_hops = np.where(have.all(axis=1), hops, np.argmin(have, axis=1)) if hops else \
        np.zeros(n, dtype=np.int64)

    def scatter(values: npt.ArrayLike, dtype: type) -> np.ndarray:
        out: np.ndarray = np.zeros(shape, dtype=dtype)
        out[r, h] = np.asarray(values).astype(dtype, copy=False)
        return out

    return HopSamples(
        flow_idx=flows, n_hops=n_hops, arrival_ns=np.asarray(arrival_ns_per_row),
        node_id=scatter(node_id, np.uint32), ts_ns=scatter(ts_ns, np.uint64),
        qlen_bytes=scatter(qlen_bytes, np.float64), tx_bytes=scatter(tx_bytes, np.uint64),
        line_rate_bps=scatter(line_rate_bps, np.float64))
