"""Scalar, one-flow-at-a-time HPCC: the readable reference for ``HpccEngine``.

Same bookkeeping as the vectorised engine written as plain Python loops over
flows and hops, on the same formulas (:mod:`traffic.cc.hpcc_math`, with floats). Used to cross-check the engine and as the baseline the
benchmark compares against; not meant for production use.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from controller.cc.hpcc import HpccParams
from traffic.cc.hpcc_math import ai_rate, bound, ewma, hop_utilisation, mi_rate, multiplicative


@dataclass(slots=True)
class HopHistory:
    node: int
    ts_ns: int
    tx_bytes: int
    qlen_bytes: float


@dataclass(slots=True)
class FlowRef:
    max_rate_bps: float
    base_rtt_s: float
    rate_bps: float
    rc_bps: float
    inc_stage: int = 0
    u_ewma: float = 0.0
    last_commit_ns: int = 0
    hops: list[HopHistory | None] = field(default_factory=list)
    hop_u: list[float] = field(default_factory=lambda: [0.0] * 8)
    hop_rc: list[float] = field(default_factory=list)
    hop_stage: list[int] = field(default_factory=lambda: [0] * 8)

    def __post_init__(self) -> None:
        if not self.hop_rc:
            self.hop_rc = [self.rc_bps] * 8


def reference_update(flow: FlowRef, p: HpccParams, *, arrival_ns: int, node: list[int],
                     ts_ns: list[int], qlen_bytes: list[float], tx_bytes: list[int],
                     line_rate_bps: list[float]) -> tuple[float, int]:
    """Apply one sample to ``flow``; return (rate_bps, bottleneck hop or -1)."""
    best_u, best_tau_s, best_hop = -1.0, 0.0, -1
    new_hist: list[HopHistory | None] = []
    t_mod, b_mod = p.ts_modulus_ns, 1 << p.tx_bytes_bits
    measured: list[tuple[int, float, float]] = []  # (hop, u, tau_s)
    fresh: list[int] = []
    for h in range(len(ts_ns)):
        prev = flow.hops[h] if h < len(flow.hops) else None
        if prev is not None and prev.node == node[h]:
            dt_ns = (ts_ns[h] - prev.ts_ns) % t_mod
            if dt_ns > 0:
                dtx = (tx_bytes[h] - prev.tx_bytes) % b_mod
                q = min(qlen_bytes[h], prev.qlen_bytes) if p.qlen_use_min else qlen_bytes[h]
                u = hop_utilisation(dtx, dt_ns * 1e-9, q, line_rate_bps[h],
                                    flow.max_rate_bps, flow.base_rtt_s)
                measured.append((h, u, dt_ns * 1e-9))
                if u > best_u:
                    best_u, best_tau_s, best_hop = u, dt_ns * 1e-9, h
        else:
            fresh.append(h)
        new_hist.append(HopHistory(node[h], ts_ns[h], tx_bytes[h], qlen_bytes[h]))
    flow.hops = new_hist
    if p.per_hop_rates:
        return _per_hop(flow, p, arrival_ns, len(ts_ns), measured, fresh)
    if best_hop < 0:
        return flow.rate_bps, -1
    T = flow.base_rtt_s
    tau = min(best_tau_s, T)
    flow.u_ewma = ewma(flow.u_ewma, best_u, tau, T)
    max_c = flow.u_ewma / p.eta
    rai = flow.max_rate_bps * p.rate_ai_fraction
    if multiplicative(max_c, flow.inc_stage, p.max_stage):
        new_rate = mi_rate(flow.rc_bps, max_c, rai)
        new_stage = 0
    else:
        new_rate = ai_rate(flow.rc_bps, rai)
        new_stage = flow.inc_stage + 1
    new_rate = bound(new_rate, flow.max_rate_bps * p.min_rate_fraction, flow.max_rate_bps)
    flow.rate_bps = new_rate
    if arrival_ns - flow.last_commit_ns >= int(T * 1e9):
        flow.rc_bps = new_rate
        flow.inc_stage = new_stage
        flow.last_commit_ns = arrival_ns
    return new_rate, best_hop


def _per_hop(flow: FlowRef, p: HpccParams, arrival_ns: int, n_hops: int,
             measured: list[tuple[int, float, float]], fresh: list[int]) -> tuple[float, int]:
    """ns-3 MultiRate: Rc, stage and U per hop; the flow takes the smallest hop rate."""
    for h in fresh:  # a new switch at this hop starts from the flow's current rate
        flow.hop_u[h], flow.hop_rc[h], flow.hop_stage[h] = 0.0, flow.rate_bps, 0
    if not measured:
        return flow.rate_bps, -1
    T = flow.base_rtt_s
    rai = flow.max_rate_bps * p.rate_ai_fraction
    lo = flow.max_rate_bps * p.min_rate_fraction
    cand: dict[int, float] = {h: flow.hop_rc[h] for h in range(n_hops)}
    new: dict[int, tuple[float, int]] = {}
    for h, u, tau_s in measured:
        tau = min(tau_s, T)
        flow.hop_u[h] = ewma(flow.hop_u[h], u, tau, T)
        c = flow.hop_u[h] / p.eta
        if multiplicative(c, flow.hop_stage[h], p.max_stage):
            r, st = mi_rate(flow.hop_rc[h], c, rai), 0
        else:
            r, st = ai_rate(flow.hop_rc[h], rai), flow.hop_stage[h] + 1
        r = bound(r, lo, flow.max_rate_bps)
        cand[h] = r
        new[h] = (r, st)
    hop = min(cand, key=lambda h: (cand[h], h))
    rate = min(flow.max_rate_bps, cand[hop])
    flow.rate_bps = rate
    if arrival_ns - flow.last_commit_ns >= round(T * 1e9):
        for h, (r, st) in new.items():
            flow.hop_rc[h], flow.hop_stage[h] = r, st
        flow.rc_bps = rate
        flow.last_commit_ns = arrival_ns
    return rate, hop
