"""Hand decoded telemetry to the rate engines (controller.cc) as ``HopSamples``.

Rows are samples (one per sampled packet), columns hop positions from the sender;
only hop records carrying what HPCC needs (egress timestamp, tx bytes, queue
bytes, a positive line rate) are passed on.  Usage from a collector listener::

    def on_batch(batch, flow_slots):
        samples = hop_samples(batch, flow_slots)
        engine.update(samples)
"""
from __future__ import annotations

import numpy as np

from controller.cc.telemetry import MAX_HOPS, HopSamples, hop_samples_from_records
from controller.int.records import (
    FIELD_EGRESS_TS,
    FIELD_LINE_RATE,
    FIELD_QUEUE_BYTES,
    FIELD_TX_BYTES,
    DecodedBatch,
    take,
)

_NEED = FIELD_EGRESS_TS | FIELD_TX_BYTES | FIELD_QUEUE_BYTES | FIELD_LINE_RATE


def hop_samples(batch: DecodedBatch, flow_idx: np.ndarray) -> HopSamples:
    """HopSamples of a batch; ``flow_idx`` is the flow index of every sample
    (e.g. the FlowTable slots the collector passes to listeners)."""
    h = batch.hops
    keep = ((h["fields"] & _NEED) == _NEED) & (h["line_rate_mbps"] > 0) & (h["hop_index"] < MAX_HOPS)
    h = take(h, keep)
    return hop_samples_from_records(
        row=h["sample"].astype(np.int64),
        hop_idx=h["hop_index"].astype(np.int64),
        flow_idx_per_row=np.asarray(flow_idx, np.int64),
        arrival_ns_per_row=batch.samples["arrival_ns"],
        node_id=h["node_id"],
        ts_ns=h["egress_ts_us"].astype(np.uint64) * np.uint64(1000),
        qlen_bytes=h["queue_bytes"],
        tx_bytes=h["tx_bytes"],
        line_rate_bps=h["line_rate_mbps"].astype(np.float64) * 1e6,
    )
