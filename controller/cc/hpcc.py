"""HPCC rate engine, vectorised over every flow the controller tracks.

Follows the published algorithm (Li et al., SIGCOMM 2019, Algorithm 1) and the
behaviour of its public ns-3 model, computed centrally from INT telemetry:

* per hop i:  u_i = min(qlen_i, qlen_i_prev) / (B_i * T) + txRate_i / B_i,
  txRate_i from the tx-bytes delta over the egress-timestamp delta (both wrap);
* the bottleneck is the hop with the largest u; its u feeds an EWMA whose weight
  is the sample's time span tau (clamped to T): U = (U*(T - tau) + u*tau) / T;
* rate:  if U/eta >= 1 or incStage >= maxStage:  R = Rc / (U/eta) + R_AI, stage 0
         else                                     R = Rc + R_AI,           stage + 1
  clamped to [min rate, max rate];
* every sample sets the flow's rate (fast reaction), but the reference rate Rc and
  the stage are committed only once per base RTT T, so a flow reacts per packet
  without compounding its decrease within one RTT.

With ``per_hop_rates`` the EWMA, Rc and stage are kept per hop and the flow takes
the smallest hop rate, as the ns-3 model's MultiRate option does.

The ns-3 model commits once per "window of sequence numbers" (``lastUpdateSeq``);
the engine alone commits once per T of telemetry arrival time, and ``commit_mask``
lets a caller that knows PSNs restrict that further: ``controller.cc.gate.CommitGate``
(used by ``HpccLoop``) holds a flow's next commit until telemetry of a packet sent
after the agent applied the last committed rate arrives.

The formulas (per-hop u, EWMA, the two steps, the bounds) are
:mod:`traffic.cc.hpcc_math`, the same code the sender's per-ACK HPCC runs; this module
is the bookkeeping around them for a table of flows and batches of telemetry.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from common.flow_batches import occurrence_rounds
from controller.cc.errors import FlowIndexError, ParameterError, TelemetryError
from controller.cc.latency import LatencySummary, LoopLatency
from controller.cc.telemetry import MAX_HOPS, HopSamples
from controller.cc.wrap import delta_mod, delta_mod_n
from traffic.cc.hpcc_math import ai_rate, bound, ewma, hop_utilisation, mi_rate, multiplicative


@dataclass(frozen=True, slots=True, kw_only=True)
class HpccParams:
    """HPCC knobs; rates that scale with the NIC are fractions of its line rate."""

    eta: float = 0.95
    """Target utilisation of the bottleneck."""
    max_stage: int = 5
    """Additive-increase rounds before a multiplicative adjustment is forced."""
    rate_ai_fraction: float = 0.001
    """R_AI as a fraction of the flow's max rate (paper: W_AI = W_init (1-eta)/N,
    i.e. 0.1 % for N = 50 flows; the ns-3 runs use 0.04 %)."""
    min_rate_fraction: float = 0.001
    """Lowest rate as a fraction of the flow's max rate."""
    base_rtt_s: float = 10e-6
    """T: base RTT, EWMA horizon and commit period."""
    ts_modulus_ns: int = 1 << 64
    """Wrap of ``ts_ns`` (e.g. 2**48 * 1000 for 48-bit microsecond timestamps)."""
    tx_bytes_bits: int = 32
    """Width of the tx-bytes counter (formats/FORMATS.md: modulo 2^32)."""
    qlen_use_min: bool = True
    """Use min(current, previous) queue length per hop, as paper and ns-3 do."""
    fast_react: bool = True
    """Apply a new rate on every sample (ns-3 FastReact); False: only once per RTT."""
    per_hop_rates: bool = False
    """Keep Rc, stage and U per hop and send the smallest hop rate (ns-3 MultiRate);
    False: one U from the bottleneck hop, as in the paper and the published runs."""

    def __post_init__(self) -> None:
        if not 0.0 < self.eta <= 1.0:
            raise ParameterError(f"HpccParams.eta = {self.eta} is outside (0, 1]")
        if self.max_stage < 0:
            raise ParameterError(f"HpccParams.max_stage = {self.max_stage} is negative")
        if not 0.0 <= self.rate_ai_fraction < 1.0:
            raise ParameterError(
                f"HpccParams.rate_ai_fraction = {self.rate_ai_fraction} is outside [0, 1)")
        if not 0.0 < self.min_rate_fraction <= 1.0:
            raise ParameterError(
                f"HpccParams.min_rate_fraction = {self.min_rate_fraction} is outside (0, 1]")
        if not self.base_rtt_s > 0.0:
            raise ParameterError(f"HpccParams.base_rtt_s = {self.base_rtt_s} must be positive")
        if not 2 <= self.ts_modulus_ns <= 1 << 64:
            raise ParameterError(f"HpccParams.ts_modulus_ns = {self.ts_modulus_ns} invalid")
        if not 1 <= self.tx_bytes_bits <= 64:
            raise ParameterError(f"HpccParams.tx_bytes_bits = {self.tx_bytes_bits} invalid")


@dataclass(slots=True, kw_only=True)
class RateDecisions:
    """Rates decided for one batch, one entry per row of the batch."""

    flow_idx: np.ndarray
    rate_bps: np.ndarray
    bottleneck_hop: np.ndarray
    """Hop column with the largest u (-1 when no hop could be measured yet)."""
    utilisation: np.ndarray
    """EWMA U of the flow after this sample."""
    updated: np.ndarray
    """False where the sample only primed the per-hop history (first sample, new path)."""
    committed: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    """True where this sample committed Rc and the stage."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HpccStats:
    """What the engine did so far, for logs, ``show`` commands and exporters."""

    samples: int
    active_flows: int
    flows_below_line_rate: int
    telemetry_to_decision: LatencySummary
    telemetry_to_sent: LatencySummary
    decision_to_applied: LatencySummary
    telemetry_to_applied: LatencySummary | None = None
    """Telemetry arrival -> rate applied at the sender (from agent confirmations)."""
    host_to_applied: LatencySummary | None = None
    """Host sink's capture of the telemetry -> rate applied at the sender (end to end)."""


@dataclass(slots=True, kw_only=True)
class HpccState:
    """Per-flow and per-(flow, hop) arrays; row = flow index."""

    max_rate_bps: np.ndarray
    base_rtt_s: np.ndarray
    base_rtt_ns: np.ndarray
    rate_bps: np.ndarray
    rc_bps: np.ndarray
    inc_stage: np.ndarray
    u_ewma: np.ndarray
    last_commit_ns: np.ndarray
    active: np.ndarray
    prev_valid: np.ndarray
    prev_node: np.ndarray
    prev_ts_ns: np.ndarray
    prev_tx_bytes: np.ndarray
    prev_qlen_bytes: np.ndarray
    u_hop: np.ndarray
    rc_hop: np.ndarray
    stage_hop: np.ndarray

    @classmethod
    def empty(cls, n_flows: int) -> HpccState:
        f, h = n_flows, MAX_HOPS
        return cls(
            max_rate_bps=np.zeros(f), base_rtt_s=np.zeros(f),
            base_rtt_ns=np.zeros(f, dtype=np.int64), rate_bps=np.zeros(f),
            rc_bps=np.zeros(f), inc_stage=np.zeros(f, dtype=np.int64), u_ewma=np.zeros(f),
            last_commit_ns=np.zeros(f, dtype=np.int64), active=np.zeros(f, dtype=bool),
            prev_valid=np.zeros((f, h), dtype=bool), prev_node=np.zeros((f, h), dtype=np.uint32),
            prev_ts_ns=np.zeros((f, h), dtype=np.uint64),
            prev_tx_bytes=np.zeros((f, h), dtype=np.uint64), prev_qlen_bytes=np.zeros((f, h)),
            u_hop=np.zeros((f, h)), rc_hop=np.zeros((f, h)),
            stage_hop=np.zeros((f, h), dtype=np.int64))


@dataclass(slots=True, kw_only=True)
class HpccEngine:
    """Vectorised HPCC for a fixed-size flow table.

    ``start_flows`` (re)initialises rows at line rate; ``update`` consumes one
    ``HopSamples`` batch and returns the new rates. Rows of a batch that name the
    same flow are applied in batch order.
    """

    n_flows: int
    params: HpccParams = field(default_factory=HpccParams)
    clock_ns: Callable[[], int] = time.monotonic_ns
    state: HpccState = field(init=False)
    latency: LoopLatency = field(init=False)
    samples_seen: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        if self.n_flows <= 0:
            raise ParameterError(f"HpccEngine.n_flows = {self.n_flows} must be positive")
        self.state = HpccState.empty(self.n_flows)
        self.latency = LoopLatency(n_flows=self.n_flows)

    # ----------------------------------------------------------------- flows
    def start_flows(self, flow_idx: npt.ArrayLike, *, max_rate_bps: npt.ArrayLike,
                    base_rtt_s: npt.ArrayLike | None = None, now_ns: int = 0,
                    initial_rate_bps: npt.ArrayLike | None = None) -> None:
        """(Re)start flows: rate = Rc = initial rate (default: max rate), history cleared."""
        idx = self._check_idx(flow_idx, "start_flows")
        mr = np.broadcast_to(np.asarray(max_rate_bps, dtype=np.float64), idx.shape)
        if np.any(~(mr > 0)):
            raise ParameterError(f"start_flows: max_rate_bps must be positive, got {mr.min()}")
        rtt = np.broadcast_to(np.asarray(
            self.params.base_rtt_s if base_rtt_s is None else base_rtt_s, dtype=np.float64),
            idx.shape)
        if np.any(~(rtt > 0)):
            raise ParameterError(f"start_flows: base_rtt_s must be positive, got {rtt.min()}")
        init = mr if initial_rate_bps is None else np.broadcast_to(
            np.asarray(initial_rate_bps, dtype=np.float64), idx.shape)
        s = self.state
        s.max_rate_bps[idx] = mr
        s.base_rtt_s[idx] = rtt
        s.base_rtt_ns[idx] = np.round(rtt * 1e9).astype(np.int64)
        lo = mr * self.params.min_rate_fraction
        s.rate_bps[idx] = np.clip(init, lo, mr)
        s.rc_bps[idx] = s.rate_bps[idx]
        s.inc_stage[idx] = 0
        s.u_ewma[idx] = 0.0
        s.u_hop[idx] = 0.0
        s.rc_hop[idx] = s.rate_bps[idx][:, None]
        s.stage_hop[idx] = 0
        s.last_commit_ns[idx] = now_ns
        s.active[idx] = True
        s.prev_valid[idx] = False

    def stop_flows(self, flow_idx: npt.ArrayLike) -> None:
        """Forget flows; their rows may be reused by ``start_flows``."""
        idx = self._check_idx(flow_idx, "stop_flows")
        self.state.active[idx] = False
        self.state.prev_valid[idx] = False

    # ---------------------------------------------------------------- update
    def update(self, samples: HopSamples, *,
               commit_mask: npt.ArrayLike | None = None) -> RateDecisions:
        """Apply one telemetry batch; return the rate of every row's flow after it.

        ``commit_mask`` (bool per row): rows allowed to commit Rc.  A flow then commits
        at most once per call, at its first allowed row that is due (once per T) and
        measured a hop; later rows of the call only set the rate.
        """
        idx = self._check_idx(samples.flow_idx, "update")
        if np.any(~self.state.active[idx]):
            bad = int(idx[~self.state.active[idx]][0])
            raise FlowIndexError(f"HpccEngine.update: flow {bad} was not started (start_flows)")
        commit = None if commit_mask is None else np.asarray(commit_mask, dtype=bool)
        if commit is not None and commit.shape != idx.shape:
            raise TelemetryError(f"update: commit_mask shape {commit.shape} != {idx.shape}")
        n = len(samples)
        out = RateDecisions(flow_idx=idx.copy(), rate_bps=np.zeros(n),
                            bottleneck_hop=np.full(n, -1, dtype=np.int64),
                            utilisation=np.zeros(n), updated=np.zeros(n, dtype=bool),
                            committed=np.zeros(n, dtype=bool))
        rounds = occurrence_rounds(idx)
        done = None if commit is None else np.zeros(self.n_flows, dtype=bool)
        if len(rounds) == 1:  # every flow once: no copy of the batch needed
            self._update_unique(samples, rounds[0], out, commit, done)
        else:
            for rows in rounds:
                self._update_unique(samples.take(rows), rows, out,
                                    None if commit is None else commit[rows], done)
        self.samples_seen += n
        self.latency.record_decided(idx, samples.arrival_ns, int(self.clock_ns()))
        return out

    def _update_unique(self, b: HopSamples, rows: np.ndarray, out: RateDecisions,
                       commit: np.ndarray | None, done: np.ndarray | None) -> None:
        p, s = self.params, self.state
        f = b.flow_idx
        hops = b.hops
        present = b.present_mask()
        node = b.node_id
        # whole-row gathers (np.take) are several times faster than 2-D fancy indexing
        old_valid = np.take(s.prev_valid, f, axis=0)
        old_node = np.take(s.prev_node, f, axis=0)
        old_ts = np.take(s.prev_ts_ns, f, axis=0)
        old_tx = np.take(s.prev_tx_bytes, f, axis=0)
        old_q = np.take(s.prev_qlen_bytes, f, axis=0)
        # history is usable where the same switch sat at this hop last time
        prev_ok = old_valid[:, :hops] & (old_node[:, :hops] == node) & present
        dts_ns = delta_mod_n(b.ts_ns, old_ts[:, :hops], p.ts_modulus_ns).astype(np.float64)
        dtx = delta_mod(b.tx_bytes, old_tx[:, :hops], p.tx_bytes_bits).astype(np.float64)
        ok = prev_ok & (dts_ns > 0)
        T = s.base_rtt_s[f]
        q = np.minimum(b.qlen_bytes, old_q[:, :hops]) if p.qlen_use_min \
            else b.qlen_bytes.copy()
        # u per hop; absent or unmeasurable hops become -inf so they never win the argmax
        with np.errstate(divide="ignore", invalid="ignore"):
            q = hop_utilisation(dtx, dts_ns * 1e-9, q, b.line_rate_bps,
                                s.max_rate_bps[f][:, None], T[:, None])
        u = np.where(ok, q, -np.inf)
        any_ok = ok.any(axis=1)
        now = b.arrival_ns
        due = (now - s.last_commit_ns[f]) >= s.base_rtt_ns[f]
        if commit is not None and done is not None:
            due &= commit & ~done[f]
        do_commit = due & any_ok
        if done is not None:
            done[f] |= do_commit
        if p.per_hop_rates:
            new_rate, hop, util = self._per_hop(f, hops, present, prev_ok, ok, u, dts_ns, T,
                                                do_commit)
        else:
            new_rate, hop, util = self._aggregate(f, hops, any_ok, u, dts_ns, T, do_commit)
        apply = any_ok if p.fast_react else do_commit
        s.rate_bps[f] = np.where(apply, new_rate, s.rate_bps[f])
        s.last_commit_ns[f] = np.where(do_commit, now, s.last_commit_ns[f])
        # store this sample as the history of every present hop; clear the rest
        old_valid[:] = False
        old_valid[:, :hops] = present
        old_node[:, :hops] = node
        old_ts[:, :hops] = b.ts_ns
        old_tx[:, :hops] = b.tx_bytes
        old_q[:, :hops] = b.qlen_bytes
        s.prev_valid[f] = old_valid
        s.prev_node[f] = old_node
        s.prev_ts_ns[f] = old_ts
        s.prev_tx_bytes[f] = old_tx
        s.prev_qlen_bytes[f] = old_q

        out.rate_bps[rows] = s.rate_bps[f]
        out.bottleneck_hop[rows] = np.where(any_ok, hop, -1)
        out.utilisation[rows] = util
        out.updated[rows] = any_ok
        out.committed[rows] = do_commit

    def _aggregate(self, f: np.ndarray, hops: int, any_ok: np.ndarray, u: np.ndarray,
                   dts_ns: np.ndarray, T: np.ndarray, do_commit: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One rate per flow from the bottleneck hop (paper; ns-3 MultiRate off)."""
        p, s = self.params, self.state
        if hops:
            hop = np.argmax(u, axis=1)
            u_max = np.where(any_ok, np.take_along_axis(u, hop[:, None], axis=1)[:, 0], 0.0)
            tau_s = np.take_along_axis(dts_ns, hop[:, None], axis=1)[:, 0] * 1e-9
            tau_s = np.where(any_ok, np.minimum(tau_s, T), 0.0)
        else:
            hop = np.zeros(len(f), dtype=np.int64)
            u_max = tau_s = np.zeros(len(f))
        u_ewma = np.where(any_ok, ewma(s.u_ewma[f], u_max, tau_s, T), s.u_ewma[f])
        max_c = u_ewma / p.eta
        stage = s.inc_stage[f]
        mi = multiplicative(max_c, stage, p.max_stage)
        rc = s.rc_bps[f]
        mr = s.max_rate_bps[f]
        rai = mr * p.rate_ai_fraction
        new_rate = np.where(mi, mi_rate(rc, max_c, rai), ai_rate(rc, rai))
        new_rate = bound(new_rate, mr * p.min_rate_fraction, mr)
        new_stage = np.where(mi, 0, stage + 1)
        s.u_ewma[f] = u_ewma
        s.rc_bps[f] = np.where(do_commit, new_rate, rc)
        s.inc_stage[f] = np.where(do_commit, new_stage, stage)
        return new_rate, hop, u_ewma

    def _per_hop(self, f: np.ndarray, hops: int, present: np.ndarray, prev_ok: np.ndarray,
                 ok: np.ndarray, u: np.ndarray, dts_ns: np.ndarray, T: np.ndarray,
                 do_commit: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A reference rate, stage and EWMA per hop; the flow takes the smallest hop
        rate (ns-3 MultiRate). A hop whose switch changed starts from the flow's rate."""
        p, s = self.params, self.state
        mr = s.max_rate_bps[f]
        rai = (mr * p.rate_ai_fraction)[:, None]
        uh = np.take(s.u_hop, f, axis=0)
        rch = np.take(s.rc_hop, f, axis=0)
        sth = np.take(s.stage_hop, f, axis=0)
        fresh = present & ~prev_ok
        u_h = np.where(fresh, 0.0, uh[:, :hops])
        rc_h = np.where(fresh, s.rate_bps[f][:, None], rch[:, :hops])
        st_h = np.where(fresh, 0, sth[:, :hops])
        Tc = T[:, None]
        tau = np.minimum(dts_ns * 1e-9, Tc)
        u_new = np.where(ok, ewma(u_h, np.where(ok, u, 0.0), tau, Tc), u_h)
        c = u_new / p.eta
        mi = multiplicative(c, st_h, p.max_stage)
        r_h = np.where(mi, mi_rate(rc_h, c, rai), ai_rate(rc_h, rai))
        r_h = bound(r_h, (mr * p.min_rate_fraction)[:, None], mr[:, None])
        cand = np.where(ok, r_h, np.where(present, rc_h, np.inf))
        if hops:
            hop = np.argmin(cand, axis=1)
            new_rate = np.minimum(mr, np.take_along_axis(cand, hop[:, None], axis=1)[:, 0])
            util = np.where(ok, u_new, -np.inf).max(axis=1)
        else:
            hop = np.zeros(len(f), dtype=np.int64)
            new_rate, util = mr.copy(), np.zeros(len(f))
        cm = do_commit[:, None] & ok
        uh[:, :hops] = u_new
        rch[:, :hops] = np.where(cm, r_h, rc_h)
        sth[:, :hops] = np.where(cm, np.where(mi, 0, st_h + 1), st_h)
        s.u_hop[f] = uh
        s.rc_hop[f] = rch
        s.stage_hop[f] = sth
        util = np.where(ok.any(axis=1), util, 0.0)
        s.u_ewma[f] = util
        s.rc_bps[f] = np.where(do_commit, new_rate, s.rc_bps[f])
        return new_rate, hop, util

    def stats(self) -> HpccStats:
        """Counters and the control-loop latency summaries."""
        s = self.state
        lat = self.latency.summary()
        return HpccStats(
            samples=self.samples_seen, active_flows=int(s.active.sum()),
            flows_below_line_rate=int((s.active & (s.rate_bps < s.max_rate_bps)).sum()),
            telemetry_to_decision=lat["telemetry_to_decision"],
            telemetry_to_sent=lat["telemetry_to_sent"],
            decision_to_applied=lat["decision_to_applied"],
            telemetry_to_applied=lat["telemetry_to_applied"],
            host_to_applied=lat["host_to_applied"])

    def _check_idx(self, flow_idx: npt.ArrayLike, where: str) -> np.ndarray:
        idx = np.asarray(flow_idx, dtype=np.int64).ravel()
        if idx.size and (idx.min() < 0 or idx.max() >= self.n_flows):
            bad = int(idx[(idx < 0) | (idx >= self.n_flows)][0])
            raise FlowIndexError(
                f"HpccEngine.{where}: flow index {bad} outside 0..{self.n_flows - 1}")
        return idx

