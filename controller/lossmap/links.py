"""Exact per-link losses per time bin from link sequence counters and loss events.

Two data-plane sources (formats/FORMATS.md, link sequence header), both kept by the
switch receiving on the link:

* counters read periodically (``LinkCounters``): packets received on the link
  (the ingress port counter) and packets lost on it (the ``link_lost_packets``
  register), cumulative modulo 2^``counter_bits`` (64 by default). The lost
  counter is *net*: a late packet takes its loss back, so it may step down;
  a received counter that steps down means the switch restarted;
* loss events pushed as they happen (``LossEvents``, the link loss digest):
  (link, time, expected, received) -- packets ``expected .. received-1`` were
  lost. A jump back (more than 2^31 forward) is reordering; a jump of
  ``resync_gap`` or more is a neighbour restart, not loss (the data plane
  resynchronises there too).

Either source alone gives exact counts; counters are exact net of reordering,
events carry the time of each loss. When both cover a link, ``prefer`` picks
which one gives the losses; counters still give the delivered packets.
"""
from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from controller.lossmap.bins import TimeBins, add_at
from controller.lossmap.errors import LossInputError

SEQ_BITS = 32
_HALF = 1 << (SEQ_BITS - 1)
_MASK = (1 << SEQ_BITS) - 1


def _arr(v: npt.ArrayLike, dtype: type, name: str, where: str) -> np.ndarray:
    a = np.asarray(v)
    if not isinstance(v, np.ndarray) and a.dtype.kind == "f" and np.issubdtype(dtype, np.integer) \
            and np.all(np.isfinite(a)) and np.all(a == np.floor(a)):
        # a list of Python ints beyond int64 (64-bit counters) is read as float64:
        # convert straight to the target type so no precision is lost
        try:
            a = np.asarray(v, dtype=dtype)
        except (OverflowError, ValueError, TypeError):
            pass
    if a.ndim != 1:
        raise LossInputError(f"{where}.{name}: expected a 1-D array, got shape {a.shape}")
    if a.dtype.kind == "f" and np.issubdtype(dtype, np.integer) and (
            np.any(~np.isfinite(a)) or np.any(a != np.floor(a))):
        raise LossInputError(f"{where}.{name}: non-integral values")
    if np.issubdtype(dtype, np.unsignedinteger) and a.dtype.kind in "if" and a.size \
            and a.min() < 0:
        raise LossInputError(f"{where}.{name}: negative value {a.min()} in a counter")
    return a.astype(dtype, copy=False)


RESYNC_GAP = 0x100000
"""Forward jumps this large are restarts, not loss (data plane LINK_SEQ_RESYNC_GAP)."""


@dataclass(slots=True, kw_only=True)
class LinkCounters:
    """Cumulative per-link counters sampled over time (any order)."""

    link_idx: np.ndarray
    ts_ns: np.ndarray
    rx_packets: np.ndarray
    lost_packets: np.ndarray
    counter_bits: int = 64

    def __post_init__(self) -> None:
        w = "LinkCounters"
        if not 8 <= self.counter_bits <= 64:
            raise LossInputError(f"{w}.counter_bits = {self.counter_bits} outside 8..64")
        self.link_idx = _arr(self.link_idx, np.int64, "link_idx", w)
        self.ts_ns = _arr(self.ts_ns, np.int64, "ts_ns", w)
        self.rx_packets = _arr(self.rx_packets, np.uint64, "rx_packets", w)
        self.lost_packets = _arr(self.lost_packets, np.uint64, "lost_packets", w)
        n = self.link_idx.size
        for name in ("ts_ns", "rx_packets", "lost_packets"):
            if getattr(self, name).size != n:
                raise LossInputError(f"{w}.{name}: {getattr(self, name).size} values, "
                                     f"link_idx has {n}")


@dataclass(slots=True, kw_only=True)
class LossEvents:
    """Forward jumps of the link sequence seen by the receiving switch."""

    link_idx: np.ndarray
    ts_ns: np.ndarray
    expected: np.ndarray
    received: np.ndarray

    def __post_init__(self) -> None:
        w = "LossEvents"
        self.link_idx = _arr(self.link_idx, np.int64, "link_idx", w)
        self.ts_ns = _arr(self.ts_ns, np.int64, "ts_ns", w)
        self.expected = _arr(self.expected, np.int64, "expected", w)
        self.received = _arr(self.received, np.int64, "received", w)
        n = self.link_idx.size
        for name in ("ts_ns", "expected", "received"):
            if getattr(self, name).size != n:
                raise LossInputError(f"{w}.{name}: {getattr(self, name).size} values, "
                                     f"link_idx has {n}")
        for name in ("expected", "received"):
            a = getattr(self, name)
            if a.size and (a.min() < 0 or a.max() > _MASK):
                raise LossInputError(f"{w}.{name}: value outside 0..2^32-1")

    def gap(self, resync_gap: int = RESYNC_GAP) -> np.ndarray:
        """Packets lost per event (0 for reordering and for resynchronisations)."""
        d = (self.received - self.expected) & _MASK
        return np.where(d < min(resync_gap, _HALF), d, 0)

    def reordered(self) -> np.ndarray:
        """True where the event is a jump back (reordering), not a loss."""
        d = (self.received - self.expected) & _MASK
        return d >= _HALF

    def resynced(self, resync_gap: int = RESYNC_GAP) -> np.ndarray:
        """True where the jump forward is so large the neighbour must have restarted."""
        d = (self.received - self.expected) & _MASK
        return (d >= resync_gap) & (d < _HALF)


class Source:
    """Where a link's numbers in a ``LinkLossMap`` come from (values of ``source``)."""

    NONE = 0
    COUNTER = 1
    EVENT = 2
    VOTE = 3
    NAMES = ("none", "counter", "event", "vote")


@dataclass(slots=True, kw_only=True)
class LinkLossMap:
    """Links x time bins: packets lost and delivered, and where each row came from."""

    bins: TimeBins
    lost: np.ndarray
    delivered: np.ndarray
    source: np.ndarray
    reordered: np.ndarray

    @property
    def n_links(self) -> int:
        return int(self.lost.shape[0])

    def loss_rate(self) -> np.ndarray:
        """lost / (lost + delivered) per cell; NaN where nothing was seen."""
        tot = self.lost + self.delivered
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(tot > 0, self.lost / tot, np.nan)

    def total_lost(self) -> np.ndarray:
        return self.lost.sum(axis=1)

    def loss_rate_ci(self, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Wilson score interval (low, high) of every cell's loss rate; NaN where
        nothing was seen. It treats losses as independent, so bursty links have
        wider true intervals: ``fit_gilbert_elliott`` gives those per link."""
        return wilson_interval(np.maximum(self.lost, 0), self.lost + self.delivered, confidence)


def wilson_interval(k: npt.ArrayLike, n: npt.ArrayLike,
                    confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval for k successes out of n, element-wise (NaN where n = 0)."""
    if not 0 < confidence < 1:
        raise LossInputError(f"wilson_interval: confidence = {confidence} not in (0, 1)")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    k_ = np.asarray(k, dtype=np.float64)
    n_ = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k_ / n_
        den = 1 + z * z / n_
        mid = (p + z * z / (2 * n_)) / den
        half = z * np.sqrt(p * (1 - p) / n_ + z * z / (4 * n_ * n_)) / den
    lo = np.where(n_ > 0, np.clip(mid - half, 0, 1), np.nan)
    hi = np.where(n_ > 0, np.clip(mid + half, 0, 1), np.nan)
    return lo, hi


def _counter_deltas(c: LinkCounters) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per consecutive sample pair of a link: (link, ts of later sample, drx, dlost)."""
    order = np.lexsort((c.ts_ns, c.link_idx))
    link, ts = c.link_idx[order], c.ts_ns[order]
    rx, lost = c.rx_packets[order], c.lost_packets[order]
    same = link[1:] == link[:-1]
    drx = _signed_delta(rx[1:], rx[:-1], c.counter_bits)
    dlost = _signed_delta(lost[1:], lost[:-1], c.counter_bits)
    # received count went back: the switch restarted, its counters count from zero
    restart = drx < 0
    drx = np.where(restart, rx[1:].astype(np.int64), drx)
    dlost = np.where(restart, lost[1:].astype(np.int64), dlost)
    return link[1:][same], ts[1:][same], drx[same], dlost[same]


def _signed_delta(new: np.ndarray, old: np.ndarray, bits: int) -> np.ndarray:
    """``new - old`` modulo 2^bits, read as a signed number (int64)."""
    with np.errstate(over="ignore"):
        d = new.astype(np.uint64) - old.astype(np.uint64)
    if bits == 64:
        return d.view(np.int64)
    d &= np.uint64((1 << bits) - 1)
    di = d.astype(np.int64)
    return np.where(di >= 1 << (bits - 1), di - (1 << bits), di)


def _delivered_from_events(ev: LossEvents, bins: TimeBins, deliv: np.ndarray,
                           skip: np.ndarray | None) -> None:
    """Packets delivered between consecutive events of a link: from one event's
    received number (that packet arrived) up to the next event's expected number."""
    order = np.lexsort((ev.ts_ns, ev.link_idx))
    link, ts = ev.link_idx[order], ev.ts_ns[order]
    exp, rcv = ev.expected[order], ev.received[order]
    same = link[1:] == link[:-1]
    span = (exp[1:] - rcv[:-1]) & _MASK
    span = np.where(span <= _HALF, span, 0)
    keep = same if skip is None else same & ~np.isin(link[1:], skip)
    add_at(deliv, link[1:][keep], bins.index(ts[1:][keep]), span[keep])


def link_loss_map(*, bins: TimeBins, n_links: int, counters: LinkCounters | None = None,
                  events: LossEvents | None = None,
                  event_links: npt.ArrayLike | None = None, prefer: str = "counters",
                  resync_gap: int = RESYNC_GAP) -> LinkLossMap:
    """Build the exact link x bin map from counters and/or events.

    Counter deltas land in the bin of the later sample of each pair; event losses
    in the bin of the event. ``event_links`` lists the links whose receiving switch
    reports loss events (a monitored link without events lost nothing); default:
    the links that appear in ``events``. For links with events but no counters,
    delivered packets are the sequence span between consecutive events. Links
    with both sources take their losses from ``prefer`` ("counters": net of
    reordering; "events": exact timing). Counter cells can be negative when late
    packets in a bin take back losses of an earlier one. Rows without any source
    stay zero with source NONE.
    """
    if prefer not in ("counters", "events"):
        raise LossInputError(f"link_loss_map: prefer = {prefer!r}; use 'counters' or 'events'")
    shape = (n_links, bins.n_bins)
    lost_c, deliv, lost_e = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    reord = np.zeros(shape)
    source = np.zeros(n_links, dtype=np.int8)
    for name, src in (("counters", counters), ("events", events)):
        if src is not None and src.link_idx.size and (
                src.link_idx.min() < 0 or src.link_idx.max() >= n_links):
            bad = int(src.link_idx[(src.link_idx < 0) | (src.link_idx >= n_links)][0])
            raise LossInputError(f"link_loss_map: {name} name link {bad}, outside "
                                 f"0..{n_links - 1}")
    if counters is not None:
        link, ts, drx, dlost = _counter_deltas(counters)
        b = bins.index(ts)
        add_at(deliv, link, b, drx)
        add_at(lost_c, link, b, dlost)
        source[np.unique(counters.link_idx)] = Source.COUNTER
    if events is not None:
        b = bins.index(events.ts_ns)
        add_at(lost_e, events.link_idx, b, events.gap(resync_gap))
        add_at(reord, events.link_idx, b, events.reordered())
        covered = np.unique(events.link_idx) if event_links is None else \
            np.asarray(event_links, dtype=np.int64)
        source[covered] = Source.EVENT
        if counters is None or not np.all(np.isin(events.link_idx, counters.link_idx)):
            _delivered_from_events(events, bins, deliv,
                                   skip=None if counters is None else counters.link_idx)
    has_counters = np.zeros(n_links, dtype=bool)
    if counters is not None:
        has_counters[np.unique(counters.link_idx)] = True
    if prefer == "counters":
        source[has_counters] = Source.COUNTER
    use_events = source == Source.EVENT
    lost = np.where(use_events[:, None], lost_e, lost_c)
    return LinkLossMap(bins=bins, lost=lost, delivered=deliv, source=source, reordered=reord)
