"""``python -m controller run``: program every switch and run the control loop.

examples:
  python -m controller run --topology mininet_topos/topofiles/dumbbell.yaml
  python -m controller run --topology two_dc.yaml --influx http://127.0.0.1:8086 --out out/
  python -m controller run --topology leaf_spine.yaml --sink-mode report --collector-host h4
  python -m controller run --topology leaf_spine.yaml --sink-mode report --collector-host h4 \\
      --standby-collector h1          # every report also to h1 (a standby controller)
  python -m controller run --topology dumbbell.yaml --once    # program, report, exit
  python -m controller run --topology two_dc.yaml --out out/ --coll-log logs/   # live diagnosis
  python -m controller run --topology dumbbell.yaml --ecn 2000:20000:0.1   # DCQCN marking
  python -m controller run --topology leaf_spine.yaml --coll-log logs/ --mitigate act   # recover
  python -m controller run --topology dumbbell.yaml --web 127.0.0.1:8080   # live view in a browser
  python -m controller run --topology dumbbell.yaml --alerts alerts.yaml   # own alert rules
  python -m controller run --topology dumbbell.yaml --target bmv2 \\
      --bmv2-json build/int_rocev2.json --p4info build/int_rocev2.p4info.txtpb

Progress is printed per switch; every failure names the switch and the reason
(unreachable, pipeline rejected, entry rejected with the entry).  Unreachable
switches are retried with backoff while the controller runs; a switch that
restarts gets its pipeline and entries back.  State for `show` goes to
OUT/controller_state.json.  Exit status: 0, or 1 when a switch failed (--once),
2 for bad options/files.
"""
from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from typing import TextIO

from common import argtypes
from controller.intent import EcnProfile, SinkMode
from controller.p4rt import Phase, Progress, Target
from controller.topology.model import DROP_PORT
from formats.agent_batch import AGENT_BATCH_UDP_PORT
from formats.feedback import FEEDBACK_UDP_PORT
from formats.int_md import HPCC_INSTRUCTION_BITMAP
from formats.telemetry_report import REPORT_UDP_PORT
from traffic.cc import registry as cc_registry
from traffic.workloads import rate_arg

from . import _types


def _cpu_list(text: str) -> tuple[int, ...]:
    """ "0,1" or "0-3" or "0,2-3" -> cores (argparse type)."""
    out: list[int] = []
    try:
        for part in text.split(","):
            lo, sep, hi = part.strip().partition("-")
            out += range(int(lo), int(hi) + 1) if sep else [int(lo)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected cores like 0,1 or 0-3") from None
    if not out or min(out) < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected cores like 0,1 or 0-3")
    return tuple(out)

def _ecn(text: str) -> EcnProfile | None:
    from controller.runner.config import parse_ecn
    from controller.runner.errors import RunError
    try:
        return parse_ecn(text)
    except RunError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _collector(text: str) -> object:
    from controller.runner.config import parse_collector
    from controller.runner.errors import RunError
    try:
        return parse_collector(text)
    except RunError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _web(text: str) -> tuple[str, int]:
    from controller.web import WebError, parse_web_address
    try:
        return parse_web_address(text)
    except WebError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _alert_rules(path: str) -> object:
    from controller.alerts import AlertRuleError, load_rules
    try:
        return load_rules(path)
    except AlertRuleError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("run", help="program the switches and run the controller",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--topology", required=True, metavar="FILE", help="topology file (YAML or JSON)")
    p.add_argument("--influx", metavar="URL", help="InfluxDB 1.x/2.x/3.x (or compatible) URL; "
                                                   "default: files under --out")
    p.add_argument("--database", default="int_telemetry", help="1.x database / 2.x bucket")
    p.add_argument("--org", default="int", help="2.x organisation")
    p.add_argument("--influx-credentials", metavar="FILE",
                   help="InfluxDB token / username / password (YAML, mode 0600); default: "
                        "$INFLUX_TOKEN, $INFLUX_USERNAME, $INFLUX_PASSWORD")
    p.add_argument("--out", default="out", metavar="DIR", help="state file, exports, spool (default ./out)")
    p.add_argument("--target", choices=[t.value for t in Target], default="softswitch",
                   help="switch kind: softswitch gets the P4 source, bmv2 the p4c JSON")
    p.add_argument("--program", metavar="P4", help="P4 program (default: p4/int_rocev2.p4)")
    p.add_argument("--p4info", metavar="FILE", help="P4Info file (needed for bmv2; softswitch builds it)")
    p.add_argument("--bmv2-json", metavar="FILE", help="p4c output for --target bmv2 (without it and "
                                                       "--p4info, the program is compiled with p4c)")
    p.add_argument("--listen", default="127.0.0.1", help="collector bind address (default 127.0.0.1)")
    p.add_argument("--collectors", type=int, default=1, metavar="N",
                   help="N collector processes behind the report and agent ports (SO_REUSEPORT, "
                        "reports steered by flow), their tables merged; default 1 (one thread)")
    p.add_argument("--collector-cpus", type=_cpu_list, default=None, metavar="LIST",
                   help="with --collectors N: pin process i to core LIST[i mod len] (e.g. 0,1 "
                        "or 0-3); one process per core scales best (bench/README.md)")
    p.add_argument("--report-port", type=argtypes.port, default=REPORT_UDP_PORT, help="Telemetry Report UDP port")
    p.add_argument("--agent-port", type=argtypes.port, default=AGENT_BATCH_UDP_PORT, help="host agent batch UDP port")
    p.add_argument("--feedback-port", type=argtypes.port, default=FEEDBACK_UDP_PORT, help="agents' feedback UDP port")
    p.add_argument("--agent", action="append", type=_types.agent, default=[], metavar="HOST=ADDR:PORT",
                   help="where HOST's agent takes feedback (default: HOST's address, --feedback-port)")
    p.add_argument("--fec-target", type=float, default=0.0, metavar="RESIDUAL",
                   help="choose FEC (k, m) per flow from the link loss map to keep residual loss "
                        "under RESIDUAL (e.g. 1e-6) and send it with the rate; default off")
    p.add_argument("--sink-mode", choices=[m.value for m in SinkMode], default="host",
                   help="host ports: leave INT for the host sink (host) or send reports (report)")
    p.add_argument("--collector-host", metavar="HOST", help="topology host receiving Telemetry Reports")
    p.add_argument("--collector-ip", metavar="IP", help="collector outside the topology: its address")
    p.add_argument("--collector-mac", metavar="MAC", help="... its MAC")
    p.add_argument("--collector-at", type=argtypes.switch_port(DROP_PORT), metavar="SWITCH:PORT",
                   help="... the switch port it is attached to")
    p.add_argument("--standby-collector", action="append", type=_collector, default=[],
                   metavar="HOST[:PORT]|ip=IP,mac=MAC,at=SWITCH:PORT[,port=PORT]",
                   help="also send every Telemetry Report to this collector (a standby "
                        "controller's), one copy each with its own sequence numbers; a topology "
                        "host or an address outside the topology; UDP port default --report-port "
                        "(repeatable, up to 14)")
    p.add_argument("--report-source-base", default="10.255.0.0", metavar="IP",
                   help="switch N sends Telemetry Reports from IP + N (default 10.255.0.0)")
    p.add_argument("--grpc-ca", metavar="PEM", help="TLS to the switches: CA of their certificates")
    p.add_argument("--grpc-cert", metavar="PEM", help="TLS client certificate (with --grpc-key)")
    p.add_argument("--grpc-key", metavar="PEM", help="TLS client key")
    p.add_argument("--grpc-server-name", default="", metavar="NAME",
                   help="name to check in the switches' certificates (e.g. localhost)")
    p.add_argument("--int-instructions", type=argtypes.bitmap16, default=HPCC_INSTRUCTION_BITMAP, metavar="BITMAP",
                   help="INT instruction bitmap of the watchlist (default 0x9400, the HPCC profile; "
                        "0xD400 adds ports so hops are told apart per egress port)")
    p.add_argument("--cc", choices=cc_registry.names(("controller",)), default="hpcc",
                   help="rate engine of the controller (traffic.cc.registry; default hpcc)")
    p.add_argument("--ecn", type=_ecn, default=EcnProfile(), metavar="KMIN:KMAX:PMAX",
                   help="ECN marking on every egress port: none up to KMIN queued bytes, "
                        "rising to probability PMAX at KMAX, all from KMAX on; 'off' for "
                        "none (default 5000:200000:0.01, DCQCN's profile)")
    p.add_argument("--key-file", metavar="FILE",
                   help="formats.auth key file (YAML, mode 0600): seal feedback, take only sealed "
                        "agent batches/confirmations and reports from the switches (README: Security)")
    p.add_argument("--insecure", action="store_true",
                   help="without --key-file, still --listen beyond loopback and the test bed's "
                        "management network (anyone reaching it can forge telemetry)")
    p.add_argument("--election-id", type=argtypes.election_id, default=1)
    p.add_argument("--sender-id", type=argtypes.ipv4_or_int, default=0xFFFFFFFF,
                   metavar="IPV4|ID",
                   help="sender id of the sealed feedback, in 255.255.255.0/24 (default "
                        "255.255.255.255; a standby controller takes another, and agents "
                        "admit its address with --feedback-from)")
    p.add_argument("--connect-timeout", type=argtypes.positive, default=5.0, metavar="S")
    p.add_argument("--interval", type=argtypes.positive, default=1.0, metavar="S",
                   help="status, polling and state-file period (default 1 s)")
    p.add_argument("--duration", type=argtypes.positive, metavar="S", help="stop after S seconds")
    p.add_argument("--status-every", type=argtypes.positive, metavar="S",
                   help="print a status line every S seconds (switches, reports, flows, feedback, losses)")
    p.add_argument("--coll-log", action="append", default=[], metavar="DIR",
                   help="live fault diagnosis: a folder of the ranks' collective logs "
                        "(traffic --coll-log); the ranked culprits go into the state file "
                        "(diagnosis) and OUT/summary.json (repeatable)")
    p.add_argument("--diagnose-every", type=argtypes.positive, default=1.0, metavar="S",
                   help="with --coll-log: diagnose again every S seconds (default 1)")
    p.add_argument("--mitigate", choices=("off", "advise", "act"), default="off",
                   help="act on the faults the diagnosis and the loss map name: reroute off a lossy "
                        "or dead link, drain a switch, raise FEC (act), or only log what it would "
                        "do (advise); actions go to the state file (mitigation) and the export "
                        "(controller/mitigate/README.md; default off)")
    p.add_argument("--mitigate-confidence", type=float, default=0.5, metavar="X",
                   help="least confidence of a finding acted on (default 0.5)")
    p.add_argument("--mitigate-hold-down", type=argtypes.positive, default=10.0, metavar="S",
                   help="an action holds at least S s, doubled each time its target is named "
                        "again after an undo (default 10)")
    p.add_argument("--mitigate-budget", type=int, default=6, metavar="N",
                   help="at most N actions in any minute (default 6)")
    p.add_argument("--mitigate-job", metavar="FILE",
                   help="the job's ranks, spare hosts and control sockets (JSON, "
                        "controller/mitigate/job.py): a slow receiver or straggler rank is moved "
                        "to a spare of its leaf (act) or the move is advised; without it a move "
                        "is advice only")
    p.add_argument("--max-rate", type=rate_arg, metavar="RATE",
                   help="the senders' line rate when below their host links' (e.g. 5M): HPCC "
                        "starts and keeps every flow at or under it (default: the host link's "
                        "rate)")
    p.add_argument("--no-rate-feedback", dest="rate_feedback", action="store_false",
                   help="send the agents no rates (the senders keep their own); other feedback "
                        "(FEC, a reroute's path notice) still goes")
    p.add_argument("--web", type=_web, metavar="HOST:PORT",
                   help="serve the live view (topology, links, flows, loss map, diagnosis, alerts) "
                        "there; loopback needs no token, any other address gets one (printed)")
    p.add_argument("--web-token", metavar="TOKEN", help="the page's token (default: generated "
                                                        "beyond loopback)")
    p.add_argument("--alerts", type=_alert_rules, metavar="FILE",
                   help="alert rules (YAML; controller/alerts/rules.py shows the format); "
                        "default: link loss > 0.5 %%, queue > 48 pkts for 3 s, report gaps, "
                        "a culprit named")
    p.add_argument("--once", action="store_true", help="program the switches, write the state, exit")
    p.add_argument("-v", "--verbose", action="store_true")
    p.set_defaults(func=run)


class ProgressPrinter:
    """One whole line per event (switches report from parallel threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __call__(self, p: Progress) -> None:
        if p.phase is Phase.FAILED:
            line, stream = f"{p.switch:<6} FAILED  {p.message}\n", sys.stderr
        elif p.phase is Phase.READY:
            line, stream = f"{p.switch:<6} ready   {p.message}\n", sys.stdout
        else:
            line, stream = f"{p.switch:<6} {p.phase.value}{(' ' + p.message) if p.message else ''}\n", sys.stdout
        self.line(line, stream)

    def line(self, text: str, stream: TextIO | None = None) -> None:
        out = stream or sys.stdout
        with self._lock:
            out.write(text)
            out.flush()


def _status_line(ctl: object) -> str:
    """time, switches ready/total, reports, flows, feedback records, link losses."""
    snap = ctl.snapshot()  # type: ignore[attr-defined]
    ready = sum(1 for s in snap["switches"] if s["state"] == "ready" and s["primary"])
    coll = snap["collector"]
    lost = sum(r["lost"] for r in snap["losses"])
    return (f"{time.strftime('%H:%M:%S')} switches {ready}/{len(snap['switches'])} reports "
            f"{coll.get('reports', 0)} host-records {coll.get('host_records', 0)} flows {len(snap['flows'])} "
            f"feedback {coll.get('feedback_records', 0)} link-lost {lost}\n")


def run(args: argparse.Namespace) -> int:
    from controller.runner import Controller, RunConfig, RunError
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    kw: dict[str, object] = {
        "topology": args.topology, "out_dir": args.out, "influx": args.influx, "database": args.database,
        "org": args.org, "influx_credentials": args.influx_credentials, "target": Target(args.target), "p4info": args.p4info,
        "bmv2_json": args.bmv2_json, "listen": args.listen, "report_port": args.report_port,
        "agent_port": args.agent_port, "collectors": args.collectors, "collector_cpus": args.collector_cpus, "feedback_port": args.feedback_port,
        "sink_mode": SinkMode(args.sink_mode), "collector_host": args.collector_host,
        "collector_ip": args.collector_ip, "collector_mac": args.collector_mac, "collector_at": args.collector_at,
        "standby_collectors": tuple(args.standby_collector),
        "report_source_base": args.report_source_base,
        "tls_ca": args.grpc_ca, "tls_cert": args.grpc_cert, "tls_key": args.grpc_key,
        "tls_server_name": args.grpc_server_name, "int_instructions": args.int_instructions,
        "agents": dict(args.agent), "election_id": args.election_id,
        "connect_timeout_s": args.connect_timeout,
        "fec_target_residual": args.fec_target, "status_interval_s": args.interval,
        "ecn": args.ecn, "cc": args.cc, "rate_feedback": args.rate_feedback, "max_rate_bps": args.max_rate, "key_file": args.key_file, "insecure": args.insecure,
        "sender_id": args.sender_id,
        "coll_logs": list(args.coll_log), "diagnose_every_s": args.diagnose_every,
        "mitigate": args.mitigate, "mitigate_min_confidence": args.mitigate_confidence,
        "mitigate_hold_down_s": args.mitigate_hold_down, "mitigate_budget_per_min": args.mitigate_budget,
        "mitigate_job": args.mitigate_job,
        "web": args.web, "web_token": args.web_token}
    if args.alerts is not None:
        kw["alert_rules"] = args.alerts
    if args.program:
        kw["program"] = args.program
    try:
        cfg = RunConfig(**kw)  # type: ignore[arg-type]
        printer = ProgressPrinter()
        ctl = Controller(cfg=cfg, progress=printer)
        ctl.start()
    except RunError as exc:
        print(f"controller: {exc}", file=sys.stderr)
        return 2
    failed = [n for n, st in ctl.status.items() if st.phase is Phase.FAILED]
    ready = len(ctl.status) - len(failed)
    rep = ctl.collector.report_address if ctl.collector else None
    agent = ctl.collector.agent_address if ctl.collector else None
    print(f"{ready}/{len(ctl.status)} switches ready; collector on {cfg.listen}:"
          f"{rep[1] if rep else cfg.report_port} (reports), :{agent[1] if agent else cfg.agent_port} "
          f"(agents); state in {cfg.state_file}", flush=True)
    if ctl.web is not None:
        print(f"live view at {ctl.web.url}", flush=True)
    if args.once:
        ctl.stop()
        return 1 if failed else 0
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    # SIGUSR1: the operator repaired what the mitigation keeps traffic off (an undo
    # needs evidence; a link the routes avoid shows none)
    signal.signal(signal.SIGUSR1, lambda *_: ctl.clear_mitigation())
    deadline = time.monotonic() + args.duration if args.duration else None
    next_status = time.monotonic() + (args.status_every or 0)
    try:
        while not stop.wait(0.2):
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                break
            if args.status_every and now >= next_status:
                printer.line(_status_line(ctl))
                next_status = now + args.status_every
    finally:
        delivered = ctl.stop()
        if not delivered:
            print(f"controller: export incomplete; the rest is spooled under {cfg.out_dir}/spool "
                  f"for the next run", file=sys.stderr)
    return 0
