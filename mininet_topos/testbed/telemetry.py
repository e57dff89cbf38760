"""Turn node samples (:mod:`.sampler` JSON lines) into link counters, queue and rate series.

Why: the loss map (:mod:`controller.lossmap`) takes cumulative per-link counters; on the
Linux-router stand-in they come from the kernel: for the direction a -> b of a link
between two switches, ``rx_packets`` is what b's port received and ``lost`` is what a's
port sent minus that (a's counter interpolated to b's sample times, since the two are
sampled by different processes).  Packets still inside a delay line count as lost
until they arrive, then are taken back; the last sample, taken after the traffic
drained, is exact.  All arrays, no per-sample Python work beyond parsing.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from controller.lossmap import LinkCounters
from controller.topology import LinkRole, Topology

__all__ = [
    "DirectedLink",
    "NodeSamples",
    "directed_links",
    "link_counters",
    "load_samples",
    "port_rates",
    "queue_series",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class DirectedLink:
    """One direction of a switch-to-switch link: row ``index`` of the loss map."""

    index: int
    name: str            # "s1:3->s5:3"
    link: str            # the topology link name, "s1:3-s5:3"
    tx_node: str
    tx_ifname: str
    rx_node: str
    rx_ifname: str
    role: LinkRole
    lag_ns: int = 0      # one-way delay + jitter + margin: what is in flight on the link


@dataclass(slots=True, kw_only=True)
class NodeSamples:
    """All samples of one node: times and per-interface counter columns."""

    node: str
    t_ns: np.ndarray                  # (n,)
    dev: dict[str, np.ndarray]        # ifname -> (n, 6) rx_pkts tx_pkts rx_b tx_b rx_drop tx_drop
    q: dict[str, np.ndarray]          # ifname -> (n, 3) backlog_pkts backlog_bytes drops


LAG_MARGIN_NS = 2_000_000


def _ifname(node: str, port: int) -> str:
    return f"{node}-eth{port}"


def directed_links(topo: Topology, *, roles: tuple[LinkRole, ...] = (LinkRole.FABRIC,
                                                                      LinkRole.WAN)
                   ) -> list[DirectedLink]:
    """Both directions of every switch-to-switch link, WAN links first."""
    order = sorted((ln for ln in topo.links if ln.role in roles),
                   key=lambda ln: (ln.role is not LinkRole.WAN, ln.name))
    out: list[DirectedLink] = []
    for ln in order:
        for tx, rx in ((ln.a, ln.b), (ln.b, ln.a)):
            lag = int((ln.delay_ms + 2 * ln.jitter_ms) * 1e6) + LAG_MARGIN_NS
            out.append(DirectedLink(index=len(out), name=f"{tx}->{rx}", link=ln.name,
                                    tx_node=tx.node, tx_ifname=_ifname(tx.node, tx.port),
                                    rx_node=rx.node, rx_ifname=_ifname(rx.node, rx.port),
                                    role=ln.role, lag_ns=lag))
    return out


def load_samples(path: Path, node: str) -> NodeSamples:
    """Parse one sampler file; a torn last line (the file is still being written) is
    skipped."""
    t: list[int] = []
    dev: dict[str, list[list[int]]] = {}
    q: dict[str, list[list[int]]] = {}
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    for line in lines:
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        i = len(t)
        t.append(int(rec["t_ns"]))
        for store, key, width in ((dev, "dev", 6), (q, "q", 3)):
            for name, vals in rec.get(key, {}).items():
                rows = store.setdefault(name, [])
                while len(rows) < i:  # interface appeared late: zeros before
                    rows.append([0] * width)
                rows.append(list(vals))
        for store, width in ((dev, 6), (q, 3)):
            for rows in store.values():
                while len(rows) < len(t):
                    rows.append(rows[-1] if rows else [0] * width)
    return NodeSamples(node=node, t_ns=np.asarray(t, dtype=np.int64),
                       dev={k: np.asarray(v, dtype=np.int64).reshape(-1, 6)
                            for k, v in dev.items()},
                       q={k: np.asarray(v, dtype=np.int64).reshape(-1, 3) for k, v in q.items()})


def link_counters(links: list[DirectedLink], samples: Mapping[str, NodeSamples]) -> LinkCounters:
    """Cumulative (rx, lost) per directed link at the receiver's sample times.

    A packet counts as lost once it should have arrived: the sender's count is taken
    ``lag_ns`` (the link's delay) before each receiver sample, so packets still in the
    delay line are not counted lost; interpolation noise is removed by keeping the
    cumulative count non-decreasing, so losses can still move between neighbouring bins
    but never go negative, and the total is exact once the traffic has drained.
    """
    idx, ts, rx, lost = [], [], [], []
    for dl in links:
        s_tx, s_rx = samples.get(dl.tx_node), samples.get(dl.rx_node)
        if (s_tx is None or s_rx is None or dl.tx_ifname not in s_tx.dev
                or dl.rx_ifname not in s_rx.dev or s_tx.t_ns.size == 0):
            continue
        t = s_rx.t_ns
        r = s_rx.dev[dl.rx_ifname][:, 0].astype(np.float64)
        sent = np.interp((t - dl.lag_ns).astype(np.float64), s_tx.t_ns.astype(np.float64),
                         s_tx.dev[dl.tx_ifname][:, 1].astype(np.float64))
        idx.append(np.full(t.size, dl.index))
        ts.append(t)
        rx.append(r)
        # losses never un-happen: the running minimum from the end keeps the series
        # non-decreasing and ends at the exact total of the last (drained) sample
        # (never below the first sample: frames lost before the run are not counted)
        cum = np.rint(sent - r)
        cum = np.maximum(cum, max(cum[0], 0.0))
        lost.append(np.minimum.accumulate(cum[::-1])[::-1])
    if not idx:
        empty = np.zeros(0)
        return LinkCounters(link_idx=empty, ts_ns=empty, rx_packets=empty, lost_packets=empty)
    return LinkCounters(link_idx=np.concatenate(idx), ts_ns=np.concatenate(ts),
                        rx_packets=np.concatenate(rx), lost_packets=np.concatenate(lost))


def queue_series(samples: Mapping[str, NodeSamples], t0_ns: int
                 ) -> list[tuple[float, str, str, int, int, int]]:
    """Rows (t_s, node, ifname, backlog_pkts, backlog_bytes, drops) of every sampled queue."""
    rows = []
    for node, s in sorted(samples.items()):
        t_s = (s.t_ns - t0_ns) / 1e9
        for ifname, a in sorted(s.q.items()):
            rows += [(float(t), node, ifname, int(v[0]), int(v[1]), int(v[2]))
                     for t, v in zip(t_s, a, strict=True)]
    return rows


def port_rates(samples: Mapping[str, NodeSamples], t0_ns: int
               ) -> list[tuple[float, str, str, float]]:
    """Rows (t_s, node, ifname, tx_bps) per sample interval of every port that sent."""
    rows = []
    for node, s in sorted(samples.items()):
        if s.t_ns.size < 2:
            continue
        dt = np.diff(s.t_ns) / 1e9
        t_s = (s.t_ns[1:] - t0_ns) / 1e9
        for ifname, a in sorted(s.dev.items()):
            bps = np.diff(a[:, 3]) * 8 / np.maximum(dt, 1e-9)
            if not np.any(bps > 0):
                continue
            rows += [(float(t), node, ifname, float(b)) for t, b in zip(t_s, bps, strict=True)]
    return rows
