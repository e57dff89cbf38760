"""The control loop as a collector listener: telemetry -> HPCC -> feedback.

``HpccLoop`` is called by ``controller.int.Collector`` with every decoded batch
and the flow-table slot of each sample. Slots are the engine's rows. A slot seen
for the first time (or reused by the collector for another flow) is resolved once
through ``resolve`` -- topology knowledge the controller has: which agent serves
the sender, the sender's QP number, its line rate -- then the engine updates and
changed rates go out through the ``FeedbackSender``.

Commits of HPCC's reference rate go through a ``CommitGate``: once a committed
rate was sent to an agent that confirms, the flow's next commit waits for telemetry
of a packet sent after the rate was applied (the confirmation's ``applied_psn``).
``poll_confirmations`` (call it when ``fileno()`` is readable, e.g. through
``Collector.add_reader``) reads the agents' confirmations, opens gates and records
the loop latency up to "rate applied".
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from common.flow_batches import thin_per_key
from controller.cc.gate import CommitGate, GateParams
from controller.cc.hpcc import HpccEngine
from controller.cc.sender import Confirmations, FeedbackSender
from controller.cc.telemetry import HopSamples
from formats.feedback import ConfirmStatus


@dataclass(frozen=True, slots=True, kw_only=True)
class FeedbackTarget:
    """Where a flow's feedback goes and what its sender can do."""

    agent: tuple[str, int]
    flow_id: int
    max_rate_bps: float
    base_rtt_s: float | None = None


Resolver = Callable[[np.ndarray], "FeedbackTarget | None"]
"""Called with one REPORT_DTYPE sample of a new flow; None: no feedback for it."""


@dataclass(slots=True, kw_only=True)
class LoopStats:
    batches: int = 0
    samples: int = 0
    flows_started: int = 0
    flows_unresolved: int = 0
    records_sent: int = 0
    samples_thinned: int = 0
    confirmations: int = 0
    confirmations_applied: int = 0


@dataclass(slots=True, kw_only=True)
class HpccLoop:
    """Collector listener running HPCC and sending feedback (rows = collector slots)."""

    engine: HpccEngine
    sender: FeedbackSender
    resolve: Resolver
    gate_params: GateParams = field(default_factory=GateParams)
    max_samples_per_flow: int = 16
    """Samples of one flow the engine gets per batch, spread evenly, the last one
    always (``batch.thin_per_key``): the engine applies a flow's samples one after
    the other, so a batch of 500 samples of a few flows would take 500 rounds."""
    send_rates: bool = True
    """False: the engine runs and flows are bound to their agents (other feedback, e.g.
    a reroute's path notice, reaches them) but no rate is sent: the senders keep
    their own (``controller run --no-rate-feedback``)."""
    stats: LoopStats = field(default_factory=LoopStats)
    gate: CommitGate = field(init=False)
    last_confirmations: Confirmations | None = field(init=False, default=None)
    """The confirmations of the last ``poll_confirmations`` that matched any."""
    _key: np.ndarray = field(init=False, repr=False)
    _resolved: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._key = np.full((self.engine.n_flows, 4), -1, dtype=np.int64)
        self._resolved = np.zeros(self.engine.n_flows, dtype=bool)
        self.gate = CommitGate(n_flows=self.engine.n_flows, params=self.gate_params)

    def __call__(self, batch: Any, flow_slots: np.ndarray) -> None:
        samples_rec = batch.samples
        slots = np.asarray(flow_slots, dtype=np.int64)
        ok = (slots >= 0) & (slots < self.engine.n_flows)
        if not ok.any():
            return
        key = np.stack([samples_rec["src_ip"], samples_rec["dst_ip"], samples_rec["sport"],
                        samples_rec["dest_qp"]], axis=1).astype(np.int64)
        safe = np.where(ok, slots, 0)
        changed = ok & ((self._key[safe] != key).any(axis=1) | ~self._resolved[safe])
        for i in np.flatnonzero(changed):  # once per new flow, not per packet
            s = int(slots[i])
            if self._resolved[s] and (self._key[s] == key[i]).all():
                continue  # a second sample of a flow resolved earlier in this batch
            target = self.resolve(samples_rec[i])
            self._key[s] = key[i]
            self._resolved[s] = True
            if target is None:
                self.stats.flows_unresolved += 1
                self.engine.stop_flows([s])
                continue
            self.engine.start_flows([s], max_rate_bps=target.max_rate_bps,
                                    base_rtt_s=target.base_rtt_s,
                                    now_ns=int(samples_rec["arrival_ns"][i]))
            self.sender.bind_flow(s, agent=target.agent, flow_id=target.flow_id)
            self.gate.reset([s])
            self.stats.flows_started += 1
        use = ok & self.engine.state.active[safe]
        if not use.any():
            return
        rows = np.flatnonzero(use)
        n_use = rows.size
        # end to end from the host: every sample the decision answers, thinned or not
        self.engine.latency.record_capture(slots[rows], samples_rec["capture_ns"][rows],
                                           samples_rec["arrival_ns"][rows])
        rows = rows[thin_per_key(slots[rows], self.max_samples_per_flow)]
        self.stats.samples_thinned += n_use - rows.size
        # the batch turns itself into the engine's input (controller.int.feed): the
        # collector sits above this package and hands its batches down
        hs: HopSamples = _select(batch, rows).hop_samples(slots[rows])
        st = self.engine.state
        mask = self.gate.commit_mask(hs.flow_idx, psn=samples_rec["psn"][rows],
                                     has_psn=samples_rec["has_bth"][rows] != 0,
                                     arrival_ns=hs.arrival_ns, last_commit_ns=st.last_commit_ns,
                                     base_rtt_ns=st.base_rtt_ns)
        d = self.engine.update(hs, commit_mask=mask)
        # one record per flow: its last measured decision of the batch
        upd = np.flatnonzero(d.updated)
        if upd.size and self.send_rates:
            f = d.flow_idx[upd]
            last = upd[f.size - 1 - np.unique(f[::-1], return_index=True)[1]]
            self.stats.records_sent += self.sender.send(d.flow_idx[last], d.rate_bps[last])
            sent = self.sender.last_sent
            if sent.size:
                self.engine.latency.record_sent(sent, self.sender.last_sent_ns,
                                                seq=self.sender.last_seq)
                # committed flows whose record went out wait for fresh telemetry
                done = np.isin(sent, d.flow_idx[d.committed])
                if done.any():
                    self.gate.arm(sent[done], self.sender.last_seq[done],
                                  int(hs.arrival_ns.max()))
        self.stats.batches += 1
        self.stats.samples += int(d.flow_idx.size)

    def fileno(self) -> int:
        """Readable when agents' confirmations are waiting (``poll_confirmations``)."""
        return self.sender.fileno()

    def poll_confirmations(self) -> int:
        """Read the agents' confirmations: loop latency to "rate applied", commit gates
        opened at the applied PSN.  Returns how many were matched to records sent."""
        c = self.sender.receive_confirmations()
        if not len(c):
            return 0
        self.last_confirmations = c
        applied = c.status == ConfirmStatus.APPLIED
        self.engine.latency.record_confirmed(c.seq[applied], c.sent_ns[applied],
                                             c.received_ns[applied], c.hold_ns[applied])
        self.gate.confirm(c.flow_idx, c.seq, c.applied_psn, applied)
        self.stats.confirmations += len(c)
        self.stats.confirmations_applied += int(applied.sum())
        return len(c)


def _select(batch: Any, rows: np.ndarray) -> Any:
    """The samples ``rows`` of a decoded batch with their hop records (renumbered), so
    only what the engine gets is turned into ``HopSamples``."""
    if rows.size == len(batch.samples):
        return batch
    new_index = np.full(len(batch.samples), -1, dtype=np.int64)
    new_index[rows] = np.arange(rows.size)
    hops = batch.hops
    pos = new_index[hops["sample"]]
    keep = pos >= 0
    sub = hops[keep]
    sub["sample"] = pos[keep]
    return type(batch)(samples=batch.samples[rows], hops=sub)
