"""Measurements, tags and fields the controller exports (the table in README.md).

=================  ======================  ==================================================
measurement        tags                    fields
=================  ======================  ==================================================
int_hop            switch, port            qlen_bytes i, qlen_pkts i, tx_bytes i,
                                           tx_rate_bps f, line_rate_bps i, utilization f,
                                           hop_latency_ns i, samples i
int_flow           src, dst, sport, qp     samples i, hop_count i, path s, last_psn i,
                                           path_changes i, bottleneck_switch i,
                                           bottleneck_qlen_bytes i
int_report_seq     switch, hw_id           received i, lost i, late i, duplicates i
int_agent          agent                   batches i, records i, lost_batches i,
                                           agent_dropped i
int_collector      collector               report_datagrams i, reports i,
                                           report_hop_records i, agent_datagrams i,
                                           host_records i, host_hop_records i, hops i,
                                           flows i, flows_expired i, socket_drops i,
                                           socket_queued_bytes i, truncated i,
                                           listener_errors i, rounds i, rejected i,
                                           cpu_ns_<stage> i,
                                           malformed_<reason> i
cc_rate            src, dst, sport, qp,    rate_bps f, utilisation f, bottleneck_hop i
                   algo
link_loss          link                    lost i, delivered i, loss_rate f
mitigation         verb, target, kind,     seq i, confidence f, onset_to_action_s f,
                   source, outcome         write_s f, hold_s f, reason s, component s
alert              rule, subject, kind     state s, value f, threshold f
=================  ======================  ==================================================

Timestamps are Unix ns: the hop's or flow's last update for int_hop/int_flow, the
export time for the counters.  ``switch`` is the INT node ID, ``port`` the egress
port (0 when the hop records carry no port field), ``src``/``dst`` dotted IPv4,
``qp`` the destination QP in decimal.  ``path`` is ``node:port>node:port>...``
from the INT source to the sink.  tx_rate_bps/utilization are left out until a
hop has two samples.
"""
from __future__ import annotations

import socket
import struct
from typing import Any, TypeAlias

import numpy as np

from controller.export.line_protocol import format_columns, format_line

# What is exported comes from the collector (controller.int, which runs the exporter
# in its CLI): its snapshots and statistics are taken by their fields, not their types
# (controller.int.state.HopSnapshot / FlowSnapshot, controller.int.collector.Collector /
# CollectorStats), so this package needs nothing of controller.int.
HopSnapshot: TypeAlias = Any
FlowSnapshot: TypeAlias = Any
Collector: TypeAlias = Any
CollectorStats: TypeAlias = Any

M_HOP = "int_hop"
M_FLOW = "int_flow"
M_REPORT_SEQ = "int_report_seq"
M_AGENT = "int_agent"
M_COLLECTOR = "int_collector"
M_RATE = "cc_rate"
M_LINK_LOSS = "link_loss"
M_MITIGATION = "mitigation"
M_ALERT = "alert"

TAGS: dict[str, tuple[str, ...]] = {
    M_HOP: ("switch", "port"), M_FLOW: ("src", "dst", "sport", "qp"),
    M_REPORT_SEQ: ("switch", "hw_id"), M_AGENT: ("agent",), M_COLLECTOR: ("collector",),
    M_RATE: ("src", "dst", "sport", "qp", "algo"), M_LINK_LOSS: ("link",),
    M_ALERT: ("rule", "subject", "kind"),
    M_MITIGATION: ("verb", "target", "kind", "source", "outcome"),
}
"""The tag keys of each measurement (the rest of its CSV columns but time_ns are fields)."""

CSV_COLUMNS: dict[str, list[str]] = {
    M_HOP: ["time_ns", "switch", "port", "qlen_bytes", "qlen_pkts", "tx_bytes", "tx_rate_bps",
            "line_rate_bps", "utilization", "hop_latency_ns", "samples"],
    M_FLOW: ["time_ns", "src", "dst", "sport", "qp", "samples", "hop_count", "path", "last_psn",
             "path_changes", "bottleneck_switch", "bottleneck_qlen_bytes"],
    M_REPORT_SEQ: ["time_ns", "switch", "hw_id", "received", "lost", "late", "duplicates"],
    M_AGENT: ["time_ns", "agent", "batches", "records", "lost_batches", "agent_dropped"],
    M_RATE: ["time_ns", "src", "dst", "sport", "qp", "algo", "rate_bps", "utilisation",
             "bottleneck_hop"],
    M_LINK_LOSS: ["time_ns", "link", "lost", "delivered", "loss_rate"],
    M_MITIGATION: ["time_ns", "verb", "target", "kind", "source", "outcome", "seq", "confidence",
                   "onset_to_action_s", "write_s", "hold_s", "component", "reason"],
    M_ALERT: ["time_ns", "rule", "subject", "kind", "state", "value", "threshold"],
}


def _ipv4(values: np.ndarray) -> list[str]:
    return [socket.inet_ntoa(struct.pack("!I", v)) for v in values.tolist()]


def hop_lines(snap: HopSnapshot, *, wall_offset_ns: int, since_ns: int = 0) -> list[str]:
    """int_hop points for hops updated after ``since_ns`` (monotonic)."""
    sel = snap.last_update_ns > since_ns
    if not sel.any():
        return []
    rate = snap.tx_rate_bps[sel]
    line = snap.line_rate_bps[sel].astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        util = np.where(line > 0, rate / line, np.nan)
    return format_columns(
        M_HOP,
        tags={"switch": snap.node_id[sel], "port": snap.egress_port[sel]},
        fields={
            "qlen_bytes": snap.qlen_bytes[sel].astype(np.int64),
            "qlen_pkts": snap.qlen_pkts[sel].astype(np.int64),
            "tx_bytes": snap.tx_bytes[sel].astype(np.int64),
            "tx_rate_bps": rate,
            "line_rate_bps": snap.line_rate_bps[sel].astype(np.int64),
            "utilization": util,
            "hop_latency_ns": snap.hop_latency_ns[sel].astype(np.int64),
            "samples": snap.samples[sel].astype(np.int64),
        },
        time_ns=snap.last_update_ns[sel] + wall_offset_ns,
    )


def flow_lines(flows: FlowSnapshot, hops: HopSnapshot, *, wall_offset_ns: int,
               since_ns: int = 0) -> list[str]:
    """int_flow points for flows updated after ``since_ns`` (monotonic)."""
    sel = np.flatnonzero(flows.last_update_ns > since_ns)
    if len(sel) == 0:
        return []
    width = flows.path_slot.shape[1]
    qlen_by_slot = np.zeros(int(hops.slot.max()) + 1 if len(hops.slot) else 1, np.int64)
    qlen_by_slot[hops.slot] = hops.qlen_bytes
    ps = flows.path_slot[sel]
    present = (ps >= 0) & (ps < len(qlen_by_slot)) & (
        np.arange(width)[None, :] < flows.hop_count[sel][:, None])
    q = np.where(present, qlen_by_slot[np.clip(ps, 0, len(qlen_by_slot) - 1)], -1)
    worst = np.argmax(q, axis=1)
    rows = np.arange(len(sel))
    bq = np.maximum(q[rows, worst], 0)
    bsw = np.where(q[rows, worst] >= 0, flows.path_node[sel][rows, worst], 0)
    nodes, ports, counts = flows.path_node[sel], flows.path_port[sel], flows.hop_count[sel]
    paths = [
        ">".join(f"{n}:{p}" for n, p in zip(nr[:c], pr[:c]))
        for nr, pr, c in zip(nodes.tolist(), ports.tolist(), counts.tolist())
    ]
    return format_columns(
        M_FLOW,
        tags={
            "src": _ipv4(flows.src_ip[sel]),
            "dst": _ipv4(flows.dst_ip[sel]),
            "sport": flows.sport[sel],
            "qp": flows.dest_qp[sel],
        },
        fields={
            "samples": flows.samples[sel].astype(np.int64),
            "hop_count": counts.astype(np.int64),
            "path": np.array(paths, dtype=object),
            "last_psn": flows.last_psn[sel].astype(np.int64),
            "path_changes": flows.path_changes[sel].astype(np.int64),
            "bottleneck_switch": bsw.astype(np.int64),
            "bottleneck_qlen_bytes": bq.astype(np.int64),
        },
        time_ns=flows.last_update_ns[sel] + wall_offset_ns,
    )


def stats_lines(stats: CollectorStats, *, time_ns: int, reasons: list[str],
                collector: str = "controller") -> list[str]:
    """int_collector, int_report_seq and int_agent points at ``time_ns`` (Unix ns);
    ``reasons``: every malformed reason (``Collector.malformed_reasons()``), a column each."""
    out: list[str] = []
    fields: dict[str, np.ndarray] = {
        k: np.array([getattr(stats, k)], np.int64)
        for k in ("report_datagrams", "reports", "report_hop_records", "agent_datagrams",
                  "host_records", "host_hop_records", "hops", "flows", "flows_expired",
                  "socket_drops", "socket_queued_bytes", "truncated", "listener_errors",
                  "rounds")
    }
    for k, v in stats.stage_ns.items():
        fields[f"cpu_ns_{k}"] = np.array([v], np.int64)
    fields["rejected"] = np.array([sum(stats.rejected.values())], np.int64)
    names = reasons
    for r in names:
        fields[f"malformed_{r}"] = np.array([stats.malformed.get(r, 0)], np.int64)
    for r in names:
        fields[f"malformed_agent_{r}"] = np.array([stats.malformed.get("agent_" + r, 0)], np.int64)
    out += format_columns(M_COLLECTOR, tags={"collector": [collector]}, fields=fields,
                          time_ns=time_ns)
    if stats.switches:
        sw = stats.switches
        out += format_columns(
            M_REPORT_SEQ,
            tags={"switch": [s.node_id for s in sw], "hw_id": [s.hw_id for s in sw]},
            fields={
                "received": np.array([s.received for s in sw], np.int64),
                "lost": np.array([s.lost for s in sw], np.int64),
                "late": np.array([s.late for s in sw], np.int64),
                "duplicates": np.array([s.duplicates for s in sw], np.int64),
            },
            time_ns=time_ns,
        )
    if stats.agents:
        ag = stats.agents
        out += format_columns(
            M_AGENT,
            tags={"agent": [a.agent_id for a in ag]},
            fields={
                "batches": np.array([a.batches for a in ag], np.int64),
                "records": np.array([a.records for a in ag], np.int64),
                "lost_batches": np.array([a.lost_batches for a in ag], np.int64),
                "agent_dropped": np.array([a.agent_dropped for a in ag], np.int64),
            },
            time_ns=time_ns,
        )
    return out


def collector_lines(collector: Collector, *, time_ns: int, since_ns: int = 0,
                    name: str = "controller") -> list[str]:
    """Everything a collector knows, as lines (hops and flows updated after since_ns)."""
    hops = collector.hop_snapshot()
    flows = collector.flow_snapshot()
    off = collector.wall_offset_ns
    return (hop_lines(hops, wall_offset_ns=off, since_ns=since_ns)
            + flow_lines(flows, hops, wall_offset_ns=off, since_ns=since_ns)
            + stats_lines(collector.stats(), time_ns=time_ns, collector=name,
                          reasons=collector.malformed_reasons()))


def rate_lines(*, src_ip: np.ndarray, dst_ip: np.ndarray, sport: np.ndarray,
               dest_qp: np.ndarray, rate_bps: np.ndarray, time_ns: np.ndarray | int,
               utilisation: np.ndarray | None = None, bottleneck_hop: np.ndarray | None = None,
               algo: str = "hpcc") -> list[str]:
    """cc_rate points: one per flow (arrays of equal length; time in Unix ns).

    E.g. with a FlowSnapshot ``f`` and the engine's decisions ``d`` for rows ``f.slot``:
    ``rate_lines(src_ip=f.src_ip, dst_ip=f.dst_ip, sport=f.sport, dest_qp=f.dest_qp,
    rate_bps=d.rate_bps, utilisation=d.utilisation, bottleneck_hop=d.bottleneck_hop,
    time_ns=time.time_ns())``.
    """
    n = len(rate_bps)
    fields: dict[str, np.ndarray] = {"rate_bps": np.asarray(rate_bps, np.float64)}
    if utilisation is not None:
        fields["utilisation"] = np.asarray(utilisation, np.float64)
    if bottleneck_hop is not None:
        fields["bottleneck_hop"] = np.asarray(bottleneck_hop, np.int64)
    return format_columns(
        M_RATE,
        tags={"src": _ipv4(np.asarray(src_ip, np.uint32)), "dst": _ipv4(np.asarray(dst_ip, np.uint32)),
              "sport": np.asarray(sport), "qp": np.asarray(dest_qp), "algo": [algo] * n},
        fields=fields,
        time_ns=time_ns,
    )


def link_loss_lines(*, links: list[str], lost: np.ndarray, delivered: np.ndarray,
                    bin_time_ns: np.ndarray) -> list[str]:
    """link_loss points from a links x bins map (e.g. controller.lossmap's LinkLossMap:
    ``lost``/``delivered`` of shape (n_links, n_bins), ``bin_time_ns`` the Unix time of
    each bin's start).  Cells with nothing lost and nothing delivered are left out."""
    lost = np.asarray(lost, np.int64)
    deliv = np.asarray(delivered, np.int64)
    seen = (lost + deliv) > 0
    li, bi = np.nonzero(seen)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = lost[li, bi] / (lost[li, bi] + deliv[li, bi])
    return format_columns(
        M_LINK_LOSS,
        tags={"link": [links[i] for i in li.tolist()]},
        fields={"lost": lost[li, bi], "delivered": deliv[li, bi], "loss_rate": rate},
        time_ns=np.asarray(bin_time_ns, np.int64)[bi],
    )


def mitigation_lines(actions: list[dict[str, Any]]) -> list[str]:
    """One ``mitigation`` point per action (``controller.mitigate.Action.as_dict()``),
    at the time it was decided; onset_to_action_s is left out when the finding had no
    onset, write_s when nothing was written."""
    out = []
    for a in actions:
        fields: dict[str, Any] = {"seq": int(a["seq"]), "confidence": float(a.get("confidence") or 0.0),
                                  "hold_s": float(a.get("hold_s") or 0.0),
                                  "component": str(a.get("component") or ""),
                                  "reason": str(a.get("reason") or "")}
        if a.get("onset") is not None:
            fields["onset_to_action_s"] = float(a["at"]) - float(a["onset"])
        if a.get("write_s") is not None:
            fields["write_s"] = float(a["write_s"])
        line = format_line(M_MITIGATION, {k: str(a.get(k) or "") for k in
                                          ("verb", "target", "kind", "source", "outcome")},
                           fields, int(float(a["at"]) * 1e9))
        if line is not None:
            out.append(line)
    return out


def alert_lines(alerts: list[dict[str, object]], *, time_ns: int) -> list[str]:
    """One line per alert that fired or resolved (``state`` "firing" / "resolved")."""
    out = []
    for a in alerts:
        line = format_line(M_ALERT, {"rule": str(a["rule"]), "subject": str(a["subject"]),
                                     "kind": str(a["kind"])},
                           {"state": str(a["state"]), "value": float(a["value"]),  # type: ignore[arg-type]
                            "threshold": float(a["threshold"])}, time_ns)  # type: ignore[arg-type]
        if line:
            out.append(line)
    return out
