"""Soak: the demo workload for N minutes with memory, queues, drops and export watched.

    python -m bench.soak [--minutes 10] [--out DIR] [--influx URL] [--interval 5]
                         [--outage SECONDS]

Runs the ``demo`` preset (two datacenters, ring all-reduce across a WAN link with 1 %
bursty loss, HPCC, FEC from the loss map) with its workload stretched to ``--minutes``
(the spec is built in memory from the preset: a count the run cannot reach and a
timeout of the soak's length, so the traffic processes run the whole time).  The
controller exports to InfluxDB while it runs: to a private influxd 1.x started here
(default) or to ``--influx URL`` (a fresh database per run).  ``--outage S`` stops the
private influxd for S seconds a third into the run: the exporter must spool to disk and
replay, and the check below must still find nothing lost.

Every ``--interval`` seconds it samples the RSS and CPU of every process the test bed
started (found as descendants of this process in /proc: switches, controller, host
agents, traffic, WAN delay lines, samplers, influxd) and the controller's queue depths
and drop counters (state file ``collector`` section).  At the end it prints:

* per process kind: RSS after the warm-up and at the end, the worst process's
  least-squares slope in MB/min and "flat" / "growing" (limit
  :data:`bench.soak_stats.MAX_SLOPE_MB_PER_MIN`; runs shorter than
  :data:`bench.soak_stats.MIN_WINDOW_S` after the warm-up say "too short");
* every drop counter, explained (configured WAN loss, tail drops of full queues) or
  UNEXPLAINED (collector socket drops, agent shipper drops, malformed datagrams,
  export rejections, loss on links configured lossless);
* lines the controller delivered per measurement against the points influxd holds;

and writes ``processes.csv``, ``queues.csv``, ``rss.png`` and ``report.json`` under
``--out``.  Exit status 1 when memory grows, a drop is unexplained or telemetry is
lost; 2 when the run could not start.  Needs root and Mininet; not part of
``python -m bench`` by default (``python -m bench soak`` names it).

Figures of a 10-minute run are in bench/README.md.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from traffic.cc import registry as cc_registry

from .soak_influx import InfluxError, PrivateInfluxd, count_points
from .soak_procs import ProcSample, ProcTable
from .soak_report import QUEUE_KEYS, format_report, memory_table, report_dict, write_outputs
from .soak_stats import MAX_SLOPE_MB_PER_MIN, classify_drops, compare_export

__all__ = ["Outage", "SoakConfig", "SoakError", "main", "run_soak", "soak_spec"]

START_DELAY_S = 4.0
GRACE_S = 30.0          # after the traffic's own timeout, before the soak stops it


class SoakError(RuntimeError):
    """The soak could not run (bad option, no influxd, the test bed did not start)."""


@dataclass(slots=True, kw_only=True)
class SoakConfig:
    minutes: float = 10.0
    out: Path = Path("results/soak")
    influx_url: str | None = None
    interval_s: float = 5.0
    warmup_s: float | None = None      # default: 60 s, or a fifth of a shorter run
    max_slope_mb_per_min: float = MAX_SLOPE_MB_PER_MIN
    preset: str = "demo"
    # The soak watches memory, queues and the export; it runs the Python target as it
    # always did. (On the eBPF target a queue's tail drop happens after the egress
    # stamped the link sequence number, so the loss map counts it as link loss.)
    switch: str = "softswitch"
    outage_s: float = 0.0              # > 0: stop the private influxd this long mid-run

    def __post_init__(self) -> None:
        if not 0.05 <= self.minutes <= 24 * 60:
            raise SoakError(f"soak --minutes {self.minutes:g}: outside 0.05..1440")
        if not 0.2 <= self.interval_s <= 60:
            raise SoakError(f"soak --interval {self.interval_s:g}: outside 0.2..60 s")
        if self.influx_url is not None and not self.influx_url.startswith(("http://", "https://")):
            raise SoakError(f"soak --influx {self.influx_url!r}: expected http://HOST:PORT")
        if self.outage_s < 0 or self.outage_s > self.minutes * 60.0 / 2:
            raise SoakError(f"soak --outage {self.outage_s:g}: outside 0..{self.minutes * 30:g} s "
                            "(at most half the run)")
        if self.outage_s and self.influx_url is not None:
            raise SoakError("soak --outage stops the soak's own influxd; leave out --influx")

    @property
    def warmup(self) -> float:
        if self.warmup_s is not None:
            return self.warmup_s
        return min(60.0, self.minutes * 60.0 / 5.0)


def soak_spec(minutes: float, preset: str = "demo", switch: str | None = None) -> Any:
    """The preset's spec with its workload running ``minutes``: the all-reduce count set
    beyond reach and the traffic's timeout (and the spec's duration) set to the soak;
    ``switch`` overrides the preset's switch kind (user-space ones at the demo's
    user-space rates)."""
    from mininet_topos.demo import PYTHON_SPEED
    from mininet_topos.experiment import preset_path, spec_from_dict

    path = preset_path(preset)
    raw = copy.deepcopy(yaml.safe_load(path.read_text(encoding="utf-8")))
    seconds = max(1.0, minutes * 60.0)
    raw["workload"]["count"] = 1_000_000
    raw["workload"]["timeout_s"] = seconds
    raw["duration_s"] = seconds
    raw["name"] = f"soak-{raw['name']}"
    if switch:
        raw["switch"] = switch
        raw["workload"].update(PYTHON_SPEED.get(switch, {}))
    return spec_from_dict(raw, base_dir=path.parent)


@dataclass(slots=True, kw_only=True)
class Outage:
    """Stops the private influxd at ``at_s`` for ``duration_s`` and starts it again on the
    same port and data, so the controller's exporter spools and then replays."""

    server: PrivateInfluxd
    at_s: float
    duration_s: float
    stopped_at_s: float | None = None
    restarted_at_s: float | None = None

    def tick(self, t_s: float) -> str | None:
        """Act at time ``t_s`` of the run; returns what it did, if anything."""
        if self.stopped_at_s is None and t_s >= self.at_s:
            self.server.stop()
            self.stopped_at_s = t_s
            return f"influxd stopped for {self.duration_s:g} s (outage)"
        if (self.stopped_at_s is not None and self.restarted_at_s is None
                and t_s >= self.stopped_at_s + self.duration_s):
            self.server.start()
            self.restarted_at_s = t_s
            return "influxd started again"
        return None

    def summary(self) -> dict[str, float | None]:
        return {"planned_s": self.duration_s, "stopped_at_s": self.stopped_at_s,
                "restarted_at_s": self.restarted_at_s}


@dataclass(slots=True, kw_only=True)
class _Run:
    samples: list[ProcSample] = field(default_factory=list)
    queues: list[dict[str, Any]] = field(default_factory=list)
    wan: dict[str, Any] = field(default_factory=dict)
    traffic_status: dict[str, int | None] = field(default_factory=dict)


def _read_state(path: Path) -> dict[str, Any]:
    """The controller's state file; {} while it is missing or being replaced."""
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def _sample_queues(t_s: float, coll: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"t_s": t_s}
    for k in QUEUE_KEYS:
        if k in coll:
            row[k] = coll[k]
    return row


def _drive(cfg: SoakConfig, spec: Any, topo: Any, url: str, database: str,
           log: Callable[[str], None], outage: Outage | None = None) -> _Run:
    """Bring the test bed up, run the traffic for the soak's length while sampling."""
    from mininet_topos.experiment.workload import traffic_argv

    run = _Run()
    logs = cfg.out / "logs"
    tdir = cfg.out / "traffic"
    tdir.mkdir(parents=True, exist_ok=True)
    procs = ProcTable(os.getpid())
    t_up = time.time()
    from mininet_topos.testbed import Testbed

    with Testbed(topo=topo, switch=spec.switch, logs=logs, seed=spec.seed,
                 sample_interval_s=spec.sample_interval_s, program=spec.program,
                 python=sys.executable, agent_hosts=spec.workload.hosts,
                 feedback=cc_registry.get(spec.cc).controller_feedback,
                 fec_target=1e-3 if spec.recovery == "fec" and spec.fec == "auto" else 0.0,
                 influx_url=url, influx_database=database) as tb:
        log(f"network up in {time.time() - t_up:.1f} s ({len(topo.switches)} switches, "
            f"{len(topo.hosts)} hosts); controller exports to {url} database {database}")
        hosts = spec.workload.hosts
        ips = [topo.host(h).ipv4 for h in hosts]
        start_at = time.time() + START_DELAY_S
        assert tb.sock_dir is not None
        traffic = []
        for rank in reversed(range(len(ips))):
            h = hosts[rank]
            argv = traffic_argv(spec, python=sys.executable, rank=rank, ips=ips,
                                out=tdir / f"{h}.json", control=tb.sock_dir / f"{h}.sock",
                                start_at=start_at)
            traffic.append(tb.spawn(f"traffic-{h}", h, argv))
        state = tb.logs / "controller" / "controller_state.json"
        deadline = start_at + cfg.minutes * 60.0 + GRACE_S
        next_log = time.monotonic() + 60.0
        t0 = time.monotonic()
        while True:
            t = time.monotonic() - t0
            run.samples.extend(procs.sample(t))
            run.queues.append(_sample_queues(t, _read_state(state).get("collector") or {}))
            if outage is not None and (did := outage.tick(t)):
                log(f"  {t / 60:.1f} min: {did}")
            if time.monotonic() >= next_log:
                q = run.queues[-1]
                log(f"  {t / 60:.1f} min: export delivered {q.get('export_lines_delivered', 0)}"
                    f" lines, spool {q.get('export_spool_batches', 0)} batches, "
                    f"{len(procs.last)} processes seen")
                next_log += 60.0
            if all(p.proc.poll() is not None for p in traffic):
                break
            if time.time() > deadline:
                log("traffic still running after its timeout; stopping it")
                break
            time.sleep(max(0.0, cfg.interval_s - (time.monotonic() - t0 - t)))
        for p in traffic:
            run.traffic_status[p.node] = p.proc.poll()
        for name, wan in tb.wan_links().items():
            with contextlib.suppress(Exception):
                run.wan[name] = wan.stats()
    return run


def run_soak(cfg: SoakConfig, *, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the soak; return the report (``report["ok"]`` is the verdict)."""
    from mininet_topos.experiment import apply_overrides, sigterm_as_interrupt
    from mininet_topos.topologies import resolve_topology

    spec = soak_spec(cfg.minutes, cfg.preset, cfg.switch)
    topo = apply_overrides(resolve_topology(spec.topology), spec)
    cfg.out.mkdir(parents=True, exist_ok=True)
    database = f"soak_{time.strftime('%Y%m%d_%H%M%S')}_{uuid.uuid4().hex[:6]}"
    wan_loss = {ln.name: float(ln.loss.mean_loss) for ln in topo.links
                if ln.loss is not None}
    t_start = time.time()
    with contextlib.ExitStack() as stack:
        stack.enter_context(sigterm_as_interrupt())
        outage = None
        if cfg.influx_url is None:
            try:
                server = stack.enter_context(PrivateInfluxd(cfg.out / "influxd"))
            except InfluxError as exc:
                raise SoakError(str(exc)) from None
            url = server.url
            if cfg.outage_s > 0:
                outage = Outage(server=server, at_s=cfg.minutes * 60.0 / 3,
                                duration_s=cfg.outage_s)
        else:
            url = cfg.influx_url
        log(f"soak: {cfg.minutes:g} min of {spec.name} ({spec.workload.kind} on "
            f"{', '.join(spec.workload.hosts)}), samples every {cfg.interval_s:g} s")
        run = _drive(cfg, spec, topo, url, database, log, outage)
        if outage is not None and outage.restarted_at_s is None:
            server.start()  # the run ended inside the outage: count what arrived
        # the controller has stopped: its last state counts every line it delivered
        state = _read_state(cfg.out / "logs" / "controller" / "controller_state.json")
        coll = dict(state.get("collector") or {})
        try:
            held = count_points(url, database)
        except InfluxError as exc:
            log(f"counting points failed: {exc}")
            held = {}
    switch_stats = {}
    for f in sorted((cfg.out / "logs" / "switches").glob("*.stats.json")):
        with contextlib.suppress(OSError, ValueError):
            st = json.loads(f.read_text())
            switch_stats[str(st.get("name", f.name.split(".")[0]))] = st
    drops = classify_drops(switch_stats=switch_stats, wan=run.wan, wan_loss=wan_loss,
                           controller_losses=state.get("losses", []) or [], collector=coll)
    pending = sum(int(coll.get(k) or 0) for k in ("export_buffered_lines", "export_queued_lines",
                                                   "export_spool_lines"))
    export = compare_export(delivered=coll.get("export_delivered_by_measurement") or {},
                            held=held, written=int(coll.get("export_lines_written") or 0),
                            pending=pending)
    memory = memory_table(run.samples, warmup_s=cfg.warmup, max_slope=cfg.max_slope_mb_per_min)
    queues_max = {k: max((int(q[k]) for q in run.queues if k in q), default=0)
                  for k in QUEUE_KEYS}
    queues_max["export_send_failures"] = int(coll.get("export_send_failures") or 0)
    rep = report_dict(minutes=cfg.minutes, warmup_s=cfg.warmup,
                      max_slope=cfg.max_slope_mb_per_min, memory=memory, drops=drops,
                      export=export, queues_max=queues_max,
                      extra={"database": database, "influx_url": url,
                             "outage": outage.summary() if outage is not None else None,
                             "wall_s": round(time.time() - t_start, 1),
                             "samples": len(run.queues),
                             "traffic_exit": run.traffic_status,
                             "host_records": int(coll.get("host_records") or 0),
                             "switch_tx_packets": sum(int(pt.get("tx_packets") or 0)
                                                      for st in switch_stats.values()
                                                      for pt in st.get("ports", []) or [])})
    write_outputs(cfg.out, samples=run.samples, queues=run.queues, report=rep)
    return rep


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.soak", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  python -m bench.soak                 # 10 minutes, private influxd\n"
               "  python -m bench.soak --minutes 0.5 --out /var/tmp/soak\n"
               "  python -m bench.soak --influx http://127.0.0.1:8086")
    ap.add_argument("--minutes", type=float, default=10.0, help="length of the workload (10)")
    ap.add_argument("--out", type=Path, default=Path("results/soak"),
                    help="results folder (results/soak)")
    ap.add_argument("--influx", metavar="URL", default=None,
                    help="export to this InfluxDB (default: a private influxd started here)")
    ap.add_argument("--interval", type=float, default=5.0, help="seconds between samples (5)")
    ap.add_argument("--warmup", type=float, default=None,
                    help="seconds left out of the memory slope (60, or 1/5 of a shorter run)")
    ap.add_argument("--outage", type=float, default=0.0, metavar="SECONDS",
                    help="stop the private influxd this long a third into the run, then start "
                         "it again: the export must spool and replay with nothing lost (0)")
    ap.add_argument("--max-slope", type=float, default=MAX_SLOPE_MB_PER_MIN,
                    help=f"MB/min per process judged 'growing' ({MAX_SLOPE_MB_PER_MIN:g})")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench.soak: needs root (Mininet, network namespaces)", file=sys.stderr)
        return 2
    from mininet_topos.experiment import ExperimentError

    try:
        cfg = SoakConfig(minutes=args.minutes, out=args.out, influx_url=args.influx,
                         interval_s=args.interval, warmup_s=args.warmup,
                         max_slope_mb_per_min=args.max_slope, outage_s=args.outage)
        rep = run_soak(cfg, log=lambda s: print(s, flush=True))
    except KeyboardInterrupt:
        print("bench.soak: interrupted; network torn down", file=sys.stderr)
        return 130
    except (SoakError, ExperimentError, InfluxError) as exc:
        print(f"bench.soak: {exc}", file=sys.stderr)
        return 2
    print()
    for line in format_report(rep):
        print(line)
    print(f"files: {', '.join(rep['files'].values())}")
    return 0 if rep["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
