"""Options of `python -m controller run`, checked once at the edge."""
from __future__ import annotations

import argparse
import ipaddress
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from common import argtypes
from common.auth.exposure import ExposureError, check_exposure
from controller.alerts import DEFAULT_RULES, AlertRule
from controller.intent import CollectorSpec, EcnProfile, SinkMode
from controller.p4rt import Target
from controller.topology.model import DROP_PORT
from formats.agent_batch import AGENT_BATCH_UDP_PORT
from formats.auth import CONTROLLER_SENDER_ID, CONTROLLER_SENDER_IDS
from formats.feedback import FEEDBACK_UDP_PORT
from formats.int_md import HPCC_INSTRUCTION_BITMAP
from formats.telemetry_report import REPORT_UDP_PORT
from traffic.cc import registry as cc_registry
from traffic.errors import ConfigError

from .errors import RunError


def default_program() -> Path:
    """p4/int_rocev2.p4 of this source tree."""
    return Path(__file__).resolve().parents[2] / "p4" / "int_rocev2.p4"


@dataclass(slots=True, kw_only=True)
class RunConfig:
    topology: str
    out_dir: str = "out"
    influx: str | None = None
    database: str = "int_telemetry"
    org: str = "int"
    influx_credentials: str | None = None   # file: token / username / password (else $INFLUX_*)
    target: Target = Target.SOFTSWITCH
    program: str = field(default_factory=lambda: str(default_program()))
    p4info: str | None = None
    bmv2_json: str | None = None
    listen: str = "127.0.0.1"
    report_port: int = REPORT_UDP_PORT
    agent_port: int = AGENT_BATCH_UDP_PORT
    sink_mode: SinkMode = SinkMode.HOST
    collector_host: str | None = None
    collector_ip: str | None = None              # a collector outside the topology ...
    collector_mac: str | None = None
    collector_at: tuple[str, int] | None = None  # ... attached to this switch port
    # further destinations of the switches' Telemetry Reports (standby controllers'
    # collectors, parse_collector); udp_port 0: --report-port
    standby_collectors: tuple[CollectorSpec, ...] = ()
    report_source_base: str = "10.255.0.0"       # switch N sends reports from this + N
    int_instructions: int = HPCC_INSTRUCTION_BITMAP   # watchlist bitmap (HPCC_PORTS_... adds ports)
    feedback_port: int = FEEDBACK_UDP_PORT
    agents: dict[str, tuple[str, int]] = field(default_factory=dict)   # host -> agent (addr, port)
    cc: str = "hpcc"              # the rate engine (traffic.cc.registry, runs_in controller)
    rate_feedback: bool = True    # False: no rates to the senders (path notices still go)
    base_rtt_s: float = 20e-6     # lower bound of HPCC T; each flow gets its path RTT from the topology
    # HPCC's max rate of a flow: its sender's host link rate, or this when lower (senders
    # whose line rate is below their link's: --max-rate)
    max_rate_bps: float | None = None
    fec_target_residual: float = 0.0     # > 0: choose FEC per flow from the link loss map
    election_id: int = 1
    tls_ca: str | None = None          # PEM files: TLS to every switch when tls_ca is given
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_server_name: str = ""
    connect_timeout_s: float = 5.0
    status_interval_s: float = 1.0
    export_interval_s: float = 1.0
    loss_bin_s: float = 1.0
    flow_capacity: int = 4096
    # collector processes behind the report/agent ports (controller.int.shards), each
    # with flow_capacity flows; 1: one collector thread in this process
    collectors: int = 1
    collector_cpus: tuple[int, ...] | None = None   # pin collector process i to core [i]
    # RED-style ECN marking on every egress port (DCQCN's congestion point); None: off
    ecn: EcnProfile | None = field(default_factory=EcnProfile)
    # live fault diagnosis: the ranks' collective log folders (empty: off), how often
    coll_logs: list[str] = field(default_factory=list)
    diagnose_every_s: float = 1.0
    # mitigation (controller.mitigate): off, advise (log what it would do), act (write it)
    mitigate: str = "off"
    mitigate_min_confidence: float = 0.5
    mitigate_hold_down_s: float = 10.0
    mitigate_budget_per_min: int = 6
    # the job's ranks, spares and control sockets (controller.mitigate.job): rank moves
    mitigate_job: str | None = None
    # formats.auth key file: agents' batches and confirmations must be sealed with it,
    # feedback is sealed, Telemetry Reports come only from the switches (README: Security)
    key_file: str | None = None
    insecure: bool = False             # keyless, yet listen beyond loopback / test bed
    # sender id of the feedback this controller seals: a standby takes its own, so
    # agents keep a replay window per controller (formats.auth CONTROLLER_SENDER_IDS)
    sender_id: int = CONTROLLER_SENDER_ID
    # alert rules (controller/alerts/rules.py) and the live page (--web HOST:PORT)
    alert_rules: tuple[AlertRule, ...] = DEFAULT_RULES
    web: tuple[str, int] | None = None
    web_token: str | None = None       # required beyond loopback (generated when not given)

    def __post_init__(self) -> None:
        for name in ("report_port", "agent_port", "feedback_port"):
            v = getattr(self, name)
            if not 0 <= v <= 65535:
                raise RunError(f"--{name.replace('_', '-')} {v}: outside 0..65535")
        for name in ("connect_timeout_s", "status_interval_s", "export_interval_s", "loss_bin_s",
                     "base_rtt_s", "diagnose_every_s"):
            if not getattr(self, name) > 0:
                raise RunError(f"{name} = {getattr(self, name)} must be > 0")
        if self.max_rate_bps is not None and not self.max_rate_bps > 0:
            raise RunError(f"--max-rate {self.max_rate_bps:g} bit/s: must be > 0")
        if self.mitigate not in ("off", "advise", "act"):
            raise RunError(f"--mitigate {self.mitigate!r}: choose off, advise or act")
        if not 0 <= self.mitigate_min_confidence <= 1:
            raise RunError(f"--mitigate-confidence {self.mitigate_min_confidence}: must be in [0, 1]")
        if not self.mitigate_hold_down_s > 0 or self.mitigate_budget_per_min < 1:
            raise RunError(f"--mitigate-hold-down {self.mitigate_hold_down_s} must be > 0 and "
                           f"--mitigate-budget {self.mitigate_budget_per_min} >= 1")
        try:
            self.cc = cc_registry.get(self.cc, ("controller",)).name
        except ConfigError as e:
            raise RunError(f"--cc: {e}") from None
        if not 1 <= self.collectors <= 64:
            raise RunError(f"--collectors {self.collectors}: expected 1..64 collector processes")
        if not 0 <= self.fec_target_residual < 1:
            raise RunError(f"--fec-target {self.fec_target_residual}: must be in [0, 1)")
        if self.election_id < 1 or self.election_id >> 128:
            raise RunError(f"--election-id {self.election_id}: must be 1..2^128-1")
        if self.sender_id not in CONTROLLER_SENDER_IDS:
            raise RunError(f"--sender-id {self.sender_id:#x}: a controller's sender id is in "
                           "255.255.255.0/24 (agents take feedback only from those)")
        explicit = (self.collector_ip, self.collector_mac, self.collector_at)
        if any(explicit) and not all(explicit):
            raise RunError("a collector outside the topology needs --collector-ip, --collector-mac and "
                           "--collector-at SWITCH:PORT together")
        if self.collector_host and any(explicit):
            raise RunError("give --collector-host or --collector-ip/-mac/-at, not both")
        if self.sink_mode is SinkMode.REPORT and not (self.collector_host or all(explicit)):
            raise RunError("--sink-mode report needs --collector-host HOST (the topology host that "
                           "receives Telemetry Reports) or --collector-ip/--collector-mac/--collector-at")
        if self.standby_collectors and self.sink_mode is not SinkMode.REPORT:
            raise RunError("--standby-collector needs --sink-mode report (switches send reports "
                           "only then)")
        if self.ecn is not None and not (0 <= self.ecn.kmin_bytes <= self.ecn.kmax_bytes < 1 << 32
                                         and 0 <= self.ecn.pmax <= 0xFFFF):
            raise RunError(f"--ecn {self.ecn.kmin_bytes}:{self.ecn.kmax_bytes}:pmax "
                           f"{self.ecn.pmax}/65536: need 0 <= KMIN <= KMAX < 2^32 and "
                           "PMAX in 0..1")
        try:   # before any switch is touched: a keyless controller stays private
            check_exposure("controller collector", self.listen, keyed=self.key_file is not None,
                           insecure=self.insecure)
        except ExposureError as exc:
            raise RunError(str(exc)) from None
        if self.web is not None:
            from controller.web.server import WebError, check_web_exposure
            try:
                self.web_token = check_web_exposure(self.web[0], self.web_token)
            except WebError as exc:
                raise RunError(str(exc)) from None
        if self.sink_mode is SinkMode.REPORT and self.report_port == 0:
            raise RunError("--sink-mode report needs a fixed --report-port (the switches send there)")

    def standby_specs(self) -> tuple[CollectorSpec, ...]:
        """The standby collectors, a missing UDP port taken from --report-port."""
        return tuple(c if c.udp_port else replace(c, udp_port=self.report_port)
                     for c in self.standby_collectors)

    def collector_spec(self) -> CollectorSpec | None:
        if self.collector_host:
            return CollectorSpec(host=self.collector_host, udp_port=self.report_port)
        if self.collector_ip and self.collector_mac and self.collector_at:
            return CollectorSpec(ip=self.collector_ip, mac=self.collector_mac, switch=self.collector_at[0],
                                 port=self.collector_at[1], udp_port=self.report_port)
        return None

    @property
    def state_file(self) -> Path:
        from .state import STATE_FILE
        return Path(self.out_dir) / STATE_FILE


def parse_ecn(text: str) -> EcnProfile | None:
    """``KMIN_BYTES:KMAX_BYTES:PMAX`` (PMAX a probability, e.g. 0.01) or ``off``.

    Marking probability is 0 up to KMIN queued bytes, rises linearly to PMAX at KMAX
    and is 1 from KMAX on (p4/README.md); PMAX is carried as a 16-bit fraction.
    """
    if text.strip().lower() == "off":
        return None
    parts = text.split(":")
    try:
        if len(parts) != 3:
            raise ValueError
        kmin, kmax, pmax = int(parts[0]), int(parts[1]), float(parts[2])
    except ValueError:
        raise RunError(f"--ecn {text!r}: expected KMIN_BYTES:KMAX_BYTES:PMAX, e.g. "
                       "5000:200000:0.01, or off") from None
    if not 0.0 <= pmax <= 1.0:
        raise RunError(f"--ecn {text!r}: PMAX {pmax} is a probability, outside 0..1")
    if not 0 <= kmin <= kmax < 1 << 32:
        raise RunError(f"--ecn {text!r}: need 0 <= KMIN <= KMAX < 2^32 bytes")
    return EcnProfile(kmin_bytes=kmin, kmax_bytes=kmax, pmax=min(0xFFFF, round(pmax * 65536)))


_MAC = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")


def parse_collector(text: str) -> CollectorSpec:
    """A report destination: ``HOST[:UDP_PORT]`` (a topology host), or
    ``ip=IP,mac=MAC,at=SWITCH:PORT[,port=UDP_PORT]`` (outside the topology, attached
    to that switch port, as --collector-ip/-mac/-at).  Without a UDP port, udp_port is
    0: the caller's --report-port."""
    where = f"collector {text!r}"
    if "=" not in text:
        host, sep, port = text.partition(":")
        fields = {"host": host} | ({"port": port} if sep else {})
    else:
        fields = {}
        for part in text.split(","):
            k, sep, v = part.partition("=")
            if not sep or k not in ("host", "ip", "mac", "at", "port") or k in fields:
                raise RunError(f"{where}: expected HOST[:UDP_PORT] or ip=IP,mac=MAC,at=SWITCH:PORT"
                               f"[,port=UDP_PORT] (bad or repeated {part!r})")
            fields[k] = v
    try:
        udp = int(fields.get("port", "0"))
    except ValueError:
        raise RunError(f"{where}: UDP port {fields['port']!r} is not a number") from None
    if "port" in fields and not 0 < udp <= 65535:
        raise RunError(f"{where}: UDP port {udp} outside 1..65535")
    if "host" in fields:
        if not fields["host"] or set(fields) - {"host", "port"}:
            raise RunError(f"{where}: give a topology host, or ip, mac and at")
        return CollectorSpec(host=fields["host"], udp_port=udp)
    if not {"ip", "mac", "at"} <= set(fields):
        raise RunError(f"{where}: a collector outside the topology needs ip=, mac= and at=")
    try:
        ipaddress.IPv4Address(fields["ip"])
    except ValueError:
        raise RunError(f"{where}: {fields['ip']!r} is not an IPv4 address") from None
    if not _MAC.match(fields["mac"]):
        raise RunError(f"{where}: {fields['mac']!r} is not a MAC address (aa:bb:cc:dd:ee:ff)")
    try:
        sw, sw_port = argtypes.switch_port(DROP_PORT)(fields["at"])
    except argparse.ArgumentTypeError as exc:
        raise RunError(f"{where}: at={exc}") from None
    return CollectorSpec(ip=fields["ip"], mac=fields["mac"].lower(), switch=sw, port=sw_port, udp_port=udp)
