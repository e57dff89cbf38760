"""Synthetic ring all-reduce runs with one injected fault, and the telemetry it leaves.

Why: unit tests of the diagnosis need every fault kind, at any place, without a test
bed; this model produces the records the ranks would log and the series the
controller would export, from the topology's paths, rates and delays.  It is a
coarse model (per-step transfer times, binned counters), not an emulator: enough to
check that each kind's signature leads to the right culprit, and that a 1 % gray
loss on one WAN direction and a slow receiver slowing the same transfer by as much
are told apart.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from controller.diagnose.evidence import Evidence, FlowSample, LossSample, PortSample, Telemetry
from controller.topology.model import Topology
from controller.topology.routing import paths
from traffic.collog.records import CollRecord

__all__ = ["SynthFault", "synth_ring", "write_run"]

BIN_S = 0.25


@dataclass(frozen=True, slots=True, kw_only=True)
class SynthFault:
    kind: str                 # common.faults.FAULT_KINDS
    target: str               # link "s1:3->s5:3", port "s3:3", host "h5", rank "2"
    onset: float              # seconds after the run's start
    loss: float = 0.01        # gray_loss
    factor: float = 0.2       # rate_degraded: remaining share of the rate
    delay_s: float = 0.2      # slow_receiver: extra time per transfer into / out of the host
    ack_delay_s: float | None = None   # ... out of it (its ACKs wait; None: delay_s / 2)
    late_s: float = 0.3       # straggler: extra time before each step


def _rng(seed: int, *names: object) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(repr(names).encode())])


def synth_ring(topo: Topology, hosts: list[str], fault: SynthFault | None, *, seed: int = 1,
               iterations: int = 12, step_bytes: int = 128 << 10, rate_bps: float = 50e6,
               t0: float = 1.7e9, known_paths: bool = True, noise: float = 0.08) -> Evidence:
    n = len(hosts)
    ip = {h.name: h.ipv4 for h in topo.hosts}
    delay = {}
    rates = {}
    for ln in topo.links:
        for near, far in ((ln.a, ln.b), (ln.b, ln.a)):
            delay[f"{near}->{far}"] = ln.delay_ms / 1e3
            rates[f"{near}->{far}"] = ln.rate_mbps * 1e6
    pair_path: dict[int, tuple[str, ...]] = {}
    for r in range(n):
        ps = paths(topo, hosts[r], hosts[(r + 1) % n])
        pick = zlib.crc32(f"{seed}-{r}".encode()) % len(ps)
        pair_path[r] = tuple(str(h) for h in ps[pick])
    on = t0 + fault.onset if fault else float("inf")
    f_link = fault.target if fault and fault.kind in (
        "gray_loss", "rate_degraded", "congestion", "link_down") else None
    if fault and fault.kind == "tiny_queue":
        sw, _, port = fault.target.partition(":")
        ln = topo.link_at(sw, int(port))
        f_link = f"{sw}:{port}->{ln.other(sw)}"
    pkts = max(1, step_bytes // 1024)
    recs: list[CollRecord] = []
    traffic: list[tuple[str, float, float, int]] = []   # link, t0, t1, packets
    link_lost: list[tuple[str, float, int]] = []
    recv_end = [t0] * n   # when each rank's input for its next step arrived
    rnd = _rng(seed, "ring")
    hung = False
    for it in range(iterations):
        for s in range(2 * (n - 1)):
            new_end = list(recv_end)
            for r in range(n):
                dst = (r + 1) % n
                start = recv_end[r] + 0.001
                if fault and fault.kind == "straggler" and str(r) == fault.target and start >= on:
                    start += fault.late_s
                path = pair_path[r]
                rtt = 2 * sum(delay[x] for x in path)
                dur = step_bytes * 8 / rate_bps + rtt
                dur *= float(np.exp(rnd.normal(0, noise)))
                retx = 0
                end: float | None = None
                crosses = f_link in path
                if start >= on and fault is not None:
                    if crosses and fault.kind == "gray_loss":
                        retx = int(rnd.binomial(pkts, fault.loss))
                        dur += retx * (rtt + 0.004) + (rtt if retx else 0)
                    elif crosses and fault.kind == "rate_degraded":
                        dur += step_bytes * 8 / (rate_bps * fault.factor) - step_bytes * 8 / rate_bps
                    elif crosses and fault.kind == "congestion":
                        dur *= 2.5
                    elif crosses and fault.kind == "tiny_queue":
                        retx = int(rnd.binomial(pkts, 0.03)) + 1
                        dur += retx * 0.004 + rtt
                    elif fault.kind == "slow_receiver" and hosts[dst] == fault.target:
                        dur += fault.delay_s
                    elif fault.kind == "slow_receiver" and hosts[r] == fault.target:
                        dur += (fault.delay_s / 2 if fault.ack_delay_s is None
                                else fault.ack_delay_s)   # its ACKs are processed late
                    if crosses and fault.kind == "link_down":
                        hung = True
                if not (crosses and fault is not None and fault.kind == "link_down"
                        and start >= on):
                    end = start + dur
                qpn = r << 16 | dst << 8
                recs.append(CollRecord(rank=r, comm=f"allreduce-{n}", op="allreduce", seq=it,
                                       step=s, dir="send", peer=dst, bytes=step_bytes, qpn=qpn,
                                       start=start, end=end, retx=retx, host=ip[hosts[r]]))
                if end is not None:
                    recs.append(CollRecord(rank=dst, comm=f"allreduce-{n}", op="allreduce",
                                           seq=it, step=s, dir="recv", peer=r,
                                           bytes=step_bytes, qpn=qpn, start=start + rtt / 2,
                                           end=end, host=ip[hosts[dst]]))
                    new_end[dst] = end
                    for x in path:
                        traffic.append((x, start, end, pkts + retx))
                    if f_link in path and fault and fault.kind == "gray_loss" and retx:
                        link_lost.append((f_link, end, retx))
                else:
                    up = path[:path.index(f_link)] if f_link in path else path
                    for x in up:   # retransmissions reach the dead link, no further
                        traffic.append((x, start, start + 5.0, 20))
                    new_end[dst] = float("inf")
            recv_end = new_end
            if hung:
                break
        if hung:
            break
    t_end = max(r.end or r.start for r in recs) + (5.0 if hung else 0.2)
    tel = _telemetry(topo, hosts, fault, f_link, traffic, link_lost, pair_path, t0, t_end,
                     on, rates, known_paths, seed)
    return Evidence(topo=topo, records=recs, telemetry=tel, now=t_end)


def _telemetry(topo: Topology, hosts: list[str], fault: SynthFault | None, f_link: str | None,
               traffic: list[tuple[str, float, float, int]], link_lost: list[tuple[str, float, int]],
               pair_path: dict[int, tuple[str, ...]], t0: float, t_end: float, on: float,
               rates: dict[str, float], known_paths: bool, seed: int) -> Telemetry:
    tel = Telemetry()
    nb = int((t_end - t0) / BIN_S) + 1
    fabric = {f"{near}->{far}" for ln in topo.links if ln.role != "host"
              for near, far in ((ln.a, ln.b), (ln.b, ln.a))}
    deliv: dict[str, np.ndarray] = {}
    for link, a, b, k in traffic:
        arr = deliv.setdefault(link, np.zeros(nb))
        i0, i1 = int((a - t0) / BIN_S), int((min(b, t_end) - t0) / BIN_S)
        arr[i0:i1 + 1] += k / (i1 - i0 + 1)
    lost: dict[str, np.ndarray] = {}
    for link, t, k in link_lost:
        lost.setdefault(link, np.zeros(nb))[min(nb - 1, int((t - t0) / BIN_S))] += k
    # every bin of every link that carried traffic, empty ones too: the kernel routers'
    # sampler reads all counters each interval (the controller leaves empty cells out;
    # tests that need its form drop them)
    for link in sorted(fabric & set(deliv)):
        d, lo = deliv[link], lost.get(link, np.zeros(nb))
        tel.link_loss[link] = [LossSample(t=t0 + (i + 1) * BIN_S, lost=int(lo[i]),
                                          delivered=round(d[i])) for i in range(nb)]
    rnd = _rng(seed, "tel")
    for link in sorted(deliv):
        near = link.split("->")[0]
        sw, _, port = near.partition(":")
        if not any(s.name == sw for s in topo.switches):
            continue
        rate = rates[link]
        samples = []
        for i in range(nb):
            t = t0 + (i + 1) * BIN_S
            q, tx = int(rnd.integers(0, 3)), rate * float(rnd.uniform(0.3, 0.6))
            if fault and link == f_link and t >= on:
                if fault.kind == "rate_degraded":
                    q, tx = int(rnd.integers(20, 60)), rate * fault.factor
                elif fault.kind == "congestion":
                    q, tx = int(rnd.integers(20, 60)), rate * float(rnd.uniform(0.95, 1.0))
                elif fault.kind == "tiny_queue":
                    q = int(rnd.integers(1, 3))
            samples.append(PortSample(t=t, qlen_pkts=q, tx_rate_bps=tx, line_rate_bps=rate))
        tel.ports[(sw, int(port))] = samples
    if fault and fault.kind == "tiny_queue" and f_link:
        sw, _, port = f_link.split("->")[0].partition(":")
        tel.port_drops[(sw, int(port))] = [
            (t0 + (i + 1) * BIN_S, 0 if t0 + (i + 1) * BIN_S < on
             else 3 * int((t0 + (i + 1) * BIN_S - on) / BIN_S + 1)) for i in range(nb)]
    ip = {h.name: h.ipv4 for h in topo.hosts}
    n = len(hosts)
    if known_paths:
        for r, p in pair_path.items():
            lost_f = 0
            if fault and fault.kind == "tiny_queue" and f_link in p:
                lost_f = 5
            for i in range(nb):
                t = t0 + (i + 1) * BIN_S
                tel.flows.append(FlowSample(t=t, src=ip[hosts[r]], dst=ip[hosts[(r + 1) % n]],
                                            qp=r << 16 | ((r + 1) % n) << 8, path=p,
                                            lost=lost_f if t >= on else 0))
    if fault and fault.kind == "congestion" and f_link:
        for i in range(nb):
            t = t0 + (i + 1) * BIN_S
            if t >= on:
                tel.flows.append(FlowSample(t=t, src="10.9.9.1", dst="10.9.9.2", qp=7,
                                            path=(f_link,)))
    return tel


def write_run(ev: Evidence, out_dir: str | Path, topology_file: str | Path) -> Path:
    """Write ``ev`` as a run directory: the ranks' logs, the controller's CSV exports,
    the switches' statistics and the topology, in the formats the loaders read."""
    import csv
    import json
    import shutil

    from controller.topology.routing import node_names_by_id
    from traffic.collog.writer import CollectiveLogWriter

    d = Path(out_dir)
    (d / "csv").mkdir(parents=True, exist_ok=True)
    shutil.copy(topology_file, d / "topology.yaml")
    writers: dict[int, CollectiveLogWriter] = {}
    for r in ev.records:
        w = writers.get(r.rank) or writers.setdefault(
            r.rank, CollectiveLogWriter(d / "collectives", r.rank))
        w.write(r)
    for w in writers.values():
        w.close()
    ids = {v: k for k, v in node_names_by_id(ev.topo).items()}
    tel = ev.telemetry

    def table(name: str, cols: list[str], rows: list[list[object]]) -> None:
        with (d / "csv" / f"{name}.csv").open("w", newline="") as fh:
            wr = csv.writer(fh)
            wr.writerow(cols)
            wr.writerows(rows)
    table("link_loss", ["time_ns", "link", "lost", "delivered", "loss_rate"],
          [[int(s.t * 1e9), link, s.lost, s.delivered, s.lost / max(1, s.lost + s.delivered)]
           for link, ss in tel.link_loss.items() for s in ss])
    table("int_hop", ["time_ns", "switch", "port", "qlen_bytes", "qlen_pkts", "tx_rate_bps",
                      "line_rate_bps"],
          [[int(s.t * 1e9), ids[sw], port, s.qlen_pkts * 1024, s.qlen_pkts, s.tx_rate_bps,
            s.line_rate_bps] for (sw, port), ss in tel.ports.items() for s in ss])

    def int_path(p: tuple[str, ...]) -> str:
        hops = [x.split("->")[0].split(":") for x in p]
        return ">".join(f"{ids[n]}:{port}" for n, port in hops if n in ids)
    table("int_flow", ["time_ns", "src", "dst", "sport", "qp", "path"],
          [[int(f.t * 1e9), f.src, f.dst, 0, f.qp, int_path(f.path)] for f in tel.flows])
    last: dict[tuple[str, str, int], int] = {}
    for f in tel.flows:
        last[(f.src, f.dst, f.qp)] = f.lost
    (d / "controller_state.json").write_text(json.dumps(
        {"version": 1, "flows": [{"src": s, "dst": t, "qp": q, "lost": n}
                                 for (s, t, q), n in last.items()]}))
    with (d / "switch_stats.jsonl").open("w") as fh:
        for (sw, port), pts in tel.port_drops.items():
            for t, n in pts:
                fh.write(json.dumps({"t": t, "switch": sw, "ports": [
                    {"port": port, "tail_drops": n}]}) + "\n")
    return d
