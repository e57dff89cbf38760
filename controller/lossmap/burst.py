"""Burst statistics of a link's losses and a Gilbert-Elliott fit with intervals.

A link's loss process is summarised by its *cycles*: a loss run (burst) of
``loss_len`` packets followed by a delivered run (gap) of ``gap_len`` packets.
Cycles come straight from the link's loss events (event i loses
``received - expected`` packets; ``expected[i+1] - received[i]`` packets arrive
before the next event) or from any per-packet loss sequence.

Model (Gilbert-Elliott with a loss-free good state): states Good and Bad,
P(G->B) = p, P(B->G) = r, a packet in Bad is lost with probability
``loss_in_bad`` (h in some texts is its complement), none is lost in Good.
Fit by Gilbert's method of moments from a = P(loss), b = P(loss | loss before),
c = P(loss at t+2 | losses at t and t+1 relative to loss at t and t+2):

    1 - r = (b^2 - a c) / (b c + a b - 2 a c),  loss_in_bad = b / (1 - r),
    p = a r / (loss_in_bad - a)

falling back to the simple Gilbert model (loss_in_bad = 1) when the three
moments do not admit a solution (e.g. no bursts longer than 2). Confidence
intervals come from a bootstrap over cycles, vectorised over resamples.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from common.loss import LossModel
from controller.lossmap.errors import LossInputError, LossParameterError
from controller.lossmap.links import LossEvents
from controller.lossmap.psn import PsnGaps

_MASK = (1 << 32) - 1


@dataclass(slots=True, kw_only=True)
class Cycles:
    """Burst and gap lengths, one row per loss burst (gap = delivered run after it)."""

    loss_len: np.ndarray
    gap_len: np.ndarray
    lead_gap: int = 0
    """Delivered packets before the first burst (not part of any cycle)."""

    def __post_init__(self) -> None:
        self.loss_len = np.asarray(self.loss_len, dtype=np.int64)
        self.gap_len = np.asarray(self.gap_len, dtype=np.int64)
        if self.loss_len.shape != self.gap_len.shape or self.loss_len.ndim != 1:
            raise LossInputError(f"Cycles: loss_len {self.loss_len.shape} and gap_len "
                                 f"{self.gap_len.shape} must be equal 1-D")
        if self.loss_len.size and (self.loss_len.min() < 1 or self.gap_len.min() < 0):
            raise LossInputError("Cycles: bursts need >= 1 lost packet, gaps >= 0 packets")

    @property
    def packets(self) -> int:
        return int(self.loss_len.sum() + self.gap_len.sum() + self.lead_gap)


def cycles_from_sequence(lost: npt.ArrayLike) -> Cycles:
    """Cycles of a per-packet loss indicator sequence (True = lost)."""
    x = np.asarray(lost, dtype=bool)
    if x.ndim != 1:
        raise LossInputError(f"cycles_from_sequence: expected 1-D, got shape {x.shape}")
    if x.size == 0 or not x.any():
        none = np.zeros(0, dtype=np.int64)
        return Cycles(loss_len=none, gap_len=none, lead_gap=int(x.size))
    edges = np.flatnonzero(np.diff(np.r_[0, x.astype(np.int8), 0]))
    starts, ends = edges[0::2], edges[1::2]           # loss runs [start, end)
    next_start = np.r_[starts[1:], x.size]
    return Cycles(loss_len=ends - starts, gap_len=next_start - ends, lead_gap=int(starts[0]))


def cycles_from_events(events: LossEvents, link: int) -> Cycles:
    """Cycles of one link from its loss events (reordering events skipped).

    The gap after the last event is unknown; it is set to 0 (pass counters to the
    caller's loss rate if the tail matters).
    """
    m = (events.link_idx == link) & ~events.reordered()
    order = np.argsort(events.ts_ns[m], kind="stable")
    exp, rcv = events.expected[m][order], events.received[m][order]
    loss = (rcv - exp) & _MASK
    keep = loss > 0
    exp, rcv, loss = exp[keep], rcv[keep], loss[keep]
    gap = np.r_[(exp[1:] - rcv[:-1]) & _MASK, 0] if loss.size else np.zeros(0, np.int64)
    return Cycles(loss_len=loss, gap_len=gap)


def cycles_from_psn_gaps(gaps: PsnGaps, flow: int) -> Cycles:
    """Cycles of one flow's path from its PSN gaps (bursts lost end to end).

    The delivered run after a gap reaches to the next gap's first lost PSN; the
    run after the last gap is unknown (0). For links without sequence numbers this
    is the burst structure the flow saw across its whole path.
    """
    m = gaps.flow_idx == flow
    order = np.argsort(gaps.ts_ns[m], kind="stable")
    first, lost = gaps.first_lost_psn[m][order], gaps.lost[m][order]
    if lost.size == 0:
        none = np.zeros(0, dtype=np.int64)
        return Cycles(loss_len=none, gap_len=none)
    gap = np.r_[(first[1:] - (first[:-1] + lost[:-1])) % (1 << 24), 0]
    return Cycles(loss_len=lost, gap_len=gap)


def run_histogram(lengths: npt.ArrayLike, max_len: int = 64) -> np.ndarray:
    """Counts of run lengths 1..max_len; index 0 unused, the last bin holds >= max_len."""
    v = np.asarray(lengths, dtype=np.int64)
    return np.bincount(np.clip(v, 0, max_len), minlength=max_len + 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Interval:
    value: float
    low: float
    high: float

    def contains(self, x: float) -> bool:
        return self.low <= x <= self.high


@dataclass(frozen=True, slots=True, kw_only=True)
class GilbertElliottFit:
    """A Gilbert-Elliott model fitted to observed losses, each parameter with a bootstrap
    confidence interval (:attr:`model` is the point estimate as a :class:`LossModel`)."""

    p: Interval
    r: Interval
    loss_in_bad: Interval
    loss_rate: Interval
    mean_burst_len: float
    packets: int
    bursts: int
    simple: bool
    """True when the fit fell back to loss_in_bad = 1."""

    @property
    def model(self) -> LossModel:
        """The fitted values as the project's loss model (:mod:`common.loss`; h = 1 -
        loss_in_bad, k = 1): what a link emulation would run to reproduce the fit."""
        return LossModel.gilbert_elliott(p=self.p.value, r=self.r.value,
                                         h=1.0 - self.loss_in_bad.value)


def _moments(n, n1, n11, n1x1, n111):
    """a, b, c from pattern counts (arrays broadcast)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        a = n1 / n
        b = np.where(n1 > 0, n11 / n1, np.nan)
        c = np.where(n1x1 > 0, n111 / n1x1, np.nan)
    return a, b, c


def _solve(a, b, c):
    """(p, r, loss_in_bad, simple) from moments, element-wise."""
    with np.errstate(invalid="ignore", divide="ignore"):
        s = (b * b - a * c) / (b * c + a * b - 2 * a * c)
        d = b / s
        r = 1 - s
        p = a * r / (d - a)
        ok = (s > 0) & (s < 1) & (d > a) & (d <= 1) & (p > 0) & (p < 1) & np.isfinite(p)
        r_simple = 1 - b
        p_simple = a * r_simple / (1 - a)
    return (np.where(ok, p, p_simple), np.where(ok, r, r_simple), np.where(ok, d, 1.0), ~ok)


def _cycle_counts(cy: Cycles) -> np.ndarray:
    """Per cycle: packets, losses, (1,1) pairs, (1,?,1) pairs, (1,1,1) triples."""
    L, G = cy.loss_len, cy.gap_len
    n111 = np.maximum(L - 2, 0)
    # a single delivered packet between bursts joins them as 1 0 1 (except the last gap)
    bridge = (G == 1) & (np.arange(L.size) < L.size - 1)
    return np.stack([L + G, L, L - 1, n111 + bridge, n111], axis=1).astype(np.float64)


def fit_gilbert_elliott(cy: Cycles, *, confidence: float = 0.95, resamples: int = 400,
                        seed: int = 0) -> GilbertElliottFit:
    """Fit p, r and loss-in-bad to ``cy``; intervals by bootstrap over cycles."""
    if not 0 < confidence < 1:
        raise LossParameterError(f"fit_gilbert_elliott: confidence = {confidence} not in (0,1)")
    if resamples < 10:
        raise LossParameterError(f"fit_gilbert_elliott: resamples = {resamples} < 10")
    if cy.loss_len.size < 2:
        raise LossInputError(f"fit_gilbert_elliott: {cy.loss_len.size} bursts; need at least 2 "
                             "to fit a burst model")
    counts = _cycle_counts(cy)
    total = counts.sum(axis=0)
    total[0] += cy.lead_gap
    a, b, c = _moments(*total)
    p, r, d, simple = _solve(a, b, c)
    rng = np.random.default_rng(seed)
    k = counts.shape[0]
    pick = rng.integers(0, k, size=(resamples, k))
    boot = counts[pick].sum(axis=1)                                       # (R, 5)
    boot[:, 0] += cy.lead_gap
    ba, bb, bc = _moments(*boot.T)
    bp, br, bd, _ = _solve(ba, bb, bc)
    lo_q, hi_q = 50 * (1 - confidence), 50 * (1 + confidence)

    def iv(value, samples) -> Interval:
        s = samples[np.isfinite(samples)]
        if s.size == 0:
            return Interval(value=float(value), low=float("nan"), high=float("nan"))
        lo, hi = np.percentile(s, [lo_q, hi_q])
        return Interval(value=float(value), low=float(min(lo, value)), high=float(max(hi, value)))

    return GilbertElliottFit(
        p=iv(p, bp), r=iv(r, br), loss_in_bad=iv(d, bd), loss_rate=iv(a, ba),
        mean_burst_len=float(cy.loss_len.mean()), packets=int(total[0]),
        bursts=int(cy.loss_len.size), simple=bool(simple))


def simulate_gilbert_elliott(*, n: int, p: float, r: float, loss_in_bad: float = 1.0,
                             seed: int = 0) -> np.ndarray:
    """A per-packet loss sequence (True = lost) drawn from the model, started in its
    stationary distribution. Vectorised: state sojourns are geometric."""
    for name, v in (("p", p), ("r", r), ("loss_in_bad", loss_in_bad)):
        if not 0 < v <= 1:
            raise LossParameterError(f"simulate_gilbert_elliott: {name} = {v} not in (0, 1]")
    rng = np.random.default_rng(seed)
    mean_cycle = 1 / p + 1 / r
    m = int(n / mean_cycle * 1.2) + 16
    good = rng.geometric(p, size=m)
    bad = rng.geometric(r, size=m)
    while good.sum() + bad.sum() < n:
        good = np.r_[good, rng.geometric(p, size=m)]
        bad = np.r_[bad, rng.geometric(r, size=m)]
    state = np.repeat(np.tile([0, 1], good.size), np.column_stack([good, bad]).ravel())
    start = rng.integers(0, good[0] + bad[0])  # random phase into the first cycle
    state = state[start:start + n]
    return (state == 1) & (rng.random(n) < loss_in_bad)
