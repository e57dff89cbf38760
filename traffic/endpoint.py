"""A host's RoCEv2 endpoint: UDP sockets, event loop, many QPs, emulated link.

One endpoint per process and per IPv4 address.  It binds ``ip:4791`` for everything it
receives (data for its responder QPs, ACK/NAK/CNP for its requester QPs; the BTH
destination QP says which) and opens one UDP socket per QP for sending, bound to an
ephemeral source port that serves as that QP's UDP entropy.

ICRC, sending: send sockets are unconnected with ``IP_PMTUDISC_DO``, for which Linux
sends IP ID 0 with DF set; every field the ICRC covers is therefore known in advance
and the ICRC is computed in user space before ``sendto``.  ICRC, receiving: the
receiver rebuilds the covered header fields from the source address and port the
socket reports, its own address, the UDP length and the same ID/DF convention, and
verifies; packets that fail are counted (``bad_icrc``) and dropped.

UDP checksum: 0 (``SO_NO_CHECK``), as RoCEv2 senders do; the ICRC protects the data.

ECN: senders mark ECT(0); a received data packet with CE makes the responder send a
CNP to the requester (at most one per QP per 50 us, as DCQCN prescribes).

Emulated link (no netem here): packets for the endpoint's QPs can be dropped by a
seeded loss model and held for a one-way delay before processing; with the same delay
at both ends the round-trip time grows by twice that.

Priority: with ``realtime`` (the ``traffic`` command's ranks ask for it) the thread that
opened the endpoint runs at real-time priority until it is closed, as the native
engine's thread does: it is the host's NIC, whose ACKs peers' timers count on, and at
normal priority a loaded host kept it off the CPU for longer than any sane timer
(:mod:`traffic.realtime`: best effort, a watchdog, ``TN_ENGINE_RT=0`` opts out).
"""
from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
import select
import socket
import struct
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Self

from common.loss import LossModel, LossProcess
from formats import int_echo, roce
from formats.roce import ICRC_LEN, PSN_MASK, ROCEV2_UDP_PORT, Opcode
from traffic.control import ControlCommand, ControlServer
from traffic.emulation import DelayLine
from traffic.errors import ConfigError
from traffic.qp_types import MessageRecord, QpConfig
from traffic.realtime import RealtimePriority
from traffic.requester import Requester
from traffic.responder import Responder

__all__ = ["Endpoint", "EndpointConfig", "EndpointCounters"]

log = logging.getLogger("traffic")

_IP_MTU_DISCOVER = getattr(socket, "IP_MTU_DISCOVER", 10)
_IP_PMTUDISC_DO = getattr(socket, "IP_PMTUDISC_DO", 2)
_SO_NO_CHECK = getattr(socket, "SO_NO_CHECK", 11)
_SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)
_SO_RXQ_OVFL = getattr(socket, "SO_RXQ_OVFL", 40)
_IP_RECVTOS = getattr(socket, "IP_RECVTOS", 13)
_HDR = struct.Struct("!BBHI")
_CNP_GAP_S = 50e-6
_STALL_S = 0.002
_KNOWN_OPCODES = frozenset(int(o) for o in Opcode)
_LOSSY_OPCODES = frozenset(int(o) for o in roce.DATA_OPCODES | {Opcode.FEC_REPAIR})


@dataclass(slots=True, kw_only=True)
class EndpointConfig:
    ip: str
    port: int = ROCEV2_UDP_PORT
    delay_s: float = 0.0
    loss: LossProcess = field(default_factory=lambda: LossProcess(LossModel.none()))
    loss_scope: str = "data"  # "data": data + FEC repair packets; "all": every packet
    control_path: str | None = None
    sample_interval_s: float = 0.05
    rcvbuf_bytes: int = 8 << 20
    batch: int = 128
    # run the opening thread at real-time priority while open (traffic.realtime)
    realtime: bool = False

    def __post_init__(self) -> None:
        if self.loss_scope not in ("data", "all"):
            raise ConfigError(f"endpoint {self.ip}: loss_scope={self.loss_scope!r} not data/all")
        if not 0.001 <= self.sample_interval_s <= 60:
            raise ConfigError(
                f"endpoint {self.ip}: sample_interval_s={self.sample_interval_s!r} "
                "outside 0.001..60")


@dataclass(slots=True, kw_only=True)
class EndpointCounters:
    rx_pkts: int = 0
    bad_icrc: int = 0
    truncated: int = 0
    bad_echo: int = 0  # ACKs flagged with an INT echo whose trailer is wrong (dropped)
    unknown_qp: int = 0
    wrong_peer: int = 0
    unexpected_opcode: int = 0
    kernel_drops: int = 0  # receive-buffer overflows reported by the kernel
    injected_drops: int = 0
    injected_data_drops: int = 0
    injected_repair_drops: int = 0
    cnps_tx: int = 0
    send_errors: int = 0
    control_msgs: int = 0
    control_errors: int = 0
    # loop iterations that started more than ``_STALL_S`` after they were due (the
    # process was descheduled or a callback ran long): the pacer's bucket covers only
    # a couple of ms, so this time is rate the QPs lose for good
    stalls: int = 0
    stall_s: float = 0.0


class Endpoint:
    """Owns the sockets and QPs of one host address; drive it with :meth:`run`."""

    def __init__(self, cfg: EndpointConfig):
        self.cfg = cfg
        self.counters = EndpointCounters()
        self.requesters: dict[int, Requester] = {}
        self.responders: dict[int, Responder] = {}
        self.injected_by_qp: dict[int, int] = {}
        self.series: dict[int, list[tuple]] = {}
        self._closed = False
        self._ip_b = socket.inet_aton(cfg.ip)
        self._socks: dict[int, socket.socket] = {}
        # QPs of a moved peer (a rank moved to a spare host, traffic.rankmove): the
        # requester that still drains to the old peer, the responder that already
        # receives from the new one; both keyed by (QP number, peer address)
        self._former_req: dict[tuple[int, str], Requester] = {}
        self._extra_resp: dict[tuple[int, str], Responder] = {}
        self._dirty: dict[int, tuple[int, Responder]] = {}  # id -> (qpn, responder)
        # the workload's commands (ControlCommand.app): reply object per command
        self.app_handler: Callable[[ControlCommand, float], dict] | None = None
        self._last_cnp: dict[int, float] = {}
        self._delay = DelayLine(delay_s=cfg.delay_s)
        self._t0 = time.monotonic()
        self._next_sample = self._t0
        self._due: float | None = None  # when the next loop iteration should start
        self.rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            try:  # root may exceed net.core.rmem_max: bursts must not overflow
                self.rx.setsockopt(socket.SOL_SOCKET, _SO_RCVBUFFORCE, cfg.rcvbuf_bytes)
            except OSError:
                self.rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, cfg.rcvbuf_bytes)
            self.rx.setsockopt(socket.SOL_SOCKET, _SO_RXQ_OVFL, 1)
            self.rx.setsockopt(socket.IPPROTO_IP, _IP_RECVTOS, 1)
            self.rx.bind((cfg.ip, cfg.port))
        except OSError as e:
            self.rx.close()
            raise ConfigError(f"endpoint: cannot bind {cfg.ip}:{cfg.port}: {e.strerror}") from None
        self.rx.setblocking(False)
        self.control = ControlServer(cfg.control_path) if cfg.control_path else None
        self.priority = RealtimePriority()
        if cfg.realtime:
            self.priority.enter()

    def app_work(self) -> contextlib.AbstractContextManager[None]:
        """The application's bulk work (reductions) keeps this loop's priority:
        the loop is the host's NIC, and ACKs owed wait while it waits (the native
        endpoint's driver thread drops to normal priority here)."""
        return contextlib.nullcontext()

    # -- QPs -------------------------------------------------------------------------
    def _qp_socket(self, qpn: int, dscp: int) -> socket.socket:
        if qpn in self._socks:
            raise ConfigError(f"endpoint {self.cfg.ip}: QP {qpn} already exists")
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.IPPROTO_IP, _IP_MTU_DISCOVER, _IP_PMTUDISC_DO)
        s.setsockopt(socket.SOL_SOCKET, _SO_NO_CHECK, 1)  # UDP checksum 0, as RoCEv2
        s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, (dscp << 2) | 0x02)  # ECT(0)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        s.bind((self.cfg.ip, 0))
        self._socks[qpn] = s
        return s

    def add_requester(self, qcfg: QpConfig, *, start_psn: int = 0) -> Requester:
        s = self._qp_socket(qcfg.qpn, qcfg.dscp)
        r = Requester(cfg=qcfg, local_ip=self.cfg.ip, sport=s.getsockname()[1],
                      start_psn=start_psn, now_s=self.now())
        self.requesters[qcfg.qpn] = r
        self.series[qcfg.qpn] = []
        return r

    def add_responder(self, qcfg: QpConfig, *, start_psn: int = 0,
                      on_message: Callable[[Responder, MessageRecord, bytearray], None]
                      | None = None) -> Responder:
        s = self._qp_socket(qcfg.qpn, qcfg.dscp)
        r = Responder(cfg=qcfg, local_ip=self.cfg.ip, sport=s.getsockname()[1],
                      start_psn=start_psn, on_message=on_message)
        self.responders[qcfg.qpn] = r
        self.series[qcfg.qpn] = []
        return r

    def repoint_requester(self, qpn: int, peer_ip: str) -> Requester:
        """Requester QP ``qpn`` talks to ``peer_ip`` from now on: a fresh QP (PSN 0, as a
        reconnected RC QP) takes its number and socket; the old one stays until its
        messages are acknowledged by the old peer (ACKs are told apart by their source)."""
        old = self.requesters[qpn]
        if old.cfg.peer_ip == peer_ip:
            raise ConfigError(f"endpoint {self.cfg.ip}: QP {qpn} already talks to {peer_ip}")
        self._former_req[(qpn, old.cfg.peer_ip)] = old
        new = Requester(cfg=dataclasses.replace(old.cfg, peer_ip=peer_ip), local_ip=self.cfg.ip,
                        sport=old.sport, now_s=self.now())
        self.requesters[qpn] = new
        return new

    def add_peer_responder(self, qpn: int, peer_ip: str, *,
                           on_message: Callable[[Responder, MessageRecord, bytearray], None]
                           | None = None) -> Responder:
        """A second responder on QP number ``qpn`` for packets from ``peer_ip`` (a fresh
        QP, PSN 0): the peer that takes over a moved rank; the first one keeps serving
        the old peer (its last messages, its retransmissions)."""
        old = self.responders[qpn]
        if peer_ip == old.cfg.peer_ip or (qpn, peer_ip) in self._extra_resp:
            raise ConfigError(f"endpoint {self.cfg.ip}: QP {qpn} already receives from {peer_ip}")
        r = Responder(cfg=dataclasses.replace(old.cfg, peer_ip=peer_ip), local_ip=self.cfg.ip,
                      sport=old.sport, on_message=on_message)
        self._extra_resp[(qpn, peer_ip)] = r
        return r

    def set_rx_delay(self, delay_s: float) -> None:
        """Change the receive delay at run time (a slow host; packets held keep theirs)."""
        self.cfg.delay_s = delay_s
        self._delay.delay_s = delay_s

    def now(self) -> float:
        """Seconds since the endpoint started (the time base of every record)."""
        return time.monotonic() - self._t0

    # -- receive path ----------------------------------------------------------------
    def _receive(self, now: float) -> bool:
        """Read up to ``batch`` packets; True when the socket is left empty."""
        rx = self.rx
        c = self.counters
        loss = self.cfg.loss
        scope_all = self.cfg.loss_scope == "all"
        lossy = loss.lossy
        delay = self.cfg.delay_s > 0
        for _ in range(self.cfg.batch):
            try:
                data, anc, _flags, addr = rx.recvmsg(65535, 64)
            except BlockingIOError:
                return True
            c.rx_pkts += 1
            tos = 0
            for lvl, typ, val in anc:
                if lvl == socket.IPPROTO_IP and val:
                    tos = val[0]
                elif lvl == socket.SOL_SOCKET and typ == _SO_RXQ_OVFL and len(val) >= 4:
                    c.kernel_drops = int.from_bytes(val[:4], "little")
            if lossy and data and (scope_all or data[0] in _LOSSY_OPCODES) \
                    and loss.lost(time.monotonic()):
                c.injected_drops += 1
                if data[0] == Opcode.FEC_REPAIR:
                    c.injected_repair_drops += 1
                else:
                    c.injected_data_drops += 1
                if len(data) >= 8:
                    q = _HDR.unpack_from(data)[3] & PSN_MASK
                    self.injected_by_qp[q] = self.injected_by_qp.get(q, 0) + 1
                continue
            if delay:
                self._delay.push(now, (data, addr, tos))
            else:
                self._process(data, addr, tos, now)
        return False

    def _process(self, data: bytes, addr: tuple[str, int], tos: int, now: float) -> None:
        c = self.counters
        if len(data) < roce.BTH_LEN + ICRC_LEN:
            c.truncated += 1
            return
        echo = None
        if data[4] & int_echo.ECHO_FLAG and data[0] == Opcode.ACKNOWLEDGE:
            try:  # INT hop records behind the ACK's ICRC (formats.int_echo): take them off
                data, echo = int_echo.split_echo(data)
            except int_echo.IntEchoError:
                c.bad_echo += 1
                return
        if not roce.icrc_ok(data, src=socket.inet_aton(addr[0]), dst=self._ip_b,
                            sport=addr[1], dport=self.cfg.port):
            c.bad_icrc += 1
            return
        try:
            pkt = roce.parse_udp_payload(data)
        except roce.RoceFormatError:
            c.truncated += 1
            return
        qpn = pkt.bth.dest_qp
        op = pkt.bth.opcode
        if op not in _KNOWN_OPCODES:  # e.g. RDMA READ, atomics, UD: not emulated here
            c.unexpected_opcode += 1
            return
        if op == Opcode.ACKNOWLEDGE or op == Opcode.CNP:
            req = self.requesters.get(qpn)
            if req is None:
                c.unknown_qp += 1
                return
            if addr[0] != req.cfg.peer_ip:
                req = self._former_req.get((qpn, addr[0]))  # type: ignore[assignment]
                if req is None:
                    c.wrong_peer += 1
                    return
            if op == Opcode.CNP:
                req.on_cnp(now)
            else:
                req.on_ack(pkt, now)
                if echo is not None:
                    req.on_int_echo(echo, pkt, now)
            return
        resp = self.responders.get(qpn)
        if resp is None:
            c.unknown_qp += 1
            return
        if addr[0] != resp.cfg.peer_ip:
            other = self._extra_resp.get((qpn, addr[0])) if self._extra_resp else None
            if other is None:
                c.wrong_peer += 1
                resp.counters.wrong_peer += 1
                return
            resp = other
        resp.on_packet(pkt, now)
        self._dirty[id(resp)] = (qpn, resp)
        if (tos & 3) == 3 and op != Opcode.FEC_REPAIR:
            last = self._last_cnp.get(qpn, -1.0)
            if now - last >= _CNP_GAP_S:
                self._last_cnp[qpn] = now
                cnp = roce.build_cnp(src=self.cfg.ip, dst=resp.cfg.peer_ip, sport=resp.sport,
                                     dest_qp=resp.cfg.peer_qpn)
                self._send(qpn, resp.cfg.peer_ip, cnp)
                c.cnps_tx += 1

    def _send(self, qpn: int, dst: str, buf: bytes) -> None:
        try:
            self._socks[qpn].sendto(buf, (dst, self.cfg.port))
        except OSError as e:
            self.counters.send_errors += 1
            if self.counters.send_errors == 1:  # once: the usual cause is a too large MTU
                hint = (" (packet larger than the path MTU: lower --mtu)"
                        if e.errno == errno.EMSGSIZE else "")
                log.warning("endpoint %s: QP %d cannot send %d bytes to %s: %s%s",
                            self.cfg.ip, qpn, len(buf), dst, e.strerror, hint)

    # -- control ---------------------------------------------------------------------
    def _control(self, now: float) -> None:
        """Apply control datagrams; lines with a ``seq`` are confirmed to the client in
        one ``{"confirm": [...]}`` reply per datagram (``traffic.control``)."""
        assert self.control is not None
        for cmds, errs, addr in self.control.receive():
            self.counters.control_msgs += 1
            self.counters.control_errors += len(errs)
            confirm: list[dict] = []
            for e in errs:
                log.warning("%s", e)
                if getattr(e, "seq", None) is not None:
                    confirm.append({"seq": e.seq, "qp": e.qp, "status": "rejected",
                                    "error": str(e)})
                else:
                    self.control.reply(addr, {"error": e})
            for cmd in cmds:
                if cmd.stats:
                    self.control.reply(addr, self.stats(compact=True))
                    continue
                if cmd.app is not None:
                    self._app_command(cmd, now, addr)
                    continue
                self._apply_control(cmd, now, addr, confirm)
            if confirm:
                self.control.reply(addr, {"confirm": confirm})

    def _app_command(self, cmd: ControlCommand, now: float, addr: str | bytes | None) -> None:
        """A workload command: the handler's reply; a rejection is counted."""
        assert self.control is not None and cmd.app is not None
        if self.app_handler is None:
            reply: dict = {"error": f"control: cmd {cmd.app['cmd']!r}: no workload on "
                                    f"{self.cfg.ip} handles it"}
        else:
            reply = self.app_handler(cmd, now)
        if "error" in reply or any(isinstance(v, dict) and v.get("status") == "rejected"
                                   for v in reply.values()):
            self.counters.control_errors += 1
            log.warning("control: %s", reply)
        self.control.reply(addr, reply)

    def _apply_control(self, cmd: ControlCommand, now: float, addr: str | bytes | None,
                       confirm: list[dict]) -> None:
        assert self.control is not None
        qps = (list(self.requesters.values()) if cmd.qp is None
               else [self.requesters[cmd.qp]] if cmd.qp in self.requesters else [])
        if not qps:
            msg = f"control: QP {cmd.qp} is not a requester QP of {self.cfg.ip}"
            self.counters.control_errors += 1
            if cmd.seq is None:
                self.control.reply(addr, {"error": msg})
            else:
                confirm.append({"seq": cmd.seq, "qp": "*" if cmd.qp is None else cmd.qp,
                                "status": "unknown_qp", "error": msg})
            return
        for q in qps:
            try:
                if cmd.rate_bps is not None:
                    q.set_rate(cmd.rate_bps, now)
                if cmd.fec_k is not None and cmd.fec_m is not None:
                    q.set_fec(cmd.fec_k, cmd.fec_m, now)
                if cmd.loss is not None:
                    q.set_path_loss(cmd.loss, now)
                if cmd.path_changed:
                    q.path_changed(now)
            except ConfigError as e:
                self.counters.control_errors += 1
                if cmd.seq is None:
                    self.control.reply(addr, {"error": str(e)})
                else:
                    confirm.append({"seq": cmd.seq, "qp": q.qpn, "status": "rejected",
                                    "error": str(e)})
                continue
            if cmd.seq is not None:
                confirm.append({"seq": cmd.seq, "qp": q.qpn, "status": "applied",
                                "psn": q.next_new_psn})

    # -- loop ------------------------------------------------------------------------
    def step(self, max_wait_s: float = 0.01) -> None:
        """One loop iteration: receive, process due packets, ack, control, send, wait."""
        now = self.now()
        if self._due is not None and now - self._due > _STALL_S:
            self.counters.stalls += 1
            self.counters.stall_s += now - self._due
        # ACKs share the socket with data: while packets are left unread (a busy host,
        # a backlog of data), an ACK may be among them, so no retransmission timer
        # fires until the socket has been read empty (else the timer measures our own
        # backlog and resends what was delivered)
        drained = self._receive(now)
        if len(self._delay):
            for data, addr, tos in self._delay.pop_due(now):
                self._process(data, addr, tos, now)
        for qpn, r in self._dirty.values():
            ack = r.take_ack()
            if ack is not None:
                self._send(qpn, r.cfg.peer_ip, ack)
        self._dirty.clear()
        if self.control is not None:
            self._control(now)
        wake = now + max_wait_s
        out: list[bytes] = []
        reqs: Iterable[Requester] = self.requesters.values()
        if self._former_req:
            reqs = [*reqs, *(r for r in self._former_req.values() if not r.idle)]
        for req in reqs:
            out.clear()
            t = req.poll(now, out, timers=drained)
            dst = req.cfg.peer_ip
            qpn = req.cfg.qpn
            for b in out:
                self._send(qpn, dst, b)
            if t is not None and t < wake:
                wake = t
        due = self._delay.next_due()
        if due is not None and due < wake:
            wake = due
        if now >= self._next_sample - self._t0:
            self._sample(now)
        timeout = wake - self.now()
        if timeout > 0:
            fds = [self.rx] + ([self.control.sock] if self.control else [])
            ready, _, _ = select.select(fds, [], [], timeout)
            self._due = self.now() if ready else wake
        else:
            self._due = self.now()

    def run(self, until: Callable[[], bool], *, timeout_s: float,
            on_tick: Callable[[float], None] | None = None) -> bool:
        """Loop until ``until()`` is true (returns True) or ``timeout_s`` passes (False)."""
        end = self.now() + timeout_s
        while not until():
            if self.now() > end:
                return False
            self.step()
            if on_tick is not None:
                on_tick(self.now())
        self._sample(self.now())
        return True

    # -- statistics ------------------------------------------------------------------
    def _sample(self, now: float) -> None:
        self._next_sample = self._t0 + now + self.cfg.sample_interval_s
        for qpn, r in self.requesters.items():
            c = r.counters
            self.series[qpn].append((round(now, 6), r.cfg.rate_bps, c.tx_bytes, c.acked_bytes,
                                     c.retx_pkts, r.srtt_s))
        for qpn, s in self.responders.items():
            c = s.counters
            self.series[qpn].append((round(now, 6), c.delivered_bytes, c.fec_repaired,
                                     c.msgs_done))

    def engine_info(self) -> dict | None:
        """The data path's own counters: which engine, at what priority."""
        return {"name": "python", **self.priority.snapshot()}

    def stats(self, *, compact: bool = False) -> dict:
        """Counters of the endpoint and every QP (plus time series unless compact)."""
        out: dict = {
            "ip": self.cfg.ip, "time_s": round(self.now(), 6),
            "endpoint": dataclasses.asdict(self.counters),
            **({"engine": eng} if (eng := self.engine_info()) is not None else {}),
            "injected_by_qp": {str(k): v for k, v in self.injected_by_qp.items()},
            "requesters": {str(q): r.snapshot() for q, r in self.requesters.items()},
            "responders": {str(q): r.snapshot() for q, r in self.responders.items()},
        }
        if not compact:
            out["series_columns"] = {
                "requester": ["t_s", "rate_bps", "tx_bytes", "acked_bytes", "retx_pkts",
                              "srtt_s"],
                "responder": ["t_s", "delivered_bytes", "fec_repaired", "msgs_done"],
            }
            out["series"] = {str(q): s for q, s in self.series.items()}
        return out

    def close(self) -> None:
        """Close every socket and remove the control socket file (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self.priority.leave()
        for s in self._socks.values():
            s.close()
        self._socks.clear()
        self.rx.close()
        if self.control is not None:
            self.control.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
