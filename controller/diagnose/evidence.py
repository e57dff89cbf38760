"""What the diagnosis reads: collective records, the controller's telemetry, the topology.

Why one in-memory form: the same engine runs on a finished run's output directory,
inside the running controller, and on synthetic data in tests; each source fills a
:class:`Telemetry` of plain time series keyed by the topology's names (directed links
``s1:3->s5:3``, switch egress ports ``("s3", 2)``), and :meth:`Evidence.until` cuts
everything at a time, which is how time-to-localise is measured.

Files read from the controller's ``--out`` directory (all optional):
``csv/link_loss.csv`` (time_ns, link, lost, delivered), ``csv/int_hop.csv`` (time_ns,
switch node ID, egress port, queue, tx rate, line rate), ``csv/int_flow.csv`` (the INT
path ``node:port>...`` of each flow, for the path a rank pair really took), and
``controller_state.json`` (per-flow PSN-gap losses) and ``switch_stats.jsonl`` (lines
``{"t": unix_s, "switch": "s3", "ports": [{"port": 2, "tail_drops": N,
"rx_socket_drops": M, "queue_size_pkts": Q}, ...]}``: the switches' own per-port statistics, sampled by the
test bed) and ``host_stats.jsonl`` (lines ``{"t": unix_s, "host": "h7",
"udp_rcvbuf_errors": N}``: the datagrams the kernel dropped on the host's full UDP
sockets, sampled by the test bed).
"""
from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from controller.topology.model import Topology
from controller.topology.routing import node_names_by_id, paths
from traffic.collog.records import CollRecord
from traffic.collog.result import CollEvent

__all__ = ["Evidence", "FlowSample", "LossSample", "PortSample", "Telemetry", "load_telemetry",
           "save_telemetry"]


@dataclass(frozen=True, slots=True)
class LossSample:
    t: float           # Unix seconds, end of the bin
    lost: int
    delivered: int


@dataclass(frozen=True, slots=True)
class PortSample:
    t: float
    qlen_pkts: int
    tx_rate_bps: float | None
    line_rate_bps: float | None


@dataclass(frozen=True, slots=True)
class FlowSample:
    t: float
    src: str           # host IPv4
    dst: str
    qp: int
    path: tuple[str, ...]   # directed links crossed (switch egress ports resolved)
    lost: int = 0      # PSN gaps seen at the receiver (whole flow, so far)


@dataclass(slots=True)
class Telemetry:
    link_loss: dict[str, list[LossSample]] = field(default_factory=dict)
    ports: dict[tuple[str, int], list[PortSample]] = field(default_factory=dict)
    flows: list[FlowSample] = field(default_factory=list)
    # switch egress port -> [(unix_s, tail drops so far)] (the switches' own statistics)
    port_drops: dict[tuple[str, int], list[tuple[float, int]]] = field(default_factory=dict)
    # switch port -> [(unix_s, frames dropped on its full receive socket so far)]: lost
    # on arrival, before the pipeline (the Python target's own statistics)
    port_rx_drops: dict[tuple[str, int], list[tuple[float, int]]] = field(default_factory=dict)
    # switch egress port -> [(unix_s, packets its queue may hold)]
    port_sizes: dict[tuple[str, int], list[tuple[float, int]]] = field(default_factory=dict)
    # host -> [(unix_s, datagrams dropped on its full UDP sockets so far)]
    host_drops: dict[str, list[tuple[float, int]]] = field(default_factory=dict)

    def until(self, t: float) -> Telemetry:
        return self._cut(lambda x: x <= t)

    def since(self, t: float) -> Telemetry:
        return self._cut(lambda x: x >= t)

    def _cut(self, keep: Callable[[float], bool]) -> Telemetry:
        return Telemetry(
            link_loss={k: [s for s in v if keep(s.t)] for k, v in self.link_loss.items()},
            ports={k: [s for s in v if keep(s.t)] for k, v in self.ports.items()},
            flows=[f for f in self.flows if keep(f.t)],
            port_drops={k: [x for x in v if keep(x[0])] for k, v in self.port_drops.items()},
            port_rx_drops={k: [x for x in v if keep(x[0])]
                           for k, v in self.port_rx_drops.items()},
            port_sizes={k: [x for x in v if keep(x[0])] for k, v in self.port_sizes.items()},
            host_drops={k: [x for x in v if keep(x[0])] for k, v in self.host_drops.items()})


@dataclass(slots=True)
class Evidence:
    topo: Topology
    records: list[CollRecord]
    telemetry: Telemetry = field(default_factory=Telemetry)
    now: float | None = None       # diagnosis time; None: the end of the data
    # from library logs: errors and watchdog lines, each process group's members, and
    # the ranks whose logs were read (a flight-recorder dump without entries included)
    events: list[CollEvent] = field(default_factory=list)
    members: dict[str, list[int]] = field(default_factory=dict)
    ranks_seen: set[int] = field(default_factory=set)

    def until(self, t: float) -> Evidence:
        """The evidence as a live diagnosis at time ``t`` would have seen it."""
        recs = []
        for r in self.records:
            if r.start > t:
                continue
            recs.append(r if r.end is None or r.end <= t else replace(r, end=None, srtt=None))
        return Evidence(topo=self.topo, records=recs, telemetry=self.telemetry.until(t), now=t,
                        events=[e for e in self.events if e.t is None or e.t <= t],
                        members=self.members, ranks_seen=self.ranks_seen)

    @property
    def end_time(self) -> float:
        if self.now is not None:
            return self.now
        ends = [r.end or r.start for r in self.records]
        return max(ends) if ends else 0.0

    def host_of_ip(self) -> dict[str, str]:
        return {h.ipv4: h.name for h in self.topo.hosts}

    def rank_hosts(self) -> dict[int, str]:
        """Rank -> topology host name, from the records' addresses (or host names)."""
        by_ip = self.host_of_ip()
        names = {h.name for h in self.topo.hosts}
        out: dict[int, str] = {}
        for r in self.records:
            if r.rank not in out and r.host:
                h = by_ip.get(r.host) or (r.host if r.host in names else None)
                if h:
                    out[r.rank] = h
        return out

    def pair_paths(self, src: str, dst: str) -> list[tuple[str, ...]]:
        """Directed links host ``src`` -> host ``dst`` crosses: the INT path when
        telemetry saw the pair, else every shortest (ECMP) path."""
        by_ip = {h.name: h.ipv4 for h in self.topo.hosts}
        seen = {f.path for f in self.telemetry.flows
                if f.src == by_ip.get(src) and f.dst == by_ip.get(dst) and f.path}
        if seen:
            return sorted(seen)
        return [tuple(str(h) for h in p) for p in paths(self.topo, src, dst)]


def _rows(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _int_path(text: str, topo: Topology, src_host: str | None, dst_host: str | None
              ) -> tuple[str, ...]:
    """``node:port>node:port`` (INT node IDs, egress ports) -> directed link names."""
    names = node_names_by_id(topo)
    out = []
    if src_host:
        h = next(x for x in topo.hosts if x.name == src_host)
        out.append(f"{h.name}:0->{h.switch}:{h.port}")
    for part in filter(None, text.split(">")):
        node, _, port = part.partition(":")
        sw = names.get(int(node))
        if sw is None:
            continue
        ln = topo.link_at(sw, int(port))
        far = ln.other(sw)
        out.append(f"{sw}:{port}->{far.node}:{far.port}")
    return tuple(out)


def load_telemetry(out_dir: str | os.PathLike[str], topo: Topology) -> Telemetry:
    """The controller's exported telemetry under ``out_dir`` (missing files: empty)."""
    d = Path(out_dir)
    tel = Telemetry()
    for row in _rows(d / "csv" / "link_loss.csv"):
        tel.link_loss.setdefault(row["link"], []).append(LossSample(
            t=int(row["time_ns"]) / 1e9, lost=int(float(row["lost"] or 0)),
            delivered=int(float(row["delivered"] or 0))))
    names = node_names_by_id(topo)
    for row in _rows(d / "csv" / "int_hop.csv"):
        sw = names.get(int(row["switch"]))
        if sw is None:
            continue

        tx, line = (float(row[k]) if row.get(k) not in (None, "") else None
                    for k in ("tx_rate_bps", "line_rate_bps"))
        tel.ports.setdefault((sw, int(row["port"])), []).append(PortSample(
            t=int(row["time_ns"]) / 1e9, qlen_pkts=int(float(row["qlen_pkts"] or 0)),
            tx_rate_bps=tx, line_rate_bps=line))
    lost: dict[tuple[str, str, int], int] = {}
    state = d / "controller_state.json"
    if state.is_file():
        try:
            for f in json.loads(state.read_text()).get("flows", []):
                lost[(f["src"], f["dst"], int(f["qp"]))] = int(f.get("lost") or 0)
        except (ValueError, KeyError, TypeError):
            pass
    by_ip = {h.ipv4: h.name for h in topo.hosts}
    for row in _rows(d / "csv" / "int_flow.csv"):
        src, dst, qp = row["src"], row["dst"], int(row["qp"])
        tel.flows.append(FlowSample(
            t=int(row["time_ns"]) / 1e9, src=src, dst=dst, qp=qp,
            path=_int_path(row.get("path", ""), topo, by_ip.get(src), by_ip.get(dst)),
            lost=lost.get((src, dst, qp), 0)))
    stats = d / "switch_stats.jsonl"
    if stats.is_file():
        for text in stats.read_text().splitlines():
            try:
                snap = json.loads(text)
                for prt in snap["ports"]:
                    key = (snap["switch"], int(prt["port"]))
                    if "tail_drops" in prt:
                        tel.port_drops.setdefault(key, []).append(
                            (float(snap["t"]), int(prt["tail_drops"])))
                    if "rx_socket_drops" in prt:
                        tel.port_rx_drops.setdefault(key, []).append(
                            (float(snap["t"]), int(prt["rx_socket_drops"])))
                    if "queue_size_pkts" in prt:
                        tel.port_sizes.setdefault(key, []).append(
                            (float(snap["t"]), int(prt["queue_size_pkts"])))
            except (ValueError, KeyError, TypeError):
                continue
    hstats = d / "host_stats.jsonl"
    if hstats.is_file():
        for text in hstats.read_text().splitlines():
            try:
                snap = json.loads(text)
                tel.host_drops.setdefault(str(snap["host"]), []).append(
                    (float(snap["t"]), int(snap["udp_rcvbuf_errors"])))
            except (ValueError, KeyError, TypeError):
                continue
    for ls in tel.link_loss.values():
        ls.sort(key=lambda s: s.t)
    for ps in tel.ports.values():
        ps.sort(key=lambda s: s.t)
    for series in (*tel.port_drops.values(), *tel.port_rx_drops.values(),
                   *tel.port_sizes.values(), *tel.host_drops.values()):
        series.sort()
    return tel


def save_telemetry(tel: Telemetry, out_dir: str | os.PathLike[str], topo: Topology) -> Path:
    """Write ``tel`` under ``out_dir`` as the files :func:`load_telemetry` reads.

    Why: telemetry that no controller exported (the kernel routers' counter samples of
    ``experiment faults``) is diagnosed in memory by the run that took it; saved in the
    controller's own layout next to the run's collective logs, ``controller diagnose
    --out DIR`` reads the same evidence afterwards (on P4 switches: one trial's cut of
    the controller's exports, with the switches' polled tail drops it never exported).
    A flow's ``lost`` is written as its last sample's (the controller's state file).
    """
    d = Path(out_dir)
    (d / "csv").mkdir(parents=True, exist_ok=True)
    with (d / "csv" / "link_loss.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["time_ns", "link", "lost", "delivered"])
        for link, samples in sorted(tel.link_loss.items()):
            w.writerows([round(s.t * 1e9), link, s.lost, s.delivered] for s in samples)
    ids = {name: node_id for node_id, name in node_names_by_id(topo).items()}
    with (d / "csv" / "int_hop.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["time_ns", "switch", "port", "qlen_pkts", "tx_rate_bps", "line_rate_bps"])
        for (sw, port), ports in sorted(tel.ports.items()):
            if sw in ids:
                w.writerows([round(s.t * 1e9), ids[sw], port, s.qlen_pkts,
                             "" if s.tx_rate_bps is None else repr(s.tx_rate_bps),
                             "" if s.line_rate_bps is None else repr(s.line_rate_bps)]
                            for s in ports)
    by_time: dict[tuple[float, str], dict[int, dict[str, int]]] = {}
    for field_name, series in (("tail_drops", tel.port_drops),
                               ("rx_socket_drops", tel.port_rx_drops),
                               ("queue_size_pkts", tel.port_sizes)):
        for (sw, port), drops in series.items():
            for t, n in drops:
                by_time.setdefault((t, sw), {}).setdefault(port, {"port": port})[field_name] = n
    (d / "switch_stats.jsonl").write_text("".join(
        json.dumps({"t": t, "switch": sw, "ports": [ps[p] for p in sorted(ps)]}) + "\n"
        for (t, sw), ps in sorted(by_time.items())))
    (d / "host_stats.jsonl").write_text("".join(
        json.dumps({"t": t, "host": h, "udp_rcvbuf_errors": n}) + "\n"
        for t, h, n in sorted((t, h, n) for h, v in tel.host_drops.items() for t, n in v)))
    if tel.flows:
        with (d / "csv" / "int_flow.csv").open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["time_ns", "src", "dst", "qp", "path"])
            w.writerows([round(f.t * 1e9), f.src, f.dst, f.qp, ">".join(
                f"{ids[near]}:{port}" for near, port in
                (x.split("->")[0].split(":") for x in f.path) if near in ids)]
                for f in tel.flows)
        lost = {(f.src, f.dst, f.qp): f.lost for f in sorted(tel.flows, key=lambda f: f.t)}
        (d / "controller_state.json").write_text(json.dumps({"flows": [
            {"src": s, "dst": t, "qp": q, "lost": n} for (s, t, q), n in lost.items()]}))
    return d

