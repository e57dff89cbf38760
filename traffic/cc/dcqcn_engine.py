"""DCQCN baseline (Zhu et al., SIGCOMM 2015), vectorised over flows.

Roles as in the paper: the congestion point (switch) marks ECN, the notification
point (receiver, ``CnpGenerator``) turns marked packets into at most one CNP per
flow per ``cnp_interval_s``, and the reaction point (sender, ``DcqcnEngine``)
adjusts the rate:

* on CNP: target Rt = Rc, Rc = Rc (1 - alpha/2), then alpha = (1-g) alpha + g;
  increase stages, byte counter and increase timer restart; at most one decrease
  per ``decrease_interval_s``;
* alpha timer: every ``alpha_interval_s`` without a CNP, alpha = (1-g) alpha;
* increase events come from the timer (every ``timer_s``) and the byte counter
  (every ``byte_counter_bytes`` sent), each counting its own stage; with F =
  ``fast_recovery_stages``: both stages < F -> fast recovery (Rc = (Rt + Rc)/2);
  one stage >= F -> additive increase (Rt += R_AI first); both > F -> hyper
  increase (Rt += i * R_HAI, i = min stage - F).

Time is passed in explicitly (ns); nothing here sleeps or schedules.

One implementation for two users: each emulated sender (:mod:`traffic.cc.dcqcn`, as a
NIC runs it) and the controller's fluid model and baseline (``controller.cc``, which
may import ``traffic``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from common.flow_batches import occurrence_rounds


class DcqcnParameterError(ValueError):
    """A DCQCN parameter (g, interval, rate, byte count ...) is out of its range."""


class DcqcnFlowIndexError(IndexError):
    """A flow index is outside the engine's flow table, or the flow was not started."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DcqcnParams:
    """Standard DCQCN parameters; rates are fractions of the flow's max rate.

    Defaults follow the DCQCN paper (g = 1/256, K = T = 55 us, B = 10 MB, F = 5,
    R_AI 40 Mbit/s on 40G = 0.1 %, R_HAI ten times that); the decrease interval is
    the public ns-3 model's 4 us (CNPs themselves are paced by ``CnpGenerator``).
    """

    g: float = 1.0 / 256
    alpha_interval_s: float = 55e-6
    timer_s: float = 55e-6
    byte_counter_bytes: int = 10 * 1024 * 1024
    fast_recovery_stages: int = 5
    rate_ai_fraction: float = 0.001
    rate_hai_fraction: float = 0.01
    min_rate_fraction: float = 0.001
    decrease_interval_s: float = 4e-6
    initial_alpha: float = 1.0

    def __post_init__(self) -> None:
        for name in ("g", "initial_alpha"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise DcqcnParameterError(f"DcqcnParams.{name} = {v} is outside [0, 1]")
        for name in ("alpha_interval_s", "timer_s"):
            v = getattr(self, name)
            if not v > 0:
                raise DcqcnParameterError(f"DcqcnParams.{name} = {v} must be positive")
        if self.decrease_interval_s < 0:
            raise DcqcnParameterError(
                f"DcqcnParams.decrease_interval_s = {self.decrease_interval_s} is negative")
        if self.byte_counter_bytes <= 0:
            raise DcqcnParameterError(
                f"DcqcnParams.byte_counter_bytes = {self.byte_counter_bytes} must be positive")
        if self.fast_recovery_stages < 0:
            raise DcqcnParameterError(
                f"DcqcnParams.fast_recovery_stages = {self.fast_recovery_stages} is negative")
        for name in ("rate_ai_fraction", "rate_hai_fraction", "min_rate_fraction"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise DcqcnParameterError(f"DcqcnParams.{name} = {v} is outside [0, 1]")


@dataclass(slots=True, kw_only=True)
class DcqcnEngine:
    """Reaction-point state of ``n_flows`` flows."""

    n_flows: int
    params: DcqcnParams = field(default_factory=DcqcnParams)
    max_rate_bps: np.ndarray = field(init=False)
    rate_bps: np.ndarray = field(init=False)
    target_bps: np.ndarray = field(init=False)
    alpha: np.ndarray = field(init=False)
    timer_stage: np.ndarray = field(init=False)
    byte_stage: np.ndarray = field(init=False)
    byte_count: np.ndarray = field(init=False)
    alpha_deadline_ns: np.ndarray = field(init=False)
    timer_deadline_ns: np.ndarray = field(init=False)
    last_decrease_ns: np.ndarray = field(init=False)
    active: np.ndarray = field(init=False)
    cnps_seen: int = field(init=False, default=0)
    decreases: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        if self.n_flows <= 0:
            raise DcqcnParameterError(f"DcqcnEngine.n_flows = {self.n_flows} must be positive")
        f = self.n_flows
        self.max_rate_bps = np.zeros(f)
        self.rate_bps = np.zeros(f)
        self.target_bps = np.zeros(f)
        self.alpha = np.zeros(f)
        self.timer_stage = np.zeros(f, dtype=np.int64)
        self.byte_stage = np.zeros(f, dtype=np.int64)
        self.byte_count = np.zeros(f, dtype=np.int64)
        self.alpha_deadline_ns = np.zeros(f, dtype=np.int64)
        self.timer_deadline_ns = np.zeros(f, dtype=np.int64)
        self.last_decrease_ns = np.full(f, np.iinfo(np.int64).min // 2, dtype=np.int64)
        self.active = np.zeros(f, dtype=bool)

    def start_flows(self, flow_idx: npt.ArrayLike, *, max_rate_bps: npt.ArrayLike,
                    now_ns: int) -> None:
        """Flows start at line rate with alpha = ``initial_alpha``."""
        idx = self._idx(flow_idx, "start_flows", need_active=False)
        mr = np.broadcast_to(np.asarray(max_rate_bps, dtype=np.float64), idx.shape)
        if np.any(~(mr > 0)):
            raise DcqcnParameterError(f"DcqcnEngine.start_flows: max_rate_bps {mr.min()} not positive")
        p = self.params
        self.max_rate_bps[idx] = mr
        self.rate_bps[idx] = mr
        self.target_bps[idx] = mr
        self.alpha[idx] = p.initial_alpha
        self.timer_stage[idx] = 0
        self.byte_stage[idx] = 0
        self.byte_count[idx] = 0
        self.alpha_deadline_ns[idx] = now_ns + _ns(p.alpha_interval_s)
        self.timer_deadline_ns[idx] = now_ns + _ns(p.timer_s)
        self.last_decrease_ns[idx] = np.iinfo(np.int64).min // 2
        self.active[idx] = True

    def stop_flows(self, flow_idx: npt.ArrayLike) -> None:
        self.active[self._idx(flow_idx, "stop_flows", need_active=False)] = False

    # ------------------------------------------------------------- events
    def on_cnp(self, flow_idx: npt.ArrayLike, now_ns: int) -> None:
        """CNPs for ``flow_idx`` arrived at ``now_ns`` (call ``advance(now_ns)`` first)."""
        idx = self._idx(flow_idx, "on_cnp")
        self.cnps_seen += int(idx.size)
        p = self.params
        for rows in occurrence_rounds(idx):
            f = idx[rows]
            dec = (now_ns - self.last_decrease_ns[f]) >= _ns(p.decrease_interval_s)
            d = f[dec]
            self.target_bps[d] = self.rate_bps[d]
            lo = self.max_rate_bps[d] * p.min_rate_fraction
            self.rate_bps[d] = np.maximum(lo, self.rate_bps[d] * (1.0 - self.alpha[d] / 2.0))
            self.timer_stage[d] = 0
            self.byte_stage[d] = 0
            self.byte_count[d] = 0
            self.timer_deadline_ns[d] = now_ns + _ns(p.timer_s)
            self.last_decrease_ns[d] = now_ns
            self.decreases += int(d.size)
            self.alpha[f] = (1.0 - p.g) * self.alpha[f] + p.g
            self.alpha_deadline_ns[f] = now_ns + _ns(p.alpha_interval_s)

    def on_sent(self, flow_idx: npt.ArrayLike, sent_bytes: npt.ArrayLike) -> None:
        """Flows sent ``sent_bytes``; every ``byte_counter_bytes`` is an increase event."""
        idx = self._idx(flow_idx, "on_sent")
        b = np.broadcast_to(np.asarray(sent_bytes, dtype=np.int64), idx.shape)
        if np.any(b < 0):
            raise DcqcnParameterError(f"DcqcnEngine.on_sent: negative byte count {int(b.min())}")
        total = np.zeros(self.n_flows, dtype=np.int64)
        np.add.at(total, idx, b)
        f = np.flatnonzero(total)
        count = self.byte_count[f] + total[f]
        events = count // self.params.byte_counter_bytes
        self.byte_count[f] = count % self.params.byte_counter_bytes
        self._increase_events(f, events, self.byte_stage)

    def advance(self, now_ns: int) -> None:
        """Fire every alpha and increase timer that expired up to ``now_ns``."""
        p = self.params
        a = _ns(p.alpha_interval_s)
        due = self.active & (self.alpha_deadline_ns <= now_ns)
        n_exp = np.where(due, (now_ns - self.alpha_deadline_ns) // a + 1, 0)
        self.alpha *= np.power(1.0 - p.g, n_exp)
        self.alpha_deadline_ns += n_exp * a
        t = _ns(p.timer_s)
        due = self.active & (self.timer_deadline_ns <= now_ns)
        f = np.flatnonzero(due)
        events = (now_ns - self.timer_deadline_ns[f]) // t + 1
        self.timer_deadline_ns[f] += events * t
        self._increase_events(f, events, self.timer_stage)

    def _increase_events(self, f: np.ndarray, events: np.ndarray, stage: np.ndarray) -> None:
        """Apply ``events[i]`` increase events to flow ``f[i]``, bumping ``stage`` each."""
        p = self.params
        fr = p.fast_recovery_stages
        # after a long idle period a flow may owe thousands of events; 256 of them take
        # any rate to its target (each halves the distance), the rest only count stages
        left = np.minimum(events.astype(np.int64), _MAX_EVENTS)
        stage[f] += events.astype(np.int64) - left
        while True:
            m = left > 0
            if not m.any():
                return
            g = f[m]
            left[m] -= 1
            stage[g] += 1
            ts, bs = self.timer_stage[g], self.byte_stage[g]
            hi, lo = np.maximum(ts, bs), np.minimum(ts, bs)
            mr = self.max_rate_bps[g]
            rt = self.target_bps[g]
            rt = np.where(lo > fr, rt + (lo - fr) * p.rate_hai_fraction * mr,
                          np.where(hi >= fr, rt + p.rate_ai_fraction * mr, rt))
            rt = np.minimum(rt, mr)
            self.target_bps[g] = rt
            self.rate_bps[g] = np.minimum((self.rate_bps[g] + rt) / 2.0, mr)

    def _idx(self, flow_idx: npt.ArrayLike, where: str, *, need_active: bool = True) -> np.ndarray:
        idx = np.asarray(flow_idx, dtype=np.int64).ravel()
        if idx.size and (idx.min() < 0 or idx.max() >= self.n_flows):
            bad = int(idx[(idx < 0) | (idx >= self.n_flows)][0])
            raise DcqcnFlowIndexError(f"DcqcnEngine.{where}: flow index {bad} outside "
                                 f"0..{self.n_flows - 1}")
        if need_active and idx.size and not self.active[idx].all():
            bad = int(idx[~self.active[idx]][0])
            raise DcqcnFlowIndexError(f"DcqcnEngine.{where}: flow {bad} was not started")
        return idx


@dataclass(slots=True, kw_only=True)
class CnpGenerator:
    """Notification point: at most one CNP per flow per ``cnp_interval_s``."""

    n_flows: int
    cnp_interval_s: float = 50e-6
    last_cnp_ns: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        if not self.cnp_interval_s >= 0:
            raise DcqcnParameterError(f"CnpGenerator.cnp_interval_s = {self.cnp_interval_s} < 0")
        self.last_cnp_ns = np.full(self.n_flows, np.iinfo(np.int64).min // 2, dtype=np.int64)

    def on_marked(self, flow_idx: npt.ArrayLike, ts_ns: npt.ArrayLike) -> tuple[np.ndarray,
                                                                             np.ndarray]:
        """ECN-marked packets of ``flow_idx`` arrived at ``ts_ns`` (time order per flow).

        Returns ``(flow_idx, ts_ns)`` of the CNPs to send.
        """
        idx = np.asarray(flow_idx, dtype=np.int64).ravel()
        ts = np.broadcast_to(np.asarray(ts_ns, dtype=np.int64), idx.shape)
        if idx.size and (idx.min() < 0 or idx.max() >= self.n_flows):
            raise DcqcnFlowIndexError(f"CnpGenerator.on_marked: flow index outside 0..{self.n_flows-1}")
        gap = _ns(self.cnp_interval_s)
        send = np.zeros(idx.shape, dtype=bool)
        for rows in occurrence_rounds(idx):
            f = idx[rows]
            ok = ts[rows] - self.last_cnp_ns[f] >= gap
            send[rows[ok]] = True
            self.last_cnp_ns[f[ok]] = ts[rows][ok]
        return idx[send], ts[send]


_MAX_EVENTS = 256


def _ns(seconds: float) -> int:
    return round(seconds * 1e9)
