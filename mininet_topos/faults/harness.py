"""Scoring harness: N trials of a ring all-reduce on the two-DC test bed, each with one
random fault (or none) at a random time and place, diagnosed and scored.

``python -m mininet_topos experiment faults --trials 30 --seed 1 --out DIR``

Why one network for all trials: starting two datacenters takes longer than a trial;
each trial runs a fresh set of rank processes (their own collective logs), injects
its fault at its onset, heals it at the end, and is diagnosed from its own records and
the counter samples since it started.  A warm-up run without a fault finds which
links and ports the ring's traffic really crosses (the routers hash flows over the
ECMP paths), so faults go where they can matter.  Time to localise: the diagnosis is
re-run on the evidence as it stood every ``STEP_S`` after the onset
(``Evidence.until``); the first time its top culprit is the injected component counts.
With ``--switch softswitch`` or ``ebpf`` (P4 switches) the warm-up's INT paths say where the ring goes and the
controller's exports are the telemetry (``p4.py``).
"""
from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from common.faults import FAULT_KINDS
from controller.diagnose import Evidence, diagnose
from controller.diagnose.evidence import save_telemetry
from controller.diagnose.report import format_diagnosis
from controller.topology.model import LinkRole, Topology
from mininet_topos.faults.inject import Injector, traffic_fault_args
from mininet_topos.faults.p4 import (
    P4_KINDS,
    PortDropPoller,
    controller_telemetry,
    int_crossings,
    int_places,
    wait_for_loss_export,
)
from mininet_topos.faults.queueing import crossings, queueing_ports, queueing_reasons
from mininet_topos.faults.spec import FaultError, FaultSpec
from mininet_topos.faults.telemetry import telemetry_from_samples
from traffic import startgate
from traffic.collog import read_logs
from traffic.control import request
from traffic.errors import ControlError

__all__ = ["HarnessConfig", "rescore", "run_harness", "score"]

STEP_S = 0.25
TRIAL_S = 9.0       # default trial length on kernel routers ...
P4_TRIAL_S = 16.0   # ... and on softswitch's Python target (the eBPF target: TRIAL_S)
DATA_BPS = 4e6
LOSS_EXPORT_WAIT_S = 6.0  # at most this long for the controller's last link-loss bin
KERNEL_TRANSFER_S = 0.2   # a ring transfer's median time at kernel speed (warm-up, ebpf
                          # and kernel routers); host faults scale with the target's own


@dataclass(slots=True, kw_only=True)
class HarnessConfig:
    trials: int = 30
    seed: int = 1
    out: Path = Path("results/faults")
    hosts: tuple[str, ...] = ("h1", "h3", "h5", "h7")
    size: str = "1M"
    count: int = 12
    rate: str = "8M"              # per QP
    qps: int = 2                  # QPs per ring link (NCCL uses several channels too)
    onset_s: tuple[float, float] = (2.0, 3.5)
    trial_s: float | None = None  # each trial's traffic is stopped after this long
                                  # (None: 9 s on kernel routers and ebpf, 16 s on softswitch)
    none_share: float = 1 / 8     # share of fault-free trials
    python: str = sys.executable
    switch: str = "linux-router"  # or softswitch / ebpf (INT paths; fewer kinds: p4.py)
    # The ranks' endpoint. The faults were sized for the Python endpoint, whose pacer
    # sends in bursts: the native engine paces each packet to the microsecond, and a
    # two-packet queue then drops nothing, so a tiny-queue fault would have no effect.
    engine: str = "python"
    mode: str | None = None       # the ranks' loss recovery (-m gbn|sr|...; None: the traffic default)
    control: bool = False         # ranks listen on the host agent's control socket (feedback)
    spares: tuple[str, ...] = ()  # hosts with a standby rank (traffic --standby; needs control)


def _rank_argv(cfg: HarnessConfig, rank: int, ips: list[str], start_file: Path, logs: Path,
               extra: list[str]) -> list[str]:
    # time-shared, as the faults were sized: the Python endpoint's loop would otherwise
    # run at real-time priority (traffic/realtime.py), ahead of the switches and of the
    # fault's own background sender, and a congested port then slowed no transfer
    return ["env", "TN_ENGINE_RT=0",
            cfg.python, "-m", "traffic", "allreduce", "--hosts", ",".join(ips), "--rank",
            str(rank), "-s", cfg.size, "-c", str(cfg.count), "--rate", cfg.rate,
            "-q", str(cfg.qps),
            "--start-file", str(start_file), "--coll-log", str(logs),
            "--timeout", f"{cfg.trial_s or TRIAL_S:g}", "--seed", str(cfg.seed),
            "--engine", cfg.engine, *(["-m", cfg.mode] if cfg.mode else []), *extra, "1"]


def _run_ranks(tb: Any, cfg: HarnessConfig, topo: Topology, trial_dir: Path,
               fault: FaultSpec | None, inj: Injector | None,
               tick: Callable[[], None] | None = None) -> tuple[float, float]:
    """Run one round of the ring with ``fault``; returns (start, end) Unix times
    (``tick``: called every 50 ms while the ranks run, e.g. to poll counters)."""
    ips = [topo.host(h).ipv4 for h in cfg.hosts]
    if fault is not None and inj is not None:
        inj.arm(fault)   # (before the start is fixed: the traffic must run before the onset)
    start = time.time() + 1.5
    logs = trial_dir / "collectives"
    trial_dir.mkdir(parents=True, exist_ok=True)
    if fault is not None and inj is not None:
        inj.prepare(fault, start + fault.onset_s)
    # the ranks start together once all are bound (traffic.startgate), at the planned
    # time or later: with a fixed time a rank that bound late on the loaded machine
    # lost its peer's first window, and the first trial's timeouts (96 packets resent
    # in its first transfer) were once named a slow receiver in a fault-free trial.
    # The faults keep the planned times (their windows are fixed before the ranks run).
    start_file = trial_dir / "start"
    startgate.clear(start_file)
    procs = []
    for rank in reversed(range(len(ips))):
        extra = traffic_fault_args(fault, rank, list(cfg.hosts), start)
        if cfg.control and getattr(tb, "sock_dir", None) is not None:
            extra = [*extra, "--control", str(tb.sock_dir / f"{cfg.hosts[rank]}.sock")]
        procs.append(tb.spawn(f"{trial_dir.name}-r{rank}", cfg.hosts[rank],
                              _rank_argv(cfg, rank, ips, start_file, logs, extra)))
    spares = []   # standby ranks: one that takes a moved rank over is waited for
    if cfg.control and getattr(tb, "sock_dir", None) is not None:
        for h in cfg.spares:
            argv = _rank_argv(cfg, 0, ips, start_file, logs,
                              ["--standby", topo.host(h).ipv4, "--control", str(tb.sock_dir / f"{h}.sock")])
            argv[argv.index("--rank"):argv.index("--rank") + 2] = []
            spares.append((h, tb.spawn(f"{trial_dir.name}-{h}", h, argv)))
    applied = False
    end = start
    try:
        released, _missing = startgate.start_together(
            start_file, len(procs), timeout_s=max(0.0, start - time.time()) + 30.0,
            alive=lambda: all(p.proc.poll() is None for p in procs), not_before=start)
        while any(p.proc.poll() is None for p in procs) or any(
                p.proc.poll() is None and _standby_active(tb, h) for h, p in spares):
            now = time.time()
            if (fault is not None and inj is not None and not applied
                    and now >= start + fault.onset_s):
                inj.apply(fault)
                applied = True
            if now > released + (cfg.trial_s or TRIAL_S) + 5:
                break
            if tick is not None:
                tick()
            time.sleep(0.05)
        end = time.time()   # when the ranks stopped: transfers open then are cut, or hung
    finally:
        if inj is not None:
            inj.heal()
        for p in [*procs, *(p for _, p in spares)]:
            p.stop()
            if p in tb.processes:
                tb.processes.remove(p)
    return start, end


def _standby_active(tb: Any, host: str) -> bool:
    """Whether the standby on ``host`` took a rank over (it then runs as that rank)."""
    try:
        rep = request(str(tb.sock_dir / f"{host}.sock"), {"cmd": "collective"}, 1.0)
    except (ControlError, ValueError):
        return True   # busy: assume so (the trial's time limit still holds)
    return not (rep.get("collective") or {}).get("standby", False)


def _data_ports(tel: Any) -> tuple[set[tuple[str, int]], dict[tuple[str, int], float]]:
    """The ports that sent the warm-up's data (median rate at least ``DATA_BPS``; the
    reverse directions carry only ACKs), and every port's median sending rate."""
    rate = {k: float(np.median([s.tx_rate_bps or 0.0 for s in ss] or [0.0]))
            for k, ss in tel.ports.items()}
    return {k for k, r in rate.items() if r >= DATA_BPS}, rate


def _places(topo: Topology, tel: Any, hosts: tuple[str, ...]) -> dict[str, list[str]]:
    """Where each kind may go: the link directions and ports on the ring pairs' paths
    as the warm-up saw them (``queueing.crossings``: a fault nothing crosses has no
    effect); gray loss on the WAN (the busiest direction first); a tiny queue only
    where packets arrive faster than the port sends them (``queueing.queueing_ports``)."""
    data_ports, rate = _data_ports(tel)
    crossed = crossings(topo, data_ports, hosts)
    used, wan = set(), set()
    for ln in topo.links:
        for near, far in ((ln.a, ln.b), (ln.b, ln.a)):
            name = f"{near}->{far}"
            if ln.role != LinkRole.HOST and name in crossed and near.node in topo.switch_names:
                used.add(name)
                if ln.role == LinkRole.WAN:
                    wan.add(name)

    def busiest(names: set[str]) -> list[str]:
        def port_rate(n: str) -> float:
            sw, _, port = n.split("->")[0].partition(":")
            return rate.get((sw, int(port)), 0.0)
        return sorted(names, key=lambda n: (-port_rate(n), n))
    return {"gray_loss": busiest(wan), "rate_degraded": sorted(used),
            "link_down": sorted(used), "congestion": sorted(used),
            "tiny_queue": [f"{sw}:{p}" for sw, p in queueing_ports(topo, data_ports, hosts)
                           if f"{sw}:{p}" in crossed],
            "slow_receiver": [h for h in hosts if h in crossed],
            "straggler": [str(r) for r in range(len(hosts))]}


def _where(fault: FaultSpec, topo: Topology, tel: Any, hosts: tuple[str, ...],
           int_paths: bool = False) -> dict[str, Any]:
    """The ground truth's account of why ``fault`` can act: the ring pairs that cross
    its component (none for a straggler: it is no place on a path; ``int_paths``:
    as the warm-up's INT records show) and, for a tiny queue, why packets queue there."""
    if fault.kind == "straggler":
        return {}
    if int_paths:
        return {"crossed_by": int_crossings(topo, tel, hosts).get(fault.target, []),
                "paths_from": "int"}
    data_ports, _ = _data_ports(tel)
    out: dict[str, Any] = {"crossed_by": crossings(topo, data_ports, hosts).get(
        fault.target, [])}
    if fault.kind == "tiny_queue":
        sw, _, port = fault.target.partition(":")
        out["queues_because"] = queueing_reasons(topo, data_ports, hosts).get(
            (sw, int(port)))
    return out


def host_fault_scale(warm_transfer_s: float | None) -> float:
    """How much longer a slow receiver holds packets on this target: the warm-up's
    median transfer time over ``KERNEL_TRANSFER_S`` (at least 1, at most 10).

    Why: a 0.3 s hold slows a 0.2 s transfer 2.5x on kernel speed, but a Python
    switch's 1-2 s transfer by 20 %, less than its own transfer-to-transfer noise: the
    same fault, relative to the ring, needs the same share of a transfer's time."""
    if not warm_transfer_s or warm_transfer_s <= KERNEL_TRANSFER_S:
        return 1.0
    return min(10.0, warm_transfer_s / KERNEL_TRANSFER_S)


def _warm_transfer_s(records: list[Any]) -> float | None:
    done = [r.end - r.start for r in records if r.dir == "send" and r.end is not None]
    return float(np.median(done)) if done else None


def _pick(rng: np.random.Generator, cfg: HarnessConfig, places: dict[str, list[str]],
          scale: float = 1.0) -> FaultSpec | None:
    if rng.random() < cfg.none_share:
        return None
    kinds = [k for k in FAULT_KINDS if places.get(k)]
    kind = kinds[int(rng.integers(len(kinds)))]
    target = places[kind][int(rng.integers(len(places[kind])))]
    onset = float(rng.uniform(*cfg.onset_s))
    kw: dict[str, Any] = {}
    if kind == "gray_loss":
        kw = {"loss": float(rng.choice([0.01, 0.02, 0.05])),
              "model": str(rng.choice(["random", "bursty"]))}
    elif kind == "rate_degraded":
        kw = {"factor": 0.05}
    elif kind == "congestion":
        kw = {"rate_mbps": 120.0}
    elif kind == "tiny_queue":
        kw = {"queue_pkts": 1}
    elif kind == "slow_receiver":
        kw = {"delay_s": round(min(10.0, 0.3 * scale), 3)}
    elif kind == "straggler":
        kw = {"late_s": 0.3}
    return FaultSpec(kind=kind, target=target, onset_s=onset, duration_s=3600.0, **kw)


def _evaluate(ev: Evidence, fault: FaultSpec | None, start: float) -> dict[str, Any]:
    d = diagnose(ev)
    out: dict[str, Any] = {"diagnosis": d.as_dict(), "text": format_diagnosis(d)}
    if fault is None:
        out.update(correct_top1=not d.fault, correct_top3=not d.fault, false_alarm=d.fault)
        return out
    keys = [(c.type, c.component) for c in d.culprits]
    out["correct_top1"] = bool(keys) and fault.matches(*keys[0])
    out["correct_top3"] = any(fault.matches(*k) for k in keys[:3])
    out["false_alarm"] = False
    onset = start + fault.onset_s
    t_loc = None
    if out["correct_top1"]:
        t = onset
        while t <= ev.end_time + STEP_S:
            dd = diagnose(ev.until(t))
            if dd.culprits and fault.matches(dd.culprits[0].type, dd.culprits[0].component):
                t_loc = t - onset
                break
            t += STEP_S
    out["time_to_localise_s"] = t_loc
    return out


def score(per_trial: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary's figures from the trials' results."""
    faulty = [t for t in per_trial if t["fault"] is not None]
    clean = [t for t in per_trial if t["fault"] is None]
    by_kind: dict[str, dict[str, Any]] = {}
    for t in faulty:
        k = by_kind.setdefault(t["fault"]["kind"], {"trials": 0, "top1": 0, "top3": 0})
        k["trials"] += 1
        k["top1"] += int(t["correct_top1"])
        k["top3"] += int(t["correct_top3"])
    times = [t["time_to_localise_s"] for t in faulty if t.get("time_to_localise_s") is not None]
    return {
        "trials": len(per_trial),
        "top1_accuracy": sum(t["correct_top1"] for t in faulty) / len(faulty) if faulty else None,
        "top3_accuracy": sum(t["correct_top3"] for t in faulty) / len(faulty) if faulty else None,
        "false_alarms": sum(t["false_alarm"] for t in clean),
        "fault_free_trials": len(clean),
        "median_time_to_localise_s": float(np.median(times)) if times else None,
        "by_kind": by_kind,
    }


def format_score(s: dict[str, Any]) -> list[str]:
    lines = [f"{'kind':<15} {'trials':>6} {'top-1':>7} {'top-3':>7}"]
    for kind, k in sorted(s["by_kind"].items()):
        lines.append(f"{kind:<15} {k['trials']:>6} {k['top1'] / k['trials']:>7.0%} "
                     f"{k['top3'] / k['trials']:>7.0%}")
    t1, t3, med = s["top1_accuracy"], s["top3_accuracy"], s["median_time_to_localise_s"]
    lines.append(f"{'all faults':<15} {s['trials'] - s['fault_free_trials']:>6} "
                 f"{(t1 or 0):>7.0%} {(t3 or 0):>7.0%}")
    lines.append(f"false alarms: {s['false_alarms']} of {s['fault_free_trials']} fault-free "
                 f"trials; median time from onset to a correct top-1: "
                 f"{'-' if med is None else f'{med:.2f} s'}")
    return lines


def rescore(out: Path, *, log: Any = print) -> dict[str, Any]:
    """Re-diagnose the trials of a finished run in ``out`` with the code as it is now,
    from what each trial folder saved (collective logs, telemetry, ground truth) at the
    run's own diagnosis time; writes OUT/rescored.json and logs the table.

    Why: the diagnosis changes more often than a 10-minute run can be repeated on a
    shared machine; the same trials' evidence tells what a change does to them."""
    from controller.diagnose.evidence import load_telemetry
    from mininet_topos.topologies import resolve_topology

    names = [f.name for f in fields(FaultSpec)]
    out = Path(out)
    try:
        done = json.loads((out / "summary.json").read_text())
    except (OSError, ValueError) as exc:
        raise FaultError(f"rescore: {out}/summary.json: {exc}") from None
    topo = resolve_topology(done.get("testbed", {}).get("topology", "two-dc"))
    per_trial = []
    for old in done["per_trial"]:
        tdir = out / f"trial{old['trial']:03d}"
        if not (tdir / "csv").is_dir():
            raise FaultError(f"rescore: {tdir}: no saved telemetry (a run before telemetry "
                             "was saved per trial on P4 switches)")
        truth = old["fault"]
        records = read_logs([tdir / "collectives"]) if (tdir / "collectives").exists() else []
        fault = FaultSpec(**{k: truth[k] for k in names if k in truth}) if truth else None
        start = (truth["onset_unix"] - truth["onset_s"]) if truth else \
            min((r.start for r in records), default=0.0)
        ev = Evidence(topo=topo, records=records, telemetry=load_telemetry(tdir, topo),
                      now=old["diagnosis"]["at"])
        res = _evaluate(ev, fault, start)
        res.pop("text")
        per_trial.append({"trial": old["trial"], "fault": truth, **res})
        if res["correct_top1"] != old["correct_top1"]:
            top = res["diagnosis"]["culprits"][:1]
            log(f"trial {old['trial']:3d}: {'MISS -> ok' if res['correct_top1'] else 'ok -> MISS'}"
                + (f" ({top[0]['type']} {top[0]['component']} {top[0]['kind']})" if top else ""))
    summary = {**score(per_trial), "per_trial": per_trial, "rescored_from": str(out)}
    (out / "rescored.json").write_text(json.dumps(summary, indent=1))
    for line in format_score(summary):
        log(line)
    return summary


def one_fault_plan(text: str) -> Callable[[dict[str, list[str]]], list[FaultSpec | None]]:
    """A plan of one trial with the fault ``text`` (a YAML mapping, see spec.py),
    checked against the two-DC topology now, before any network starts."""
    import yaml

    from mininet_topos.faults.spec import parse_fault
    from mininet_topos.topologies import resolve_topology

    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise FaultError(f"--fault {text!r}: not YAML: {exc}") from None
    if isinstance(raw, dict):
        raw.setdefault("onset_s", 3.0)
        raw.setdefault("duration_s", 3600.0)
    fault = parse_fault(raw, resolve_topology("two-dc"), nranks=4)
    return lambda _places: [fault]


def run_harness(cfg: HarnessConfig, *, log: Any = print,
                plan: Callable[[dict[str, list[str]]], list[FaultSpec | None]] | None = None,
                verbose: bool = False) -> dict[str, Any]:
    """Run the trials on one two-DC test bed (``cfg.switch``); write OUT/summary.json.

    ``plan`` (given the places the warm-up found) fixes the trials' faults instead of
    drawing ``cfg.trials`` at random (the end-to-end tests use it)."""
    from mininet_topos.testbed import Testbed
    from mininet_topos.topologies import resolve_topology

    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    topo = resolve_topology("two-dc")
    rng = np.random.default_rng(cfg.seed)
    per_trial: list[dict[str, Any]] = []
    t_all = time.time()
    p4 = cfg.switch != "linux-router"
    if p4 and cfg.switch not in ("softswitch", "ebpf"):
        raise FaultError(f"faults harness: switch {cfg.switch!r} not one of linux-router, "
                         "softswitch, ebpf")
    if cfg.trial_s is None:
        # the Python switches carry the ring 5-10x slower (transfers of 0.5-1 s): a dead
        # link's transfer is called hung after 10x its pair's usual time, which must fit
        # between the onset and the end
        cfg = replace(cfg, trial_s=P4_TRIAL_S if cfg.switch == "softswitch" else TRIAL_S)
    extra: dict[str, Any] = {"agent_hosts": cfg.hosts, "feedback": False} if p4 else {}
    drops: PortDropPoller | None = None
    with Testbed(topo=topo, switch=cfg.switch, logs=out / "testbed", seed=cfg.seed,
                 sample_interval_s=0.2, python=cfg.python, **extra) as tb:
        def telemetry(since: float, end: float) -> Any:
            if p4:   # the controller's exports: INT paths, link sequence loss, queues
                time.sleep(1.2)   # (its CSV files are written once a second)
                # the link loss of a bin is written once the bin closed and the links'
                # counters were read after it: wait (bounded) for the bin of the last
                # second of traffic
                wait_for_loss_export(tb.logs / "controller", end - 1.0,
                                     timeout_s=LOSS_EXPORT_WAIT_S)
                return controller_telemetry(topo, tb.logs / "controller", since_unix=since,
                                            drops=drops)
            return telemetry_from_samples(topo, tb.samples_dir(), since_unix=since)
        if p4:   # drops no link counter sees: the switches' queues (the eBPF target's tiny
            # queues, the Python target's bursts after a stall) and receive sockets, and
            # the ranks' hosts' full UDP sockets
            drops = PortDropPoller([tb.net.get(s) for s in topo.switch_names],
                                   hosts={h: tb.net.get(h).pid for h in cfg.hosts})
        tick = drops.poll if drops is not None else None
        log(f"two-dc up on {cfg.switch} in {time.time() - t_all:.1f} s; warm-up run")
        start, w_end = _run_ranks(tb, cfg, topo, out / "warmup", None, None, tick)
        warm = telemetry(start, w_end)
        if p4:
            places = {k: v for k, v in int_places(topo, warm, cfg.hosts).items()
                      if k in P4_KINDS[cfg.switch]}
            log("INT paths cross: " + ", ".join(places["link_down"]))
        else:
            places = _places(topo, warm, cfg.hosts)
            log("ring traffic crosses: " + ", ".join(places["rate_degraded"]))
            log("tiny queues may go to: " + (", ".join(places["tiny_queue"]) or "nowhere"))
        scale = 1.0
        if p4 and (out / "warmup" / "collectives").exists():   # (kernel routers: as measured)
            scale = host_fault_scale(_warm_transfer_s(read_logs([out / "warmup" / "collectives"])))
            log(f"host faults scaled x{scale:.2f} (warm-up transfers' median time)")
        chosen = plan(places) if plan is not None else [
            _pick(rng, cfg, places, scale) for _ in range(cfg.trials)]
        for f in chosen:
            if p4 and f is not None and f.kind not in P4_KINDS[cfg.switch]:
                raise FaultError(f"faults harness: {f.kind} is not injected on {cfg.switch} "
                                 f"(kinds there: {', '.join(P4_KINDS[cfg.switch])})")
        for i, fault in enumerate(chosen):
            tdir = out / f"trial{i:03d}"
            inj = Injector(tb=tb, topo=topo, python=cfg.python, switch=cfg.switch)
            start, end = _run_ranks(tb, cfg, topo, tdir, fault, inj, tick)
            time.sleep(0.5)   # a last counter sample after the traffic
            records = read_logs([tdir / "collectives"]) if (tdir / "collectives").exists() \
                else []
            tel = telemetry(start - 0.5, end)
            # saved for `controller diagnose --out tdir` (kernel routers: no controller
            # exported it; P4 switches: this trial's cut, with the polled tail drops)
            save_telemetry(tel, tdir, topo)
            ev = Evidence(topo=topo, records=records, telemetry=tel, now=end)
            res = _evaluate(ev, fault, start)
            truth = {**fault.truth(start), **_where(fault, topo, warm, cfg.hosts, p4)} \
                if fault else None
            if truth is not None and inj.drops:
                truth["injected_drops"] = inj.drops
            (tdir / "ground_truth.json").write_text(json.dumps(truth, indent=1))
            (tdir / "diagnosis.txt").write_text(res.pop("text") + "\n")
            per_trial.append({"trial": i, "fault": truth, **res})
            top = res["diagnosis"]["culprits"][:1]
            got = f"{top[0]['type']} {top[0]['component']} {top[0]['kind']}" if top \
                else "no fault"
            want = f"{fault.component_type} {fault.target} {fault.kind}" if fault \
                else "no fault"
            if verbose:
                log((tdir / "diagnosis.txt").read_text().rstrip())
            tl = res.get("time_to_localise_s")
            log(f"trial {i:3d}: injected {want:<32} diagnosed {got:<36} "
                f"{'ok' if res['correct_top1'] else 'MISS'}"
                + (f" in {tl:.2f} s" if tl is not None else ""))
    summary = {**score(per_trial), "per_trial": per_trial, "seed": cfg.seed,
               "testbed": {"topology": "two-dc", "switch": cfg.switch,
                           "ranks": list(cfg.hosts), "size": cfg.size, "rate": cfg.rate},
               "wall_s": time.time() - t_all}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    for line in format_score(summary):
        log(line)
    return summary
