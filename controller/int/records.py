"""Decoded telemetry as numpy structured arrays: the collector's internal currency.

Both sources (Telemetry Reports from sink switches, host records from agents) are
decoded into the same two arrays, so state tables and consumers (controller.cc,
loss maps, export) see one shape:

``REPORT_DTYPE`` — one element per telemetry sample (one data packet seen; a host
record also stands for a run of packets of its flow, see ``run_psn``):

=============  =====  =====================================================
field          type   meaning
=============  =====  =====================================================
arrival_ns     i8     collector receive time (CLOCK_MONOTONIC ns) of the batch
source         u1     SOURCE_REPORT (switch report) or SOURCE_HOST (agent)
reporter       u4     node ID of the sink switch, or agent id for host records
seq            u4     report sequence number (22 bit) / agent batch sequence
src_ip         u4     inner IPv4 source (host order integer)
dst_ip         u4     inner IPv4 destination
sport          u2     UDP source port (per-QP entropy)
dport          u2     original UDP destination port (from the INT shim)
dest_qp        u4     BTH destination QP (0 when not present)
psn            u4     BTH PSN of the sampled packet (0 when not present)
opcode         u1     BTH opcode (0 when not present)
has_bth        u1     1 when dest_qp/psn/opcode were decoded
hop_count      u1     hop records of this sample (including sink metadata)
e_bit          u1     INT-MD E flag: some hop could not push its record
ins_bitmap     u2     INT instruction bitmap of the hop records
ds_bitmap      u2     DS instruction bitmap of the hop records
capture_ns     u8     host capture time (host records only, else 0)
run_psn        u4     host records: first PSN of the run of packets the record
                      covers (PSNs run_psn .. run_psn + psn_count - 1, mod 2^24)
psn_count      u4     host records: packets in the run (0 for switch reports)
run_first_ns   u8     host records: the run's first and last packet (coarse
run_last_ns    u8     CLOCK_MONOTONIC, tick resolution)
=============  =====  =====================================================

``HOP_DTYPE`` — one element per hop record, a column per part of every row of
``formats.int_fields.HOP_FIELDS`` (unit in the column name); ``sample`` indexes the report array
of the same batch; ``hop_index`` is the position along the path (0 = the INT
source switch, the last hop is the sink).  ``fields`` has bit ``1 << n`` set for
every field present (FIELD_* constants); absent fields are 0.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from formats.int_fields import HOP_FIELDS, field_named

if TYPE_CHECKING:
    from controller.cc.telemetry import HopSamples

SOURCE_REPORT = 1
SOURCE_HOST = 2

REPORT_DTYPE = np.dtype(
    [
        ("arrival_ns", "i8"),
        ("source", "u1"),
        ("reporter", "u4"),
        ("seq", "u4"),
        ("src_ip", "u4"),
        ("dst_ip", "u4"),
        ("sport", "u2"),
        ("dport", "u2"),
        ("dest_qp", "u4"),
        ("psn", "u4"),
        ("opcode", "u1"),
        ("has_bth", "u1"),
        ("hop_count", "u1"),
        ("e_bit", "u1"),
        ("ins_bitmap", "u2"),
        ("ds_bitmap", "u2"),
        ("capture_ns", "u8"),
        ("run_psn", "u4"),
        ("psn_count", "u4"),
        ("run_first_ns", "u8"),
        ("run_last_ns", "u8"),
    ]
)

def _uint(bits: int) -> str:
    return next(f"u{n // 8}" for n in (8, 16, 32, 64) if bits <= n)


#: One column per part of every row of ``formats.int_fields.HOP_FIELDS``, wire order.
HOP_DTYPE = np.dtype(
    [("sample", "u4"), ("hop_index", "u1"), ("fields", "u2")]
    + [(p.col, _uint(p.bits)) for f in HOP_FIELDS for p in f.parts]
)

FIELD_NODE_ID = field_named("node_id").flag
FIELD_PORTS = field_named("ports").flag
FIELD_HOP_LATENCY = field_named("hop_latency").flag
FIELD_QUEUE = field_named("queue").flag
FIELD_INGRESS_TS = field_named("ingress_ts").flag
FIELD_EGRESS_TS = field_named("egress_ts").flag
FIELD_TX_UTIL = field_named("tx_util").flag
FIELD_TX_BYTES = field_named("tx_bytes").flag
FIELD_QUEUE_BYTES = field_named("queue_bytes").flag
FIELD_LINE_RATE = field_named("line_rate").flag

#: Table row name -> FIELD_* bit.
FIELD_BIT_BY_NAME: dict[str, int] = {f.name: f.flag for f in HOP_FIELDS}


def as_pool(datagrams: Sequence[bytes], min_len: int = 1) -> tuple[np.ndarray, np.ndarray] | None:
    """Datagrams of one length as a receive pool (rows of ``buf``, their ``lens``),
    with one join and no Python work per datagram, so the no-socket entry points
    (``Collector.feed_reports``) decode as the socket path does; None when the lengths
    differ, are under ``min_len`` or there is nothing (the callers' per-datagram path)."""
    if not datagrams:
        return None
    n0 = len(datagrams[0])
    if n0 < min_len or any(len(d) != n0 for d in datagrams):
        return None
    buf = np.frombuffer(b"".join(datagrams), np.uint8).reshape(len(datagrams), n0)
    return buf, np.full(len(datagrams), n0, np.uint32)


def take(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``a[idx]`` for a structured array (index or mask), by rows of raw bytes: numpy
    copies structured elements field by field, 20-40 times slower than whole rows."""
    if a.dtype.names is None:
        return a[idx]
    raw = np.ascontiguousarray(a).view(np.dtype((np.void, a.dtype.itemsize)))
    return raw[idx].view(a.dtype)


@dataclass(slots=True, kw_only=True)
class DecodedBatch:
    """Samples and hop records decoded from one batch of datagrams."""

    samples: np.ndarray  # REPORT_DTYPE
    hops: np.ndarray  # HOP_DTYPE

    def hop_samples(self, flow_idx: np.ndarray) -> HopSamples:
        """The batch as the rate engines' input (:func:`controller.int.feed.hop_samples`);
        ``flow_idx``: each sample's flow slot."""
        from controller.int.feed import hop_samples
        return hop_samples(self, flow_idx)

    @classmethod
    def empty(cls) -> DecodedBatch:
        return cls(samples=np.zeros(0, REPORT_DTYPE), hops=np.zeros(0, HOP_DTYPE))

    @classmethod
    def concat(cls, parts: list[DecodedBatch]) -> DecodedBatch:
        """Join batches, renumbering ``hops['sample']`` to the joined sample array."""
        parts = [p for p in parts if len(p.samples)]
        if not parts:
            return cls.empty()
        if len(parts) == 1:
            return parts[0]
        offsets = np.cumsum([0] + [len(p.samples) for p in parts[:-1]])
        hops = []
        for off, p in zip(offsets, parts):
            h = p.hops.copy()
            h["sample"] += np.uint32(off)
            hops.append(h)
        return cls(
            samples=np.concatenate([p.samples for p in parts]),
            hops=np.concatenate(hops),
        )
