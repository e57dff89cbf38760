"""The page's model, built from the controller's snapshot (or a state file) and the
topology: nodes, every link direction with its utilisation, queue and loss, the flows,
the loss map over time, the diagnosis, the alerts and the mitigation's actions.

Why server-side: the snapshot keys hops by (switch, egress port) and losses by the
receiving port; joining them to the topology's link directions once here keeps the
page a plain renderer and lets tests check the join without a browser.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.topology.model import LinkRole, Topology
from controller.topology.routing import directed_links

from .layout import node_positions

MITIGATION_ROWS = 50   # the page lists this many of the latest actions (the state keeps 200)


def _mitigation(state: Mapping[str, Any]) -> dict[str, Any] | None:
    """The mitigation's mode, what it keeps traffic off now and its latest actions,
    newest first (``None``: the controller runs without ``--mitigate``).  Each action
    keeps its reason, evidence and time: an operator reads why a route moved here."""
    m = state.get("mitigation")
    if not isinstance(m, Mapping):
        return None
    acts = [a for a in m.get("actions") or () if isinstance(a, Mapping)]
    keep = ("seq", "verb", "target", "kind", "component", "confidence", "source", "reason",
            "evidence", "at", "undoes", "outcome", "write_s")
    return {"mode": m.get("mode"), "avoided": list(m.get("avoided") or ()),
            "fec_links": list(m.get("fec_links") or ()), "counts": dict(m.get("counts") or {}),
            "errors": dict(m.get("errors") or {}),
            "actions": [{k: a.get(k) for k in keep} for a in reversed(acts[-MITIGATION_ROWS:])]}


def _direction_rows(topo: Topology, state: Mapping[str, Any],
                    avoided: frozenset[str]) -> list[dict[str, Any]]:
    """``avoided``: the links the mitigation keeps the routes off (both directions)."""
    hops = {(h.get("switch"), int(h.get("egress_port", -1))): h for h in state.get("hops", ())}
    lm = state.get("lossmap") or {}
    loss_idx = {name: i for i, name in enumerate(lm.get("links", ()))}
    lost_total = {r.get("link"): r.get("lost") for r in state.get("losses", ())}
    queue_pkts = {ln.name: ln.queue_pkts for ln in topo.links}
    rows = []
    for d in directed_links(topo, roles=(LinkRole.FABRIC, LinkRole.WAN, LinkRole.HOST)):
        h = hops.get((d.src, d.src_port))
        i = loss_idx.get(d.name)
        ci = (lm.get("ci95") or [None] * (i + 1))[i] if i is not None else None
        rows.append({
            "name": d.name, "link": d.link, "src": d.src, "dst": d.dst, "role": str(d.role),
            "utilisation": None if h is None else h.get("utilisation"),
            "tx_rate_bps": None if h is None else h.get("tx_rate_bps"),
            "qlen_pkts": None if h is None else h.get("qlen_pkts"),
            "queue_limit_pkts": queue_pkts.get(d.link),
            "loss_rate": None if i is None else (lm.get("rate") or [None] * (i + 1))[i],
            "recent_loss_rate": None if i is None else (lm.get("recent_rate") or [None] * (i + 1))[i],
            "loss_ci95": ci, "lost": lost_total.get(d.name),
            "avoided": d.link in avoided})
    return rows


def build_view(state: Mapping[str, Any], topo: Topology, *, live: bool) -> dict[str, Any]:
    """The JSON the page renders; ``live``: the controller is running (the page
    polls), else a finished run's folder (one fetch)."""
    pos = node_positions(topo)
    nodes = [{"name": s.name, "kind": "switch", "role": str(s.role), "site": s.site,
              "x": pos[s.name][0], "y": pos[s.name][1]} for s in topo.switches]
    nodes += [{"name": h.name, "kind": "host", "role": "host", "site": "",
               "ip": h.ipv4, "x": pos[h.name][0], "y": pos[h.name][1]} for h in topo.hosts]
    alerts = state.get("alerts") or {}
    mitigation = _mitigation(state)
    avoided = frozenset(mitigation["avoided"]) if mitigation else frozenset()
    return {"topology": topo.name, "live": live, "running": bool(state.get("running", False)),
            "updated_unix_s": state.get("updated_unix_s"),
            "nodes": nodes, "directions": _direction_rows(topo, state, avoided), "flows": [f for f in state.get("flows", ()) if f.get("kind") != "ack"],  # data flows
            "lossmap": state.get("lossmap"), "diagnosis": state.get("diagnosis"),
            "alerts": {"active": alerts.get("active", []), "resolved": alerts.get("resolved", []),
                       "rules": alerts.get("rules", [])},
            "mitigation": mitigation,
            "collector": state.get("collector", {})}
