"""A run's figures against its limits and sweep variants side by side: utilisation of
the goodput limit, the congestion row of each variant, the comparison plots (split
from the runner: one job per module)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from controller.topology import Topology, paths

from .results import ResultsDir, RunResult
from .spec import ExperimentSpec
from .workload import flows

__all__ = ["compare_plots", "compare_row", "fcts", "goodput_limit_bps", "slug", "utilisation"]


def goodput_limit_bps(spec: ExperimentSpec, topo: Topology) -> float:
    """What the workload could reach: per receiver, the sum of its senders' QP rates,
    capped by the narrowest link on the way in (the incast bottleneck)."""
    w = spec.workload
    rate = float(w.rate.rstrip("KMG")) * {"K": 1e3, "M": 1e6, "G": 1e9}.get(w.rate[-1], 1.0)
    links = {ln.name: ln for ln in topo.links}
    into: dict[str, tuple[float, float]] = {}
    for f in flows(spec):
        narrow = min(links[h.link].rate_mbps * 1e6 for h in paths(topo, f.src_host,
                                                                   f.dst_host)[0])
        offered, cap = into.get(f.dst_host, (0.0, 0.0))
        into[f.dst_host] = (offered + rate, max(cap, narrow))
    return float(sum(min(offered, cap) for offered, cap in into.values()))


def utilisation(ranks: dict[str, Any], limit_bps: float) -> float | None:
    """Every byte the ranks sent over the time the last one took, as a fraction of the
    goodput limit (the sum of per-rank goodputs overstates it: ranks finish at
    different times)."""
    done = [float(r["completion_s"]) for r in ranks.values() if r.get("completion_s")]
    sent = sum(int(r.get("bytes_sent") or 0) for r in ranks.values())
    if not done or not limit_bps or max(done) <= 0:
        return None
    return sent * 8 / max(done) / limit_bps


def compare_row(s: dict[str, Any]) -> dict[str, Any]:
    """A variant's congestion figures for the side-by-side table: utilisation, the
    bottleneck's switch queue (median while busy, high water, tail drops: the P4
    switches' own statistics), the senders' CNPs and DCQCN cuts, and the controller's
    loop end to end (host capture -> rate applied at the sender, p50/p99: ``cc: hpcc``)."""
    ports = s.get("switch_ports") or {}
    worst: tuple[str | None, dict[str, int]] = max(
        ports.items(), key=lambda kv: (kv[1]["tail_drops"], kv[1]["queue_high_water"]),
        default=(None, {}))
    port = worst[0]
    busy = None
    if port is not None:
        node, _, num = port.partition("/")
        busy = (s.get("switch_queues") or {}).get(f"{node}/{node}-eth{num}")
    cc = s.get("senders_cc") or {}
    loop = ((s.get("int") or {}).get("collector") or {}).get("loop_host_to_applied_s") or {}
    return {"utilisation": s.get("utilisation"), "switch_port": port,
            "queue_p50_busy_pkts": busy["p50_busy_pkts"] if busy else None,
            "queue_mean_busy_pkts": busy.get("mean_busy_pkts") if busy else None,
            "queue_high_water_pkts": worst[1].get("queue_high_water"),
            "tail_drops": worst[1].get("tail_drops"),
            "cnps_rx": cc.get("cnps_rx"), "rate_cuts": cc.get("rate_cuts"),
            "reaction_p50_s": (sorted(cc["reaction_s"])[len(cc["reaction_s"]) // 2]
                               if cc.get("reaction_s") else None),
            "loop_p50_s": loop.get("p50"), "loop_p99_s": loop.get("p99")}


def compare_plots(res: ResultsDir, name: str, results: list[RunResult]) -> None:
    """Side by side: goodput per variant, and the bottleneck queue of every variant over
    time from its senders' start (the P4 switch's own statistics where it has them,
    else INT's view, the kernel's on routers)."""
    from .plots import plot_bars, plot_queues
    from .results import read_csv

    plot_bars({r.spec.variant: (r.summary.get("goodput_tx_bps_total") or 0.0) / 1e6
               for r in results}, res.file("goodput.png"), ylabel="goodput (Mbit/s)",
              title=f"{name}: goodput per variant")
    series = {}
    for r in results:
        if not (r.out / "queue.csv").exists():
            continue
        all_rows = read_csv(r.out / "queue.csv")
        ports = [(r.summary.get("bottleneck_queue") or {}).get("port")]
        sw_port = compare_row(r.summary)["switch_port"]
        if sw_port:  # "s1/9" -> the statistics rows of node "s1", ifname "s1-eth9"
            node, _, num = sw_port.partition("/")
            ports.insert(0, f"{node}/{node}-eth{num}")
        t0 = float(r.summary.get("traffic_start_s") or 0.0)
        for port in filter(None, ports):
            node, _, ifname = port.partition("/")
            rows = [row for row in all_rows if row["node"] == node and row["ifname"] == ifname
                    and float(row["t_s"]) >= t0 - 1.0]
            if rows:
                series[f"{r.spec.variant} ({port})"] = (
                    np.array([float(row["t_s"]) - t0 for row in rows]),
                    np.array([int(row["backlog_pkts"]) for row in rows]))
                break
    if series:
        plot_queues(series, res.file("queue_compare.png"), top=len(series),
                    title=f"{name}: bottleneck queue per variant (0 s: senders start)")


def fcts(folder: Path) -> np.ndarray:
    """Every message's FCT of a run folder (``fct.csv``)."""
    from .results import read_csv
    p = folder / "fct.csv"
    return np.array([float(r["fct_s"]) for r in read_csv(p)]) if p.exists() else np.zeros(0)


def slug(s: str) -> str:
    """A sweep variant's name as a folder name."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in s.replace(",", "__"))
