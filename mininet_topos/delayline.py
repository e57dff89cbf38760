"""A user-space WAN emulator between two interfaces: delay, jitter, rate and loss.

Why: this kernel has no netem (and no fq, so no timestamp-based pacing), but WAN
experiments need a one-way delay of 1..200 ms with jitter, a rate limit and random or
bursty loss.  A small process that owns two interfaces does it: it reads every frame
arriving on one with an AF_PACKET socket, gives it a departure time, and sends it out of
the other when that time comes.

Model of one direction (like a real link: serialise, then propagate):

    tx_end  = max(arrival, end of the previous frame's serialisation) + bits / rate
    lost?   = the loss model's verdict (a frame lost on the wire still used its slot)
    deliver = tx_end + delay +/- jitter     (uniform, like netem's default)

Frames waiting for serialisation beyond ``queue_pkts`` are tail-dropped.  Without
``reorder`` a frame never overtakes the one before it (delivery times are made
non-decreasing), so jitter does not reorder RoCE packets; with it, jitter reorders as
netem does.  The rate counts Ethernet frame bits (no preamble, gap or FCS), as HTB does.
IPv4 TCP/UDP frames whose sender left the checksum to offload get it filled in
(:func:`complete_checksum`); frames larger than the outgoing interface's MTU (TSO/GSO
super-frames from a local TCP stack) cannot be sent and count as ``tx_errors``, so
senders attached straight to a delay line should turn segmentation offload off.

:class:`DelayLineCore` holds that model as pure, clock-free logic (tested without root);
:func:`main` is the process: two sockets, one thread, ``select`` with microsecond
timeouts.  SIGUSR1 writes the counters to the stats file, SIGHUP re-reads the params
file (live changes), SIGTERM stops.  Run as
``python -m mininet_topos.delayline --a IF --b IF --params FILE --stats FILE``.

Its native twin (``mininet_topos/wan/native/delayline.c``) applies this same model, but
loss, at Gbit/s; :class:`mininet_topos.wan.WanLink` picks one (``line=``).
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import errno
import heapq
import json
import os
import random
import select
import signal
import socket
import struct
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from common.files import write_json_atomic
from common.loss import LossKind, LossModel, LossProcess, LossSpecError

__all__ = ["DelayLineCore", "DirectionStats", "WanError", "WanParams", "main"]

ETH_P_ALL = 0x0003
SOL_PACKET = 263             # linux/socket.h (the socket module does not export it)
PACKET_IGNORE_OUTGOING = 23  # linux/if_packet.h, Linux 4.20+
PACKET_AUXDATA = 8
TP_STATUS_CSUMNOTREADY = 8
_AUX = struct.Struct("=IIIHHHH")  # struct tpacket_auxdata
_CMSG_SPACE = socket.CMSG_SPACE(_AUX.size)
MAX_FRAME = 65536
MAX_WAIT_S = 0.05            # wake at least this often to handle signals


class WanError(Exception):
    """A WAN link parameter or operation is invalid; the message names it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WanParams:
    """Shaping of a WAN link, applied to each direction independently."""

    delay_ms: float = 10.0
    jitter_ms: float = 0.0
    rate_mbps: float = 0.0        # 0: not rate limited
    loss: LossModel = field(default_factory=LossModel)
    queue_pkts: int = 1000        # frames waiting for the rate limit (netem's default limit)
    reorder: bool = False
    seed: int | None = None

    def check(self, where: str = "WAN link") -> WanParams:
        """Return self if every field is in range, else raise WanError naming the field."""
        if not 0.0 <= self.delay_ms <= 200.0:
            raise WanError(f"{where}: delay_ms {self.delay_ms} out of range 0..200")
        if not 0.0 <= self.jitter_ms <= self.delay_ms:
            raise WanError(f"{where}: jitter_ms {self.jitter_ms} out of range "
                           f"0..delay_ms ({self.delay_ms})")
        if not (self.rate_mbps == 0.0 or 0.001 <= self.rate_mbps <= 100_000.0):
            raise WanError(f"{where}: rate_mbps {self.rate_mbps} out of range 0.001..100000 "
                           "(or 0 for no limit)")
        if not 1 <= self.queue_pkts <= 1_000_000:
            raise WanError(f"{where}: queue_pkts {self.queue_pkts} out of range 1..1000000")
        for name in ("p", "r", "h", "k"):
            value = getattr(self.loss, name)
            if not 0.0 <= value <= 1.0:
                raise WanError(f"{where}: loss {self.loss.kind} {name} {value} out of range 0..1")
        return self

    def to_dict(self) -> dict[str, object]:
        return {"delay_ms": self.delay_ms, "jitter_ms": self.jitter_ms,
                "rate_mbps": self.rate_mbps, "loss": self.loss.to_dict(),
                "queue_pkts": self.queue_pkts, "reorder": self.reorder, "seed": self.seed}

    @classmethod
    def from_dict(cls, raw: dict) -> WanParams:
        raw = dict(raw)
        loss = raw.pop("loss", {"model": "none"})
        kind = LossKind(loss.get("model", "none"))
        lm = LossModel(kind=kind, **{k: float(v) for k, v in loss.items() if k != "model"})
        unknown = set(raw) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise WanError(f"WAN params: unknown field(s) {', '.join(sorted(unknown))}")
        return cls(loss=lm, **raw).check()


@dataclass(slots=True, kw_only=True)
class DirectionStats:
    """Counters of one direction; ``lost`` is the loss model's, ``queue_drops`` the rate
    limiter's tail drops."""

    rx_pkts: int = 0
    rx_bytes: int = 0
    tx_pkts: int = 0
    tx_bytes: int = 0
    lost: int = 0
    queue_drops: int = 0
    tx_errors: int = 0
    max_backlog_pkts: int = 0
    late_max_us: int = 0          # worst lateness of a send against its delivery time
    late_over_1ms_pkts: int = 0   # frames sent more than 1 ms late (a busy machine)


class DelayLineCore:
    """The timing and loss model of one direction, with no clock and no sockets.

    Call :meth:`arrive` with the arrival time and frame; frames come back from
    :meth:`due` once their delivery time has passed.
    """

    def __init__(self, params: WanParams, rng: random.Random) -> None:
        self.stats = DirectionStats()
        self._rng = rng
        self._seq = 0
        self._tx_free_s = 0.0
        self._last_deliver_s = 0.0
        self._backlog: collections.deque[float] = collections.deque()  # tx_end times
        self._fifo: collections.deque[tuple[float, bytes]] = collections.deque()
        self._heap: list[tuple[float, int, bytes]] = []
        self._loss: LossProcess | None = None
        self.set_params(params)

    def set_params(self, params: WanParams) -> None:
        """Apply new parameters to frames arriving from now on (in-flight ones keep theirs)."""
        self.params = params
        self._delay_s = params.delay_ms / 1e3
        self._jitter_s = params.jitter_ms / 1e3
        self._s_per_byte = 8.0 / (params.rate_mbps * 1e6) if params.rate_mbps else 0.0
        if self._loss is None or self._loss.model != params.loss:
            self._loss = LossProcess(params.loss, self._rng)
        if params.reorder and self._fifo:
            for t, frame in self._fifo:
                self._push_heap(t, frame)
            self._fifo.clear()

    def _push_heap(self, t: float, frame: bytes) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, self._seq, frame))

    def arrive(self, now_s: float, frame: bytes) -> float | None:
        """Take a frame arriving at ``now_s``; return its delivery time, or None if dropped."""
        st = self.stats
        st.rx_pkts += 1
        st.rx_bytes += len(frame)
        tx_end = now_s
        if self._s_per_byte:
            backlog = self._backlog
            while backlog and backlog[0] <= now_s:
                backlog.popleft()
            if len(backlog) >= self.params.queue_pkts:
                st.queue_drops += 1
                return None
            tx_end = max(now_s, self._tx_free_s) + len(frame) * self._s_per_byte
            self._tx_free_s = tx_end
            backlog.append(tx_end)
            st.max_backlog_pkts = max(st.max_backlog_pkts, len(backlog))
        if self._loss is not None and self._loss.lost(now_s):
            st.lost += 1
            return None
        deliver = tx_end + self._delay_s
        if self._jitter_s:
            deliver += self._rng.uniform(-self._jitter_s, self._jitter_s)
        if self.params.reorder:
            self._push_heap(deliver, frame)
        else:
            deliver = max(deliver, self._last_deliver_s)
            self._last_deliver_s = deliver
            self._fifo.append((deliver, frame))
        return deliver

    def next_due_s(self) -> float | None:
        """Delivery time of the next frame, or None when nothing is in flight."""
        heads = [q[0][0] for q in (self._fifo, self._heap) if q]
        return min(heads) if heads else None

    def due(self, now_s: float) -> list[bytes]:
        """Remove and return, in delivery order, the frames due at ``now_s``.

        Also records how late the earliest of them is (the scheduler's accuracy).
        """
        out: list[bytes] = []
        fifo, heap = self._fifo, self._heap
        first = self.next_due_s()
        while fifo and fifo[0][0] <= now_s:
            out.append(fifo.popleft()[1])
        while heap and heap[0][0] <= now_s:
            out.append(heapq.heappop(heap)[2])
        if out and first is not None:
            late_us = int((now_s - first) * 1e6)
            st = self.stats
            st.late_max_us = max(st.late_max_us, late_us)
            if late_us > 1000:
                st.late_over_1ms_pkts += len(out)
        return out

    @property
    def in_flight(self) -> int:
        return len(self._fifo) + len(self._heap)


def complete_checksum(frame: bytes) -> bytes:
    """Fill in the TCP/UDP checksum of an IPv4 frame the sender left to offload.

    A frame made by a local stack with checksum offload reaches the delay line with only
    the pseudo-header sum in its checksum field (the kernel flags it
    TP_STATUS_CSUMNOTREADY); forwarded as is, the receiver would drop it.  The one's
    complement sum of the whole segment is its value modulo 0xffff.
    """
    if len(frame) < 34 or frame[12:14] != b"\x08\x00":
        return frame
    ihl = (frame[14] & 0x0F) * 4
    proto = frame[23]
    off = {6: 16, 17: 6}.get(proto)
    start = 14 + ihl
    end = 14 + int.from_bytes(frame[16:18], "big")
    if off is None or end > len(frame) or start + off + 2 > end:
        return frame
    seg = frame[start:end]
    if len(seg) % 2:
        seg += b"\x00"
    total = int.from_bytes(seg, "big") % 0xFFFF
    csum = (~total) & 0xFFFF
    if proto == 17 and csum == 0:
        csum = 0xFFFF
    pos = start + off
    return frame[:pos] + csum.to_bytes(2, "big") + frame[pos + 2:]


# --- the process -------------------------------------------------------------------------

def _open(ifname: str) -> socket.socket:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    try:
        sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        sock.bind((ifname, ETH_P_ALL))
    except OSError as exc:
        sock.close()
        raise WanError(f"delay line: cannot open interface {ifname}: {exc.strerror}") from exc
    sock.setblocking(False)
    return sock


def _write_json(path: Path, data: dict) -> None:
    write_json_atomic(path, data, indent=None)


@dataclass(slots=True)
class _Flags:
    stop: bool = False
    dump: bool = False
    reload: bool = False


def run(a_if: str, b_if: str, params: WanParams, *, stats_path: Path | None = None,
        params_path: Path | None = None, realtime: bool = False) -> dict[str, DirectionStats]:
    """Forward between ``a_if`` and ``b_if`` until SIGTERM/SIGINT; return the counters."""
    flags = _Flags()

    def on_signal(signum: int, _frame: object) -> None:
        if signum in (signal.SIGTERM, signal.SIGINT):
            flags.stop = True
        elif signum == signal.SIGUSR1:
            flags.dump = True
        elif signum == signal.SIGHUP:
            flags.reload = True

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGHUP):
        signal.signal(sig, on_signal)
    is_realtime = False
    if realtime:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
            is_realtime = True
        except (OSError, AttributeError):
            pass  # best effort: timing is still good on an idle machine
    rng = random.Random(params.seed)
    socks = {"a": _open(a_if), "b": _open(b_if)}
    # direction "ab": frames read on a, sent on b
    cores = {"ab": DelayLineCore(params, random.Random(rng.random())),
             "ba": DelayLineCore(params, random.Random(rng.random()))}
    routes = [(socks["a"], cores["ab"]), (socks["b"], cores["ba"])]
    out_sock = {"ab": socks["b"], "ba": socks["a"]}
    by_fd = {s.fileno(): c for s, c in routes}
    sock_by_fd = {s.fileno(): s for s, _ in routes}
    read_fds = list(by_fd)
    clock = time.monotonic

    dumps = [0]

    def dump() -> None:
        if stats_path is not None:
            _write_json(stats_path, {"seq": dumps[0], "pid": os.getpid(),
                                     "realtime": is_realtime,
                                     "params": cores["ab"].params.to_dict(),
                                     **{d: dataclasses.asdict(c.stats) for d, c in cores.items()}})
            dumps[0] += 1

    dump()  # also tells the parent we are ready
    try:
        while not flags.stop:
            now = clock()
            nexts = [t for t in (cores["ab"].next_due_s(), cores["ba"].next_due_s())
                     if t is not None]
            wait = min(MAX_WAIT_S, max(0.0, min(nexts) - now)) if nexts else MAX_WAIT_S
            try:
                ready, _, _ = select.select(read_fds, [], [], wait)
            except InterruptedError:
                ready = []
            for fd in ready:
                sock, core = sock_by_fd[fd], by_fd[fd]
                for _ in range(256):
                    try:
                        frame, anc, _, _ = sock.recvmsg(MAX_FRAME, _CMSG_SPACE)
                    except BlockingIOError:
                        break
                    except InterruptedError:
                        continue
                    except OSError as exc:  # the interface went away: nothing to do
                        name = a_if if sock is socks["a"] else b_if
                        raise WanError(f"delay line: interface {name} is gone "
                                       f"({exc.strerror}); stopping") from None
                    for level, kind, data in anc:
                        if (level == SOL_PACKET and kind == PACKET_AUXDATA
                                and _AUX.unpack_from(data)[0] & TP_STATUS_CSUMNOTREADY):
                            frame = complete_checksum(frame)
                    core.arrive(clock(), frame)
            now = clock()
            for direction, core in cores.items():
                for frame in core.due(now):
                    try:
                        out_sock[direction].send(frame)
                        core.stats.tx_pkts += 1
                        core.stats.tx_bytes += len(frame)
                    except OSError as exc:
                        if exc.errno not in (errno.ENOBUFS, errno.EAGAIN, errno.EMSGSIZE,
                                             errno.ENETDOWN, errno.ENXIO):
                            raise
                        core.stats.tx_errors += 1
            if flags.reload and params_path is not None:
                flags.reload = False
                new = WanParams.from_dict(json.loads(params_path.read_text()))
                for core in cores.values():
                    core.set_params(new)
                flags.dump = True
            if flags.dump:
                flags.dump = False
                dump()
    finally:
        dump()
        for s in socks.values():
            s.close()
    return {d: c.stats for d, c in cores.items()}


def _parse_loss(text: str) -> LossModel:
    """'none', 'bernoulli:P' or 'gilbert-elliott:P,R[,H[,K]]' (common.loss's forms)."""
    try:
        return LossModel.parse(text)
    except LossSpecError as e:
        raise argparse.ArgumentTypeError(f"--loss {e}") from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m mininet_topos.delayline",
        description="Forward frames between two interfaces with WAN delay, jitter, rate "
                    "and loss (a netem stand-in).",
        epilog="example: --a wana --b wanb --delay-ms 10 --jitter-ms 1 --rate-mbps 100 "
               "--loss gilbert-elliott:0.003,0.3")
    ap.add_argument("--a", required=True, help="first interface")
    ap.add_argument("--b", required=True, help="second interface")
    ap.add_argument("--params", type=Path, help="JSON params file (re-read on SIGHUP); "
                    "overrides the shaping options")
    ap.add_argument("--delay-ms", type=float, default=10.0)
    ap.add_argument("--jitter-ms", type=float, default=0.0)
    ap.add_argument("--rate-mbps", type=float, default=0.0, help="0: no rate limit")
    ap.add_argument("--loss", type=_parse_loss, default=LossModel.none())
    ap.add_argument("--queue-pkts", type=int, default=1000)
    ap.add_argument("--reorder", action="store_true", help="let jitter reorder frames")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--stats", type=Path, help="JSON counters file (written on SIGUSR1 and exit)")
    ap.add_argument("--realtime", action="store_true", help="run with SCHED_FIFO priority")
    args = ap.parse_args(argv)
    try:
        if args.params:
            params = WanParams.from_dict(json.loads(args.params.read_text()))
        else:
            params = WanParams(delay_ms=args.delay_ms, jitter_ms=args.jitter_ms,
                               rate_mbps=args.rate_mbps, loss=args.loss,
                               queue_pkts=args.queue_pkts, reorder=args.reorder,
                               seed=args.seed).check()
        stats = run(args.a, args.b, params, stats_path=args.stats, params_path=args.params,
                    realtime=args.realtime)
    except (WanError, OSError, ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if not args.stats:
        print(json.dumps({d: dataclasses.asdict(s) for d, s in stats.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
