"""Control-loop latency: telemetry arrival -> rate decided -> rate applied.

Kept in bounded numpy rings (no per-sample Python objects) so recording costs a
slice assignment per batch. The engines record arrival->decision; whoever sends
feedback to the sender's agent records decision->applied when the agent confirms.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from controller.cc.errors import ParameterError


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
    decide: LatencyRing = field(init=False)
    sent: LatencyRing = field(init=False)
    apply: LatencyRing = field(init=False)
    _last_decided_ns: np.ndarray = field(init=False, repr=False)
    _last_arrival_ns: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.decide = LatencyRing(capacity=self.capacity)
        self.sent = LatencyRing(capacity=self.capacity)
        self.apply = LatencyRing(capacity=self.capacity)
        self._last_decided_ns = np.full(self.n_flows, -1, dtype=np.int64)
        self._last_arrival_ns = np.full(self.n_flows, -1, dtype=np.int64)

    def record_decided(self, flow_idx: np.ndarray, arrival_ns: np.ndarray,
                       decided_ns: int) -> None:
        """Telemetry for ``flow_idx`` arrived at ``arrival_ns``; rates decided at ``decided_ns``."""
        arrival = np.asarray(arrival_ns, dtype=np.int64)
        self.decide.add(decided_ns - arrival)
        self._last_decided_ns[flow_idx] = decided_ns
        self._last_arrival_ns[flow_idx] = arrival

    def record_sent(self, flow_idx: npt.ArrayLike, sent_ns: int) -> None:
        """Feedback for ``flow_idx`` left for the agents at ``sent_ns``: records the
        telemetry-to-wire latency of the telemetry that led to it."""
        idx = np.asarray(flow_idx, dtype=np.int64)
        last = self._last_arrival_ns[idx]
        self.sent.add((sent_ns - last)[last >= 0])

    def record_applied(self, flow_idx: npt.ArrayLike, applied_ns: npt.ArrayLike) -> None:
        """The sender's agent confirmed the rate of ``flow_idx`` applied at ``applied_ns``."""
        idx = np.asarray(flow_idx, dtype=np.int64)
        last = self._last_decided_ns[idx]
        ok = last >= 0
        applied = np.broadcast_to(np.asarray(applied_ns, dtype=np.int64), idx.shape)
        self.apply.add((applied - last)[ok])

    def summary(self) -> dict[str, LatencySummary]:
        """``telemetry_to_decision``, ``telemetry_to_sent`` (feedback on the wire) and
        ``decision_to_applied`` (when agents confirm)."""
        return {"telemetry_to_decision": self.decide.summary(),
                "telemetry_to_sent": self.sent.summary(),
                "decision_to_applied": self.apply.summary()}
