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

__all__ = ["bottleneck_port", "compare_plots", "compare_row", "deepest_queue", "fcts", "goodput_limit", "slug",
           "utilisation"]


def deepest_queue(summary: dict[str, Any], topo: Topology,
                  sample_interval_s: float) -> dict[str, Any]:
    """The one "deepest queue" figure of a run, with where and how it was measured: the
    P4 switches' own high-water mark of each egress queue (kept at every enqueue), or,
    on kernel routers, the qdisc backlog sampled every ``sample_interval_s``; with the
    tail drops of all switches against the packets the senders sent."""
    sent = sum(int(r.get("tx_pkts") or 0) for r in (summary.get("ranks") or {}).values())
    sp = summary.get("switch_ports") or {}
    if sp:
        port, st = max(sp.items(), key=lambda kv: (kv[1]["queue_high_water"],
                                                   kv[1]["tail_drops"]))
        sw, _, num = port.partition("/")
        link = None
        for ln in topo.links:
            for ep in ln.endpoints():
                if ep.node == sw and str(ep.port) == num:
                    far = ln.other(sw)
                    link = f"{sw}:{num}->{far.node}:{far.port}"
        out: dict[str, Any] = {
            "port": port, "link": link, "max_pkts": st["queue_high_water"],
            "measured": "the switch's own high-water mark of the egress queue (every enqueue)",
            "tail_drops": sum(int(v["tail_drops"]) for v in sp.values())}
    else:
        bq = summary.get("bottleneck_queue") or {}
        out = {"port": bq.get("port"), "link": None, "max_pkts": bq.get("max_pkts"),
               "measured": f"the kernel qdisc's backlog, sampled every {sample_interval_s:g} s",
               "tail_drops": sum((summary.get("queue_drops") or {}).values())}
    out["packets_sent"] = sent
    out["tail_drop_pct"] = 100.0 * out["tail_drops"] / sent if sent else None
    return out


def goodput_limit(spec: ExperimentSpec, topo: Topology) -> dict[str, Any]:
    """What the workload could reach on this network: the path's real bottleneck.

    Each flow (every QP on its first shortest path) wants its QP's rate, or, where the
    congestion control may raise it (``cc: hpcc``: the controller's rates go up to the
    line rate), as much as its path carries; the directed links are shared max-min
    fairly (water-filling).  A ring all-reduce moves in lock-step, so its ranks go at
    the slowest flow's share: the limit is N times that; any other workload gets the
    sum of the shares.  Returns the limit, the link that sets it and the per-flow
    shares.
    """
    w = spec.workload
    rate = float(w.rate.rstrip("KMG")) * {"K": 1e3, "M": 1e6, "G": 1e9}.get(w.rate[-1], 1.0)
    links = {ln.name: ln for ln in topo.links}
    fl = flows(spec)
    hops = [[str(h) for h in paths(topo, f.src_host, f.dst_host)[0]] for f in fl]
    cap = {str(h): links[h.link].rate_mbps * 1e6
           for f in fl for h in paths(topo, f.src_host, f.dst_host)[0]}
    demand = [float("inf") if spec.cc == "hpcc" else rate for _ in fl]
    share = [0.0] * len(fl)
    left = dict(cap)
    active = set(range(len(fl)))
    setter: dict[int, str] = {}
    while active:   # water-filling: raise every active flow until a link or demand binds
        users = {d: [i for i in active if d in hops[i]] for d in left}
        inc, where = min(((left[d] / len(u), d) for d, u in users.items() if u),
                         default=(float("inf"), ""))
        need = min(demand[i] - share[i] for i in active)
        step = min(inc, need)
        for i in active:
            share[i] += step
        for d, u in users.items():
            left[d] -= step * len(u)
        done = {i for i in active if demand[i] - share[i] <= 1e-6}
        if inc <= need:   # link ``where`` is full: its flows stop there
            done |= set(users[where])
            for i in users[where]:
                setter.setdefault(i, where)
        for i in done:
            setter.setdefault(i, "the QP rate")
        active -= done
    if not fl:
        return {"bps": 0.0, "bottleneck": None, "flows": {}}
    slow = min(range(len(fl)), key=lambda i: share[i])
    total = share[slow] * len(fl) if w.kind == "allreduce" else sum(share)
    return {"bps": float(total), "bottleneck": setter.get(slow),
            "model": "ring in lock-step: N x the slowest flow's fair share"
            if w.kind == "allreduce" else "sum of the flows' fair shares",
            "flows": {f.name: {"share_bps": share[i], "set_by": setter.get(i)}
                      for i, f in enumerate(fl)}}


def utilisation(ranks: dict[str, Any], limit_bps: float) -> float | None:
    """Every byte the ranks sent over the time the last one took, as a fraction of the
    goodput limit (the sum of per-rank goodputs overstates it: ranks finish at
    different times)."""
    done = [float(r["completion_s"]) for r in ranks.values() if r.get("completion_s")]
    sent = sum(int(r.get("bytes_sent") or 0) for r in ranks.values())
    if not done or not limit_bps or max(done) <= 0:
        return None
    return sent * 8 / max(done) / limit_bps


def bottleneck_port(s: dict[str, Any]) -> str | None:
    """The egress port ("s1/9") of the directed link that sets the run's goodput limit
    (``goodput_limit``'s water-filling: "s1:9->s2:2"), or None.  The bottleneck is where
    the data queues by design; the deepest queue of a run can be elsewhere (a Python
    switch descheduled for a moment queues 50 ACKs on the reverse direction of the same
    4 Mbit/s link), so the side-by-side table follows the limit, not the maximum."""
    link = (s.get("goodput_limit") or {}).get("bottleneck") or ""
    head, sep, _ = link.partition("->")
    node, colon, num = head.partition(":")
    return f"{node}/{num}" if sep and colon else None


def compare_row(s: dict[str, Any]) -> dict[str, Any]:
    """A variant's congestion figures for the side-by-side table: utilisation, the
    bottleneck's switch queue (median while busy, high water, tail drops: the P4
    switches' own statistics; the bottleneck is the port of the link that sets the
    goodput limit, or the worst port by tail drops, then high water), the senders' CNPs and DCQCN cuts, and the controller's
    loop end to end (host capture -> rate applied at the sender, p50/p99: ``cc: hpcc``)."""
    ports = s.get("switch_ports") or {}
    worst: tuple[str | None, dict[str, int]]
    limit_at = bottleneck_port(s)
    if limit_at in ports:
        worst = (limit_at, ports[limit_at])
    else:
        worst = max(ports.items(),
                    key=lambda kv: (kv[1]["tail_drops"], kv[1]["queue_high_water"]),
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
