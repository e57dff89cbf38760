"""The controller's FEC policy where no controller runs (kernel routers, or P4 switches
without its feedback): :class:`controller.runner.fec.FecPolicy` on the switches'
counter samples, codes sent to the senders' control sockets.

Only the two ends are the test bed's: every ``interval_s`` the link loss map is
rebuilt from the samples (one bin over the whole run: net counts, so timing noise
between the two ends' samples cancels instead of piling up as false losses), and
changed codes go to ``python -m traffic``'s control socket of the flow's sender.
"""
from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from controller.lossmap import TimeBins, link_loss_map
from controller.runner.fec import FecPolicy
from controller.topology import Topology, paths
from mininet_topos.testbed.telemetry import (
    DirectedLink,
    directed_links,
    link_counters,
    load_samples,
)
from traffic.control import send_control

from .workload import Flow

__all__ = ["TestbedFec"]


class TestbedFec:
    """Runs :class:`FecPolicy` (k from 8, 16, 32, m up to 8, links under 500 packets
    count as loss-free) for ``flows_`` on the samples under ``samples_dir``."""

    def __init__(self, *, topo: Topology, flows_: list[Flow], samples_dir: Path,
                 sockets: dict[str, Path], interval_s: float = 0.5,
                 target_residual: float = 1e-3, min_packets: int = 500) -> None:
        self.directed: list[DirectedLink] = directed_links(topo)
        index = {d.name: d.index for d in self.directed}
        self.flows = flows_
        self.paths: list[list[int]] = []
        for f in flows_:  # every link of every ECMP choice: the policy covers the worst
            links: set[int] = set()
            for p in paths(topo, f.src_host, f.dst_host):
                links.update(index[str(h)] for h in p if str(h) in index)
            self.paths.append(sorted(links) or [0])
        self.policy = FecPolicy(target_residual=target_residual, k_choices=(8, 16, 32),
                                m_max=8, min_packets=min_packets)
        self.samples_dir = samples_dir
        self.sockets = sockets
        self.interval_s = interval_s
        self.topo = topo
        self.next_s = time.monotonic() + interval_s
        self.decisions: list[dict[str, Any]] = []

    def tick(self) -> None:
        if time.monotonic() < self.next_s:
            return
        self.next_s = time.monotonic() + self.interval_s
        samples = {sw: load_samples(self.samples_dir / f"{sw}.jsonl", sw)
                   for sw in self.topo.switch_names}
        c = link_counters(self.directed, samples)
        if c.ts_ns.size == 0:
            return
        lo, hi = int(c.ts_ns.min()), int(c.ts_ns.max())
        bins = TimeBins(start_ns=lo, bin_ns=hi - lo + 1, n_bins=1)
        lm = link_loss_map(bins=bins, n_links=len(self.directed), counters=c)
        dec = self.policy.decide(lm, self.paths)
        for j, k, m in self.policy.changes(dec):
            f = self.flows[j]
            sock = self.sockets.get(f.src_host)
            if sock is None or not sock.exists():
                continue
            with contextlib.suppress(OSError):
                send_control(str(sock), {"qp": f.qpn, "fec_k": k, "fec_m": m})
                self.policy.sent(j, k, m)
                self.decisions.append({"t_unix_s": time.time(), "flow": f.name, "qpn": f.qpn,
                                       "fec_k": k, "fec_m": m,
                                       "raw_loss": float(dec.raw_loss[j])})
