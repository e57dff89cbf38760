"""The host agent: INT sink in the kernel, records to the controller, feedback to the sender.

One agent per host interface.  ``read`` is the whole loop body: wait briefly for the
ring buffer, copy every committed host record out in one step (numpy), queue them as
``formats.agent_batch`` datagrams for the controller (bounded queue, drops counted,
never blocks), and forward any rate/FEC feedback that arrived from the controller to
the local traffic endpoint's control socket (``ebpf.feedback`` describes both sides).

Library use::

    cfg = AgentConfig(iface="h2-eth0", controller=("10.0.0.100", 32767),
                      feedback_port=32768, control_socket="/run/h2-traffic.sock")
    with HostAgent(cfg) as agent:
        while running:
            records = agent.read(timeout_s=0.1)
        print(agent.stats(), agent.flows())

Command line (run it inside the host's namespace, e.g. with ``ip netns exec``)::

    python -m ebpf.agent --iface h2-eth0 --controller 10.0.0.100:32767 1 10
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import ipaddress
import signal
import socket
import sys
import threading
import time
from types import TracebackType
from typing import Self, TextIO

import numpy as np

from formats.agent_batch import AGENT_BATCH_UDP_PORT
from formats.int_md import HOST_RECORD_DTYPE, INT_UDP_PORT

from .errors import AgentError, ConfigError, EbpfError
from .feedback import decode_feedback_datagram, feedback_to_lines
from .netns import in_netns
from .records import SinkStat, format_flows
from .shipper import BatchShipper, ShipperStats, udp_sender
from .sink import IntSink, SinkConfig

__all__ = ["AgentConfig", "AgentStats", "HostAgent", "main"]


@dataclasses.dataclass(slots=True, kw_only=True, frozen=True)
class AgentConfig:
    """Everything one agent needs; validated on construction."""

    iface: str
    netns: str | None = None
    """Namespace of ``iface``; the agent's sockets are made there too."""
    controller: tuple[str, int] | None = None
    """Where host-record batches go (None: keep them local, ``read`` still returns them)."""
    agent_id: int = 0
    """Carried in every batch header (e.g. the host's IPv4 address as an integer)."""
    feedback_port: int = 0
    """UDP port the agent receives controller feedback on (0: no feedback)."""
    control_socket: str | None = None
    """The traffic endpoint's UNIX datagram socket (None: feedback only counted)."""
    queue_batches: int = 256
    batch_records: int | None = None
    """Records per datagram (default: as many as fit, 132)."""
    sink: SinkConfig = dataclasses.field(default_factory=SinkConfig)

    def __post_init__(self) -> None:
        if not self.iface:
            raise ConfigError("iface: an interface name is required")
        if self.controller is not None:
            _, port = self.controller
            if not 1 <= port <= 0xFFFF:
                raise ConfigError(f"controller port {port}: expected 1..65535")
        if not 0 <= self.feedback_port <= 0xFFFF:
            raise ConfigError(f"feedback_port {self.feedback_port}: expected 0..65535")
        if not 0 <= self.agent_id <= 0xFFFFFFFF:
            raise ConfigError(f"agent_id {self.agent_id}: expected a 32-bit value")
        if self.queue_batches < 1:
            raise ConfigError(f"queue_batches {self.queue_batches}: expected >= 1")


@dataclasses.dataclass(slots=True, kw_only=True, frozen=True)
class AgentStats:
    """Counters of the agent and its sink."""

    records: int
    shipper: ShipperStats
    feedback_datagrams: int
    feedback_forwarded: int
    feedback_rejected: int
    feedback_undelivered: int
    sink: dict[SinkStat, int]

    def format_line(self) -> str:
        """One status line (< 80 columns)."""
        bad = sum(v for k, v in self.sink.items() if k.name.startswith("BAD_"))
        s = self.shipper
        return (f"rec {self.records:>9} sent {s.records_sent:>9} drop {s.records_dropped:>6} "
                f"bad {bad:>5} fb {self.feedback_forwarded:>5}/{self.feedback_datagrams:<5}")


class HostAgent:
    """INT sink + shipper + feedback relay for one interface (attach, read, close)."""

    def __init__(self, config: AgentConfig, *, dump_source: TextIO | None = None) -> None:
        self.config = config
        self._sink = IntSink(config.iface, netns=config.netns, config=config.sink,
                             dump_source=dump_source)
        self._ship_sock: socket.socket | None = None
        self._fb_sock: socket.socket | None = None
        self._ctl_sock: socket.socket | None = None
        self._shipper: BatchShipper | None = None
        self._records = 0
        self._fb = {"datagrams": 0, "forwarded": 0, "rejected": 0, "undelivered": 0}

    # -- lifecycle -----------------------------------------------------------------
    def attach(self) -> Self:
        """Open sockets and attach the sink; on failure everything is released."""
        cfg = self.config
        try:
            with in_netns(cfg.netns):
                if cfg.controller is not None:
                    self._ship_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                    self._ship_sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
                if cfg.feedback_port:
                    self._fb_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                    self._fb_sock.bind(("0.0.0.0", cfg.feedback_port))
                    self._fb_sock.setblocking(False)
            if cfg.control_socket is not None:
                self._ctl_sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                self._ctl_sock.setblocking(False)
            if self._ship_sock is not None and cfg.controller is not None:
                self._shipper = BatchShipper(
                    udp_sender(self._ship_sock, cfg.controller), agent_id=cfg.agent_id,
                    record_size=HOST_RECORD_DTYPE.itemsize, queue_batches=cfg.queue_batches,
                    batch_records=cfg.batch_records)
            self._sink.attach()
        except OSError as exc:
            self.close()
            raise AgentError(f"agent on {cfg.iface}: cannot open sockets: {exc}") from None
        except Exception:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Detach the sink and close sockets (queued batches get one last flush)."""
        try:
            if self._shipper is not None:
                self._shipper.flush()
        finally:
            self._sink.close()
            for s in (self._ship_sock, self._fb_sock, self._ctl_sock):
                if s is not None:
                    s.close()
            self._ship_sock = self._fb_sock = self._ctl_sock = None

    def __enter__(self) -> Self:
        return self.attach()

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- the loop body -------------------------------------------------------------
    def read(self, timeout_s: float = 0.0, max_records: int = 1 << 16) -> np.ndarray:
        """Records since the last call (shipped too); relays pending feedback."""
        if timeout_s > 0:
            extra = (self._fb_sock.fileno(),) if self._fb_sock is not None else ()
            self._sink.wait(timeout_s, extra)
        ring = self._sink.read(0.0, max_records)
        self._records += ring.size
        if self._shipper is not None:
            if ring.size:
                self._shipper.push(ring)
            self._shipper.flush()
        self._relay_feedback()
        return ring

    def _relay_feedback(self) -> None:
        if self._fb_sock is None:
            return
        while True:
            try:
                data = self._fb_sock.recv(65535)
            except (BlockingIOError, InterruptedError):
                return
            self._fb["datagrams"] += 1
            recs = decode_feedback_datagram(data)
            if recs is None:
                self._fb["rejected"] += 1
                continue
            lines, rejected = feedback_to_lines(recs)
            self._fb["rejected"] += rejected
            if not lines:
                continue
            if self._ctl_sock is None or self.config.control_socket is None:
                self._fb["undelivered"] += len(lines)
                continue
            try:
                self._ctl_sock.sendto(("\n".join(lines) + "\n").encode(),
                                      self.config.control_socket)
                self._fb["forwarded"] += len(lines)
            except OSError as exc:
                # endpoint not there yet, or its queue is full: feedback is best effort
                if exc.errno not in (errno.ENOENT, errno.ECONNREFUSED, errno.EAGAIN,
                                     errno.ENOBUFS):
                    raise AgentError(f"agent on {self.config.iface}: control socket "
                                     f"{self.config.control_socket}: {exc}") from None
                self._fb["undelivered"] += len(lines)

    def run(self, *, interval_s: float = 1.0, count: int | None = None,
            stop: threading.Event | None = None, out: TextIO | None = None,
            show_flows: bool = False) -> None:
        """Loop until ``stop`` is set or ``count`` intervals passed, printing a line each
        (and the busiest flows after it with ``show_flows``)."""
        stop = stop or threading.Event()
        done = 0
        next_t = time.monotonic() + interval_s
        while not stop.is_set():
            self.read(timeout_s=min(0.05, interval_s))
            if time.monotonic() >= next_t:
                next_t += interval_s
                done += 1
                if out is not None:
                    out.write(time.strftime("%H:%M:%S ") + self.stats().format_line() + "\n")
                    if show_flows:
                        out.write("\n".join(format_flows(self.flows())) + "\n\n")
                    out.flush()
                if count is not None and done >= count:
                    return

    # -- counters ------------------------------------------------------------------
    def flows(self) -> np.ndarray:
        """Per-flow state of the sink (``ebpf.records.FLOW_DTYPE``)."""
        return self._sink.flows()

    def stats(self) -> AgentStats:
        sh = dataclasses.replace(self._shipper.stats) if self._shipper else ShipperStats()
        return AgentStats(records=self._records, shipper=sh,
                          feedback_datagrams=self._fb["datagrams"],
                          feedback_forwarded=self._fb["forwarded"],
                          feedback_rejected=self._fb["rejected"],
                          feedback_undelivered=self._fb["undelivered"],
                          sink=self._sink.stats())


# -- command line ----------------------------------------------------------------------
def _hostport(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        host, port = text, str(AGENT_BATCH_UDP_PORT)
    try:
        ipaddress.ip_address(host)
        p = int(port)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected IPv4:PORT, e.g. 10.0.0.100:"
                                         f"{AGENT_BATCH_UDP_PORT}") from None
    if not 1 <= p <= 0xFFFF:
        raise argparse.ArgumentTypeError(f"{text!r}: port {p} outside 1..65535")
    return host, p


def _port(text: str) -> int:
    try:
        p = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a port number") from None
    if not 0 <= p <= 0xFFFF:
        raise argparse.ArgumentTypeError(f"port {p} outside 0..65535")
    return p


def _positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"{text}: must be > 0")
    return v


def _agent_id(text: str) -> int:
    try:
        return int(ipaddress.IPv4Address(text))
    except ValueError:
        pass
    try:
        v = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected an integer or IPv4") from None
    if not 0 <= v <= 0xFFFFFFFF:
        raise argparse.ArgumentTypeError(f"{text}: outside 0..2^32-1")
    return v


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m ebpf.agent",
        description="Host INT sink + agent: read and strip INT at tc ingress, ship host "
                    "records to the controller, relay rate/FEC feedback to the sender.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  python -m ebpf.agent --iface h2-eth0 --controller 10.0.0.100:32767\n"
               "  python -m ebpf.agent --iface h2-eth0 --controller 10.0.0.100:32767 \\\n"
               "      --feedback-port 32768 --control /run/h2.sock 1 10\n"
               "  python -m ebpf.agent --iface h2-eth0 --dump-c 1 1   # print the C\n")
    p.add_argument("--iface", required=True, help="interface to attach the sink to")
    p.add_argument("--netns", help="named network namespace of the interface")
    p.add_argument("--controller", type=_hostport,
                   help=f"IPv4:PORT for host-record batches (port default "
                        f"{AGENT_BATCH_UDP_PORT})")
    p.add_argument("--agent-id", type=_agent_id, default=0,
                   help="id in batch headers (integer or IPv4 address)")
    p.add_argument("--feedback-port", type=_port, default=0,
                   help="UDP port to receive controller feedback on (0: none)")
    p.add_argument("--control", metavar="PATH",
                   help="UNIX datagram socket of the local traffic endpoint")
    p.add_argument("--int-port", type=_port, default=INT_UDP_PORT,
                   help=f"UDP port announcing INT (default {INT_UDP_PORT})")
    p.add_argument("--malformed", choices=("pass", "drop"), default="pass",
                   help="malformed INT: pass up unmodified (default) or drop")
    p.add_argument("--ringbuf-pages", type=int, default=1024,
                   help="ring size in pages (default 1024: 8322 records)")
    p.add_argument("--xdp", action="store_true",
                   help="run the sink at XDP instead of tc ingress (before tc programs)")
    p.add_argument("--flows", action="store_true",
                   help="print the busiest flows (PSN loss, reordering) every interval")
    p.add_argument("--dump-c", action="store_true", help="print the C source loaded")
    p.add_argument("interval", nargs="?", type=_positive, default=1.0,
                   help="seconds between status lines (default 1)")
    p.add_argument("count", nargs="?", type=int, help="status lines before exiting")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        cfg = AgentConfig(
            iface=args.iface, netns=args.netns, controller=args.controller,
            agent_id=args.agent_id, feedback_port=args.feedback_port,
            control_socket=args.control,
            sink=SinkConfig(int_udp_port=args.int_port, ringbuf_pages=args.ringbuf_pages,
                            malformed_drop=args.malformed == "drop",
                            hook="xdp" if args.xdp else "tc"))
    except EbpfError as exc:
        print(f"ebpf.agent: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()

    def _stop(signum: int, frame: object) -> None:
        stop.set()

    old = {s: signal.signal(s, _stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        with HostAgent(cfg, dump_source=sys.stderr if args.dump_c else None) as agent:
            print(f"ebpf.agent: attached to {args.iface}; Ctrl-C to stop", file=sys.stderr)
            agent.run(interval_s=args.interval, count=args.count, stop=stop, out=sys.stdout,
                      show_flows=args.flows)
    except EbpfError as exc:
        print(f"ebpf.agent: {exc}", file=sys.stderr)
        return 1
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    return 0


if __name__ == "__main__":
    sys.exit(main())
