"""Loss maps kept up to date as counters, digests and host records arrive.

The batch functions (``link_loss_map``, ``flow_loss_map``) see one batch at a
time; in a running controller counters are polled, digests trickle in and host
records come in agent batches, so differences must reach back to the previous
batch. The streams keep, per link and per flow, the last value seen (counter
sample, last received link sequence, highest PSN) and feed it back as the base
of the next batch, and accumulate into a ring of the last ``n_bins`` time bins.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from controller.lossmap.bins import TimeBins, add_at
from controller.lossmap.errors import LossInputError, LossParameterError
from controller.lossmap.links import (
    _HALF,
    _MASK,
    RESYNC_GAP,
    LinkCounters,
    LinkLossMap,
    LossEvents,
    Source,
    _counter_deltas,
)
from controller.lossmap.psn import FlowLossMap, PsnGaps, _check, _gaps, _scan


@dataclass(slots=True, kw_only=True)
class BinRing:
    """Named (rows x n_bins) accumulators over a sliding window of time bins.

    Absolute bin ``k`` covers ``[origin_ns + k * bin_ns, origin_ns + (k+1) * bin_ns)``;
    the window ends at the newest bin seen. Values older than the window are
    counted in ``late_values`` and dropped.
    """

    n_rows: int
    bin_ns: int
    n_bins: int
    names: tuple[str, ...]
    origin_ns: int = 0
    head: int = field(init=False, default=-(1 << 62))
    late_values: int = field(init=False, default=0)
    _data: dict[str, np.ndarray] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.bin_ns <= 0 or self.n_bins <= 0 or self.n_rows <= 0:
            raise LossParameterError(
                f"BinRing: bin_ns {self.bin_ns}, n_bins {self.n_bins}, rows {self.n_rows} "
                "must all be positive")
        self._data = {n: np.zeros((self.n_rows, self.n_bins)) for n in self.names}

    def _advance(self, newest: int) -> None:
        if newest <= self.head:
            return
        if newest - self.head >= self.n_bins:
            for a in self._data.values():
                a[:] = 0.0
        else:
            slots = np.arange(self.head + 1, newest + 1) % self.n_bins
            for a in self._data.values():
                a[:, slots] = 0.0
        self.head = newest

    def add(self, name: str, rows: np.ndarray, ts_ns: np.ndarray, values: npt.ArrayLike) -> None:
        if rows.size == 0:
            return
        k = (np.asarray(ts_ns, dtype=np.int64) - self.origin_ns) // self.bin_ns
        self._advance(int(k.max()))
        keep = k > self.head - self.n_bins
        self.late_values += int((~keep).sum())
        v = np.broadcast_to(np.asarray(values, dtype=np.float64), rows.shape)
        add_at(self._data[name], rows[keep], k[keep] % self.n_bins, v[keep])

    def clear_rows(self, rows: np.ndarray) -> None:
        for a in self._data.values():
            a[rows] = 0.0

    def bins(self) -> TimeBins:
        start = max(self.head - self.n_bins + 1, 0) if self.head >= 0 else 0
        return TimeBins(start_ns=self.origin_ns + start * self.bin_ns, bin_ns=self.bin_ns,
                        n_bins=self.n_bins)

    def window(self, name: str) -> np.ndarray:
        """The accumulator in time order (oldest bin first) for ``bins()``."""
        start = (self.bins().start_ns - self.origin_ns) // self.bin_ns
        return self._data[name][:, (start + np.arange(self.n_bins)) % self.n_bins].copy()


@dataclass(slots=True, kw_only=True)
class LinkLossStream:
    """Link x time loss map fed incrementally with counters and loss events."""

    n_links: int
    bin_ns: int
    n_bins: int
    origin_ns: int = 0
    counter_bits: int = 64
    prefer: str = "counters"
    resync_gap: int = RESYNC_GAP
    ring: BinRing = field(init=False)
    _tot_c: np.ndarray = field(init=False, repr=False)
    _tot_e: np.ndarray = field(init=False, repr=False)
    _last_rx: np.ndarray = field(init=False, repr=False)
    _last_lost: np.ndarray = field(init=False, repr=False)
    _last_ts: np.ndarray = field(init=False, repr=False)
    _has_prev: np.ndarray = field(init=False, repr=False)
    _last_rcv: np.ndarray = field(init=False, repr=False)
    _has_rcv: np.ndarray = field(init=False, repr=False)
    _has_counters: np.ndarray = field(init=False, repr=False)
    _has_events: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.prefer not in ("counters", "events"):
            raise LossParameterError(f"LinkLossStream.prefer = {self.prefer!r}; use "
                                     "'counters' or 'events'")
        self.ring = BinRing(n_rows=self.n_links, bin_ns=self.bin_ns, n_bins=self.n_bins,
                            origin_ns=self.origin_ns,
                            names=("lost_c", "deliv_c", "lost_e", "deliv_e", "reord"))
        n = self.n_links
        self._tot_c = np.zeros(n)
        self._tot_e = np.zeros(n)
        self._last_rx = np.zeros(n, dtype=np.uint64)
        self._last_lost = np.zeros(n, dtype=np.uint64)
        self._last_ts = np.zeros(n, dtype=np.int64)
        self._has_prev = np.zeros(n, dtype=bool)
        self._last_rcv = np.zeros(n, dtype=np.int64)
        self._has_rcv = np.zeros(n, dtype=bool)
        self._has_counters = np.zeros(n, dtype=bool)
        self._has_events = np.zeros(n, dtype=bool)

    def _check_links(self, link: np.ndarray, where: str) -> None:
        if link.size and (link.min() < 0 or link.max() >= self.n_links):
            bad = int(link[(link < 0) | (link >= self.n_links)][0])
            raise LossInputError(f"LinkLossStream.{where}: link {bad} outside "
                                 f"0..{self.n_links - 1}")

    def add_counters(self, c: LinkCounters) -> None:
        """A poll of link counters (any links, any number of samples each)."""
        self._check_links(c.link_idx, "add_counters")
        if c.counter_bits != self.counter_bits:
            raise LossInputError(f"LinkLossStream.add_counters: counter_bits {c.counter_bits} "
                                 f"!= stream's {self.counter_bits}")
        if c.link_idx.size == 0:
            return
        seeds = np.unique(c.link_idx[self._has_prev[c.link_idx]])
        both = LinkCounters(
            link_idx=np.r_[seeds, c.link_idx], ts_ns=np.r_[self._last_ts[seeds], c.ts_ns],
            rx_packets=np.r_[self._last_rx[seeds], c.rx_packets],
            lost_packets=np.r_[self._last_lost[seeds], c.lost_packets],
            counter_bits=self.counter_bits)
        link, ts, drx, dlost = _counter_deltas(both)
        self.ring.add("deliv_c", link, ts, drx)
        self.ring.add("lost_c", link, ts, dlost)
        order = np.lexsort((both.ts_ns, both.link_idx))
        sl = both.link_idx[order]
        last = order[np.r_[sl[1:] != sl[:-1], True]]
        ln = both.link_idx[last]
        self._last_rx[ln] = both.rx_packets[last]
        self._last_lost[ln] = both.lost_packets[last]
        self._last_ts[ln] = both.ts_ns[last]
        self._has_prev[ln] = True
        self._has_counters[ln] = True
        self._tot_c += np.bincount(link, weights=dlost.astype(float), minlength=self.n_links)

    def add_events(self, ev: LossEvents, monitored: npt.ArrayLike | None = None) -> None:
        """Loss digests; ``monitored`` lists links that report events even when quiet."""
        self._check_links(ev.link_idx, "add_events")
        if monitored is not None:
            self._has_events[np.asarray(monitored, dtype=np.int64)] = True
        if ev.link_idx.size == 0:
            return
        self._has_events[ev.link_idx] = True
        gap = ev.gap(self.resync_gap)
        self.ring.add("lost_e", ev.link_idx, ev.ts_ns, gap)
        self.ring.add("reord", ev.link_idx, ev.ts_ns, ev.reordered())
        self._tot_e += np.bincount(ev.link_idx, weights=gap, minlength=self.n_links)
        fwd = ~ev.reordered() & ~ev.resynced(self.resync_gap)
        link, ts = ev.link_idx[fwd], ev.ts_ns[fwd]
        exp, rcv = ev.expected[fwd], ev.received[fwd]
        seeds = np.unique(link[self._has_rcv[link]])
        L = np.r_[seeds, link]
        T = np.r_[np.full(seeds.size, np.iinfo(np.int64).min), ts]
        E = np.r_[np.zeros(seeds.size, np.int64), exp]
        R = np.r_[self._last_rcv[seeds], rcv]
        order = np.lexsort((T, L))
        L, T, E, R = L[order], T[order], E[order], R[order]
        same = L[1:] == L[:-1]
        span = (E[1:] - R[:-1]) & _MASK
        ok = same & (span < _HALF)
        self.ring.add("deliv_e", L[1:][ok], T[1:][ok], span[ok])
        if L.size:
            last = np.r_[~same, True]
            self._last_rcv[L[last]] = R[last]
            self._has_rcv[L[last]] = True

    def _source(self) -> np.ndarray:
        source = np.zeros(self.n_links, dtype=np.int8)
        source[self._has_events] = Source.EVENT
        if self.prefer == "counters":
            source[self._has_counters] = Source.COUNTER
        else:
            source[self._has_counters & ~self._has_events] = Source.COUNTER
        return source

    @property
    def lost_total(self) -> np.ndarray:
        """Packets lost per link since the stream started (not only in the window)."""
        return np.where(self._source() == Source.EVENT, self._tot_e, self._tot_c)

    def snapshot(self) -> LinkLossMap:
        """The map over the current window."""
        r = self.ring
        source = self._source()
        use_e = (source == Source.EVENT)[:, None]
        return LinkLossMap(
            bins=r.bins(), lost=np.where(use_e, r.window("lost_e"), r.window("lost_c")),
            delivered=np.where(self._has_counters[:, None], r.window("deliv_c"),
                               r.window("deliv_e")),
            source=source, reordered=r.window("reord"))


@dataclass(slots=True, kw_only=True)
class FlowLossStream:
    """Flow x time PSN-gap map fed with host-record batches."""

    n_flows: int
    bin_ns: int
    n_bins: int
    origin_ns: int = 0
    ring: BinRing = field(init=False)
    lost_total: np.ndarray = field(init=False)
    last_gaps: PsnGaps | None = field(init=False, default=None)
    _max_psn: np.ndarray = field(init=False, repr=False)
    _last_ts: np.ndarray = field(init=False, repr=False)
    _seen: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.ring = BinRing(n_rows=self.n_flows, bin_ns=self.bin_ns, n_bins=self.n_bins,
                            origin_ns=self.origin_ns, names=("lost", "delivered"))
        self.lost_total = np.zeros(self.n_flows)
        self._max_psn = np.zeros(self.n_flows, dtype=np.int64)
        self._last_ts = np.zeros(self.n_flows, dtype=np.int64)
        self._seen = np.zeros(self.n_flows, dtype=bool)

    def add(self, *, flow_idx: npt.ArrayLike, ts_ns: npt.ArrayLike, psn: npt.ArrayLike) -> None:
        """One batch of host records (any order within the batch)."""
        f = np.asarray(flow_idx, dtype=np.int64)
        t = np.asarray(ts_ns, dtype=np.int64)
        p = np.asarray(psn, dtype=np.int64)
        _check(f, t, p, "FlowLossStream.add")
        if f.size and (f.min() < 0 or f.max() >= self.n_flows):
            raise LossInputError(f"FlowLossStream.add: flow index outside 0..{self.n_flows - 1}")
        if f.size == 0:
            return
        seeds = np.unique(f[self._seen[f]])
        sc = _scan(np.r_[seeds, f], np.r_[self._last_ts[seeds], t],
                   np.r_[self._max_psn[seeds], p],
                   np.r_[np.ones(seeds.size, bool), np.zeros(f.size, bool)])
        gaps = _gaps(sc)
        self.last_gaps = gaps
        self.ring.add("lost", gaps.flow_idx, gaps.ts_ns, gaps.lost)
        real = ~sc.seed
        self.ring.add("delivered", sc.f[real], sc.t[real], 1.0)
        self.lost_total += np.bincount(gaps.flow_idx, weights=gaps.lost.astype(float),
                                       minlength=self.n_flows)
        lf = sc.f[sc.last]
        self._max_psn[lf] = sc.max_psn
        self._last_ts[lf] = np.maximum(sc.t[sc.last], self._last_ts[lf])
        self._seen[lf] = True

    def reset(self, flow_idx: npt.ArrayLike) -> None:
        """Forget flows (their row is reused for another flow): no base PSN, empty row."""
        idx = np.asarray(flow_idx, dtype=np.int64).ravel()
        if idx.size and (idx.min() < 0 or idx.max() >= self.n_flows):
            raise LossInputError(f"FlowLossStream.reset: flow index outside "
                                 f"0..{self.n_flows - 1}")
        self._seen[idx] = False
        self.lost_total[idx] = 0.0
        self.ring.clear_rows(idx)

    def snapshot(self) -> FlowLossMap:
        z = np.zeros(0, dtype=np.int64)
        gaps = self.last_gaps or PsnGaps(flow_idx=z, ts_ns=z, first_lost_psn=z, lost=z)
        return FlowLossMap(bins=self.ring.bins(), lost=self.ring.window("lost"),
                           delivered=self.ring.window("delivered"), gaps=gaps)
