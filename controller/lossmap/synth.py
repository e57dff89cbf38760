"""Synthetic packet traces with known losses per link, for tests, benchmarks and demos.

Flows send packets at fixed intervals along paths of links; every link drops
packets by its own Gilbert-Elliott process; a packet dropped upstream never
reaches the next link. The trace yields what the data plane would report (link
sequence loss events and counters, host PSN records) and the ground truth.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from controller.lossmap.bins import TimeBins
from controller.lossmap.burst import simulate_gilbert_elliott
from controller.lossmap.links import LinkCounters, LossEvents

SEQ0 = (1 << 32) - 500      # link sequence numbers start just below the wrap
PSN0 = (1 << 24) - 300      # PSNs too


@dataclass(slots=True, kw_only=True)
class Trace:
    """What the data plane and hosts would report, plus the ground truth."""

    n_links: int
    paths: list[list[int]]
    events: LossEvents
    counters: LinkCounters
    host_flow: np.ndarray
    host_ts: np.ndarray
    host_psn: np.ndarray
    link_lost_ts: list[np.ndarray]      # per link: reveal time of every lost packet
    link_seq_lost: list[np.ndarray]     # per link: loss indicator in link order
    flow_lost_ts: list[np.ndarray]      # per flow: reveal time of every lost packet


def make_trace(*, paths: list[list[int]], n_links: int,
               link_ge: dict[int, tuple[float, float, float]], packets_per_flow: int,
               interval_ns: int = 1000, sample_ns: int = 10**6, seed: int = 0) -> Trace:
    """Flows send ``packets_per_flow`` packets every ``interval_ns`` along ``paths``;
    link ``l`` drops by Gilbert-Elliott ``link_ge[l] = (p, r, loss_in_bad)``; counters
    are polled every ``sample_ns`` (32-bit, starting near the wrap)."""
    rng = np.random.default_rng(seed)
    n_flows = len(paths)
    flow = np.repeat(np.arange(n_flows), packets_per_flow)
    k = np.tile(np.arange(packets_per_flow), n_flows)
    ts = k * interval_ns + rng.integers(0, interval_ns, n_flows)[flow]
    order = np.lexsort((flow, ts))
    flow, k, ts = flow[order], k[order], ts[order]
    alive = np.ones(flow.size, dtype=bool)
    ev_link, ev_ts, ev_exp, ev_rcv = [], [], [], []
    cn_link, cn_ts, cn_rx, cn_lost = [], [], [], []
    link_lost_ts = [np.zeros(0, np.int64)] * n_links
    link_seq_lost = [np.zeros(0, bool)] * n_links
    width = max(len(p) for p in paths)
    pad = np.array([p + [-1] * (width - len(p)) for p in paths])
    for hop in range(width):
        link_of = pad[flow, hop]
        for link in range(n_links):
            sel = np.flatnonzero(alive & (link_of == link))
            if sel.size == 0:
                continue
            if link in link_ge:
                p, r, d = link_ge[link]
                lost = simulate_gilbert_elliott(n=sel.size, p=p, r=r, loss_in_bad=d,
                                                seed=seed * 1000 + link)
            else:
                lost = np.zeros(sel.size, dtype=bool)
            lost[-1] = False  # the link's last packet arrives, so every gap is revealed
            seq = (SEQ0 + np.arange(sel.size)) % (1 << 32)
            # reveal time of each lost packet: next delivered packet on the link
            nxt = np.minimum.accumulate(np.where(~lost, np.arange(sel.size), sel.size)[::-1])[::-1]
            reveal = ts[sel][nxt[lost]]
            link_lost_ts[link] = reveal
            link_seq_lost[link] = lost
            starts = np.flatnonzero(lost & ~np.r_[False, lost[:-1]])
            ev_link.append(np.full(starts.size, link))
            ev_ts.append(ts[sel][nxt[starts]])
            ev_exp.append(seq[starts])
            ev_rcv.append(seq[nxt[starts]])
            # counters sampled at the last ns of each sample period, plus one before start
            samples = np.r_[-1, np.arange(sample_ns - 1, ts.max() + sample_ns, sample_ns)]
            rx = np.searchsorted(np.sort(ts[sel][~lost]), samples, side="right")
            lo = np.searchsorted(np.sort(reveal), samples, side="right")
            cn_link.append(np.full(samples.size, link))
            cn_ts.append(samples)
            cn_rx.append((rx + SEQ0) % (1 << 32))
            cn_lost.append((lo + SEQ0) % (1 << 32))
            alive[sel[lost]] = False
    psn = (PSN0 + k) % (1 << 24)
    flow_lost_ts = []
    for f in range(n_flows):
        m = flow == f
        a = alive[m]
        nxt = np.minimum.accumulate(np.where(a, np.arange(a.size), a.size)[::-1])[::-1]
        lost_idx = np.flatnonzero(~a)
        ok = nxt[lost_idx] < a.size   # losses after the flow's last delivery are invisible
        flow_lost_ts.append(ts[m][nxt[lost_idx[ok]]])
    cat = np.concatenate
    return Trace(
        n_links=n_links, paths=paths,
        events=LossEvents(link_idx=cat(ev_link), ts_ns=cat(ev_ts), expected=cat(ev_exp),
                          received=cat(ev_rcv)),
        counters=LinkCounters(link_idx=cat(cn_link), ts_ns=cat(cn_ts), rx_packets=cat(cn_rx),
                              lost_packets=cat(cn_lost), counter_bits=32),
        host_flow=flow[alive], host_ts=ts[alive], host_psn=psn[alive],
        link_lost_ts=link_lost_ts, link_seq_lost=link_seq_lost, flow_lost_ts=flow_lost_ts)


def binned(times: list[np.ndarray], bins: TimeBins) -> np.ndarray:
    """Rows of event times -> (rows x bins) counts."""
    out = np.zeros((len(times), bins.n_bins))
    for i, t in enumerate(times):
        np.add.at(out[i], bins.index(t), 1)
    return out
