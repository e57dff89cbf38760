"""What the operator chooses beyond the topology: INT profile, sink mode, collectors,
ECN profile.  Defaults follow p4/README.md and formats/FORMATS.md (HPCC profile, 8 hops,
DCQCN's RED profile, report clone session 500, collector port 32766)."""
from __future__ import annotations

import enum
import ipaddress
from dataclasses import dataclass, field

from formats.int_md import (
    HPCC_DS_INSTRUCTION,
    HPCC_INSTRUCTION_BITMAP,
    SUPPORTED_DS_INSTRUCTIONS,
    SUPPORTED_INSTRUCTIONS,
)
from formats.roce import ROCEV2_UDP_PORT
from formats.telemetry_report import REPORT_UDP_PORT

from .errors import IntentError

REPORT_CLONE_SESSION = 500          # REPORT_CLONE_SESSION in p4/include/defines.p4
REPORT_DESTINATIONS = 16            # REPORT_DESTINATIONS in p4/include/defines.p4
# the collector takes replica instance 1, standby collectors 2, 3, ...: each its own
# report sequence slot (rid mod REPORT_DESTINATIONS), so at most 15 in all
MAX_REPORT_COLLECTORS = REPORT_DESTINATIONS - 1
COLLECTOR_UDP_PORT = REPORT_UDP_PORT


class SinkMode(enum.StrEnum):
    """What the last switch does on host ports (p4/README.md "Sink modes")."""

    HOST = "host"        # leave INT in for the host's eBPF sink
    REPORT = "report"    # strip INT and send a Telemetry Report to the collector


@dataclass(slots=True, frozen=True, kw_only=True)
class WatchRule:
    """One INT watchlist entry: ternary (value, mask) per field, None = any."""

    src_addr: tuple[str, str] | None = None
    dst_addr: tuple[str, str] | None = None
    src_port: tuple[int, int] | None = None
    dst_port: tuple[int, int] | None = (ROCEV2_UDP_PORT, 0xFFFF)
    dscp: tuple[int, int] | None = None
    priority: int = 10
    instruction_bitmap: int = HPCC_INSTRUCTION_BITMAP
    ds_instruction: int = HPCC_DS_INSTRUCTION
    max_hops: int = 8


@dataclass(slots=True, frozen=True, kw_only=True)
class CollectorSpec:
    """Where Telemetry Reports go: a host of the topology (its address and MAC), or an
    explicit address reached through `switch`:`port` (e.g. the controller's own veth)."""

    host: str = ""
    ip: str = ""
    mac: str = ""
    switch: str = ""
    port: int = 0
    udp_port: int = COLLECTOR_UDP_PORT


@dataclass(slots=True, frozen=True, kw_only=True)
class EcnProfile:
    """RED-like marking thresholds for every egress port (DCQCN's defaults)."""

    kmin_bytes: int = 5_000
    kmax_bytes: int = 200_000
    pmax: int = 655      # 1 % of 65536


@dataclass(slots=True, frozen=True, kw_only=True)
class IntentOptions:
    sink_mode: SinkMode = SinkMode.HOST
    collector: CollectorSpec | None = None
    # further destinations of every Telemetry Report (a standby controller's collector):
    # one copy each, each with its own sequence numbers
    standby_collectors: tuple[CollectorSpec, ...] = ()
    watch: tuple[WatchRule, ...] = field(default_factory=lambda: (WatchRule(),))
    ecn: EcnProfile | None = field(default_factory=EcnProfile)
    report_payload_bytes: int = 12       # keeps the BTH of the inner packet
    report_clone_session: int = REPORT_CLONE_SESSION
    report_switch_ip_base: str = "10.255.0.0"   # switch N sends reports from base + N

    def __post_init__(self) -> None:
        if self.sink_mode is SinkMode.REPORT and self.collector is None:
            raise IntentError("intent options: sink mode 'report' needs a collector "
                              "(a topology host, or ip/mac/switch/port)")
        if self.standby_collectors and self.collector is None:
            raise IntentError("intent options: standby collectors need a collector (the primary)")
        if len(self.collectors) > MAX_REPORT_COLLECTORS:
            raise IntentError(f"intent options: {len(self.collectors)} report collectors, the program "
                              f"sends to at most {MAX_REPORT_COLLECTORS} (REPORT_DESTINATIONS - 1)")
        for w in self.watch:
            if w.instruction_bitmap & ~SUPPORTED_INSTRUCTIONS or w.ds_instruction & ~SUPPORTED_DS_INSTRUCTIONS:
                raise IntentError(f"watch rule: instruction bitmap 0x{w.instruction_bitmap:04x} / DS "
                                  f"0x{w.ds_instruction:04x} asks for fields p4/int_rocev2.p4 does not "
                                  f"supply (supported 0x{SUPPORTED_INSTRUCTIONS:04x} / "
                                  f"0x{SUPPORTED_DS_INSTRUCTIONS:04x})")
            if not 1 <= w.max_hops <= 255:
                raise IntentError(f"watch rule {w}: max_hops {w.max_hops} outside 1..255")
        if self.ecn and not 0 <= self.ecn.kmin_bytes <= self.ecn.kmax_bytes:
            raise IntentError(f"ECN profile: kmin {self.ecn.kmin_bytes} must be 0..kmax "
                              f"({self.ecn.kmax_bytes})")
        try:
            ipaddress.IPv4Address(self.report_switch_ip_base)
        except ValueError:
            raise IntentError(f"report source base {self.report_switch_ip_base!r} is not an IPv4 "
                              f"address") from None
        if not 0 <= self.report_payload_bytes < 1024:
            raise IntentError(f"report payload bytes {self.report_payload_bytes} outside 0..1023")

    @property
    def collectors(self) -> tuple[CollectorSpec, ...]:
        """Every report destination, the primary first (clone replica instance 1, 2, ...)."""
        return ((self.collector,) if self.collector else ()) + self.standby_collectors
