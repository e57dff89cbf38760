"""Control-loop latency: telemetry arrival -> rate decided -> sent -> rate applied.

Kept in bounded numpy rings (no per-sample Python objects) so recording costs a
slice assignment per batch. The engines record arrival->decision; whoever sends
feedback records the send with the records' ``seq`` and, when an agent confirms a
record, its round trip.  The controller and the agents share no clock: the agent
reports how long it held the record (``hold_ns``, a duration), so

    sent -> applied  ~=  (round trip - hold) / 2 + hold

(half the network round trip out, then the agent's hold, which ends when the
endpoint's answer reached the agent: the applied moment lies inside it).

End to end, ``host_to_applied`` starts where the telemetry was made: the host
sink's capture time of the oldest host record of the flow that the decision
answered (``record_capture``), so the agent's holding and shipping and the
collector's queue are inside it.  Capture times are the host kernel's
CLOCK_MONOTONIC, the controller's clock only when both run on one machine (the
test bed's namespaces): a capture time after the arrival or more than
``MAX_HOST_SKEW_NS`` before it is another clock and is counted in
``clock_mismatch`` instead of measured.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from controller.cc.errors import ParameterError

MAX_HOST_SKEW_NS = 10_000_000_000
"""A host record older than this on arrival is taken for another machine's clock."""
_NEVER = np.iinfo(np.int64).max


@dataclass(slots=True, kw_only=True)
class LatencySummary:
    """Percentiles of one latency series, in seconds (NaN when empty)."""

    count: int
    mean_s: float
    p50_s: float
    p99_s: float
    max_s: float


@dataclass(slots=True, kw_only=True)
class LatencyRing:
    """Last ``capacity`` latency samples in ns, overwritten oldest first."""

    capacity: int = 65536
    _buf: np.ndarray = field(init=False, repr=False)
    _n: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        if self.capacity <= 0:
            raise ParameterError(f"LatencyRing.capacity = {self.capacity} must be positive")
        self._buf = np.zeros(self.capacity, dtype=np.int64)

    def add(self, latency_ns: npt.ArrayLike) -> None:
        """Append a batch of latencies (ns); negative values are clock skew, kept as 0."""
        v = np.maximum(np.asarray(latency_ns, dtype=np.int64).ravel(), 0)
        if v.size >= self.capacity:
            v = v[-self.capacity:]
        start = self._n % self.capacity
        end = start + v.size
        if end <= self.capacity:
            self._buf[start:end] = v
        else:
            cut = self.capacity - start
            self._buf[start:] = v[:cut]
            self._buf[: end - self.capacity] = v[cut:]
        self._n += int(v.size)

    def values_ns(self) -> np.ndarray:
        """The retained samples (order not guaranteed)."""
        return self._buf[: min(self._n, self.capacity)].copy()

    def summary(self) -> LatencySummary:
        v = self.values_ns().astype(np.float64) * 1e-9
        if v.size == 0:
            nan = float("nan")
            return LatencySummary(count=0, mean_s=nan, p50_s=nan, p99_s=nan, max_s=nan)
        return LatencySummary(count=self._n, mean_s=float(v.mean()),
                              p50_s=float(np.percentile(v, 50)),
                              p99_s=float(np.percentile(v, 99)), max_s=float(v.max()))


@dataclass(slots=True, kw_only=True)
class LoopLatency:
    """Telemetry-to-decision, telemetry-to-sent and decision-to-applied latency.

    ``n_flows`` sizes the per-flow table of the last decision time, used to pair
    an "applied" confirmation from the agent with the decision it applies.
    """

    n_flows: int
    capacity: int = 65536
    seq_capacity: int = 1 << 16
    """Feedback records remembered (by ``seq``) until their confirmation."""
    decide: LatencyRing = field(init=False)
    sent: LatencyRing = field(init=False)
    apply: LatencyRing = field(init=False)
    telemetry_apply: LatencyRing = field(init=False)
    host_apply: LatencyRing = field(init=False)
    clock_mismatch: int = field(init=False, default=0)
    """Host records whose capture time is not on this clock (see the module doc)."""
    _last_capture_ns: np.ndarray = field(init=False, repr=False)
    _seq_capture_ns: np.ndarray = field(init=False, repr=False)
    _last_decided_ns: np.ndarray = field(init=False, repr=False)
    _last_arrival_ns: np.ndarray = field(init=False, repr=False)
    _seq_tag: np.ndarray = field(init=False, repr=False)
    _seq_decided_ns: np.ndarray = field(init=False, repr=False)
    _seq_arrival_ns: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.seq_capacity <= 0 or self.seq_capacity & (self.seq_capacity - 1):
            raise ParameterError(
                f"LoopLatency.seq_capacity = {self.seq_capacity} must be a power of two")
        self.decide = LatencyRing(capacity=self.capacity)
        self.sent = LatencyRing(capacity=self.capacity)
        self.apply = LatencyRing(capacity=self.capacity)
        self.telemetry_apply = LatencyRing(capacity=self.capacity)
        self.host_apply = LatencyRing(capacity=self.capacity)
        self._last_capture_ns = np.full(self.n_flows, -1, dtype=np.int64)
        self._seq_capture_ns = np.full(self.seq_capacity, -1, dtype=np.int64)
        self._last_decided_ns = np.full(self.n_flows, -1, dtype=np.int64)
        self._last_arrival_ns = np.full(self.n_flows, -1, dtype=np.int64)
        self._seq_tag = np.full(self.seq_capacity, -1, dtype=np.int64)
        self._seq_decided_ns = np.zeros(self.seq_capacity, dtype=np.int64)
        self._seq_arrival_ns = np.zeros(self.seq_capacity, dtype=np.int64)

    def record_decided(self, flow_idx: np.ndarray, arrival_ns: np.ndarray,
                       decided_ns: int) -> None:
        """Telemetry for ``flow_idx`` arrived at ``arrival_ns``; rates decided at ``decided_ns``."""
        arrival = np.asarray(arrival_ns, dtype=np.int64)
        self.decide.add(decided_ns - arrival)
        self._last_decided_ns[flow_idx] = decided_ns
        self._last_arrival_ns[flow_idx] = arrival

    def record_capture(self, flow_idx: npt.ArrayLike, capture_ns: npt.ArrayLike,
                       arrival_ns: npt.ArrayLike) -> None:
        """The samples of one batch (host capture and arrival times, 0 capture for a
        switch's report): each flow's oldest capture on this clock becomes the start
        of the ``host_to_applied`` sample of the feedback that answers the batch."""
        idx = np.asarray(flow_idx, dtype=np.int64).ravel()
        cap = np.asarray(capture_ns).astype(np.int64, copy=False).ravel()
        age = np.asarray(arrival_ns, dtype=np.int64) - cap
        ok = (cap > 0) & (age >= 0) & (age <= MAX_HOST_SKEW_NS)
        last = self._last_capture_ns
        if ok.all():   # host records on this clock (the usual case): no masking
            last[idx] = _NEVER
            np.minimum.at(last, idx, cap)
            return
        self.clock_mismatch += int(((cap > 0) & ~ok).sum())
        last[idx] = _NEVER
        np.minimum.at(last, idx[ok], cap[ok])
        last[idx[last[idx] == _NEVER]] = -1

    def record_sent(self, flow_idx: npt.ArrayLike, sent_ns: int,
                    seq: npt.ArrayLike | None = None) -> None:
        """Feedback for ``flow_idx`` left for the agents at ``sent_ns``: records the
        telemetry-to-wire latency of the telemetry that led to it, and remembers the
        decision behind each record ``seq`` for its confirmation."""
        idx = np.asarray(flow_idx, dtype=np.int64)
        last = self._last_arrival_ns[idx]
        self.sent.add((sent_ns - last)[last >= 0])
        if seq is not None:
            s = np.asarray(seq, dtype=np.int64)
            ok = last >= 0
            slot = s[ok] & (self.seq_capacity - 1)
            self._seq_tag[slot] = s[ok]
            self._seq_decided_ns[slot] = self._last_decided_ns[idx[ok]]
            self._seq_arrival_ns[slot] = last[ok]
            self._seq_capture_ns[slot] = self._last_capture_ns[idx[ok]]

    def record_confirmed(self, seq: npt.ArrayLike, sent_ns: npt.ArrayLike,
                         received_ns: npt.ArrayLike, hold_ns: npt.ArrayLike) -> int:
        """Confirmations of records ``seq`` (sent at ``sent_ns``, confirmation received
        at ``received_ns``, both on this clock; ``hold_ns`` on the agent's): adds
        decision -> applied and telemetry -> applied samples; returns how many records
        were known (sent through ``record_sent`` and not overwritten since)."""
        s = np.asarray(seq, dtype=np.int64).ravel()
        sent = np.broadcast_to(np.asarray(sent_ns, dtype=np.int64), s.shape)
        recv = np.broadcast_to(np.asarray(received_ns, dtype=np.int64), s.shape)
        hold = np.broadcast_to(np.asarray(hold_ns, dtype=np.int64), s.shape)
        slot = s & (self.seq_capacity - 1)
        ok = self._seq_tag[slot] == s
        if not ok.any():
            return 0
        one_way = (np.maximum(recv - sent - hold, 0) // 2 + hold)[ok]
        applied = sent[ok] + one_way
        self.apply.add(applied - self._seq_decided_ns[slot[ok]])
        self.telemetry_apply.add(applied - self._seq_arrival_ns[slot[ok]])
        cap = self._seq_capture_ns[slot[ok]]
        self.host_apply.add((applied - cap)[cap > 0])
        self._seq_tag[slot[ok]] = -1   # one sample per record
        return int(ok.sum())

    def record_applied(self, flow_idx: npt.ArrayLike, applied_ns: npt.ArrayLike) -> None:
        """The sender's agent confirmed the rate of ``flow_idx`` applied at ``applied_ns``."""
        idx = np.asarray(flow_idx, dtype=np.int64)
        last = self._last_decided_ns[idx]
        ok = last >= 0
        applied = np.broadcast_to(np.asarray(applied_ns, dtype=np.int64), idx.shape)
        self.apply.add((applied - last)[ok])

    def summary(self) -> dict[str, LatencySummary]:
        """``telemetry_to_decision``, ``telemetry_to_sent`` (feedback on the wire),
        ``decision_to_applied``, ``telemetry_to_applied`` (when agents confirm) and
        ``host_to_applied`` (from the host's capture, host records on this clock)."""
        return {"telemetry_to_decision": self.decide.summary(),
                "telemetry_to_sent": self.sent.summary(),
                "decision_to_applied": self.apply.summary(),
                "telemetry_to_applied": self.telemetry_apply.summary(),
                "host_to_applied": self.host_apply.summary()}
