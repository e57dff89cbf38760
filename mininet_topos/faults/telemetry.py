"""The test bed's counter samples as the diagnosis's telemetry (linux-router switches).

Why: on kernel routers there is no INT and no controller; the per-node sampler
(``experiment.sampler``) reads what the kernel counts, and the test bed already turns
it into per-link loss (``experiment.telemetry.link_counters``: what one end sent minus
what the other received, the same quantity as the P4 program's link sequence
counters).  This module hands those series, the ports' queue backlog, tail drops and
sending rate, to ``controller.diagnose`` in its own terms (directed link names,
(switch, port) keys).  Paths are not known (no INT): the diagnosis weighs every
ECMP path.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from controller.diagnose.evidence import LossSample, PortSample, Telemetry
from controller.topology.model import Topology
from mininet_topos.testbed.telemetry import directed_links, link_counters, load_samples

__all__ = ["telemetry_from_samples"]


def telemetry_from_samples(topo: Topology, samples_dir: Path, *, since_unix: float = 0.0
                           ) -> Telemetry:
    """Telemetry from ``samples_dir/<switch>.jsonl`` (samples after ``since_unix``)."""
    samples = {sw: load_samples(samples_dir / f"{sw}.jsonl", sw) for sw in topo.switch_names}
    tel = Telemetry()
    links = directed_links(topo)
    c = link_counters(links, samples)
    since_ns = int(since_unix * 1e9)
    for dl in links:
        sel = (c.link_idx == dl.index) & (c.ts_ns >= since_ns)
        t, rx, lost = c.ts_ns[sel], c.rx_packets[sel], c.lost_packets[sel]
        if t.size < 2:
            continue
        d_rx, d_lost = np.diff(rx), np.diff(lost)
        tel.link_loss[dl.name] = [
            LossSample(t=float(t[i + 1]) / 1e9, lost=int(max(0, d_lost[i])),
                       delivered=int(max(0, d_rx[i]))) for i in range(d_rx.size)]
    rates: dict[tuple[str, int], float] = {}
    for ln in topo.links:
        for end in (ln.a, ln.b):
            rates[(end.node, end.port)] = ln.rate_mbps * 1e6
    for sw, s in samples.items():
        keep = s.t_ns >= since_ns
        t = s.t_ns[keep]
        if t.size < 2:
            continue
        dt = np.diff(t) / 1e9
        for ifname, q in s.q.items():
            node, _, port_s = ifname.partition("-eth")
            if node != sw or not port_s.isdigit():
                continue
            port = int(port_s)
            qk = q[keep]
            dev = s.dev.get(ifname)
            txb = dev[keep][:, 3] if dev is not None else np.zeros(t.size)
            bps = np.diff(txb) * 8 / np.maximum(dt, 1e-9)
            tel.ports[(sw, port)] = [
                PortSample(t=float(t[i + 1]) / 1e9, qlen_pkts=int(qk[i + 1, 0]),
                           tx_rate_bps=float(bps[i]), line_rate_bps=rates.get((sw, port)))
                for i in range(bps.size)]
            tel.port_drops[(sw, port)] = [(float(t[i]) / 1e9, int(qk[i, 2]))
                                          for i in range(t.size)]
    return tel
