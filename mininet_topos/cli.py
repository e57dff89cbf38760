"""``python -m mininet_topos``: run the test bed, experiments and the demo.

Commands::

    run TOPO [--switch softswitch|ebpf|bmv2|linux-router] [--cli] [--duration S]
    experiment SPEC.yaml|PRESET --out DIR [--influx URL]
    experiment faults --rescore --out DIR   (a finished faults run, diagnosed again)
    check SPEC.yaml|PRESET              (validate only; no root)
    demo [--out DIR]                    (see mininet_topos.demo)

Only :func:`main` exits; errors are one line on stderr naming what failed.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from common import argtypes
from controller.topology import TopologyError

__all__ = ["main", "show_lines"]

EPILOG = """examples:
  python -m mininet_topos run two-dc --switch linux-router --cli
  python -m mininet_topos run mininet_topos/topofiles/leaf_spine.yaml --duration 30
  python -m mininet_topos run dumbbell --switch ebpf --duration 30
  python -m mininet_topos experiment demo --out results/demo
  python -m mininet_topos experiment mininet_topos/presets/wan_loss.yaml --out results/wan
  python -m mininet_topos check incast_cc
  python -m mininet_topos demo --out results/demo
"""


def _switch(value: str) -> str:
    from mininet_topos.experiment import SWITCH_KINDS
    if value not in SWITCH_KINDS:
        raise argparse.ArgumentTypeError(f"{value!r}: choose {', '.join(SWITCH_KINDS)}")
    return value


def _web(value: str) -> str:
    """HOST:PORT for the controller's live view, checked here (the controller takes it)."""
    from controller.web import WebError, parse_web_address
    try:
        host, port = parse_web_address(value)
    except WebError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if port == 0:
        raise argparse.ArgumentTypeError(f"--web {value}: give a port (the address is printed "
                                         "before the controller has picked a free one)")
    return f"{host}:{port}"


_seconds = argtypes.bounded_float(0, 86400, what="seconds")
_seed = argtypes.bounded_int(0, 2**31 - 1, what="seed")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m mininet_topos", epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 description="The Mininet test bed: networks, experiments, "
                                             "the demo.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="start a topology with switches (and controller) and wait",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("topology", help="standard name (two-dc, leaf-spine, dumbbell) or file")
    r.add_argument("--switch", type=_switch, default="softswitch",
                   help="softswitch (default; P4 in Python), ebpf (softswitch's eBPF target: "
                        "P4 in the kernel), bmv2, or linux-router (kernel routers, no P4)")
    r.add_argument("--cli", action="store_true",
                   help="open the Mininet CLI (extra: show hops|flows|losses)")
    r.add_argument("--duration", type=_seconds, help="stop after S seconds (default: Ctrl-C)")
    r.add_argument("--logs", type=Path,
                   help="folder for logs and samples (default: a temporary one, removed on exit)")
    r.add_argument("--program", default="p4/int_rocev2.p4", help="P4 program of the switches")
    r.add_argument("--mtls", action="store_true",
                   help="P4Runtime over mutual TLS (a CA and certificates made for the run)")
    r.add_argument("--no-agents", action="store_true",
                   help="P4 switches: start no host agents (INT then reaches the hosts)")
    e = sub.add_parser("experiment", help="run an experiment spec and write a results folder")
    e.add_argument("spec", help="spec file or preset name (demo, incast_cc, wan_loss), or "
                                "'faults': the fault-localisation scoring harness")
    e.add_argument("--out", type=Path, required=True, help="results folder")
    e.add_argument("--switch", type=_switch, help="override the spec's switch kind")
    e.add_argument("--mtls", action="store_true", help="P4Runtime over mutual TLS")
    e.add_argument("--influx", default=os.environ.get("INFLUX_URL"),
                   help="InfluxDB URL to export to (default: $INFLUX_URL; none: files only)")
    e.add_argument("--web", type=_web, metavar="HOST:PORT",
                   help="the controller serves the live view there (the address is printed)")
    e.add_argument("--trials", type=int, default=30, help="faults: number of trials")
    e.add_argument("--seed", type=_seed,
                   help="the run's seed instead of the spec's `seed:` (a recovery sweep's "
                        "loss patterns: runs with seeds 1, 2, 3 are independent samples); "
                        "faults: seed of the fault draws (default 1)")
    e.add_argument("--fault", metavar="YAML",
                   help="faults: run one trial with this fault and print its diagnosis, "
                        "e.g. '{kind: gray_loss, link: \"s2:3->s6:3\", loss: 0.01, onset_s: 3}'")
    e.add_argument("--rescore", action="store_true",
                   help="faults: re-diagnose the trials of the finished run in --out with "
                        "the diagnosis as it is now (no network; writes rescored.json)")
    e.add_argument("--mitigate", choices=("off", "act"), default="off",
                   help="faults: act = the controller acts on the faults (gray loss, link down, "
                        "a flapping link; P4 switches, default ebpf): each kind --trials times "
                        "with mitigation acting and only advising, --trials fault-free runs; "
                        "a table of recovery times (mininet_topos/faults/recovery_run.py)")
    c = sub.add_parser("check", help="validate a spec (no root needed)")
    c.add_argument("spec", help="spec file or preset name")
    d = sub.add_parser("demo", help="the two-datacenter demo (see mininet_topos.demo)")
    d.add_argument("--out", type=Path, default=Path("results/demo"), help="results folder")
    d.add_argument("--switch", type=_switch, help="override the demo's switch kind")
    d.add_argument("--mtls", action="store_true",
                   help="P4Runtime over mutual TLS (a CA and certificates made for the run)")
    d.add_argument("--influx", default=os.environ.get("INFLUX_URL"),
                   help="InfluxDB URL (default: $INFLUX_URL)")
    d.add_argument("--web", type=_web, metavar="HOST:PORT",
                   help="the controller serves the live view there, e.g. 127.0.0.1:8080 "
                        "(the address is printed)")
    return ap


def show_lines(what: str, tb: Any) -> list[str]:
    """Lines for ``show hops|flows|losses`` on a running test bed (its latest samples)."""
    from controller.lossmap import TimeBins, link_loss_map, link_table
    from mininet_topos.testbed.telemetry import (
        directed_links,
        link_counters,
        load_samples,
    )
    samples = {sw: load_samples(tb.samples_dir() / f"{sw}.jsonl", sw)
               for sw in tb.topo.switch_names}
    stats = sorted((tb.logs / "switches").glob("*.stats.json")) \
        if (tb.logs / "switches").exists() else []
    if what == "hops" and stats:  # P4 switches: their own per-port statistics
        import json

        from mininet_topos.ebpf_switch import stats_ports
        head = (f"{'port':<12} {'queue pkts':>10} {'high water':>10} {'drops':>7} "
                f"{'tx pkts':>10}")
        lines = [head]
        for f in stats:
            try:
                st = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            name = st.get("name", f.name.split(".")[0])
            for p in stats_ports(st, name):
                depth = p.get("queue_depth")
                if depth is None:   # the eBPF target's queue is the kernel's: sampled
                    s = samples.get(name)
                    q = s.q.get(str(p.get("ifname"))) if s is not None else None
                    depth = int(q[-1][0]) if q is not None and len(q) else "-"
                lines.append(f"{p.get('ifname')!s:<12} {depth:>10} "
                             f"{p.get('queue_high_water', 0):>10} {p.get('tail_drops', 0):>7} "
                             f"{p.get('tx_packets', 0):>10}")
        return lines
    if what == "hops":
        lines = [f"{'port':<12} {'queue pkts':>10} {'queue B':>9} {'drops':>7} {'tx pkts':>10}"]
        for sw, s in sorted(samples.items()):
            if not s.t_ns.size:
                continue
            for ifname in sorted(s.dev):
                q = s.q.get(ifname)
                qv = q[-1] if q is not None else [0, 0, 0]
                lines.append(f"{ifname:<12} {qv[0]:>10} {qv[1]:>9} {qv[2]:>7} "
                             f"{s.dev[ifname][-1][1]:>10}")
        return lines
    if what == "losses":
        dl = directed_links(tb.topo)
        c = link_counters(dl, samples)
        if not c.ts_ns.size:
            return ["no samples yet"]
        lm = link_loss_map(bins=TimeBins.covering(c.ts_ns, 10**9), n_links=len(dl), counters=c)
        return link_table(lm, [d.name for d in dl])
    if what == "flows":
        state = tb.logs / "controller" / "controller_state.json"
        if state.exists():
            import json
            flows = json.loads(state.read_text()).get("flows", [])
            return [f"{f.get('src')} -> {f.get('dst')} qp {f.get('qp')} rate "
                    f"{f.get('rate_bps')} path {f.get('path')}" for f in flows] or ["no flows"]
        return ["flows are seen by INT; on linux-router, see `show hops` for port counters"]
    return [f"show {what!r}: choose hops, flows or losses"]


def _cli(tb: Any) -> None:
    from mininet.cli import CLI

    class TestbedCLI(CLI):
        """Mininet's CLI with ``show hops|flows|losses``."""

        def do_show(self, line: str) -> None:
            """show hops|flows|losses: queues and counters per port, flows, link losses"""
            for out in show_lines(line.strip() or "hops", tb):
                self.stdout.write(out + "\n")

    TestbedCLI(tb.net)


def _run(args: argparse.Namespace) -> int:
    import tempfile

    from mininet_topos.topologies import resolve_topology

    topo = resolve_topology(args.topology)
    # without --logs the logs live in a temporary folder removed on exit
    tmp = None if args.logs else tempfile.TemporaryDirectory(prefix="mininet-topos-run-")
    logs = args.logs or Path(tmp.name if tmp else ".")
    try:
        return _run_in(args, topo, logs)
    finally:
        if tmp is not None:
            tmp.cleanup()


def _run_in(args: argparse.Namespace, topo: Any, logs: Path) -> int:
    from mininet_topos.experiment import sigterm_as_interrupt
    from mininet_topos.testbed import Testbed

    with sigterm_as_interrupt():
        try:
            t = time.monotonic()
            agents = () if args.switch == "linux-router" or args.no_agents else \
                tuple(topo.host_names)
            with Testbed(topo=topo, switch=args.switch, logs=logs, program=args.program,
                         agent_hosts=agents, mtls=args.mtls) as tb:
                kept = "" if args.logs else " (removed on exit; --logs DIR keeps them)"
                print(f"{topo.name}: {len(topo.switches)} switches ({args.switch}), "
                      f"{len(topo.hosts)} hosts up and programmed in "
                      f"{time.monotonic() - t:.1f} s; logs in {logs}{kept}; control "
                      f"sockets in {tb.sock_dir}", flush=True)
                if args.cli:
                    _cli(tb)
                else:
                    end = time.monotonic() + (args.duration or float("inf"))
                    print("Ctrl-C stops it", flush=True)
                    while time.monotonic() < end:
                        time.sleep(0.5)
        except KeyboardInterrupt:
            print("interrupted; network torn down", file=sys.stderr)
            return 130
    return 0


def _recovery_sweep(path: Path, out: Path, seed: int | None = None) -> int:
    import dataclasses

    from mininet_topos.experiment import sigterm_as_interrupt
    from mininet_topos.experiment.recovery_sweep import (
        HEADER,
        load_sweep,
        run_sweep,
        unfinished_lines,
    )

    sw = load_sweep(path)
    if seed is not None:
        sw = dataclasses.replace(sw, seed=seed)
    print(HEADER)
    with sigterm_as_interrupt():
        try:
            summary = run_sweep(sw, out)
        except KeyboardInterrupt:
            print("interrupted; namespaces removed", file=sys.stderr)
            return 130
    print(f"results: {out.resolve()}/summary.json")
    lines = unfinished_lines(summary["recovery"])
    for line in lines:   # the exit status says so; these say which and why
        print(line, file=sys.stderr)
    return 1 if lines else 0


def _recovery_faults(cfg: Any) -> int:
    """Faults with the controller acting vs only advising (``recovery_run``)."""
    from mininet_topos.experiment import sigterm_as_interrupt
    from mininet_topos.faults.recovery_run import run_recovery

    with sigterm_as_interrupt():
        try:
            run_recovery(cfg)
        except KeyboardInterrupt:
            print("interrupted; network torn down", file=sys.stderr)
            return 130
    print(f"results: {cfg.out.resolve()}/summary.json")
    return 0


def _experiment(args: argparse.Namespace) -> int:
    import dataclasses

    from mininet_topos.experiment import load_spec, preset_path, run_specs, sigterm_as_interrupt
    from mininet_topos.experiment.report import data_check_line

    fault_seed = 1 if args.seed is None else args.seed
    if args.spec == "faults" and args.mitigate == "act":   # mininet_topos.faults.recovery_run
        from mininet_topos.faults.recovery_run import RecoveryConfig
        return _recovery_faults(RecoveryConfig(
            out=args.out, switch=args.switch or "ebpf", fault_free=max(1, args.trials),
            seeds=tuple(range(fault_seed, fault_seed + max(1, args.trials)))))
    if args.spec == "faults" and args.rescore:   # the saved trials, today's diagnosis
        from mininet_topos.faults.harness import rescore
        rescore(args.out)
        print(f"results: {args.out.resolve()}/rescored.json")
        return 0
    if args.spec == "faults":   # mininet_topos.faults.harness
        from mininet_topos.faults.harness import HarnessConfig, one_fault_plan, run_harness
        plan = one_fault_plan(args.fault) if args.fault else None
        with sigterm_as_interrupt():
            try:
                run_harness(HarnessConfig(trials=args.trials, seed=fault_seed, out=args.out,
                                          switch=args.switch or "linux-router"),
                            plan=plan, verbose=plan is not None)
            except KeyboardInterrupt:
                print("interrupted; network torn down", file=sys.stderr)
                return 130
        print(f"results: {args.out.resolve()}/summary.json")
        return 0
    path = preset_path(args.spec)
    from mininet_topos.experiment.recovery_sweep import is_recovery_spec
    if is_recovery_spec(path):   # wan_recovery: netns + delay line + eBPF loss, no Mininet
        return _recovery_sweep(path, args.out, args.seed)
    from mininet_topos.faults.recovery_run import is_mitigation_spec, load_recovery_spec
    if is_mitigation_spec(path):   # recovery_faults: faults with the controller acting
        cfg = load_recovery_spec(path, args.out)
        if args.seed is not None:   # as many trials, numbered from the given seed
            cfg = dataclasses.replace(cfg, seeds=tuple(range(args.seed,
                                                             args.seed + len(cfg.seeds))))
        return _recovery_faults(dataclasses.replace(cfg, switch=args.switch or cfg.switch))
    specs = load_spec(path)
    if args.switch:
        specs = [dataclasses.replace(s, switch=args.switch) for s in specs]
    if args.seed is not None:
        specs = [dataclasses.replace(s, seed=args.seed) for s in specs]
    with sigterm_as_interrupt():
        try:
            results = run_specs(specs, args.out, influx_url=args.influx, mtls=args.mtls,
                                web=args.web)
        except KeyboardInterrupt:
            print("interrupted; network torn down", file=sys.stderr)
            return 130
    if len(results) > 1:
        from mininet_topos.experiment.runner import compare_row

        print(f"{'variant':<22} {'goodput':>9} {'util':>5} {'FCT p50':>8} {'FCT p99':>8} "
              f"{'queue':>5} {'q p50':>5} {'q avg':>5} {'drops':>5} {'cuts':>5} {'react':>6} "
              f"{'loop p50/p99':>13}  lossy link")
        for r in results:
            s = r.summary
            row = compare_row(s)
            gp = (s.get("goodput_tx_bps_total") or 0.0) / 1e6
            fct = s.get("fct_s") or {}
            q = (s.get("deepest_queue") or s.get("bottleneck_queue") or {}).get("max_pkts", 0)
            drops = row["tail_drops"] if row["tail_drops"] is not None else sum(
                (s.get("queue_drops") or {}).values())
            ll = s.get("lossy_link") or {}
            lossy = f"{ll['link']} {100 * ll['loss_rate']:.2f} %" if ll else "-"

            def ms(v: float | None) -> str:
                return f"{1e3 * v:6.0f}ms" if v is not None else f"{'-':>8}"

            def num(v: Any, fmt: str = "") -> str:
                return format(v, fmt) if v is not None else "-"

            util = f"{100 * row['utilisation']:4.0f}%" if row["utilisation"] else "    -"
            rs = row.get("reaction_p50_s")
            react = f"{1e3 * rs:.1f}ms" if rs is not None else "-"
            # the controller's loop, host capture -> applied at the sender (cc: hpcc)
            loop = (f"{1e3 * row['loop_p50_s']:.0f}/{1e3 * row['loop_p99_s']:.0f}ms"
                    if row.get("loop_p50_s") is not None else "-")
            print(f"{r.spec.variant[:22]:<22} {gp:6.1f}M/s {util} {ms(fct.get('p50'))} "
                  f"{ms(fct.get('p99'))} {q:>5} {num(row['queue_p50_busy_pkts'], '.0f'):>5} "
                  f"{num(row['queue_mean_busy_pkts'], '.1f'):>5} {drops:>5} "
                  f"{num(row['rate_cuts']):>5} {react:>6} {loop:>13}  {lossy}")
    print(f"results: {args.out.resolve()}")
    for r in results:
        for name, p in sorted(r.plots.items()):
            print(f"  {name:<13} {p}")
    wrong = [r for r in results if not (r.summary.get("data_check") or {}).get("ok")]
    for r in wrong:   # a wrong (or missing) result is the run's failure, not a log line
        print(f"error: {r.spec.variant or r.spec.name}: {data_check_line(r.summary)}",
              file=sys.stderr)
    return 1 if wrong else 0


def main(argv: list[str] | None = None) -> int:
    from mininet_topos.experiment import ExperimentError

    args = parser().parse_args(argv)
    try:
        if args.cmd == "check":
            from mininet_topos.experiment import apply_overrides, load_spec, preset_path
            from mininet_topos.experiment.recovery_sweep import is_recovery_spec, load_sweep
            from mininet_topos.topologies import resolve_topology
            path = preset_path(args.spec)
            from mininet_topos.faults.recovery_run import is_mitigation_spec, load_recovery_spec
            if is_mitigation_spec(path):
                rc = load_recovery_spec(path, Path("."))
                print(f"ok: {path.stem} (faults with mitigation: {', '.join(rc.kinds)} x seeds "
                      f"{', '.join(map(str, rc.seeds))} on {rc.switch}, {rc.fault_free} "
                      "fault-free)")
                return 0
            if is_recovery_spec(path):
                sw = load_sweep(path)
                print(f"ok: {sw.name} (recovery sweep: {len(sw.losses)} loss models x "
                      f"{len(sw.rtt_ms)} RTTs x {', '.join(sw.modes)})")
                return 0
            specs = load_spec(path)
            for s in specs:
                apply_overrides(resolve_topology(s.topology), s)
                print(f"ok: {s.name} {s.variant or ''} ({s.workload.kind} on "
                      f"{','.join(s.workload.hosts)}, {s.switch}, cc {s.cc}, {s.recovery})")
            return 0
        if os.geteuid() != 0:
            print(f"error: {args.cmd}: needs root (network namespaces, tc)", file=sys.stderr)
            return 1
        if args.cmd == "run":
            return _run(args)
        if args.cmd == "experiment":
            return _experiment(args)
        from mininet_topos.demo import run_demo
        return run_demo(out=args.out, switch=args.switch, influx_url=args.influx,
                        mtls=args.mtls, web=args.web)
    except (ExperimentError, TopologyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
