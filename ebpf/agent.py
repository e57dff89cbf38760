"""The host agent: INT sink in the kernel, records to the controller, feedback to the sender.

One agent per host interface.  ``read`` is the whole loop body: wait briefly for the
ring buffer, copy every committed host record out in one step (numpy), queue them as
``formats.agent_batch`` datagrams for the controller (bounded queue, drops counted,
never blocks; ``ship`` says when: at once for a record that saw a queue, else after a
few records or milliseconds, ``ebpf.shipper.ShipPolicy``), and forward any rate/FEC
feedback that arrived from the controller to the local traffic endpoint's control
socket (``ebpf.feedback`` describes both sides).
The endpoint confirms each record (applied at which PSN, or why not); the agent sends
those confirmations back to the controller address the feedback came from, with the
time it held the record, so the controller can measure its loop to "rate applied".

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
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Self, TextIO

import numpy as np

from common import argtypes
from common.auth import ExposureError, KeyFile, KeyFileError
from common.kernel.errors import AttachError
from common.kernel.setns import in_netns
from formats.agent_batch import AGENT_BATCH_UDP_PORT
from formats.feedback import CONFIRM_MAX_RECORDS, ConfirmStatus
from formats.int_md import HOST_RECORD_DTYPE, INT_UDP_PORT

from .agent_auth import AgentAuth, add_auth_arguments, auth_from_arguments, final_line
from .errors import AgentError, ConfigError, EbpfError
from .feedback import (
    decode_feedback_datagram,
    encode_confirmations,
    feedback_lines,
    parse_confirm_reply,
)
from .records import SinkStat, format_flows
from .shipper import BatchShipper, ShipperStats, ShipPolicy, UdpFanout
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
    standby: tuple[tuple[str, int], ...] = ()
    """Standby controllers: each gets a copy of every batch (``ebpf.shipper.UdpFanout``)
    and may send feedback."""
    agent_id: int = 0
    """Carried in every batch header (e.g. the host's IPv4 address as an integer)."""
    feedback_port: int = 0
    """UDP port the agent receives controller feedback on (0: no feedback)."""
    control_socket: str | None = None
    """The traffic endpoint's UNIX datagram socket (None: feedback only counted)."""
    queue_batches: int = 256
    confirm_timeout_s: float = 1.0
    """A forwarded record the endpoint has not confirmed after this long is reported
    ``UNCONFIRMED`` (an endpoint without confirmations)."""
    max_pending: int = 4096
    """Forwarded records awaiting the endpoint's answer; beyond it the oldest is
    reported ``UNCONFIRMED``."""
    batch_records: int | None = None
    """Records per datagram (default: as many as fit, 132)."""
    sink: SinkConfig = dataclasses.field(default_factory=SinkConfig)
    ship: ShipPolicy = dataclasses.field(default_factory=ShipPolicy)
    """When records leave for the controller (``ebpf.shipper.IMMEDIATE``: each read)."""
    keys: KeyFile | None = None
    """Seal batches and confirmations, take only sealed feedback (``ebpf.agent_auth``)."""
    feedback_bind: str = "0.0.0.0"
    feedback_from: tuple[str, ...] = ()
    """Other addresses that may send feedback (a standby controller), besides
    ``controller``'s host (``ebpf.agent_auth``)."""

    def __post_init__(self) -> None:
        if not self.iface:
            raise ConfigError("iface: an interface name is required")
        for _, port in ((self.controller,) if self.controller else ()) + self.standby:
            if not 1 <= port <= 0xFFFF:
                raise ConfigError(f"controller port {port}: expected 1..65535")
        if self.standby and self.controller is None:
            raise ConfigError("standby controllers need a primary controller")
        if not 0 <= self.feedback_port <= 0xFFFF:
            raise ConfigError(f"feedback_port {self.feedback_port}: expected 0..65535")
        if not 0 <= self.agent_id <= 0xFFFFFFFF:
            raise ConfigError(f"agent_id {self.agent_id}: expected a 32-bit value")
        if self.queue_batches < 1:
            raise ConfigError(f"queue_batches {self.queue_batches}: expected >= 1")
        if not 0 < self.confirm_timeout_s <= 60:
            raise ConfigError(f"confirm_timeout_s {self.confirm_timeout_s}: expected 0..60 s")
        if self.max_pending < 1:
            raise ConfigError(f"max_pending {self.max_pending}: expected >= 1")
        for addr in self.feedback_from:
            try:
                ipaddress.IPv4Address(addr)
            except ValueError:
                raise ConfigError(f"feedback_from {addr!r}: not an IPv4 address") from None

    def feedback_sources(self) -> tuple[str, ...]:
        """Addresses feedback is taken from: the controller's host, then the others."""
        first = (self.controller[0],) if self.controller is not None else ()
        return tuple(dict.fromkeys(first + tuple(h for h, _ in self.standby)
                                   + self.feedback_from))


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
    confirmations: dict[str, int] = dataclasses.field(default_factory=dict)
    """Confirmations sent to the controller, by ``ConfirmStatus`` name."""
    confirm_pending: int = 0
    auth_rejected: dict[str, int] = dataclasses.field(default_factory=dict)
    """Feedback frames dropped by ``formats.auth`` checks, by reason."""

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
        # (seq, qp) -> (flow_id, seq, decided_ns, received_ns, controller address)
        self._pending: dict[tuple[int, int], tuple[int, int, int, int, tuple[str, int]]] = {}
        # controller address -> confirmation rows not sent yet
        self._confirm_out: dict[tuple[str, int], list[tuple[int, int, int, int, int, int]]] = {}
        self._confirmed = {s.name: 0 for s in ConfirmStatus}
        self._auth = AgentAuth(config.keys, agent_id=config.agent_id) if config.keys else None
        self._next_flush_ns = 0

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
                    self._fb_sock.bind((cfg.feedback_bind, cfg.feedback_port))
                    self._fb_sock.setblocking(False)
                    if self._auth is not None:
                        self._auth.filter_feedback(self._fb_sock, cfg.feedback_sources())
                if cfg.control_socket is not None:
                    # an abstract address (per network namespace, hence made in the
                    # host's) so the endpoint can answer with confirmations
                    self._ctl_sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                    self._ctl_sock.bind(f"\0ebpf-agent-{os.getpid()}-{os.urandom(6).hex()}")
                    self._ctl_sock.setblocking(False)
            if self._ship_sock is not None and cfg.controller is not None:
                send: Callable[[bytes], object] = UdpFanout(self._ship_sock, cfg.controller,
                                                            cfg.standby)
                if self._auth is not None:
                    seal, raw = self._auth.batches.seal, send
                    send = lambda data: raw(seal(data))
                self._shipper = BatchShipper(
                    send, agent_id=cfg.agent_id,
                    record_size=HOST_RECORD_DTYPE.itemsize, queue_batches=cfg.queue_batches,
                    batch_records=cfg.batch_records if self._auth is None
                    else self._auth.batch_records(cfg.batch_records), policy=cfg.ship)
            self._sink.attach()
        except OSError as exc:
            self.close()
            raise AgentError(f"agent on {cfg.iface}: cannot open sockets: {exc}") from None
        except Exception:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Detach the sink, ship what it still holds (its open runs too: no packet it
        stripped goes unrecorded) and close sockets."""
        try:
            if self._sink.attached:
                rest = self._sink.stop()
                self._records += rest.size
                if self._shipper is not None and rest.size:
                    self._shipper.push(rest)
            if self._shipper is not None:
                self._shipper.release()
                self._shipper.flush()
        finally:
            self._sink.close()
            for s in (self._ship_sock, self._fb_sock, self._ctl_sock):
                if s is not None:
                    s.close()
            self._ship_sock = self._fb_sock = self._ctl_sock = None
            if self._auth is not None:
                self._auth.close()

    def __enter__(self) -> Self:
        return self.attach()

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- the loop body -------------------------------------------------------------
    def read(self, timeout_s: float = 0.0, max_records: int = 1 << 16) -> np.ndarray:
        """Records since the last call (shipped too); relays pending feedback."""
        if timeout_s > 0:
            extra = tuple(s.fileno() for s in (self._fb_sock, self._ctl_sock) if s is not None)
            held = self._shipper.due() if self._shipper is not None else None
            self._sink.wait(timeout_s if held is None else min(timeout_s, held), extra)
        now = time.monotonic_ns()
        if now >= self._next_flush_ns:
            # runs of flows gone idle would otherwise wait for their next packet
            self._next_flush_ns = now + max(self.config.sink.flush_idle_ns // 2, 1_000_000)
            self._sink.flush_runs()
        ring = self._sink.read(0.0, max_records)
        self._records += ring.size
        if self._shipper is not None:
            self._shipper.offer(ring)
            self._shipper.due()
            self._shipper.flush()
        self._relay_feedback()
        self._collect_confirmations()
        self._send_confirmations()
        return ring

    def _relay_feedback(self) -> None:
        if self._fb_sock is None:
            return
        while True:
            try:
                data, addr = self._fb_sock.recvfrom(65535)
            except (BlockingIOError, InterruptedError):
                return
            now = time.monotonic_ns()
            self._fb["datagrams"] += 1
            if self._auth is not None:
                opened = self._auth.open_feedback(data, addr)
                if opened is None:
                    continue   # counted by reason in auth_rejected
                data = opened
            recs = decode_feedback_datagram(data)
            if recs is None:
                self._fb["rejected"] += 1
                continue
            lines, ok = feedback_lines(recs)
            self._fb["rejected"] += int(recs.size - ok.sum())
            for r in recs[~ok]:
                self._confirm(addr, r, now, now, ConfirmStatus.INVALID)
            if not lines:
                continue
            fwd = recs[ok]
            if self._ctl_sock is None or self.config.control_socket is None:
                self._fb["undelivered"] += len(lines)
                for r in fwd:
                    self._confirm(addr, r, now, now, ConfirmStatus.NO_ENDPOINT)
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
                status = (ConfirmStatus.ENDPOINT_BUSY if exc.errno in (errno.EAGAIN, errno.ENOBUFS)
                          else ConfirmStatus.NO_ENDPOINT)
                for r in fwd:
                    self._confirm(addr, r, now, time.monotonic_ns(), status)
                continue
            for r in fwd:
                key = (int(r["seq"]), int(r["flow_id"]))
                self._pending.pop(key, None)   # a repeated seq: the newer one counts
                self._pending[key] = (int(r["flow_id"]), int(r["seq"]), int(r["decided_ns"]),
                                      now, addr)
            while len(self._pending) > self.config.max_pending:
                self._expire_one(ConfirmStatus.UNCONFIRMED)

    def _confirm(self, addr: tuple[str, int], rec: np.ndarray, received_ns: int, done_ns: int,
                 status: ConfirmStatus, applied_psn: int = 0) -> None:
        self._confirm_out.setdefault(addr, []).append(
            (int(rec["flow_id"]), int(rec["seq"]), int(rec["decided_ns"]),
             max(0, done_ns - received_ns), applied_psn, int(status)))
        self._confirmed[status.name] += 1

    def _expire_one(self, status: ConfirmStatus) -> None:
        key = next(iter(self._pending))
        flow_id, seq, decided, received, addr = self._pending.pop(key)
        self._confirm_out.setdefault(addr, []).append(
            (flow_id, seq, decided, max(0, time.monotonic_ns() - received), 0, int(status)))
        self._confirmed[status.name] += 1

    def _collect_confirmations(self) -> None:
        """Turn the endpoint's answers into confirmations; give up on old records."""
        if self._ctl_sock is not None:
            while True:
                try:
                    data = self._ctl_sock.recv(65536)
                except (BlockingIOError, InterruptedError):
                    break
                now = time.monotonic_ns()
                for seq, qp, status, psn in parse_confirm_reply(data) or ():
                    entry = self._pending.pop((seq, qp), None)
                    if entry is None:
                        continue  # already given up on, or never asked
                    flow_id, _seq, decided, received, addr = entry
                    self._confirm_out.setdefault(addr, []).append(
                        (flow_id, seq, decided, max(0, now - received),
                         psn if status is ConfirmStatus.APPLIED else 0, int(status)))
                    self._confirmed[status.name] += 1
        limit = time.monotonic_ns() - int(self.config.confirm_timeout_s * 1e9)
        while self._pending and next(iter(self._pending.values()))[3] < limit:
            self._expire_one(ConfirmStatus.UNCONFIRMED)

    def _send_confirmations(self) -> None:
        if not self._confirm_out:
            return
        out, self._confirm_out = self._confirm_out, {}
        if self._fb_sock is None:
            return
        for addr, rows in out.items():
            step = CONFIRM_MAX_RECORDS - (2 if self._auth else 0)   # frame: +40 B
            for start in range(0, len(rows), step):
                buf = encode_confirmations(rows[start:start + step]).tobytes()
                if self._auth is not None:
                    buf = self._auth.confirms.seal(buf)
                try:
                    self._fb_sock.sendto(buf, addr)
                except OSError:
                    pass  # the controller went away; confirmations are best effort

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
                          sink=self._sink.stats(),
                          confirmations={k: v for k, v in self._confirmed.items() if v},
                          confirm_pending=len(self._pending),
                          auth_rejected=self._auth.rejected() if self._auth else {})


# -- command line ----------------------------------------------------------------------
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
               "  python -m ebpf.agent --iface h2-eth0 --controller 10.0.0.100:32767 \\\n"
               "      --feedback-port 32768 --feedback-from 10.0.0.101 --key-file keys.yaml\n"
               "  python -m ebpf.agent --iface h2-eth0 --controller 10.0.0.100:32767 \\\n"
               "      --ship-records 1    # every record at once (no holding)\n"
               "  python -m ebpf.agent --iface h2-eth0 --dump-c 1 1   # print the C\n")
    p.add_argument("--iface", required=True, help="interface to attach the sink to")
    p.add_argument("--netns", help="named network namespace of the interface")
    p.add_argument("--controller", type=argtypes.host_port(AGENT_BATCH_UDP_PORT),
                   help=f"IPv4:PORT for host-record batches (port default "
                        f"{AGENT_BATCH_UDP_PORT})")
    p.add_argument("--standby-controller", type=argtypes.host_port(AGENT_BATCH_UDP_PORT),
                   action="append", default=[], metavar="IPv4:PORT",
                   help="a standby controller that gets a copy of every batch and may send "
                        "feedback (repeat for several)")
    p.add_argument("--agent-id", type=argtypes.ipv4_or_int, default=0,
                   help="id in batch headers (integer or IPv4 address)")
    p.add_argument("--feedback-port", type=argtypes.port, default=0,
                   help="UDP port to receive controller feedback on (0: none)")
    p.add_argument("--control", metavar="PATH",
                   help="UNIX datagram socket of the local traffic endpoint")
    p.add_argument("--confirm-timeout", type=argtypes.positive, default=1.0, metavar="S",
                   help="report feedback the endpoint has not confirmed after S seconds "
                        "as UNCONFIRMED (default 1)")
    ship = ShipPolicy()
    p.add_argument("--ship-records", type=int, default=ship.records, metavar="N",
                   help=f"ship host records once N are held (1: each at once; default "
                        f"{ship.records})")
    p.add_argument("--ship-interval", type=float, default=1e3 * ship.interval_s,
                   metavar="MS", help=f"hold a record at most MS milliseconds (default "
                                      f"{1e3 * ship.interval_s:g})")
    p.add_argument("--ship-queued-interval", type=float,
                   default=1e3 * ship.queued_interval_s, metavar="MS",
                   help=f"hold a record that saw a queue at some hop at most MS "
                        f"milliseconds (default {1e3 * ship.queued_interval_s:g}: at once)")
    p.add_argument("--int-port", type=argtypes.port, default=INT_UDP_PORT,
                   help=f"UDP port announcing INT (default {INT_UDP_PORT})")
    p.add_argument("--malformed", choices=("pass", "drop"), default="pass",
                   help="malformed INT: pass up unmodified (default) or drop")
    p.add_argument("--ringbuf-pages", type=int, default=1024,
                   help="ring size in pages (default 1024: 7943 records)")
    p.add_argument("--run-packets", type=int, default=16, metavar="N",
                   help="packets of a flow one host record covers at most (consecutive "
                        "PSNs; default 16, 1: a record per packet)")
    p.add_argument("--xdp", action="store_true",
                   help="run the sink at XDP instead of tc ingress (before tc programs)")
    p.add_argument("--flows", action="store_true",
                   help="print the busiest flows (PSN loss, reordering) every interval")
    p.add_argument("--echo", action="store_true",
                   help="echo INT in this host's ACKs (formats.int_echo) for HPCC senders")
    p.add_argument("--dump-c", action="store_true", help="print the C source loaded")
    add_auth_arguments(p)
    p.add_argument("interval", nargs="?", type=argtypes.positive, default=1.0,
                   help="seconds between status lines (default 1)")
    p.add_argument("count", nargs="?", type=int, help="status lines before exiting")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        keys, warning = auth_from_arguments(args)
    except (KeyFileError, ExposureError) as exc:
        print(f"ebpf.agent: {exc}", file=sys.stderr)
        return 2
    if warning:
        print(f"ebpf.agent: warning: {warning}", file=sys.stderr)
    try:
        cfg = AgentConfig(keys=keys, feedback_bind=args.feedback_bind,
            feedback_from=tuple(args.feedback_from),
            iface=args.iface, netns=args.netns, controller=args.controller,
            standby=tuple(args.standby_controller),
            agent_id=args.agent_id, feedback_port=args.feedback_port,
            control_socket=args.control, confirm_timeout_s=args.confirm_timeout,
            ship=ShipPolicy(records=args.ship_records, interval_s=args.ship_interval / 1e3,
                            queued_interval_s=args.ship_queued_interval / 1e3),
            sink=SinkConfig(int_udp_port=args.int_port, ringbuf_pages=args.ringbuf_pages,
                            malformed_drop=args.malformed == "drop",
                            hook="xdp" if args.xdp else "tc", echo=args.echo,
                            run_packets=args.run_packets))
    except (EbpfError, AttachError) as exc:
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
            print(final_line(agent.stats()), file=sys.stderr, flush=True)
    except (EbpfError, AttachError) as exc:
        print(f"ebpf.agent: {exc}", file=sys.stderr)
        return 1
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    return 0


if __name__ == "__main__":
    sys.exit(main())
