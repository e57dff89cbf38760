"""Write an :class:`~.analysis.Analysis` into a results folder, and print its summary.

CSV time series first, then the JSON summary, then the plots (so a plotting failure
never loses data); returns the paths of the plots it made.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from controller.lossmap import link_table, plot_heatmap

from .analysis import Analysis
from .plots import plot_fct_cdf, plot_queues, plot_rates
from .results import ResultsDir

__all__ = ["LOOP_STAGES", "control_loop_lines", "data_check_line", "engine_line", "format_summary",
           "queue_lines", "write_analysis"]

# the controller's control-loop latency figures (state file, ``collector`` section):
# key -> what the interval covers
LOOP_STAGES = (
    ("loop_telemetry_to_decision_s", "telemetry -> decision"),
    ("loop_telemetry_to_sent_s", "telemetry -> feedback sent"),
    ("loop_decision_to_applied_s", "decision -> applied at sender"),
    ("loop_telemetry_to_applied_s", "telemetry -> applied at sender"),
    ("loop_host_to_applied_s", "host capture -> applied at sender (end to end)"),
)


def write_analysis(res: ResultsDir, a: Analysis, *, meta: dict[str, Any]) -> dict[str, Path]:
    res.write_csv("queue.csv", ["t_s", "node", "ifname", "backlog_pkts", "backlog_bytes",
                                "drops"], a.queue_rows)
    res.write_csv("port_rate.csv", ["t_s", "node", "ifname", "tx_bps"], a.port_rate_rows)
    cols = a.traffic["rate_columns"] or ["t_s", "rate_bps"]
    res.write_csv("flow_rate.csv", ["host", "qpn", *cols], a.traffic["rate_rows"])
    res.write_csv("fct.csv", ["host", "qpn", "peer", "size", "fct_s", "retx_pkts"],
                  a.traffic["fct_rows"])
    loss_rows = []
    if a.loss_map is not None:
        t = a.loss_map.bins.edges_s()[:-1] + (a.loss_map.bins.start_ns - a.t0_ns) / 1e9
        for dl in a.directed:
            for j, ts in enumerate(t):
                loss_rows.append((round(float(ts), 3), dl.name,
                                  int(a.loss_map.lost[dl.index, j]),
                                  int(a.loss_map.delivered[dl.index, j])))
    res.write_csv("link_loss.csv", ["t_s", "link", "lost", "delivered"], loss_rows)
    res.write_json("summary.json", {**meta, **a.summary})
    plots: dict[str, Path] = {}
    q: dict[str, tuple[list[float], list[int]]] = {}
    for ts, node, ifname, pkts, _, _ in a.queue_rows:
        s = q.setdefault(f"{node}/{ifname}", ([], []))
        s[0].append(ts)
        s[1].append(pkts)
    plots["queue"] = plot_queues({k: (np.array(v[0]), np.array(v[1])) for k, v in q.items()},
                                 res.file("queue.png"))
    rates: dict[str, tuple[list[float], list[float]]] = {}
    ti, ri = cols.index("t_s") if "t_s" in cols else 0, cols.index("rate_bps") \
        if "rate_bps" in cols else 1
    for row in a.traffic["rate_rows"]:
        s2 = rates.setdefault(f"{row[0]} qp {row[1]:#x}", ([], []))
        s2[0].append(float(row[2 + ti]))
        s2[1].append(float(row[2 + ri]))
    if rates:
        plots["rates"] = plot_rates({k: (np.array(v[0]), np.array(v[1]))
                                     for k, v in rates.items()}, res.file("rates.png"),
                                    title="Sending rate per QP (rate convergence)")
    else:
        port: dict[str, tuple[list[float], list[float]]] = {}
        for ts, node, ifname, bps in a.port_rate_rows:
            s3 = port.setdefault(f"{node}/{ifname}", ([], []))
            s3[0].append(ts)
            s3[1].append(bps)
        plots["rates"] = plot_rates({k: (np.array(v[0]), np.array(v[1]))
                                     for k, v in port.items()}, res.file("rates.png"),
                                    title="Transmit rate per switch port")
    fcts = [r[4] for r in a.traffic["fct_rows"]]
    plots["fct_cdf"] = plot_fct_cdf({meta.get("variant") or meta.get("name", "run"): fcts},
                                    res.file("fct_cdf.png"))
    if a.loss_map is not None:
        plots["loss_heatmap"] = plot_heatmap(a.loss_map, res.file("loss_heatmap.png"),
                                             link_names=[d.name for d in a.directed],
                                             title="Packet loss per link (switch counters)")
    return plots


def control_loop_lines(collector: dict[str, Any] | None) -> list[str]:
    """The controller's control-loop latency, one line per stage it reported (each a
    ``{count, p50, p99, max}`` in seconds, or None before the first sample)."""
    lines = []
    for key, what in LOOP_STAGES:
        st = (collector or {}).get(key)
        if not isinstance(st, dict) or not st.get("count"):
            continue
        lines.append(f"control loop {what}: p50 {1e3 * st['p50']:.1f} ms, p99 "
                     f"{1e3 * st['p99']:.1f} ms, max {1e3 * st['max']:.1f} ms "
                     f"({st['count']} samples)")
    return lines


def reaction_line(reactions: list[float]) -> str:
    """HPCC's reaction at the senders: first ACK with a queue above zero -> first cut."""
    if not reactions:
        return "HPCC reaction (first ACK with queue > 0 -> rate cut): no QP saw a queue"
    r = sorted(reactions)
    return (f"HPCC reaction (first ACK with queue > 0 -> rate cut at that sender), "
            f"{len(r)} QPs: p50 {1e3 * r[len(r) // 2]:.1f} ms, max {1e3 * r[-1]:.1f} ms")


def data_check_line(summary: dict[str, Any]) -> str:
    """The ranks' verdict on the data they received, for the terminal."""
    dc = summary.get("data_check") or {}
    n = len(dc.get("ranks") or {})
    what = "all-reduce result" if summary.get("workload") == "allreduce" else \
        "messages (CRC-32)"
    if dc.get("ok"):
        return f"data check: passed on all {n} ranks ({what} as the senders' data implies)"
    parts = []
    if dc.get("wrong"):
        parts.append(f"WRONG on {', '.join(dc['wrong'])}")
    if dc.get("unchecked"):
        parts.append(f"no verdict from {', '.join(dc['unchecked'])} (did not finish)")
    return f"data check: FAILED ({what}): {'; '.join(parts) or 'no rank reported'}"


def queue_lines(summary: dict[str, Any]) -> list[str]:
    """The run's one deepest-queue figure, where and how it was measured, and the tail
    drops against the packets sent."""
    dq = summary.get("deepest_queue")
    if not dq:
        return []
    where = dq.get("link") or dq.get("port")
    pct = dq.get("tail_drop_pct")
    share = (f" ({pct:.2f} % of the {dq['packets_sent']} packets the senders sent)"
             if pct is not None else "")
    return [f"deepest queue: {dq.get('max_pkts')} packets at {where} ({dq.get('measured')})",
            f"tail drops: {dq.get('tail_drops', 0)} in all switches{share}"]


def engine_line(summary: dict[str, Any]) -> str:
    """Which data path the ranks ran (``--engine auto`` may fall back to Python)."""
    by: dict[str, list[str]] = {}
    for host, eng in (summary.get("engines") or {}).items():
        by.setdefault(str(eng or "unknown"), []).append(host)
    if not by:
        return "engine: no rank reported"
    return "engine: " + "; ".join(f"{e} on {len(h)} rank{'s' * (len(h) != 1)} ({', '.join(h)})"
                                  for e, h in sorted(by.items()))


def format_summary(summary: dict[str, Any], a: Analysis | None = None) -> list[str]:
    """A few lines for the terminal: data check, engine, lossy link, bottleneck queue,
    goodput, FCT."""
    lines = [data_check_line(summary), engine_line(summary)]
    ll = summary.get("lossy_link")
    if ll:
        ok = {True: "within", False: "OUTSIDE", None: "n/a"}[ll.get("within_expected")]
        lines.append(f"lossy link: {ll['link']}  measured {100 * ll['loss_rate']:.3f} % "
                     f"({ll['lost']} of {ll['lost'] + ll['delivered']}), 95 % CI "
                     f"{100 * ll['ci95'][0]:.3f}-{100 * ll['ci95'][1]:.3f} %; configured "
                     f"{100 * ll['configured_loss']:.3f} % ({ok} the model's range)")
    else:
        lines.append("lossy link: none found")
    lines += queue_lines(summary)
    gp = summary.get("goodput_tx_bps_total") or 0.0
    line = f"goodput (sum of ranks): {gp / 1e6:.1f} Mbit/s"
    if summary.get("goodput_limit_bps"):
        line += f" of a {summary['goodput_limit_bps'] / 1e6:.0f} Mbit/s limit"
        lim = summary.get("goodput_limit") or {}
        if lim.get("bottleneck"):
            line += f" (bottleneck {lim['bottleneck']})"
    if summary.get("utilisation") is not None:
        line += f"; utilisation {100 * summary['utilisation']:.0f} % (all bytes / last finish)"
    lines.append(line)
    cc = summary.get("senders_cc") or {}
    if cc.get("echo_acks") is not None:
        lines.append(f"senders' HPCC: {cc['echo_acks']} ACKs with INT, {cc['rate_cuts']} rate "
                     f"cuts, lowest rate {cc['min_rate_bps'] / 1e6:.2f} Mbit/s")
        lines.append(reaction_line(cc.get("reaction_s") or []))
    elif cc.get("rate_cuts") is not None:
        lines.append(f"senders' DCQCN: {cc['cnps_rx']} CNPs received, {cc['rate_cuts']} rate "
                     f"cuts, lowest rate {cc['min_rate_bps'] / 1e6:.2f} Mbit/s")
    if summary.get("cc") in (None, "hpcc"):   # the controller's loop sets rates only then
        lines += control_loop_lines((summary.get("int") or {}).get("collector"))
    fct = summary.get("fct_s", {})
    if fct.get("n"):
        lines.append(f"messages: {fct['n']}, FCT p50 {1e3 * fct['p50']:.1f} ms, "
                     f"p99 {1e3 * fct['p99']:.1f} ms; completion "
                     f"{summary.get('completion_s_max') or float('nan'):.2f} s")
    if a is not None and a.loss_map is not None:
        lines += link_table(a.loss_map, [d.name for d in a.directed])[:5]
    return lines
