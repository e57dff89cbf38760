"""`python -m softswitch switch [PROGRAM.p4] -i 1@veth1 -i 2@veth2 ...`: run a switch process.

Options are named as BMv2 simple_switch_grpc names them where it has them. Without
a program the switch waits for SetForwardingPipelineConfig. SIGTERM or SIGINT stop
it cleanly (gRPC server stopped, sockets closed, captures flushed, final
statistics logged and written). `--print-stats FILE` prints the statistics a
running switch writes with `--stats-file FILE`.
"""
from __future__ import annotations

import argparse
import logging
import signal
import sys
from typing import Any

from softswitch.cli._load import parse_defines
from softswitch.errors import SoftswitchError

EXAMPLES = """examples:
  python -m softswitch switch p4/examples/ipv4_forward.p4 --device-id 1 \\
      -i 1@s1-eth1 -i 2@s1-eth2 --grpc-server-addr 127.0.0.1:9559 --log-console
  python -m softswitch switch --device-id 2 -i 1@veth1 --queue-rate 1:10 --queue-depth 1:64 \\
      --stats-file s2.json --stats-interval 5
  python -m softswitch switch --print-stats s2.json
"""


def _typed(fn):  # OptionError -> argparse error naming the option
    def conv(text: str):
        from softswitch.switchd.errors import OptionError
        try:
            return fn(text)
        except OptionError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    conv.__name__ = fn.__name__
    return conv


def _device_id(text: str) -> int:
    v = int(text, 0)
    if not 0 <= v < 1 << 64:
        raise argparse.ArgumentTypeError(f"--device-id {v}: outside 0..2**64-1")
    return v


def _interval(text: str) -> float:
    v = float(text)
    if not 0 <= v <= 86400:
        raise argparse.ArgumentTypeError(f"--stats-interval {v}: outside 0..86400 seconds")
    return v


def register(sub: argparse._SubParsersAction) -> None:
    from softswitch.switchd import options as O
    p = sub.add_parser("switch", help="run a switch process on network interfaces",
                       description=__doc__, epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("program", nargs="?", help="P4_16 v1model source (else wait for the controller)")
    p.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR",
                   help="add DIR to the #include search path")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME[=VAL]",
                   help="define a preprocessor macro")
    p.add_argument("--device-id", type=_device_id, default=0, help="P4Runtime device id (default 0)")
    p.add_argument("-i", "--interface", dest="interfaces", action="append", default=[],
                   type=_typed(O.parse_interface), metavar="PORT@IF",
                   help="attach interface IF as port PORT (repeatable)")
    p.add_argument("--grpc-server-addr", default="0.0.0.0:9559", metavar="ADDR",
                   help="P4Runtime server address host:port or unix:PATH (default 0.0.0.0:9559); "
                        "'none' for no server")
    p.add_argument("--grpc-server-ssl", action="store_true", help="serve P4Runtime over TLS")
    p.add_argument("--grpc-server-cert", metavar="PEM", help="server certificate (TLS)")
    p.add_argument("--grpc-server-key", metavar="PEM", help="server private key (TLS)")
    p.add_argument("--grpc-server-cacert", metavar="PEM",
                   help="CA certificate: clients must present a certificate it signed")
    p.add_argument("--cpu-port", type=_typed(O.parse_cpu_port), default=O.DEFAULT_CPU_PORT,
                   help=f"CPU port number (default {O.DEFAULT_CPU_PORT})")
    p.add_argument("--pcap", metavar="DIR", nargs="?", const=".",
                   help="write IF_in.pcap / IF_out.pcap per port into DIR (default .)")
    p.add_argument("--queue-rate", action="append", default=[], type=_typed(O.parse_rate),
                   metavar="[PORT:]MBPS", help="pace egress PORT (or every port) at MBPS Mbit/s")
    p.add_argument("--queue-depth", action="append", default=[], type=_typed(O.parse_depth),
                   metavar="[PORT:]PKTS", help="egress queue size in packets (default 64)")
    p.add_argument("--entries", metavar="FILE",
                   help="table entries and sessions in STF syntax, applied at start")
    p.add_argument("--stats-interval", type=_interval, default=0.0, metavar="SEC",
                   help="log per-port statistics every SEC seconds (0 = only at exit)")
    p.add_argument("--stats-file", metavar="FILE", help="keep statistics as JSON in FILE")
    p.add_argument("--print-stats", metavar="FILE",
                   help="print the statistics in FILE (written by a running switch) and exit")
    p.add_argument("--log-console", action="store_true", help="log to stderr")
    p.add_argument("--log-file", metavar="FILE", help="log to FILE")
    p.add_argument("-L", "--log-level", default="info",
                   choices=("trace", "debug", "info", "warn", "error", "off"), help="log level")
    p.add_argument("--netns", metavar="NS",
                   help="open the interfaces in network namespace NS (a name or /proc/PID/ns/net); "
                        "the P4Runtime server stays in the namespace the switch was started in")
    p.add_argument("--name", default="softswitch", help="switch name in logs (e.g. s1)")
    p.add_argument("--no-p4", action="store_true",
                   help="start without a program (the default when none is given; BMv2 compatibility)")
    from softswitch.cli._load import target_help
    from softswitch.targets import DEFAULT_TARGET, TARGETS
    p.add_argument("--target", choices=tuple(TARGETS), default=DEFAULT_TARGET, help=target_help())
    p.add_argument("--hook", choices=("tc", "xdp"), default="tc",
                   help="with --target ebpf: the kernel hook (tc, the default; xdp: before the socket "
                        "buffer, no clones, multicast, resubmit, recirculate or --queue-rate)")
    p.add_argument("--xdp-mode", choices=("auto", "native", "generic"), default="auto",
                   help="with --hook xdp: native (driver) or generic (skb) XDP; auto: native when "
                        "every veth port's peer can take redirected frames, else generic")
    p.add_argument("--thrift-port", type=int, help="accepted for simple_switch compatibility; unused")
    p.set_defaults(func=main)


def _setup_logging(args: argparse.Namespace) -> None:
    level = {"trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO,
             "warn": logging.WARNING, "error": logging.ERROR, "off": logging.CRITICAL + 1}[args.log_level]
    fmt = logging.Formatter(f"%(asctime)s {args.name} %(levelname)s %(name)s: %(message)s")
    root = logging.getLogger("softswitch")
    root.setLevel(level)
    handlers: list[logging.Handler] = []
    if args.log_file:
        handlers.append(logging.FileHandler(args.log_file))
    if args.log_console:
        handlers.append(logging.StreamHandler(sys.stderr))
    if not handlers:
        warn_only: logging.Handler = logging.StreamHandler(sys.stderr)
        warn_only.setLevel(logging.WARNING)
        handlers.append(warn_only)
    for h in handlers:
        h.setFormatter(fmt)
        root.addHandler(h)


def _options(args: argparse.Namespace):
    from softswitch.switchd.errors import OptionError
    from softswitch.switchd.options import SwitchOptions
    interfaces: dict[int, str] = {}
    for port, ifname in args.interfaces:
        if port in interfaces:
            raise OptionError(f"-i {port}@{ifname}: port {port} is already {interfaces[port]}")
        interfaces[port] = ifname
    addr = None if args.grpc_server_addr.lower() == "none" else args.grpc_server_addr
    if args.grpc_server_ssl and not (args.grpc_server_cert and args.grpc_server_key):
        raise OptionError("--grpc-server-ssl needs --grpc-server-cert and --grpc-server-key")
    return SwitchOptions(
        program=args.program, include_dirs=args.include_dirs, defines=parse_defines(args.defines),
        device_id=args.device_id, interfaces=interfaces, grpc_server_addr=addr,
        cpu_port=args.cpu_port, pcap_dir=args.pcap, queue_rates_bps=dict(args.queue_rate),
        queue_depths_pkts=dict(args.queue_depth), entries=args.entries,
        stats_interval_s=args.stats_interval, stats_file=args.stats_file,
        tls_cert=args.grpc_server_cert, tls_key=args.grpc_server_key,
        tls_ca=args.grpc_server_cacert, name=args.name, netns=args.netns,
        hook=args.hook, xdp_mode=args.xdp_mode)


def main(args: argparse.Namespace) -> int:
    from softswitch.switchd import format_stats, read_stats
    from softswitch.switchd.errors import ProgramError
    from softswitch.targets import target_named
    if args.print_stats:
        try:
            print(format_stats(read_stats(args.print_stats)))
        except SoftswitchError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    if args.no_p4 and args.program:
        print(f"error: --no-p4 and a program ({args.program}) given together", file=sys.stderr)
        return 2
    _setup_logging(args)
    try:
        target = target_named(args.target)
        if not target.hooks and (args.hook != "tc" or args.xdp_mode != "auto"):
            from softswitch.targets.base import kernel_targets
            print(f"error: --hook and --xdp-mode need --target {' or '.join(kernel_targets())}",
                  file=sys.stderr)
            return 2
        sd: Any = target.daemon(_options(args))
    except SoftswitchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # The receive and scheduler threads hand the interpreter to each other often; a short
    # switch interval keeps a paced departure from waiting behind a 5 ms slice of ingress.
    sys.setswitchinterval(0.0005)
    stop = sd.stop_event
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        sd.start()
    except ProgramError as exc:
        print(exc, file=sys.stderr)
        return 2
    except SoftswitchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        sd.run()
    finally:
        sd.close()
    return 0
