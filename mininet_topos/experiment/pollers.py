"""What a run watches on the running test bed while the traffic flows: the controller's
state file (INT's queues and paths), the P4 switches' statistics files, the WAN delay
lines draining (split from the runner: one job per module)."""
from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from controller.topology import Topology
from mininet_topos.ebpf_switch import stats_ports
from mininet_topos.testbed import Testbed

__all__ = ["IntStatePoller", "SwitchStatsPoller", "busy_queue_stats", "sampled_queue_stats",
           "switch_port_stats", "wire_quiet"]


class IntStatePoller:
    """Reads the controller's state file (P4 switches only): per-hop queue lengths as
    INT reports them, and the flows with the switches their records named."""

    def __init__(self, path: Path, interval_s: float = 0.5) -> None:
        self.path = path
        self.interval_s = interval_s
        self.next_s = 0.0
        self.rows: list[tuple[float, str, str, int, int, int]] = []
        self.flows: list[dict[str, Any]] = []
        self.hops: list[dict[str, Any]] = []
        self.collector: dict[str, Any] = {}
        self.losses: dict[str, int] = {}   # the controller's loss map: link -> lost

    def poll(self, force: bool = False) -> None:
        if not force and time.monotonic() < self.next_s:
            return
        self.next_s = time.monotonic() + self.interval_s
        try:
            state = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return
        t = float(state.get("updated_unix_s") or time.time())
        self.hops = state.get("hops", []) or []
        for h in self.hops:
            self.rows.append((t, f"int:{h.get('switch') or h.get('node_id')}",
                              f"port{h.get('egress_port')}", int(h.get("qlen_pkts") or 0),
                              int(h.get("qlen_bytes") or 0), 0))
        self.flows = state.get("flows", []) or self.flows
        self.collector = state.get("collector", {}) or self.collector
        self.losses = {str(x.get("link")): int(x.get("lost") or 0)
                       for x in state.get("losses", []) or []} or self.losses

    def summary(self, topo: Topology) -> dict[str, Any]:
        node_to_switch = {sw.int_node_id: sw.name for sw in topo.switches}
        seen = sorted({node_to_switch.get(int(h.get("node_id") or 0), str(h.get("node_id")))
                       for h in self.hops})
        return {"switches_reporting": seen, "flows": self.flows,
                "max_qlen_pkts": max((r[3] for r in self.rows), default=0),
                "fec_records": int(self.collector.get("fec_records") or 0),
                "controller_losses": self.losses,
                "collector": self.collector}


class SwitchStatsPoller:
    """Per-port queue depth over time from the P4 switches' statistics files (softswitch
    rewrites them every sample interval): the queue series INT cannot give when hop
    records carry no port."""

    def __init__(self, folder: Path, interval_s: float) -> None:
        self.folder = folder
        self.interval_s = interval_s
        self.next_s = 0.0
        self.seen: dict[Path, int] = {}
        # (t_unix_s, node, ifname, queue_depth, tx_packets, tail_drops)
        self.rows: list[tuple[float, str, str, int, int, int]] = []

    def poll(self, force: bool = False) -> None:
        if not force and time.monotonic() < self.next_s:
            return
        self.next_s = time.monotonic() + self.interval_s
        for f in sorted(self.folder.glob("*.stats.json")) if self.folder.exists() else []:
            try:
                mtime = f.stat().st_mtime_ns
                if self.seen.get(f) == mtime:
                    continue
                st = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            self.seen[f] = mtime
            name = st.get("name", f.name.split(".")[0])
            for p in stats_ports(st, name):
                if "queue_depth" not in p:   # the eBPF target: its queue is sampled by tc
                    continue
                self.rows.append((mtime / 1e9, name, str(p.get("ifname") or p.get("port")),
                                  int(p.get("queue_depth") or 0), int(p.get("tx_packets") or 0),
                                  int(p.get("tail_drops") or 0)))

    def queue_stats(self) -> dict[str, dict[str, float]]:
        """Per port "sN/ifname": max, median, 90th percentile and mean queue depth over
        the samples in which the port sent packets (the port was busy)."""
        by: dict[str, list[tuple[float, int, int]]] = {}
        for t, node, ifname, depth, tx, _ in self.rows:
            by.setdefault(f"{node}/{ifname}", []).append((t, depth, tx))
        return busy_queue_stats(by)


def busy_queue_stats(by: dict[str, list[tuple[float, int, int]]]) -> dict[str, dict[str, float]]:
    """Port -> max, median, 90th percentile and mean of the queue depths sampled while
    the port sent packets; ``by``: port -> [(time, depth, packets sent so far)]."""
    out = {}
    for port, rows in by.items():
        rows.sort()
        active = [d for (_, d, tx), (_, _, tx0) in zip(rows[1:], rows[:-1], strict=True)
                  if tx > tx0]
        if active:
            out[port] = {"max_pkts": float(max(active)),
                         "p50_busy_pkts": float(np.median(active)),
                         "p90_busy_pkts": float(np.percentile(active, 90)),
                         "mean_busy_pkts": float(np.mean(active)),
                         "busy_samples": float(len(active))}
    return out


def sampled_queue_stats(samples: dict[str, Any], ports: Any) -> dict[str, dict[str, float]]:
    """:func:`busy_queue_stats` of ``ports`` ("sN/ifname") from the sampler's tc backlogs:
    the eBPF target's queue, which the kernel holds (HTB at the virtual queue's rate),
    where its statistics file gives only high water and drops."""
    by: dict[str, list[tuple[float, int, int]]] = {}
    for port in ports:
        node, _, ifname = port.partition("/")
        s = samples.get(node)
        if s is None or ifname not in s.q or ifname not in s.dev:
            continue
        by[port] = [(float(t), int(q[0]), int(d[1]))
                    for t, q, d in zip(s.t_ns, s.q[ifname], s.dev[ifname], strict=True)]
    return busy_queue_stats(by)


def switch_port_stats(folder: Path) -> dict[str, dict[str, int]]:
    """"s1/9" -> queue high water, tail drops, tx packets, from the P4 switches' own
    statistics files (written when they stop); empty for kernel routers."""
    out: dict[str, dict[str, int]] = {}
    for f in sorted(folder.glob("*.stats.json")) if folder.exists() else []:
        try:
            st = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        name = st.get("name", f.name.split(".")[0])
        for p in stats_ports(st, name):
            out[f"{name}/{p.get('port')}"] = {
                k: int(p.get(k) or 0) for k in ("queue_high_water", "tail_drops", "tx_packets")}
    return out


def wire_quiet(tb: Testbed, *, interval_s: float = 0.3, max_s: float = 10.0) -> bool:
    """Wait until no WAN delay line moves a packet for ``interval_s`` (at most
    ``max_s``): on a busy machine a user-space delay line can still be working off
    its backlog when the traffic processes have exited, and a packet it drops after
    the switches' last counter sample is missing from the loss map but not from the
    wire's own count.  True when quiet (at once without WAN links)."""
    wans = tb.wan_links()
    if not wans:
        return True

    def snapshot() -> dict[str, Any]:
        out = {}
        for name, wan in wans.items():
            with contextlib.suppress(Exception):
                out[name] = wan.stats()
        return out

    deadline = time.monotonic() + max_s
    prev = snapshot()
    while time.monotonic() < deadline:
        time.sleep(interval_s)
        cur = snapshot()
        if cur == prev:
            return True
        prev = cur
    return False
