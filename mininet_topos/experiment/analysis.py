"""From raw experiment output (node samples, traffic summaries) to results.

Why separate from the runner: the analysis is pure file-in, data-out, so it runs again
on a results folder after the fact and is tested without root.  It builds the link loss
map (:mod:`controller.lossmap`) from the per-link counters, names the lossiest link and
checks its measured loss against the configured model, finds the deepest queue, and
collects per-flow rates and completion times.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from common.loss import LossKind
from controller.lossmap import LinkLossMap, TimeBins, link_loss_map, wilson_interval
from controller.topology import Topology
from mininet_topos.testbed.telemetry import (
    DirectedLink,
    NodeSamples,
    directed_links,
    link_counters,
    load_samples,
    port_rates,
    queue_series,
)

__all__ = ["Analysis", "LinkResult", "analyse", "traffic_results"]

BIN_NS = 500_000_000


@dataclass(slots=True, kw_only=True)
class LinkResult:
    """One direction of a switch-to-switch link over the whole run."""

    name: str
    link: str
    role: str
    lost: int
    delivered: int
    loss_rate: float
    ci95: tuple[float, float]
    configured_loss: float
    expected_lost: tuple[float, float] | None   # 99.9 % range of the configured model
    wire_lost: int | None = None                # what the delay line says it dropped
    within_expected: bool | None = None


@dataclass(slots=True, kw_only=True)
class Analysis:
    t0_ns: int
    links: list[LinkResult]
    directed: list[DirectedLink]
    loss_map: LinkLossMap | None
    samples: dict[str, NodeSamples]
    queue_rows: list[tuple[float, str, str, int, int, int]]
    port_rate_rows: list[tuple[float, str, str, float]]
    traffic: dict[str, Any]
    summary: dict[str, Any] = field(default_factory=dict)


def traffic_results(traffic_dir: Path, hosts: tuple[str, ...]) -> dict[str, Any]:
    """Per-rank summaries, FCTs, flow rate series and totals from the traffic JSON files."""
    ranks: dict[str, Any] = {}
    fct_rows: list[tuple[str, int, int, int, float, int]] = []
    rate_rows: list[list[Any]] = []
    columns: list[str] = []
    for host in hosts:
        p = traffic_dir / f"{host}.json"
        try:
            d = json.loads(p.read_text())
        except (OSError, ValueError):
            ranks[host] = {"finished": False, "error": f"no summary ({p.name})"}
            continue
        ranks[host] = {k: d.get(k) for k in ("rank", "finished", "completion_s", "goodput_tx_bps",
                                             "goodput_rx_bps", "bytes_sent", "bytes_received",
                                             "interrupted", "engine")}
        ranks[host]["fct_s"] = d.get("fct_s")
        ranks[host]["cc"] = d.get("cc")
        # the rank's own check of the data it received (traffic.runner: the all-reduce
        # sum, or every message's CRC-32 against what its peer sent)
        ranks[host]["result_ok"] = (d.get("collective") or {}).get("result_ok")
        ep = d.get("endpoint", {})
        reqs = ep.get("requesters", {}) or {}
        ranks[host]["retx_pkts"] = sum(int(r.get("retx_pkts", 0)) for r in reqs.values())
        ranks[host]["tx_pkts"] = sum(int(r.get("tx_pkts", 0)) for r in reqs.values())
        ranks[host]["repair_pkts"] = sum(int(r.get("repair_pkts", 0)) for r in reqs.values())
        resp = ep.get("responders", {}) or {}
        ranks[host]["fec_repaired"] = sum(int(r.get("fec_repaired", 0)) for r in resp.values())
        for m in d.get("messages", []):
            if m.get("dir") == "tx" and m.get("fct_s") is not None:
                fct_rows.append((host, int(m["qpn"]), int(m.get("peer", -1)), int(m["size"]),
                                 float(m["fct_s"]), int(m.get("retx_pkts", 0))))
        cols = (ep.get("series_columns", {}) or {}).get("requester", [])
        if cols and not columns:
            columns = list(cols)
        base = float(d.get("start_s") or 0.0)
        for qpn, rows in (ep.get("series", {}) or {}).items():
            if str(qpn) not in {str(k) for k in reqs}:
                continue
            for row in rows:
                if len(row) == len(columns):
                    rate_rows.append([host, int(qpn), *row])
        ranks[host]["start_s"] = base
    ccs = [r["cc"] for r in ranks.values() if r.get("cc")]
    senders_cc: dict[str, Any] = {
        "mode": ccs[0]["mode"] if ccs else None,
        "cnps_rx": sum(int(c.get("cnps_rx", 0)) for c in ccs)}
    cut = [c for c in ccs if c.get("rate_cuts") is not None]
    if cut:  # DCQCN or HPCC in the senders
        senders_cc.update(rate_cuts=sum(int(c["rate_cuts"]) for c in cut),
                          cnps_applied=sum(int(c.get("cnps_applied", 0)) for c in cut),
                          min_rate_bps=min(float(c["min_rate_bps"]) for c in cut))
    echo = [c for c in ccs if c.get("echo_acks") is not None]
    if echo:  # HPCC in the senders: ACKs with INT, and each QP's reaction time
        reactions = sorted(float(x) for c in echo for x in c.get("reaction_s") or [])
        senders_cc.update(echo_acks=sum(int(c["echo_acks"]) for c in echo),
                          reaction_s=reactions)
    gp = [r.get("goodput_tx_bps") or 0.0 for r in ranks.values()]
    done = [r.get("completion_s") for r in ranks.values() if r.get("completion_s")]
    return {"ranks": ranks, "fct_rows": fct_rows, "rate_columns": columns,
            "rate_rows": rate_rows, "all_finished": all(r.get("finished") for r in ranks.values()),
            "senders_cc": senders_cc,
            # which data path each rank ran (native C engine or the Python endpoint):
            # `--engine auto` falls back to Python where the engine is not built
            "engines": {h: r.get("engine") for h, r in ranks.items()},
            "goodput_tx_bps_total": float(sum(gp)),
            "completion_s_max": float(max(done)) if done else None}


def analyse(topo: Topology, *, samples_dir: Path, traffic_dir: Path, hosts: tuple[str, ...],
            t0_ns: int | None = None, wire: dict[str, dict[str, dict[str, int]]] | None = None,
            bin_ns: int = BIN_NS) -> Analysis:
    """Everything the results folder shows, from the files of one run.

    ``wire`` is the delay lines' own counters per topology link (``WanLink.stats()``),
    kept beside the measurement as ground truth.
    """
    samples = {sw: load_samples(samples_dir / f"{sw}.jsonl", sw) for sw in topo.switch_names}
    have = [s.t_ns for s in samples.values() if s.t_ns.size]
    if t0_ns is None:
        t0_ns = int(min(t[0] for t in have)) if have else 0
    directed = directed_links(topo)
    counters = link_counters(directed, samples)
    loss_map = None
    if counters.ts_ns.size:
        bins = TimeBins.covering(np.append(counters.ts_ns, t0_ns), bin_ns)
        loss_map = link_loss_map(bins=bins, n_links=len(directed), counters=counters)
    results = []
    by_link = {ln.name: ln for ln in topo.links}
    for dl in directed:
        if loss_map is not None:
            lost = int(max(loss_map.lost[dl.index].sum(), 0))
            deliv = int(loss_map.delivered[dl.index].sum())
        else:
            lost = deliv = 0
        n = lost + deliv
        lo, hi = wilson_interval(lost, n)
        model = by_link[dl.link].loss
        expected = model.loss_count_interval(n) if model.kind is not LossKind.NONE else None
        res = LinkResult(name=dl.name, link=dl.link, role=str(dl.role), lost=lost,
                         delivered=deliv, loss_rate=lost / n if n else float("nan"),
                         ci95=(float(lo), float(hi)), configured_loss=model.mean_loss,
                         expected_lost=expected)
        if expected is not None:
            res.within_expected = bool(expected[0] <= lost <= expected[1])
        if wire and dl.link in wire:
            direction = "ab" if dl.tx_node == by_link[dl.link].a.node else "ba"
            res.wire_lost = int(wire[dl.link].get(direction, {}).get("lost", 0))
        results.append(res)
    tr = traffic_results(traffic_dir, hosts)
    a = Analysis(t0_ns=t0_ns, links=results, directed=directed, loss_map=loss_map,
                 samples=samples, queue_rows=queue_series(samples, t0_ns),
                 port_rate_rows=port_rates(samples, t0_ns), traffic=tr)
    a.summary = summarise(a)
    return a


def lossiest_link(links: list[LinkResult]) -> dict[str, Any] | None:
    """The topology link (both directions together, as its loss is configured) with the
    highest measured loss rate, with its Wilson 95 % interval and whether the count fits
    the configured model's 99.9 % range; None when no link lost anything."""
    by: dict[str, list[LinkResult]] = {}
    for r in links:
        by.setdefault(r.link, []).append(r)
    best: dict[str, Any] | None = None
    for link, rs in by.items():
        lost = sum(r.lost for r in rs)
        deliv = sum(r.delivered for r in rs)
        if lost <= 0 or deliv <= 0:
            continue
        rate = lost / (lost + deliv)
        if best is None or rate > best["loss_rate"]:
            lo, hi = wilson_interval(lost, lost + deliv)
            exp = [r.expected_lost for r in rs if r.expected_lost is not None]
            expected = (sum(e[0] for e in exp), sum(e[1] for e in exp)) if exp else None
            wire = [r.wire_lost for r in rs if r.wire_lost is not None]
            best = {"link": link, "name": max(rs, key=lambda r: r.lost).name,
                    "loss_rate": rate, "ci95": [float(lo), float(hi)], "lost": lost,
                    "delivered": deliv, "configured_loss": rs[0].configured_loss,
                    "expected_lost": expected,
                    "within_expected": None if expected is None
                    else bool(expected[0] <= lost <= expected[1]),
                    "wire_lost": sum(wire) if wire else None,
                    "directions": {r.name: [r.lost, r.delivered] for r in rs}}
    return best


def summarise(a: Analysis) -> dict[str, Any]:
    """The JSON summary: lossy link, deepest queue, goodput, completion, FCT percentiles."""
    worst = lossiest_link(a.links)
    q_max: dict[str, int] = {}
    q_drops: dict[str, int] = {}
    for _, node, ifname, pkts, _, drops in a.queue_rows:
        key = f"{node}/{ifname}"
        q_max[key] = max(q_max.get(key, 0), pkts)
        q_drops[key] = max(q_drops.get(key, 0), drops)
    deepest = max(q_max.items(), key=lambda kv: kv[1], default=(None, 0))
    fct = np.array([r[4] for r in a.traffic["fct_rows"]], dtype=float)
    pct = ({f"p{p}": float(np.percentile(fct, p)) for p in (50, 90, 99)} if fct.size else {})
    return {
        "t0_ns": a.t0_ns,
        "lossy_link": worst,
        "links": [{k: getattr(r, k) for k in r.__slots__} for r in a.links],
        "bottleneck_queue": {"port": deepest[0], "max_pkts": deepest[1],
                             "drops": q_drops.get(deepest[0] or "", 0)},
        "queue_max_pkts": q_max,
        "queue_drops": {k: v for k, v in q_drops.items() if v},
        "goodput_tx_bps_total": a.traffic["goodput_tx_bps_total"],
        "completion_s_max": a.traffic["completion_s_max"],
        "all_finished": a.traffic["all_finished"],
        "fct_s": {"n": int(fct.size), **pct},
        "senders_cc": a.traffic.get("senders_cc"),
        "engines": a.traffic.get("engines"),
        "data_check": data_check(a.traffic["ranks"]),
        "ranks": a.traffic["ranks"],
    }


def data_check(ranks: dict[str, Any]) -> dict[str, Any]:
    """The ranks' verdicts on the data they received: ``ok`` only if every rank wrote a
    summary and found its data right (a rank that did not finish has no verdict)."""
    verdict = {h: r.get("result_ok") for h, r in ranks.items()}
    return {"ok": bool(verdict) and all(v is True for v in verdict.values()),
            "ranks": verdict,
            "wrong": sorted(h for h, v in verdict.items() if v is False),
            "unchecked": sorted(h for h, v in verdict.items() if v is None)}
