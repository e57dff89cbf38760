"""Per-flow losses from RoCEv2 PSN gaps seen by the receiving host.

Host records carry (flow, capture time, PSN); PSNs are 24 bits and wrap. Per
flow the PSN is unwrapped (each step read as a signed 24-bit difference) and
compared with the highest PSN seen so far: a packet beyond it by k > 1 reveals
k - 1 lost packets; a packet at or below it is a retransmission or reordering
and reveals nothing. So each dropped PSN counts once, whatever the recovery
scheme (go-back-N, selective repeat) resends later.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from controller.lossmap.bins import TimeBins, add_at
from controller.lossmap.errors import LossInputError

PSN_BITS = 24
_PSN_MOD = 1 << PSN_BITS
_PSN_HALF = 1 << (PSN_BITS - 1)


@dataclass(slots=True, kw_only=True)
class PsnGaps:
    """Loss gaps found in host records, one row per gap."""

    flow_idx: np.ndarray
    ts_ns: np.ndarray
    """Capture time of the packet that revealed the gap."""
    first_lost_psn: np.ndarray
    lost: np.ndarray


@dataclass(slots=True, kw_only=True)
class FlowLossMap:
    """Flows x time bins: packets lost (from gaps) and delivered (records seen)."""

    bins: TimeBins
    lost: np.ndarray
    delivered: np.ndarray
    gaps: PsnGaps

    def loss_rate(self) -> np.ndarray:
        tot = self.lost + self.delivered
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(tot > 0, self.lost / tot, np.nan)


def psn_gaps(*, flow_idx: npt.ArrayLike, ts_ns: npt.ArrayLike, psn: npt.ArrayLike) -> PsnGaps:
    """Find PSN gaps per flow; records may come in any order (sorted by flow, time)."""
    f = np.asarray(flow_idx, dtype=np.int64)
    t = np.asarray(ts_ns, dtype=np.int64)
    p = np.asarray(psn, dtype=np.int64)
    if not (f.ndim == t.ndim == p.ndim == 1 and f.size == t.size == p.size):
        raise LossInputError(
            f"psn_gaps: flow_idx {f.shape}, ts_ns {t.shape}, psn {p.shape} must be equal 1-D")
    if p.size and (p.min() < 0 or p.max() >= _PSN_MOD):
        bad = int(p[(p < 0) | (p >= _PSN_MOD)][0])
        raise LossInputError(f"psn_gaps: PSN {bad} outside 0..2^24-1")
    empty = np.zeros(0, dtype=np.int64)
    if f.size < 2:
        return PsnGaps(flow_idx=empty, ts_ns=empty, first_lost_psn=empty, lost=empty)
    order = np.lexsort((t, f))
    f, t, p = f[order], t[order], p[order]
    new_flow = np.r_[True, f[1:] != f[:-1]]
    step = (np.diff(p) + _PSN_HALF) % _PSN_MOD - _PSN_HALF  # signed 24-bit difference
    step = np.r_[0, step]
    step[new_flow] = 0
    unwrapped = np.cumsum(step)
    # restart each flow at 0 so one large offset per flow keeps the running max inside it
    first = np.maximum.accumulate(np.where(new_flow, np.arange(f.size), 0))
    unwrapped = unwrapped - unwrapped[first]
    group = np.cumsum(new_flow) - 1
    offset = group.astype(np.int64) << 40
    run_max = np.maximum.accumulate(unwrapped + offset) - offset
    prev_max = np.r_[0, run_max[:-1]]
    jump = np.where(new_flow, 0, unwrapped - prev_max)
    lost = np.maximum(jump - 1, 0)
    at = np.flatnonzero(lost > 0)
    return PsnGaps(flow_idx=f[at], ts_ns=t[at], first_lost_psn=(p[at] - lost[at]) % _PSN_MOD,
                   lost=lost[at])


def flow_loss_map(*, bins: TimeBins, n_flows: int, flow_idx: npt.ArrayLike,
                  ts_ns: npt.ArrayLike, psn: npt.ArrayLike) -> FlowLossMap:
    """Flows x bins map of PSN-gap losses and delivered packets."""
    f = np.asarray(flow_idx, dtype=np.int64)
    if f.size and (f.min() < 0 or f.max() >= n_flows):
        raise LossInputError(f"flow_loss_map: flow index {int(f.max())} outside 0..{n_flows-1}")
    gaps = psn_gaps(flow_idx=f, ts_ns=ts_ns, psn=psn)
    shape = (n_flows, bins.n_bins)
    lost, deliv = np.zeros(shape), np.zeros(shape)
    add_at(deliv, f, bins.index(ts_ns), 1)
    add_at(lost, gaps.flow_idx, bins.index(gaps.ts_ns), gaps.lost)
    return FlowLossMap(bins=bins, lost=lost, delivered=deliv, gaps=gaps)
