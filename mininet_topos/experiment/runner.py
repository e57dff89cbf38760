"""Run experiment specs on the test bed and write their results folders.

Why: this is the one place that joins every part in order: topology (+ the spec's link
changes) -> Mininet network with switches (-> controller) -> samplers -> one traffic
process per rank -> feedback while it runs (HPCC rates and the loss-map FEC policy
from the controller on P4 switches; the same FEC policy run here on the switch
counters elsewhere) -> drain -> analysis and results.  Everything started is stopped in ``finally`` (the test bed's
context manager), also on Ctrl-C and SIGTERM (:func:`sigterm_as_interrupt`).
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from controller.lossmap import TimeBins, fit_link_models, link_loss_map, path_fec
from controller.topology import Topology, paths
from mininet_topos.ebpf_switch import stats_ports
from mininet_topos.topologies import resolve_topology
from traffic.cc import registry as cc_registry
from traffic.control import send_control

from .analysis import analyse, summarise
from .errors import ExperimentError, RunError
from .plots import plot_fct_cdf
from .report import format_summary, write_analysis
from .results import ResultsDir
from .rogue_run import (
    RoguePhase,
    baseline_memory,
    finish_rogue,
    format_memory,
    format_rogue,
    rogue_comparison,
)
from .spec import ExperimentSpec, apply_overrides
from .telemetry import DirectedLink, directed_links, link_counters, load_samples
from .testbed import Testbed
from .workload import Flow, flows, traffic_argv

__all__ = ["FecPolicyLoop", "RunResult", "run_experiment", "run_specs", "sigterm_as_interrupt"]

START_DELAY_S = 3.0
FEC_TARGET_RESIDUAL = 1e-3


@dataclass(slots=True, kw_only=True)
class RunResult:
    spec: ExperimentSpec
    out: Path
    summary: dict[str, Any]
    plots: dict[str, Path]
    lines: list[str] = field(default_factory=list)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM (and SIGINT) into KeyboardInterrupt for the block, so ``finally``
    cleanup runs.

    Only in this process: a forked child (pyroute2 forks to enter namespaces) that gets
    the signal must die at once, not unwind a copy of our stack and tear the network
    down a second time.
    """
    owner = os.getpid()

    def handler(signum: int, frame: Any) -> None:
        if os.getpid() != owner:
            os._exit(128 + signum)
        raise KeyboardInterrupt(f"signal {signum}")
    try:
        old = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


class FecPolicyLoop:
    """The controller's FEC policy, run by the test bed on the switch counters: every
    ``interval_s`` it rebuilds the link loss map, fits a model per link, chooses (k, m)
    per flow path (:func:`controller.lossmap.path_fec`) and sends changes to the
    senders' control sockets."""

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
            self.paths.append(sorted(links))
        self.samples_dir = samples_dir
        self.sockets = sockets
        self.interval_s = interval_s
        self.target_residual = target_residual
        self.min_packets = min_packets
        self.topo = topo
        self.next_s = time.monotonic() + interval_s
        self.current: dict[int, tuple[int, int]] = {}
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
        # one bin over the whole run: net counts, so timing noise between the two
        # ends' samples cancels instead of piling up as false losses
        lo, hi = int(c.ts_ns.min()), int(c.ts_ns.max())
        bins = TimeBins(start_ns=lo, bin_ns=hi - lo + 1, n_bins=1)
        lm = link_loss_map(bins=bins, n_links=len(self.directed), counters=c)
        lm.lost = np.maximum(lm.lost, 0)
        lm.lost[lm.lost + lm.delivered < self.min_packets] = 0
        models = fit_link_models(lm)
        fec = path_fec(paths=[p or [0] for p in self.paths], models=models,
                       target_residual=self.target_residual, k_choices=(8, 16, 32),
                       m_max=8)
        for j, f in enumerate(self.flows):
            k, m = int(fec.fec_k[j]), int(fec.fec_m[j])
            k, m = (k, m) if k > 0 else (1, 0)
            if self.current.get(j) == (k, m):
                continue
            sock = self.sockets.get(f.src_host)
            if sock is None or not sock.exists():
                continue
            with contextlib.suppress(OSError):
                send_control(str(sock), {"qp": f.qpn, "fec_k": k, "fec_m": m})
                self.current[j] = (k, m)
                self.decisions.append({"t_unix_s": time.time(), "flow": f.name, "qpn": f.qpn,
                                       "fec_k": k, "fec_m": m,
                                       "raw_loss": float(fec.raw_loss[j])})


class IntStatePoller:
    """Reads the controller's state file (P4 switches only): per-hop queue lengths as
    INT reports them, and the flows with the switches their records named."""

    def __init__(self, path: Path, interval_s: float = 0.5) -> None:
        self.path = path
        self.interval_s = interval_s
        self.next_s = 0.0
        self.rows: list[tuple[float, str, str, int, int, int]] = []
        self.flows: list[dict[str, Any]] = []
        self.hops: list[dict[str, Any]] = []
        self.collector: dict[str, Any] = {}
        self.losses: dict[str, int] = {}   # the controller's loss map: link -> lost

    def poll(self, force: bool = False) -> None:
        if not force and time.monotonic() < self.next_s:
            return
        self.next_s = time.monotonic() + self.interval_s
        try:
            state = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return
        t = float(state.get("updated_unix_s") or time.time())
        self.hops = state.get("hops", []) or []
        for h in self.hops:
            self.rows.append((t, f"int:{h.get('switch') or h.get('node_id')}",
                              f"port{h.get('egress_port')}", int(h.get("qlen_pkts") or 0),
                              int(h.get("qlen_bytes") or 0), 0))
        self.flows = state.get("flows", []) or self.flows
        self.collector = state.get("collector", {}) or self.collector
        self.losses = {str(x.get("link")): int(x.get("lost") or 0)
                       for x in state.get("losses", []) or []} or self.losses

    def summary(self, topo: Topology) -> dict[str, Any]:
        node_to_switch = {sw.int_node_id: sw.name for sw in topo.switches}
        seen = sorted({node_to_switch.get(int(h.get("node_id") or 0), str(h.get("node_id")))
                       for h in self.hops})
        return {"switches_reporting": seen, "flows": self.flows,
                "max_qlen_pkts": max((r[3] for r in self.rows), default=0),
                "fec_records": int(self.collector.get("fec_records") or 0),
                "controller_losses": self.losses,
                "collector": self.collector}


class SwitchStatsPoller:
    """Per-port queue depth over time from the P4 switches' statistics files (softswitch
    rewrites them every sample interval): the queue series INT cannot give when hop
    records carry no port."""

    def __init__(self, folder: Path, interval_s: float) -> None:
        self.folder = folder
        self.interval_s = interval_s
        self.next_s = 0.0
        self.seen: dict[Path, int] = {}
        # (t_unix_s, node, ifname, queue_depth, tx_packets, tail_drops)
        self.rows: list[tuple[float, str, str, int, int, int]] = []

    def poll(self, force: bool = False) -> None:
        if not force and time.monotonic() < self.next_s:
            return
        self.next_s = time.monotonic() + self.interval_s
        for f in sorted(self.folder.glob("*.stats.json")) if self.folder.exists() else []:
            try:
                mtime = f.stat().st_mtime_ns
                if self.seen.get(f) == mtime:
                    continue
                st = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            self.seen[f] = mtime
            name = st.get("name", f.name.split(".")[0])
            for p in stats_ports(st, name):
                if "queue_depth" not in p:   # the eBPF target: its queue is sampled by tc
                    continue
                self.rows.append((mtime / 1e9, name, str(p.get("ifname") or p.get("port")),
                                  int(p.get("queue_depth") or 0), int(p.get("tx_packets") or 0),
                                  int(p.get("tail_drops") or 0)))

    def queue_stats(self) -> dict[str, dict[str, float]]:
        """Per port "sN/ifname": max, median, 90th percentile and mean queue depth over
        the samples in which the port sent packets (the port was busy)."""
        by: dict[str, list[tuple[float, int, int]]] = {}
        for t, node, ifname, depth, tx, _ in self.rows:
            by.setdefault(f"{node}/{ifname}", []).append((t, depth, tx))
        return busy_queue_stats(by)


def busy_queue_stats(by: dict[str, list[tuple[float, int, int]]]) -> dict[str, dict[str, float]]:
    """Port -> max, median, 90th percentile and mean of the queue depths sampled while
    the port sent packets; ``by``: port -> [(time, depth, packets sent so far)]."""
    out = {}
    for port, rows in by.items():
        rows.sort()
        active = [d for (_, d, tx), (_, _, tx0) in zip(rows[1:], rows[:-1], strict=True)
                  if tx > tx0]
        if active:
            out[port] = {"max_pkts": float(max(active)),
                         "p50_busy_pkts": float(np.median(active)),
                         "p90_busy_pkts": float(np.percentile(active, 90)),
                         "mean_busy_pkts": float(np.mean(active)),
                         "busy_samples": float(len(active))}
    return out


def sampled_queue_stats(samples: dict[str, Any], ports: Any) -> dict[str, dict[str, float]]:
    """:func:`busy_queue_stats` of ``ports`` ("sN/ifname") from the sampler's tc backlogs:
    the eBPF target's queue, which the kernel holds (HTB at the virtual queue's rate),
    where its statistics file gives only high water and drops."""
    by: dict[str, list[tuple[float, int, int]]] = {}
    for port in ports:
        node, _, ifname = port.partition("/")
        s = samples.get(node)
        if s is None or ifname not in s.q or ifname not in s.dev:
            continue
        by[port] = [(float(t), int(q[0]), int(d[1]))
                    for t, q, d in zip(s.t_ns, s.q[ifname], s.dev[ifname], strict=True)]
    return busy_queue_stats(by)


def switch_port_stats(folder: Path) -> dict[str, dict[str, int]]:
    """"s1/9" -> queue high water, tail drops, tx packets, from the P4 switches' own
    statistics files (written when they stop); empty for kernel routers."""
    out: dict[str, dict[str, int]] = {}
    for f in sorted(folder.glob("*.stats.json")) if folder.exists() else []:
        try:
            st = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        name = st.get("name", f.name.split(".")[0])
        for p in stats_ports(st, name):
            out[f"{name}/{p.get('port')}"] = {
                k: int(p.get(k) or 0) for k in ("queue_high_water", "tail_drops", "tx_packets")}
    return out


def _goodput_limit_bps(spec: ExperimentSpec, topo: Topology) -> float:
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


def run_experiment(spec: ExperimentSpec, out: str | Path, *, log: Callable[[str], None] = print,
                   python: str = sys.executable, influx_url: str | None = None,
                   mtls: bool = False, web: str | None = None) -> RunResult:
    """Run one spec; write ``out`` (see :mod:`.results` for the layout); ``mtls``: the
    controller reaches the switches over mutual TLS (certificates made for the run)."""
    res = ResultsDir(out)
    topo = apply_overrides(resolve_topology(spec.topology), spec)
    algo = cc_registry.get(spec.cc)
    if algo.needs_int and spec.switch == "linux-router":
        log(f"note: cc={spec.cc} needs INT from P4 switches; on linux-router the senders "
            "keep their start rate")
    if algo.needs_ecn and spec.switch == "linux-router":
        log(f"note: cc={spec.cc} needs ECN marking from P4 switches; kernel routers here "
            "do not mark, so the senders see no CNPs")
    logs = res.path / "logs"
    tdir = res.path / "traffic"
    tdir.mkdir(parents=True, exist_ok=True)
    for old in tdir.glob("*.json"):
        old.unlink()
    fl = flows(spec)
    # FEC "auto": the controller's policy where its feedback reaches the senders (P4
    # switches with HPCC feedback on), else the same policy run here on switch counters
    fec_auto = spec.recovery == "fec" and spec.fec == "auto"
    fec_by_controller = (fec_auto and spec.switch != "linux-router"
                         and algo.controller_feedback)
    wire: dict[str, Any] = {}
    decisions: list[dict[str, Any]] = []
    timed_out = False
    t_start = time.time()
    log(f"[{spec.name}{' ' + spec.variant if spec.variant else ''}] starting {topo.name} "
        f"({len(topo.switches)} switches, {len(topo.hosts)} hosts) on {spec.switch}")
    with Testbed(topo=topo, switch=spec.switch, logs=logs, seed=spec.seed,
                 sample_interval_s=spec.sample_interval_s, program=spec.program,
                 python=python,
                 agent_hosts=spec.workload.hosts if spec.switch != "linux-router" else (),
                 feedback=algo.controller_feedback, echo=algo.needs_int_echo,
                 fec_target=FEC_TARGET_RESIDUAL if fec_by_controller else 0.0,
                 ecn=spec.ecn.argument if spec.ecn is not None else None,
                 influx_url=influx_url, mtls=mtls, web=web) as tb:
        log(f"network up in {time.time() - t_start:.1f} s; every switch programmed")
        if tb.web_url:
            log(f"live view at {tb.web_url}")
        ips = [topo.host(h).ipv4 for h in spec.workload.hosts]
        start_at = time.time() + START_DELAY_S + 0.3 * len(ips)
        assert tb.sock_dir is not None
        socks = {h: tb.sock_dir / f"{h}.sock" for h in spec.workload.hosts}
        resources = tb.resources()
        sf = None
        if spec.faults:  # injected faults, their ground truth and the run's diagnosis
            from mininet_topos.faults.in_spec import SpecFaults, check_spec_faults
            sf = SpecFaults(check_spec_faults(spec.faults, topo, nranks=len(ips),
                                              switch=spec.switch),
                            topo=topo, hosts=spec.workload.hosts, start_unix=start_at,
                            out=res.path, on_exit=tb.add_cleanup)
            sf.prepare(tb)
        procs = []
        for rank in reversed(range(len(ips))):  # receivers of rank 0 last: all bind first
            h = spec.workload.hosts[rank]
            argv = traffic_argv(spec, python=python, rank=rank, ips=ips,
                                out=tdir / f"{h}.json", control=socks[h], start_at=start_at)
            procs.append(tb.spawn(f"traffic-{h}", h, argv + (sf.rank_args(rank) if sf else [])))
        rogue = (RoguePhase(tb, spec, fl, start_at, res.path / "rogue.json", python=python)
                 if spec.rogue and spec.rogue.rate > 0 and spec.switch != "linux-router"
                 else None)
        base_mem = baseline_memory(tb, spec, start_at)
        policy = None
        if fec_auto and not fec_by_controller:
            policy = FecPolicyLoop(topo=topo, flows_=fl, samples_dir=tb.samples_dir(),
                                   sockets=socks)
        deadline = start_at + spec.duration_s + 10.0
        log(f"traffic: {spec.workload.kind} on {', '.join(spec.workload.hosts)} "
            f"({len(fl)} QPs, recovery {spec.recovery}, fec {spec.fec})")
        int_state = IntStatePoller(tb.logs / "controller" / "controller_state.json")
        sw_stats = SwitchStatsPoller(tb.logs / "switches", spec.sample_interval_s)
        while any(p.proc.poll() is None for p in procs):
            int_state.poll()
            sw_stats.poll()
            if rogue is not None:
                rogue.poll(int_state)
            if base_mem is not None:
                base_mem.poll(time.time())
            if sf is not None:
                sf.tick(tb)
            if time.time() > deadline:
                timed_out = True
                log("traffic did not finish in time; stopping it")
                break
            if policy is not None:
                try:
                    policy.tick()
                except ExperimentError:
                    raise
                except Exception as exc:  # noqa: BLE001 - a policy round may fail; the run goes on
                    log(f"FEC policy round failed: {exc}")
            time.sleep(0.2)
        failed = [p for p in procs if p.proc.poll() not in (None, 0)]
        for p in failed:
            log(f"traffic on {p.node} exited with status {p.proc.returncode}: "
                f"{p.tail(400).strip()}")
        time.sleep(max(0.5, 3 * max((ln.delay_ms for ln in topo.links), default=0) / 1e3))
        wire_quiet(tb)
        int_state.poll(force=True)
        rogue_out = rogue.finish(int_state) if rogue is not None else None
        if base_mem is not None:
            base_mem.sample()
        sw_stats.poll(force=True)
        tb.stop_samplers()
        fault_summary = sf.finish(tb.samples_dir()) if sf is not None else None
        for name, wan in tb.wan_links().items():
            with contextlib.suppress(Exception):
                wire[name] = wan.stats()
        if policy is not None:
            decisions = policy.decisions
        resources["process_pids"] = sorted(set(resources["process_pids"])
                                           | {p.proc.pid for p in procs})
    log(f"network down; analysing ({time.time() - t_start:.1f} s since start)")
    a = analyse(topo, samples_dir=logs / "samples", traffic_dir=tdir,
                hosts=spec.workload.hosts, wire=wire)
    int_rows = [(r[0] - a.t0_ns / 1e9, *r[1:]) for r in int_state.rows]
    int_rows += [(r[0] - a.t0_ns / 1e9, r[1], r[2], r[3], 0, r[5]) for r in sw_stats.rows]
    if int_rows:
        a.queue_rows = int_rows + a.queue_rows
        a.summary = summarise(a)
        a.summary["int"] = int_state.summary(topo)
    a.summary["switch_ports"] = switch_port_stats(logs / "switches")
    a.summary["switch_queues"] = sw_stats.queue_stats()
    if spec.switch == "ebpf":
        a.summary["switch_queues"] = sampled_queue_stats(
            a.samples, [f"{k.partition('/')[0]}/{k.partition('/')[0]}-eth{k.partition('/')[2]}"
                        for k in a.summary["switch_ports"]])
    res.write_csv("int_hops.csv", ["t_s", "node", "ifname", "backlog_pkts", "backlog_bytes",
                                   "drops"], int_rows)
    limit = _goodput_limit_bps(spec, topo)
    meta = {"name": spec.name, "variant": spec.variant, "description": spec.description,
            "topology": topo.name, "switch": spec.switch, "cc": spec.cc,
            # none: nothing to apply; hpcc: INT-driven feedback; dcqcn: the senders'
            # reaction point on CNPs from the switches' ECN marks (P4 switches only)
            "cc_applied": spec.cc == "none" or spec.switch != "linux-router",
            "ecn": spec.ecn.argument if spec.ecn is not None else "default",
            "recovery": spec.recovery, "fec": spec.fec, "workload": spec.workload.kind,
            "hosts": list(spec.workload.hosts), "timed_out": timed_out,
            "goodput_limit_bps": limit,
            "fec_policy": ("controller" if fec_by_controller else "testbed") if fec_auto
            else "fixed", "fec_decisions": decisions, "wire": wire, "resources": resources, "spec": dict(spec.raw),
            "wall_s": time.time() - t_start}
    a.summary.update({"goodput_limit_bps": limit,
                      # when the senders started, on the time axis of the CSV series
                      "traffic_start_s": start_at - a.t0_ns / 1e9,
                      "utilisation": utilisation(a.traffic["ranks"], limit)})
    plots = write_analysis(res, a, meta=meta)
    summary = json.loads(res.file("summary.json").read_text())
    summary.setdefault("switch_ports", a.summary.get("switch_ports", {}))
    if rogue_out is not None:
        summary["rogue"] = finish_rogue(rogue_out, logs)
        res.write_json("summary.json", summary)
    if base_mem is not None:   # the run without the rogue: what the workload alone grows
        summary["memory"] = base_mem.summary()
        res.write_json("summary.json", summary)
    if fault_summary is not None:   # ground truth and the diagnosis (mininet_topos.faults)
        summary.update(fault_summary)
        res.write_json("summary.json", summary)
    if influx_url:
        from .influx import export_summary
        try:
            # the controller (P4 switches) exported its telemetry and loss bins live;
            # the test bed's own series (queues, the run's summary) go now
            n = export_summary(influx_url, res.path, spec,
                               link_loss=spec.switch == "linux-router")
            log(f"exported {n} test-bed points to {influx_url}"
                + ("" if spec.switch == "linux-router" else
                   " (the controller exported its telemetry while running)"))
        except ExperimentError as exc:
            log(f"InfluxDB export failed: {exc}")
    return RunResult(spec=spec, out=res.path, summary=summary, plots=plots,
                     lines=format_summary(summary, a))


def run_specs(specs: list[ExperimentSpec], out: str | Path, *,
              log: Callable[[str], None] = print, python: str = sys.executable,
              influx_url: str | None = None, mtls: bool = False,
              web: str | None = None) -> list[RunResult]:
    """Run every spec (sweep members side by side under ``out/<variant>``), then write
    ``out/summary.json`` comparing them and a joint FCT CDF."""
    if not specs:
        raise RunError("run_specs: no experiment to run")
    res = ResultsDir(out)
    results = []
    for spec in specs:
        sub = res.path if len(specs) == 1 else res.path / _slug(spec.variant or spec.name)
        r = run_experiment(spec, sub, log=log, python=python, influx_url=influx_url, mtls=mtls,
                           web=web)
        for line in r.lines:
            log("  " + line)
        results.append(r)
    rogue = rogue_comparison([(r.spec, r.summary) for r in results])
    if rogue is not None:
        log(f"rogue: {format_rogue(rogue)}")
        for line in format_memory(rogue):
            log(f"  memory {line}")
    if len(specs) > 1:
        rows = []
        for r in results:
            s = r.summary
            rows.append({"variant": r.spec.variant, "out": str(r.out.name),
                         "goodput_tx_bps_total": s.get("goodput_tx_bps_total"),
                         "completion_s_max": s.get("completion_s_max"),
                         "fct_s": s.get("fct_s"), "bottleneck_queue": s.get("bottleneck_queue"),
                         "lossy_link": (s.get("lossy_link") or {}).get("link"),
                         "loss_rate": (s.get("lossy_link") or {}).get("loss_rate"),
                         "cc_applied": s.get("cc_applied"), **compare_row(s)})
        res.write_json("summary.json", {"name": specs[0].name, "variants": rows,
                                        **({"rogue": rogue} if rogue is not None else {})})
        fcts = {}
        for r in results:
            fcts[r.spec.variant] = [float(x) for x in _fcts(r.out)]
        plot_fct_cdf(fcts, res.file("fct_cdf.png"), title=f"{specs[0].name}: FCT CDF")
        _compare_plots(res, specs[0].name, results)
    return results


def wire_quiet(tb: Testbed, *, interval_s: float = 0.3, max_s: float = 10.0) -> bool:
    """Wait until no WAN delay line moves a packet for ``interval_s`` (at most
    ``max_s``): on a busy machine a user-space delay line can still be working off
    its backlog when the traffic processes have exited, and a packet it drops after
    the switches' last counter sample is missing from the loss map but not from the
    wire's own count.  True when quiet (at once without WAN links)."""
    wans = tb.wan_links()
    if not wans:
        return True

    def snapshot() -> dict[str, Any]:
        out = {}
        for name, wan in wans.items():
            with contextlib.suppress(Exception):
                out[name] = wan.stats()
        return out

    deadline = time.monotonic() + max_s
    prev = snapshot()
    while time.monotonic() < deadline:
        time.sleep(interval_s)
        cur = snapshot()
        if cur == prev:
            return True
        prev = cur
    return False


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


def _compare_plots(res: ResultsDir, name: str, results: list[RunResult]) -> None:
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


def _fcts(folder: Path) -> np.ndarray:
    from .results import read_csv
    p = folder / "fct.csv"
    return np.array([float(r["fct_s"]) for r in read_csv(p)]) if p.exists() else np.zeros(0)


def _slug(s: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in s.replace(",", "__"))
