"""Options of the switch process, parsed and checked once at the edge.

Names follow BMv2 simple_switch_grpc where it has them (``--device-id``,
``-i PORT@IF``, ``--grpc-server-addr``, ``--cpu-port``, ``--pcap``,
``--log-console``); queue options take Mbit/s and packets per port.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from softswitch.switchd.errors import OptionError
from softswitch.switchd.tm import DEFAULT_DEPTH_PKTS, MAX_DEPTH_PKTS
from softswitch.v1model.ports import DEFAULT_CPU_PORT, DROP_PORT

_IFNAME = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")
ALL_PORTS = -1


@dataclass(slots=True, kw_only=True)
class SwitchOptions:
    """Everything `run_switch` needs; built by the CLI or by Python callers."""

    program: str | None = None
    include_dirs: list[str] = field(default_factory=list)
    defines: dict[str, str] = field(default_factory=dict)
    device_id: int = 0
    interfaces: dict[int, str] = field(default_factory=dict)
    grpc_server_addr: str | None = "0.0.0.0:9559"
    cpu_port: int = DEFAULT_CPU_PORT
    pcap_dir: str | None = None
    queue_rates_bps: dict[int, float] = field(default_factory=dict)   # ALL_PORTS = every port
    queue_depths_pkts: dict[int, int] = field(default_factory=dict)
    entries: str | None = None
    stats_interval_s: float = 0.0
    stats_file: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca: str | None = None
    name: str = "softswitch"
    netns: str | None = None   # open the ports in this namespace (name or /proc/PID/ns/net)
    hook: str = "tc"           # --target ebpf: the kernel hook (tc or xdp)
    xdp_mode: str = "auto"     # --hook xdp: auto, native or generic


def parse_interface(text: str) -> tuple[int, str]:
    """``PORT@IFNAME`` -> (port, ifname)."""
    port_s, sep, ifname = text.partition("@")
    if not sep or not port_s or not ifname:
        raise OptionError(f"-i {text!r}: expected PORT@INTERFACE, e.g. 1@veth1")
    port = parse_port(port_s, f"-i {text!r}")
    if not _IFNAME.match(ifname):
        raise OptionError(f"-i {text!r}: interface name {ifname!r} is not a Linux interface name "
                          f"(1..15 characters)")
    return port, ifname


def parse_port(text: str, where: str) -> int:
    try:
        port = int(text, 0)
    except ValueError:
        raise OptionError(f"{where}: port {text!r} is not a number") from None
    if not 0 <= port < DROP_PORT:
        raise OptionError(f"{where}: port {port} outside 0..{DROP_PORT - 1}")
    return port


def parse_cpu_port(text: str) -> int:
    """``--cpu-port``: a port other than 0 below the drop port."""
    try:
        port = int(text, 0)
    except ValueError:
        raise OptionError(f"--cpu-port {text!r} is not a number") from None
    if not 0 < port < DROP_PORT:
        raise OptionError(f"--cpu-port {port}: outside 1..{DROP_PORT - 1}")
    return port


def parse_port_value(text: str, where: str, unit: str) -> tuple[int, float]:
    """``PORT:VALUE`` or ``VALUE`` (every port) -> (port or ALL_PORTS, value)."""
    port_s, sep, value_s = text.rpartition(":")
    port = parse_port(port_s, where) if sep else ALL_PORTS
    try:
        value = float(value_s)
    except ValueError:
        raise OptionError(f"{where} {text!r}: {value_s!r} is not a number of {unit}") from None
    return port, value


def parse_rate(text: str) -> tuple[int, float]:
    """``PORT:MBPS`` -> (port, bits per second); 0 = unpaced."""
    port, mbps = parse_port_value(text, "--queue-rate", "Mbit/s")
    if not 0 <= mbps <= 1e6:
        raise OptionError(f"--queue-rate {text!r}: {mbps} Mbit/s outside 0..1000000 (0 = unpaced)")
    return port, mbps * 1e6


def parse_depth(text: str) -> tuple[int, int]:
    """``PORT:PKTS`` -> (port, packets)."""
    port, pkts = parse_port_value(text, "--queue-depth", "packets")
    if pkts != int(pkts) or not 1 <= pkts <= MAX_DEPTH_PKTS:
        raise OptionError(f"--queue-depth {text!r}: {pkts} packets must be a whole number in "
                          f"1..{MAX_DEPTH_PKTS} (BMv2 default {DEFAULT_DEPTH_PKTS})")
    return port, int(pkts)


def check_options(opts: SwitchOptions) -> None:
    """Cross-option checks (each option alone was checked when parsed)."""
    names = list(opts.interfaces.values())
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise OptionError(f"interface {min(dup)} given for two ports")
    if opts.cpu_port in opts.interfaces:
        raise OptionError(f"--cpu-port {opts.cpu_port} is also interface "
                          f"{opts.interfaces[opts.cpu_port]}")
    if (opts.tls_cert is None) != (opts.tls_key is None):
        raise OptionError("--grpc-server-cert and --grpc-server-key go together")
    if opts.tls_ca and not opts.tls_cert:
        raise OptionError("--grpc-server-cacert needs --grpc-server-cert and --grpc-server-key")
    if opts.stats_interval_s < 0:
        raise OptionError(f"--stats-interval {opts.stats_interval_s}: must be >= 0")
    if opts.entries and not opts.program:
        raise OptionError("--entries needs a P4 program on the command line")
