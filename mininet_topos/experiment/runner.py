"""Run experiment specs on the test bed and write their results folders.

Why: this is the one place that joins every part in order: topology (+ the spec's link
changes) -> Mininet network with switches (-> controller) -> samplers -> one traffic
process per rank -> feedback while it runs (HPCC rates and the loss-map FEC policy
from the controller on P4 switches; the controller's FEC policy run here on the switch
counters elsewhere, :mod:`.fec`) -> drain -> analysis and results.  What it watches
meanwhile is :mod:`.pollers`, the variants' comparison :mod:`.compare`.  Everything started is stopped in ``finally`` (the test bed's
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
from pathlib import Path
from typing import Any

from mininet_topos.testbed import Testbed
from mininet_topos.topologies import resolve_topology
from traffic import startgate
from traffic.cc import registry as cc_registry

from .analysis import analyse, summarise
from .compare import (
    compare_plots,
    compare_row,
    deepest_queue,
    fcts,
    goodput_limit,
    slug,
    utilisation,
)
from .errors import ExperimentError, RunError
from .fec import TestbedFec
from .plots import plot_fct_cdf
from .pollers import (
    IntStatePoller,
    SwitchStatsPoller,
    sampled_queue_stats,
    switch_port_stats,
    wire_quiet,
)
from .report import format_summary, write_analysis
from .results import ResultsDir, RunResult
from .rogue_run import (
    RoguePhase,
    baseline_memory,
    finish_rogue,
    format_memory,
    format_rogue,
    rogue_comparison,
)
from .spec import ExperimentSpec, apply_overrides
from .workload import flows, traffic_argv

__all__ = ["RunResult", "controller_argv", "run_experiment", "run_specs", "sigterm_as_interrupt"]

START_DELAY_S = 3.0
FEC_TARGET_RESIDUAL = 1e-3


def release_ranks(start_file: Path, procs: list[Any], *, planned: float,
                  log: Callable[[str], None]) -> float:
    """Start the ranks together once every one is bound (:mod:`traffic.startgate`): at
    the planned time, or, when a rank bound after it (a loaded machine takes seconds to
    start a Python process in a namespace), a moment after the last one did, so no
    first window goes to a peer that cannot receive yet.  Injected faults keep the
    planned time (their injectors were prepared for it); the rogue phase, the memory
    watch and the run's deadline count from the start returned."""
    alive = lambda: all(p.proc.poll() is None for p in procs)
    at, missing = startgate.start_together(
        start_file, len(procs), timeout_s=max(0.0, planned - time.time()) + 60.0,
        alive=alive, not_before=planned)
    if missing:
        log(f"ranks {missing} not bound (exited, or not within 60 s of the planned "
            "start): starting the others")
    elif at > planned + 0.05:
        log(f"ranks bound {at - planned:.2f} s after the planned start: all start together")
    return at


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


def controller_argv(spec: ExperimentSpec) -> tuple[str, ...]:
    """The spec's own arguments to ``controller run``: ``--max-rate`` from
    ``controller_max_rate`` (HPCC's max rate below the host links' for senders held
    slower on purpose; omitted, none)."""
    return ("--max-rate", spec.controller_max_rate) if spec.controller_max_rate else ()


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
                 controller_args=controller_argv(spec),
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
        start_file = tb.sock_dir / "start"
        for rank in reversed(range(len(ips))):  # receivers of rank 0 last: all bind first
            h = spec.workload.hosts[rank]
            argv = traffic_argv(spec, python=python, rank=rank, ips=ips,
                                out=tdir / f"{h}.json", control=socks[h], start_at=start_at,
                                start_file=start_file)
            # each rank's collective log: `controller diagnose --out DIR` reads it
            argv[-1:-1] = ["--coll-log", str(res.path / "collectives")]
            procs.append(tb.spawn(f"traffic-{h}", h, argv + (sf.rank_args(rank) if sf else [])))
        start_at = release_ranks(start_file, procs, planned=start_at, log=log)
        rogue = (RoguePhase(tb, spec, fl, start_at, res.path / "rogue.json", python=python)
                 if spec.rogue and spec.rogue.rate > 0 and spec.switch != "linux-router"
                 else None)
        base_mem = baseline_memory(tb, spec, start_at)
        policy = None
        if fec_auto and not fec_by_controller:
            policy = TestbedFec(topo=topo, flows_=fl, samples_dir=tb.samples_dir(),
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
    lim = goodput_limit(spec, topo)
    limit = lim["bps"]
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
    a.summary["deepest_queue"] = deepest_queue(a.summary, topo, spec.sample_interval_s)
    a.summary.update({"goodput_limit_bps": limit, "goodput_limit": lim,
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
        sub = res.path if len(specs) == 1 else res.path / slug(spec.variant or spec.name)
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
        by_variant: dict[str, list[float]] = {}
        for r in results:
            by_variant[r.spec.variant] = [float(x) for x in fcts(r.out)]
        plot_fct_cdf(by_variant, res.file("fct_cdf.png"), title=f"{specs[0].name}: FCT CDF")
        compare_plots(res, specs[0].name, results)
    return results


