"""Local control API of a traffic endpoint: rate and FEC feedback over a UNIX socket.

Why: congestion control (HPCC, DCQCN) and the loss-map FEC policy run in the
controller; the host agent receives their feedback and must hand it to the QPs of the
local traffic process without waiting on it.  A UNIX *datagram* socket keeps that
one-way, message-framed and lossless on one machine.

Protocol: the endpoint binds ``path`` (``--control PATH``).  Each datagram holds one or
more JSON objects, one per line (UTF-8).  Recognised objects:

``{"qp": N, "rate_bps": X}``
    set requester QP N's pacing rate to X bit/s (1e3..4e11); effective for the next
    packet the QP sends.
``{"qp": N, "fec_k": K, "fec_m": M}``
    set QP N's FEC block to K data + M repair packets (1..128, 0..16); the open block
    is closed first.  Both keys may be combined with ``rate_bps`` in one object.
``{"qp": N, "loss": MODEL}``
    the path's loss model from the controller's loss map (``none``, ``P``,
    ``ge:p,r[,h[,k]]``, :mod:`common.loss`): requester QP N in mode auto plans its
    next messages with it (``traffic.recovery``).
``{"qp": N, "path_changed": true}``
    the controller rewrote the routes QP N's packets (or their ACKs) took (a
    mitigation's reroute): the QP drops its retransmission backoff and, if a timeout
    had fired since its last progress (it is stalled, its packets were lost on the old
    path), resends its oldest unacknowledged packets now instead of at the backed-off
    deadline.  A QP that is not stalled only has its timer rearmed at the base RTO.
``{"qp": "*", ...}``
    apply to every requester QP of the endpoint.
``"seq": S`` (0..2^32-1, with any of the above)
    ask for a confirmation: after the datagram is handled, the endpoint sends the
    client's bound address one JSON object ``{"confirm": [...]}`` with one entry per
    QP and ``seq``: ``{"seq": S, "qp": N, "status": "applied", "psn": P}``, P being
    the requester's next PSN to send (the first packet paced at the new setting), or
    ``{"seq": S, "qp": N, "status": "unknown_qp" | "rejected", "error": "..."}``.
    The host agent binds an abstract address and turns the entries into
    ``formats.feedback.CONFIRM_DTYPE`` records for the controller.
``{"cmd": "stats"}``
    ask for a snapshot; the reply (one JSON object) is sent back to the client's bound
    address, if it has one.
``{"cmd": "collective"}``
    ask the workload for its progress: ``{"collective": {"rank": R, "iter": I, ...}}``
    (an all-reduce rank: the iteration it is working on; a standby: ``"standby": true``).
``{"cmd": "move_rank", "rank": R, "to": IP, "at_iter": N}``
    a ring all-reduce moves rank R to the spare host IP from iteration N on
    (:mod:`traffic.rankmove`): R stops after iteration N - 1, R's ring peers re-point
    their QPs to IP at that boundary, and the standby process on IP takes rank R over.
    Answered with ``{"move_rank": {"status": "accepted" | "rejected", ...}}``; a
    rejection (counted) names what is wrong (a rank outside the ring, a host already in
    the ring, an iteration already started, ...).

A malformed line is counted and answered with ``{"error": "..."}`` when the client
has an address (a confirmation entry with status "rejected" when the line carried a
valid ``seq``); it never stops the endpoint.  :func:`send_control` is a small client.
"""
from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from dataclasses import dataclass

from common.loss import LossModel, LossSpecError
from traffic.errors import ControlError

__all__ = ["ControlCommand", "ControlReject", "ControlServer", "parse_control", "query_stats",
           "request", "request_all", "send_control"]

MAX_DATAGRAM = 65536
SEQ_MAX = 0xFFFFFFFF


@dataclass(slots=True, kw_only=True, frozen=True)
class ControlCommand:
    """One parsed control object. ``qp`` is None for "all QPs"."""

    qp: int | None = None
    rate_bps: float | None = None
    fec_k: int | None = None
    fec_m: int | None = None
    loss: LossModel | None = None
    path_changed: bool = False
    stats: bool = False
    app: dict | None = None
    """A workload command (``collective``, ``move_rank``), checked for shape here and
    handled by the endpoint's ``app_handler``."""
    seq: int | None = None
    """Feedback sequence to confirm (None: no confirmation asked)."""


class ControlReject(str):
    """An error message of one line; ``seq``/``qp`` are set when the line asked for a
    confirmation, so the reply can name the feedback record it refuses."""

    seq: int | None = None
    qp: int | str | None = None


def _reject(msg: str, obj: object) -> ControlReject:
    r = ControlReject(msg)
    if isinstance(obj, dict):
        seq = obj.get("seq")
        if isinstance(seq, int) and not isinstance(seq, bool) and 0 <= seq <= SEQ_MAX:
            r.seq = seq
            qp = obj.get("qp")
            r.qp = qp if isinstance(qp, (int, str)) and not isinstance(qp, bool) else None
    return r


def _parse_obj(obj: object, where: str) -> ControlCommand:
    if not isinstance(obj, dict):
        raise ControlError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    if "cmd" in obj:
        return _parse_cmd(obj, where)
    unknown = set(obj) - {"qp", "rate_bps", "fec_k", "fec_m", "loss", "path_changed", "cmd", "seq"}
    if unknown:
        raise ControlError(
            f"{where}: unknown key(s) {sorted(unknown)}; known: qp, rate_bps, fec_k, fec_m, "
            "loss, path_changed, seq, cmd"
        )
    seq = obj.get("seq")
    if seq is not None and (not isinstance(seq, int) or isinstance(seq, bool)
                            or not 0 <= seq <= SEQ_MAX):
        raise ControlError(f"{where}: seq={seq!r} outside 0..{SEQ_MAX}")
    if "qp" not in obj:
        raise ControlError(f"{where}: missing 'qp' (a QP number or \"*\")")
    qp = obj["qp"]
    if qp == "*":
        qpn = None
    elif isinstance(qp, int) and not isinstance(qp, bool) and 1 <= qp <= 0xFFFFFF:
        qpn = qp
    else:
        raise ControlError(f"{where}: qp={qp!r} is not a QP number (1..16777215) or \"*\"")
    rate = obj.get("rate_bps")
    if rate is not None:
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 1e3 <= rate <= 4e11:
            raise ControlError(f"{where}: rate_bps={rate!r} outside 1e3..4e11")
        rate = float(rate)
    k, m = obj.get("fec_k"), obj.get("fec_m")
    if (k is None) != (m is None):
        raise ControlError(f"{where}: fec_k and fec_m must be given together")
    if k is not None:
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 128:
            raise ControlError(f"{where}: fec_k={k!r} outside 1..128")
        if not isinstance(m, int) or isinstance(m, bool) or not 0 <= m <= 16:
            raise ControlError(f"{where}: fec_m={m!r} outside 0..16")
    loss = None
    if "loss" in obj:
        if not isinstance(obj["loss"], str):
            raise ControlError(f"{where}: loss={obj['loss']!r} is not a loss model text")
        try:
            loss = LossModel.parse(obj["loss"])
        except LossSpecError as e:
            raise ControlError(f"{where}: loss: {e}") from None
    moved = obj.get("path_changed", False)
    if not isinstance(moved, bool):
        raise ControlError(f"{where}: path_changed={moved!r} is not true or false")
    if rate is None and k is None and loss is None and not moved:
        raise ControlError(f"{where}: nothing to set (give rate_bps, fec_k + fec_m, loss or "
                           "path_changed)")
    return ControlCommand(qp=qpn, rate_bps=rate, fec_k=k, fec_m=m, loss=loss, path_changed=moved,
                          seq=seq)


_CMD_KEYS = {"stats": {"cmd", "seq"}, "collective": {"cmd", "seq"},
             "move_rank": {"cmd", "seq", "rank", "to", "at_iter"}}


def _parse_cmd(obj: dict, where: str) -> ControlCommand:
    """``{"cmd": ...}`` objects: stats (the endpoint's) and the workload's commands."""
    cmd = obj["cmd"]
    if not isinstance(cmd, str) or cmd not in _CMD_KEYS:
        raise ControlError(f"{where}: cmd={cmd!r} unknown; known: {', '.join(_CMD_KEYS)}")
    unknown = set(obj) - _CMD_KEYS[cmd]
    if unknown:
        raise ControlError(f"{where}: cmd {cmd}: unknown key(s) {sorted(unknown)}; known: "
                           f"{', '.join(sorted(_CMD_KEYS[cmd]))}")
    seq = obj.get("seq")
    if seq is not None and (not isinstance(seq, int) or isinstance(seq, bool)
                            or not 0 <= seq <= SEQ_MAX):
        raise ControlError(f"{where}: seq={seq!r} outside 0..{SEQ_MAX}")
    if cmd == "stats":
        return ControlCommand(stats=True)
    if cmd == "move_rank":
        for key, hi in (("rank", 255), ("at_iter", 1 << 31)):
            v = obj.get(key)
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= hi:
                raise ControlError(f"{where}: move_rank: {key}={v!r} is not an integer "
                                   f"in 0..{hi}")
        to = obj.get("to")
        try:
            ok = isinstance(to, str) and socket.inet_ntoa(socket.inet_aton(to)) == to
        except OSError:
            ok = False
        if not ok:
            raise ControlError(f"{where}: move_rank: to={to!r} is not an IPv4 address")
    return ControlCommand(app=dict(obj), seq=seq)


def parse_control(data: bytes) -> tuple[list[ControlCommand], list[ControlReject]]:
    """Parse one datagram: (commands, error messages), one entry per line."""
    cmds: list[ControlCommand] = []
    errors: list[ControlReject] = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return [], [ControlReject(f"control datagram: not UTF-8 ({e.reason} at byte {e.start})")]
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"control line {n}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            errors.append(ControlReject(f"{where}: invalid JSON ({e.msg} at column {e.colno})"))
            continue
        try:
            cmds.append(_parse_obj(obj, where))
        except ControlError as e:
            errors.append(_reject(str(e), obj))
    return cmds, errors


class ControlServer:
    """Non-blocking UNIX datagram socket owned by an endpoint (``fileno`` for poll)."""

    def __init__(self, path: str):
        self.path = path
        if os.path.exists(path):
            os.unlink(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.setblocking(False)
        self.errors = 0

    def fileno(self) -> int:
        return self.sock.fileno()

    def receive(self) -> list[tuple[list[ControlCommand], list[ControlReject], str | bytes | None]]:
        """Drain pending datagrams: (commands, errors, reply address) per datagram; an
        abstract client address comes as bytes (leading NUL)."""
        out: list[tuple[list[ControlCommand], list[ControlReject], str | bytes | None]] = []
        while True:
            try:
                data, addr = self.sock.recvfrom(MAX_DATAGRAM)
            except BlockingIOError:
                return out
            cmds, errs = parse_control(data)
            self.errors += len(errs)
            out.append((cmds, errs, addr or None))

    def reply(self, addr: str | bytes | None, obj: dict) -> None:
        if not addr:
            return
        try:
            self.sock.sendto(json.dumps(obj).encode(), addr)
        except OSError:
            pass  # the client went away; feedback is best effort

    def close(self) -> None:
        self.sock.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def send_control(path: str, *objs: dict) -> None:
    """Send control objects (one datagram, one JSON line each) to an endpoint."""
    data = "\n".join(json.dumps(o) for o in objs).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.sendto(data, path)


def request(path: str, obj: dict, timeout_s: float = 2.0) -> dict:
    """Send one control object and return the endpoint's one-object reply (binds a
    temporary client address); ControlError when the socket is gone or silent."""
    with tempfile.TemporaryDirectory(prefix="ttrctl") as d:
        me = os.path.join(d, "c")
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.bind(me)
            s.settimeout(timeout_s)
            try:
                s.sendto(json.dumps(obj).encode(), path)
                data = s.recv(MAX_DATAGRAM * 16)
            except TimeoutError:
                raise ControlError(f"control {path}: no reply to {obj.get('cmd', obj)!r} "
                                   f"in {timeout_s} s") from None
            except OSError as e:
                raise ControlError(f"control {path}: {e.strerror}") from None
    reply = json.loads(data)
    if not isinstance(reply, dict):
        raise ControlError(f"control {path}: reply is not a JSON object")
    return reply


def request_all(pairs: list[tuple[str, dict]], timeout_s: float = 2.0) -> dict[str, dict]:
    """Send one control object to each path at once, then collect the one-object replies
    by the path that sent them (``{"error": ...}`` for a path gone or silent).  Why at
    once: a command whose effect depends on when it lands (a rank move's iteration)
    reaches every endpoint within a send loop, not one reply wait after another.
    A reply comes from the endpoint's own address: a path given as a symbolic link is
    matched by what it resolves to."""
    out: dict[str, dict] = {}
    named = {os.path.realpath(p): p for p, _ in pairs}
    with tempfile.TemporaryDirectory(prefix="ttrctl") as d:
        me = os.path.join(d, "c")
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.bind(me)
            for path, obj in pairs:
                try:
                    s.sendto(json.dumps(obj).encode(), path)
                except OSError as e:
                    out[path] = {"error": f"control {path}: {e.strerror}"}
            end = time.monotonic() + timeout_s
            while len(out) < len(pairs) and (left := end - time.monotonic()) > 0:
                s.settimeout(left)
                try:
                    data, addr = s.recvfrom(MAX_DATAGRAM * 16)
                except TimeoutError:
                    break
                try:
                    reply = json.loads(data)
                except json.JSONDecodeError:
                    reply = {"error": f"control {addr}: reply is not JSON"}
                key = addr if isinstance(addr, str) else str(addr)
                out[named.get(os.path.realpath(key), key)] = (
                    reply if isinstance(reply, dict) else {"error": "reply not an object"})
    for path, _ in pairs:
        out.setdefault(path, {"error": f"control {path}: no reply in {timeout_s} s"})
    return out


def query_stats(path: str, timeout_s: float = 2.0) -> dict:
    """Ask an endpoint for its stats snapshot."""
    return request(path, {"cmd": "stats"}, timeout_s)
