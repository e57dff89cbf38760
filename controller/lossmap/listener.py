"""Per-flow PSN-gap losses fed straight from the collector's host-record batches.

``FlowLossListener`` is a ``controller.int.Collector`` listener: it takes the host
records (agent batches) of each decoded batch, keyed by the collector's flow
slot, into a ``FlowLossStream``. A host record covers a run of packets with
consecutive PSNs (``run_psn``, ``psn_count``); the runs are expanded to one PSN per
packet (``formats.int_md.psn_runs_to_packets``, vectorised) so the stream counts
every packet exactly as if each had its own record. A slot the collector hands to
another flow is reset first, so PSNs of different flows never meet.

Only data packets (RDMA WRITEs, FEC repairs) count: an ACK carries the last PSN
received in order, one ACK for many packets, so the PSN gaps of an ACK direction
are coalescing, not loss.  Which slots are ACK directions (only ACKs or CNPs seen)
is kept, so that flow tables can leave them out of the data flows.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from controller.lossmap.stream import FlowLossStream
from formats.int_md import psn_runs_to_packets
from formats.roce import Opcode

SOURCE_HOST = 2
"""``REPORT_DTYPE.source`` of host records (controller.int.records.SOURCE_HOST)."""


@dataclass(slots=True, kw_only=True)
class FlowLossListener:
    """Collector listener -> ``FlowLossStream`` (rows = collector flow slots)."""

    stream: FlowLossStream
    records: int = 0
    packets: int = 0
    """Packets the records stand for (their runs' lengths summed)."""
    _key: np.ndarray = field(init=False, repr=False)
    _data: np.ndarray = field(init=False, repr=False)   # per slot: data packets seen
    _ctrl: np.ndarray = field(init=False, repr=False)   # per slot: ACKs / CNPs seen

    def __post_init__(self) -> None:
        self._key = np.full((self.stream.n_flows, 4), -1, dtype=np.int64)
        self._data = np.zeros(self.stream.n_flows, dtype=bool)
        self._ctrl = np.zeros(self.stream.n_flows, dtype=bool)

    def is_ack_direction(self, slot: int) -> bool:
        """The slot's flow carried ACKs (or CNPs) and no data: not a data flow."""
        return bool(0 <= slot < self._data.size and self._ctrl[slot] and not self._data[slot])

    def __call__(self, batch: Any, flow_slots: np.ndarray) -> None:
        s = batch.samples
        slots = np.asarray(flow_slots, dtype=np.int64)
        m = ((s["source"] == SOURCE_HOST) & (s["has_bth"] == 1) & (slots >= 0)
             & (slots < self.stream.n_flows))
        if not m.any():
            return
        rows, rec = slots[m], s[m]
        key = np.stack([rec["src_ip"], rec["dst_ip"], rec["sport"], rec["dest_qp"]],
                       axis=1).astype(np.int64)
        known = self._key[rows]
        fresh = (known != key).any(axis=1)
        if fresh.any():
            first = np.unique(rows[fresh], return_index=True)[1]
            reused = rows[fresh][first]
            self.stream.reset(reused[(self._key[reused] >= 0).any(axis=1)])
            self._key[reused] = key[fresh][first]
            self._data[reused] = self._ctrl[reused] = False
        ctrl = (rec["opcode"] == Opcode.ACKNOWLEDGE) | (rec["opcode"] == Opcode.CNP)
        self._ctrl[rows[ctrl]] = True
        self._data[rows[~ctrl]] = True
        rows, rec = rows[~ctrl], rec[~ctrl]   # loss from data PSNs only
        if rows.size == 0:
            return
        first = np.where(rec["run_first_ns"] > 0, rec["run_first_ns"],
                         np.where(rec["capture_ns"] > 0, rec["capture_ns"],
                                  rec["arrival_ns"])).astype(np.int64)
        last = np.where(rec["run_last_ns"] > 0, rec["run_last_ns"].astype(np.int64), first)
        idx, psn, ts = psn_runs_to_packets(rec["run_psn"], rec["psn_count"], first, last)
        self.stream.add(flow_idx=rows[idx], ts_ns=ts, psn=psn)
        self.records += int(rows.size)
        self.packets += int(idx.size)
