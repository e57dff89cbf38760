"""A small fluid model of flows sharing links, to exercise the rate engines.

Not a packet simulator: every step of ``dt_s`` each link serves up to its rate
from the summed sending rates of the flows crossing it, the excess waits in the
link's queue (up to ``buffer_bytes``, beyond that it is dropped), and telemetry
seen by the engines is the link state one feedback delay ago, like INT that
travels to the receiver and back. Counters are kept with their on-wire widths
(tx bytes modulo 2^32, timestamps modulo ``ts_modulus_ns``) so wraparound is
exercised on the same path as real telemetry.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from controller.cc.errors import ParameterError
from controller.cc.telemetry import HopSamples


@dataclass(slots=True, kw_only=True)
class FluidNetwork:
    """Links with rates and flows with paths (link indices, -1 padded)."""

    link_rate_bps: np.ndarray
    paths: np.ndarray

    def __post_init__(self) -> None:
        self.link_rate_bps = np.asarray(self.link_rate_bps, dtype=np.float64)
        self.paths = np.atleast_2d(np.asarray(self.paths, dtype=np.int64))
        n_links = self.link_rate_bps.shape[0]
        if np.any(~(self.link_rate_bps > 0)):
            raise ParameterError("FluidNetwork.link_rate_bps: every link needs a positive rate")
        if np.any(self.paths >= n_links) or np.any(self.paths < -1):
            raise ParameterError(f"FluidNetwork.paths: link index outside -1..{n_links - 1}")
        if np.any(self.paths[:, 0] < 0):
            raise ParameterError("FluidNetwork.paths: every flow needs at least one link")

    @property
    def n_flows(self) -> int:
        return int(self.paths.shape[0])

    @property
    def n_links(self) -> int:
        return int(self.link_rate_bps.shape[0])

    def incidence(self) -> np.ndarray:
        """(flows x links) 0/1 matrix: flow f crosses link l."""
        m = np.zeros((self.n_flows, self.n_links))
        f, h = np.nonzero(self.paths >= 0)
        m[f, self.paths[f, h]] = 1.0
        return m


@dataclass(slots=True, kw_only=True)
class FluidSim:
    """Queues and counters of a ``FluidNetwork`` advanced in fixed steps."""

    net: FluidNetwork
    dt_s: float
    feedback_delay_s: float
    buffer_bytes: float = float("inf")
    ts_start_ns: int = 0
    ts_modulus_ns: int = 1 << 64
    tx_start_bytes: int = 0
    queue_bytes: np.ndarray = field(init=False)
    tx_bytes: np.ndarray = field(init=False)
    dropped_bytes: np.ndarray = field(init=False)
    now_ns: int = field(init=False)
    _hist_q: np.ndarray = field(init=False, repr=False)
    _hist_tx: np.ndarray = field(init=False, repr=False)
    _hist_ts: np.ndarray = field(init=False, repr=False)
    _delay_steps: int = field(init=False)
    _k: int = field(init=False, default=0)
    _inc: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.dt_s > 0:
            raise ParameterError(f"FluidSim.dt_s = {self.dt_s} must be positive")
        if not self.feedback_delay_s >= 0:
            raise ParameterError(f"FluidSim.feedback_delay_s = {self.feedback_delay_s} < 0")
        n = self.net.n_links
        self.queue_bytes = np.zeros(n)
        self.tx_bytes = np.full(n, self.tx_start_bytes % (1 << 32), dtype=np.uint64)
        self.dropped_bytes = np.zeros(n)
        self.now_ns = 0
        self._delay_steps = round(self.feedback_delay_s / self.dt_s)
        d = self._delay_steps + 1
        self._hist_q = np.zeros((d, n))
        self._hist_tx = np.tile(self.tx_bytes, (d, 1))
        self._hist_ts = np.full(d, self.ts_start_ns % self.ts_modulus_ns, dtype=np.uint64)
        self._inc = self.net.incidence()

    def step(self, rate_bps: npt.ArrayLike) -> None:
        """Advance one ``dt_s`` with every flow sending at ``rate_bps``."""
        rate = np.asarray(rate_bps, dtype=np.float64)
        offered = rate @ self._inc * self.dt_s / 8.0
        cap = self.net.link_rate_bps * self.dt_s / 8.0
        backlog = self.queue_bytes + offered
        served = np.minimum(backlog, cap)
        q = backlog - served
        drop = np.maximum(q - self.buffer_bytes, 0.0)
        self.dropped_bytes += drop
        self.queue_bytes = q - drop
        sent = np.round(served).astype(np.uint64)
        with np.errstate(over="ignore"):
            self.tx_bytes = (self.tx_bytes + sent) & np.uint64(0xFFFFFFFF)
        self.now_ns += round(self.dt_s * 1e9)
        self._k += 1
        slot = self._k % self._hist_q.shape[0]
        self._hist_q[slot] = self.queue_bytes
        self._hist_tx[slot] = self.tx_bytes
        self._hist_ts[slot] = (self.ts_start_ns + self.now_ns) % self.ts_modulus_ns

    def telemetry(self, flow_idx: npt.ArrayLike | None = None) -> HopSamples:
        """Per-hop samples for ``flow_idx`` (default all) as seen one feedback delay ago."""
        f = np.arange(self.net.n_flows) if flow_idx is None else np.asarray(flow_idx)
        k = max(self._k - self._delay_steps, 0)
        slot = k % self._hist_q.shape[0]
        paths = self.net.paths[f]
        present = paths >= 0
        link = np.where(present, paths, 0)
        ts = np.where(present, self._hist_ts[slot], 0).astype(np.uint64)
        return HopSamples(
            flow_idx=f, n_hops=present.sum(axis=1),
            arrival_ns=np.full(f.shape, self.now_ns, dtype=np.int64),
            node_id=np.where(present, link + 1, 0),
            ts_ns=ts, qlen_bytes=np.where(present, self._hist_q[slot][link], 0.0),
            tx_bytes=np.where(present, self._hist_tx[slot][link], 0).astype(np.uint64),
            line_rate_bps=np.where(present, self.net.link_rate_bps[link], 0.0))

    def delayed_queue_bytes(self) -> np.ndarray:
        """Per-link queue as the senders learn it (one feedback delay ago)."""
        k = max(self._k - self._delay_steps, 0)
        return self._hist_q[k % self._hist_q.shape[0]].copy()

    def ecn_marks(self, rate_bps: npt.ArrayLike, *, kmin_bytes: float, kmax_bytes: float,
                  pmax: float, mtu_bytes: int, rng: np.random.Generator) -> np.ndarray:
        """Which flows saw at least one ECN-marked packet this step (RED-style marking
        on the delayed queue), as a bool array; drives CNPs for DCQCN."""
        q = self.delayed_queue_bytes()
        p_link = np.clip((q - kmin_bytes) / max(kmax_bytes - kmin_bytes, 1e-9), 0.0, 1.0) * pmax
        p_link = np.where(q >= kmax_bytes, 1.0, p_link)
        p_path = 1.0 - np.exp(self._inc @ np.log1p(-np.minimum(p_link, 1 - 1e-12)))
        pkts = np.asarray(rate_bps, dtype=np.float64) * self.dt_s / 8.0 / mtu_bytes
        p_any = 1.0 - np.power(1.0 - p_path, pkts)
        return rng.random(p_any.shape) < p_any
