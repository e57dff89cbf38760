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


def _check(f: np.ndarray, t: np.ndarray, p: np.ndarray, where: str) -> None:
    if not (f.ndim == t.ndim == p.ndim == 1 and f.size == t.size == p.size):
        raise LossInputError(
            f"{where}: flow_idx {f.shape}, ts_ns {t.shape}, psn {p.shape} must be equal 1-D")
    if p.size and (p.min() < 0 or p.max() >= _PSN_MOD):
        bad = int(p[(p < 0) | (p >= _PSN_MOD)][0])
        raise LossInputError(f"{where}: PSN {bad} outside 0..2^24-1")


@dataclass(slots=True, kw_only=True)
class _Scan:
    """Records sorted by (flow, seed first, time) with the gap each one reveals."""

    f: np.ndarray
    t: np.ndarray
    p: np.ndarray
    seed: np.ndarray
    lost: np.ndarray
    last: np.ndarray
    """Index of each flow's last record."""
    max_psn: np.ndarray
    """Highest PSN seen per flow (at ``last``), modulo 2^24."""


def _scan(f: np.ndarray, t: np.ndarray, p: np.ndarray, seed: np.ndarray) -> _Scan:
    """Unwrap PSNs per flow and find forward jumps beyond the running maximum.

    ``seed`` marks records standing for earlier batches (a flow's highest PSN so
    far): they sort first in their flow and only serve as the base.
    """
    order = np.lexsort((t, ~seed, f))
    f, t, p, seed = f[order], t[order], p[order], seed[order]
    new_flow = np.r_[True, f[1:] != f[:-1]]
    step = np.r_[0, (np.diff(p) + _PSN_HALF) % _PSN_MOD - _PSN_HALF]  # signed 24-bit steps
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
    last = np.r_[np.flatnonzero(new_flow)[1:] - 1, f.size - 1] if f.size else \
        np.zeros(0, dtype=np.int64)
    max_psn = (p[first[last]] + run_max[last]) % _PSN_MOD if f.size else last
    return _Scan(f=f, t=t, p=p, seed=seed, lost=lost, last=last, max_psn=max_psn)


def _gaps(sc: _Scan) -> PsnGaps:
    at = np.flatnonzero(sc.lost > 0)
    return PsnGaps(flow_idx=sc.f[at], ts_ns=sc.t[at],
                   first_lost_psn=(sc.p[at] - sc.lost[at]) % _PSN_MOD, lost=sc.lost[at])


def psn_gaps(*, flow_idx: npt.ArrayLike, ts_ns: npt.ArrayLike, psn: npt.ArrayLike) -> PsnGaps:
    """Find PSN gaps per flow; records may come in any order (sorted by flow, time)."""
    f = np.asarray(flow_idx, dtype=np.int64)
    t = np.asarray(ts_ns, dtype=np.int64)
    p = np.asarray(psn, dtype=np.int64)
    _check(f, t, p, "psn_gaps")
    return _gaps(_scan(f, t, p, np.zeros(f.size, dtype=bool)))


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
