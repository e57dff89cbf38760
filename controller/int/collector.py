"""The telemetry collector: UDP servers for Telemetry Reports and host-agent batches.

One thread waits on both sockets; when one is readable it drains up to
``max_batch`` datagrams without blocking and decodes them as one batch
(``ReportDecoder`` / ``HostBatchDecoder``), then updates the report sequence
accounting, the hop and flow tables, and calls the listeners with the decoded
batch and the flow-table slot of every sample.  Listeners run on the collector
thread: they must be quick (hand work to a queue for anything slow).

Times: ``arrival_ns`` is CLOCK_MONOTONIC (the clock host records and the rate
engines use); ``wall_offset_ns`` converts it to Unix time for export.
"""
from __future__ import annotations

import logging
import selectors
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, Self

import numpy as np

from common.auth import KeyFile
from common.auth.socket_filter import SourceFilter
from controller.int import native_reports
from controller.int.decode import ReportDecoder
from controller.int.errors import ConfigError, Malformed
from controller.int.host import AgentState, HostBatchDecoder
from controller.int.records import DecodedBatch, as_pool
from controller.int.rxbatch import RxPool
from controller.int.seq import SeqState, SeqTracker
from controller.int.state import FlowSnapshot, FlowTable, HopSnapshot, HopTable
from formats.agent_batch import AGENT_BATCH_UDP_PORT
from formats.auth import AUTH_HEADER_LEN, FrameKind
from formats.telemetry_report import FIXED_LEN, REPORT_UDP_PORT

from .admission import Admission

log = logging.getLogger("controller.int")

Listener = Callable[[DecodedBatch, np.ndarray], None]
#: The stages of the socket path whose CPU time ``CollectorStats.stage_ns`` keeps.
STAGES = ("receive", "admit", "decode", "tables", "listeners")
class HasFileno(Protocol):
    def fileno(self) -> int: ...


Reader = Callable[[], object]
"""Called on the collector thread when its file object is readable; it reads itself."""

_AdmitDecode = Callable[[RxPool, int, int, int], tuple[DecodedBatch, dict[str, int], int]]
"""A socket's admission and decode of a receive round: (pool, datagrams received, arrival
ns, CPU clock after receiving) -> (batch, stage costs, CPU clock after decoding)."""


@dataclass(frozen=True, slots=True)
class _ReaderKey:
    callback: Reader
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)
#: receive slots of the report pool (at most max_batch): a round of 2048 reports pays the
#: round's fixed costs (some thirty numpy and C calls) over twice the reports of 1024,
#: 8 % more reports per CPU second (bench/README.md), for 9 MiB more of pool
_POOL_SLOTS = 2048
#: bytes of a report slot in the pool's dense rows (the rest of a longer report spills,
#: rxbatch.RxPool ``head``): 5-hop reports are 216 bytes, 8 hops under 320; rows of 512
#: instead of ``report_slot_bytes`` cut the receive's CPU by a fifth (bench/README.md)
_REPORT_HEAD = 512


SO_MEMINFO = getattr(socket, "SO_MEMINFO", 55)
_SK_MEMINFO_DROPS = 8   # linux/sock_diag.h: SK_MEMINFO_DROPS


_SK_MEMINFO_RMEM_ALLOC = 0   # bytes waiting in the receive queue


def _meminfo(sock: socket.socket | None) -> tuple[int, ...]:
    if sock is None:
        return (0,) * 9
    try:
        return struct.unpack_from("=9I", sock.getsockopt(socket.SOL_SOCKET, SO_MEMINFO, 4 * 9))
    except (OSError, struct.error):
        return (0,) * 9


def socket_drops(sock: socket.socket | None) -> int:
    """Datagrams the kernel dropped for this socket (receive buffer full, or refused
    by a socket filter), from SO_MEMINFO: one getsockopt, unlike a scan of
    /proc/net/udp, which grows with every socket on the machine."""
    return _meminfo(sock)[_SK_MEMINFO_DROPS]


def socket_queued_bytes(sock: socket.socket | None) -> int:
    """Bytes (kernel accounting, with overhead) waiting in the socket's receive queue."""
    return _meminfo(sock)[_SK_MEMINFO_RMEM_ALLOC]


@dataclass(slots=True, kw_only=True)
class CollectorConfig:
    """Where to listen and how big the tables are.  Port 0 picks a free port."""

    host: str = "127.0.0.1"
    report_port: int = REPORT_UDP_PORT
    agent_port: int | None = AGENT_BATCH_UDP_PORT
    max_batch: int = 2048
    #: Also stop draining once this many bytes are in hand: one host-agent datagram
    #: holds up to 132 records (65 KB), so 2048 of them would be one batch of minutes'
    #: work for the rate engine's latency (every record waits for the whole batch).
    max_batch_bytes: int = 2 << 20
    rcvbuf_bytes: int = 8 << 20
    #: How datagrams are read: ``auto`` (recvmmsg through controller/int/rxbatch.c
    #: when gcc built it, else recvmsg_into), ``recvmmsg`` or ``recvmsg_into``.
    rx_method: str = "auto"
    #: Slot size of the report socket's receive pool: the longest Telemetry Report
    #: datagram taken (longer ones are counted as ``truncated`` and dropped).
    report_slot_bytes: int = 9216
    hop_capacity: int = 2048
    hop_depth: int = 256
    flow_capacity: int = 16384
    flow_depth: int = 32
    flow_ttl_s: float = 10.0
    #: Several collectors (processes) may bind the same ports; the kernel spreads
    #: datagrams by source address and port, i.e. by reporting switch / agent.
    reuse_port: bool = False
    #: Host-agent batches must be ``formats.auth`` frames sealed with these keys.
    keys: KeyFile | None = None
    #: Telemetry Reports only from these (source address, source port) pairs (the
    #: switches' report sources from the topology); None: from anywhere.
    report_sources: frozenset[tuple[str, int]] | None = None
    #: Drop forged datagrams in the kernel (``common.auth.socket_filter``) where
    #: ``report_sources`` / ``keys`` are set: reports from other sources, agent
    #: datagrams that are no host-batch frame (the MAC is checked in Python).  Where
    #: bcc or the privilege is missing the Python checks alone remain (logged).
    kernel_filter: bool = True

    def __post_init__(self) -> None:
        for name in ("report_port", "agent_port"):
            v = getattr(self, name)
            if v is not None and not 0 <= v <= 65535:
                raise ConfigError(f"CollectorConfig.{name}={v} is outside 0..65535")
        if not 1 <= self.max_batch <= 1 << 20:
            raise ConfigError(f"CollectorConfig.max_batch={self.max_batch} is outside 1..2^20")
        if not 1 <= self.max_batch_bytes <= 1 << 30:
            raise ConfigError(
                f"CollectorConfig.max_batch_bytes={self.max_batch_bytes} is outside 1..2^30")
        if self.rx_method not in ("auto", "recvmmsg", "recvmsg_into"):
            raise ConfigError(f"CollectorConfig.rx_method={self.rx_method!r}: auto, recvmmsg "
                              "or recvmsg_into")
        if not 64 <= self.report_slot_bytes <= 65536:
            raise ConfigError(
                f"CollectorConfig.report_slot_bytes={self.report_slot_bytes} is outside 64..65536")
        if not self.flow_ttl_s > 0:
            raise ConfigError(f"CollectorConfig.flow_ttl_s={self.flow_ttl_s} must be > 0")


@dataclass(slots=True, kw_only=True)
class CollectorStats:
    """A consistent copy of the collector's counters."""

    report_datagrams: int
    reports: int
    report_hop_records: int
    agent_datagrams: int
    host_records: int
    host_hop_records: int
    malformed: dict[str, int]
    switches: list[SeqState] = field(default_factory=list)
    agents: list[AgentState] = field(default_factory=list)
    hops: int = 0
    flows: int = 0
    flows_expired: int = 0
    listener_errors: int = 0
    #: datagrams the kernel dropped because the collector fell behind (overload)
    socket_drops: int = 0
    #: datagrams refused before decoding (report source, agent frame checks), by
    #: reason, in the kernel's socket filter or in Python
    rejected: dict[str, int] = field(default_factory=dict)
    #: the part of ``rejected`` the kernel's socket filters dropped
    kernel_rejected: dict[str, int] = field(default_factory=dict)
    #: datagrams longer than a receive slot (dropped, never decoded)
    truncated: int = 0
    #: bytes waiting in the sockets' receive queues now (the collector's only queue
    #: before the tables: a rising figure is a collector falling behind)
    socket_queued_bytes: int = 0
    #: receive rounds (one drain of one socket) and the CPU time of each stage of the
    #: socket path, ns of the collector thread: receive, admit (source and frame
    #: checks), decode, tables (hop/flow tables, sequence accounting), listeners
    rounds: int = 0
    stage_ns: dict[str, int] = field(default_factory=dict)
    #: CLOCK_MONOTONIC ns when the last receive round that took datagrams was done
    #: (tables and listeners included; 0: none yet): when a backlog was emptied,
    #: without polling the counters for it
    last_round_ns: int = 0

    @property
    def reports_lost(self) -> int:
        return sum(s.lost for s in self.switches)


class Collector:
    """Telemetry collector; use as a context manager or call start()/stop()."""

    def __init__(self, config: CollectorConfig | None = None, *,
                 listeners: Sequence[Listener] = ()) -> None:
        self.config = config or CollectorConfig()
        c = self.config
        self.hops = HopTable(capacity=c.hop_capacity, depth=c.hop_depth)
        self.flows = FlowTable(capacity=c.flow_capacity, ttl_ns=int(c.flow_ttl_s * 1e9),
                               depth=c.flow_depth)
        self.report_decoder = ReportDecoder()
        self.host_decoder = HostBatchDecoder()
        self.seq = SeqTracker()
        self.listeners: list[Listener] = list(listeners)
        self.wall_offset_ns = time.time_ns() - time.monotonic_ns()
        #: re-entrant: a receive round holds it from admission through the tables, so
        #: ``stats()`` and the snapshots never see counters ahead of the tables
        self._lock = threading.RLock()
        self._listener_errors = 0
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._sel: selectors.BaseSelector | None = None
        self._report_sock: socket.socket | None = None
        self._agent_sock: socket.socket | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._readers: list[tuple[HasFileno, Reader]] = []
        self._last_expire = 0
        self._filters: list[tuple[str, SourceFilter]] = []
        self._pools: dict[str, RxPool] = {}
        self._rounds = 0
        self._last_round_ns = 0
        self._stage_ns = dict.fromkeys(STAGES, 0)
        self.admission = Admission(keys=self.config.keys,
                                   report_sources=self.config.report_sources)

    # -- lifecycle ------------------------------------------------------------------

    def _bind(self, port: int) -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            try:  # beyond net.core.rmem_max needs CAP_NET_ADMIN
                s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, self.config.rcvbuf_bytes)
            except OSError:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.config.rcvbuf_bytes)
            if self.config.reuse_port:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            s.bind((self.config.host, port))
        except OSError as exc:
            s.close()
            raise ConfigError(
                f"collector: cannot bind UDP {self.config.host}:{port} ({exc.strerror})"
            ) from None
        s.setblocking(False)
        return s

    def start(self) -> Self:
        if self._thread is not None:
            return self
        self._report_sock = self._bind(self.config.report_port)
        try:
            if self.config.agent_port is not None:
                self._agent_sock = self._bind(self.config.agent_port)
        except ConfigError:
            self._report_sock.close()
            self._report_sock = None
            raise
        if self.config.kernel_filter:
            self._attach_filters()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._sel = selectors.DefaultSelector()
        c = self.config
        slots = min(c.max_batch, _POOL_SLOTS)
        # source addresses only where they are checked: the kernel skips them otherwise
        self._pools["report"] = RxPool(self._report_sock, slots=slots,
                                       stride=c.report_slot_bytes, method=c.rx_method,
                                       head=_REPORT_HEAD,
                                       sources=c.report_sources is not None)
        self._sel.register(self._report_sock, selectors.EVENT_READ, self._round_reports)
        if self._agent_sock is not None:
            # an agent datagram is at most 64 KiB; max_batch_bytes bounds a round
            self._pools["agent"] = RxPool(
                self._agent_sock, slots=max(1, min(slots, c.max_batch_bytes // 16384 + 1)),
                stride=65536, method=c.rx_method)
            self._sel.register(self._agent_sock, selectors.EVENT_READ, self._round_agents)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        for fileobj, cb in self._readers:
            self._sel.register(fileobj, selectors.EVENT_READ, _ReaderKey(cb))
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="int-collector", daemon=True)
        self._thread.start()
        log.info("collector listening: reports %s, agents %s", self.report_address,
                 self.agent_address)
        return self

    def _attach_filters(self) -> None:
        """Kernel filters in front of the Python admission checks (same reason names)."""
        c = self.config
        if c.report_sources is not None:
            f = SourceFilter.try_attach([self._report_sock], sources=c.report_sources,
                                        frame_kind=None, what="collector: reports")
            if f is not None:
                self._filters.append(("", f))
        if c.keys is not None and self._agent_sock is not None:
            # shape only: an agent's id (its data-plane address) is not the address it
            # ships from (the test bed's management link), so no source list here
            f = SourceFilter.try_attach([self._agent_sock], frame_kind=FrameKind.HOST_BATCH,
                                        sources=None, what="collector: agent batches")
            if f is not None:
                self._filters.append(("agent_", f))

    def kernel_rejected(self) -> dict[str, int]:
        """Datagrams the kernel filters dropped, by reason (the names of ``rejected``)."""
        out: dict[str, int] = {}
        for prefix, f in self._filters:
            for k, n in f.drops().items():
                out[prefix + k] = out.get(prefix + k, 0) + n
        return out

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        assert self._wake_w is not None
        self._wake_w.send(b"x")
        self._thread.join(timeout=5)
        self._thread = None
        for s in (self._report_sock, self._agent_sock, self._wake_r, self._wake_w):
            if s is not None:
                s.close()
        if self._sel is not None:
            self._sel.close()
        self._report_sock = self._agent_sock = self._wake_r = self._wake_w = None
        self._sel = None
        self._pools.clear()
        for _, f in self._filters:
            f.close()
        self._filters.clear()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add_reader(self, fileobj: HasFileno, callback: Reader) -> None:
        """Wake the collector thread when ``fileobj`` (a socket, or anything with
        ``fileno()``) is readable and call ``callback()`` there, e.g. the HPCC loop's
        confirmations.  Callbacks share the thread with decoding: keep them short.
        Registered before or after ``start``; they stay until ``stop``."""
        self._readers.append((fileobj, callback))
        if self._sel is not None:
            self._sel.register(fileobj, selectors.EVENT_READ, _ReaderKey(callback))
            assert self._wake_w is not None
            self._wake_w.send(b"r")   # the thread may be waiting in select: re-enter it

    @property
    def report_address(self) -> tuple[str, int] | None:
        return self._report_sock.getsockname() if self._report_sock else None

    @property
    def agent_address(self) -> tuple[str, int] | None:
        return self._agent_sock.getsockname() if self._agent_sock else None

    # -- receive loop ---------------------------------------------------------------

    def _round_reports(self) -> None:
        """One receive round of the report socket."""
        self._round("report", self._admit_decode_reports)

    def _round_agents(self) -> None:
        """One receive round of the agent socket (frames checked in a batch)."""
        self._round("agent", self._admit_decode_agents)

    def _round(self, kind: str, admit_decode: _AdmitDecode) -> None:
        """One receive round of a socket: slots -> admission -> decode -> tables ->
        listeners, the stages timed on this thread's CPU clock.  ``admit_decode`` is what
        differs between the sockets: their admission and decoder (see `_AdmitDecode`)."""
        pool = self._pools[kind]
        clock = time.thread_time_ns
        t0 = clock()
        n = pool.receive(self.config.max_batch, self.config.max_batch_bytes)
        t1 = clock()
        if n == 0:
            self._stage_ns["receive"] += t1 - t0
            return
        arrival = time.monotonic_ns()
        with self._lock:
            batch, costs, t_decoded = admit_decode(pool, n, arrival, t1)
            flow_slots = self._tables(batch)
        costs["receive"] = t1 - t0
        self._listeners_timed(batch, flow_slots, t_decoded, costs)

    def _admit_decode_reports(self, pool: RxPool, n: int, arrival: int,
                              t1: int) -> tuple[DecodedBatch, dict[str, int], int]:
        """Reports: source admission, sequence accounting (a "tables" cost), decode."""
        clock = time.thread_time_ns
        buf = pool.rows(n)
        lens = self.admission.report_rows(pool.lens[:n], pool.src_ip[:n], pool.src_port[:n])
        t2 = clock()
        self._account_seq_rows(buf, lens)
        t3 = clock()
        batch = self.report_decoder.decode_pool(buf, lens, arrival)
        t4 = clock()
        return batch, {"admit": t2 - t1, "tables": t3 - t2, "decode": t4 - t3}, t4

    def _admit_decode_agents(self, pool: RxPool, n: int, arrival: int,
                             t1: int) -> tuple[DecodedBatch, dict[str, int], int]:
        """Agent batches: frames verified (when keys are set, behind their header), decode."""
        clock = time.thread_time_ns
        buf = pool.rows(n)
        if self.admission.verifier is not None:
            lens, offset = self.admission.agent_rows(buf, pool.lens[:n]), AUTH_HEADER_LEN
        else:
            lens, offset = pool.lens[:n], 0
        t2 = clock()
        batch = self.host_decoder.decode_pool(buf, lens, arrival, offset)
        t3 = clock()
        return batch, {"admit": t2 - t1, "decode": t3 - t2}, t3

    def _listeners_timed(self, batch: DecodedBatch, flow_slots: np.ndarray, t: int,
                         costs: dict[str, int]) -> None:
        """Listeners of a round (outside the lock), and the round's stage costs."""
        clock = time.thread_time_ns
        t5 = clock()
        self._call_listeners(batch, flow_slots)
        t6 = clock()
        st = self._stage_ns
        for k, v in costs.items():
            st[k] += v
        st["tables"] += t5 - t
        st["listeners"] += t6 - t5
        self._rounds += 1
        self._last_round_ns = time.monotonic_ns()

    def _account_seq_rows(self, buf: np.ndarray, lens: np.ndarray) -> None:
        """``_account_seq`` on a receive pool."""
        if self.report_decoder.native:     # reports.c: one pass over the rows
            g, ok = native_reports.heads(buf, lens)
            if not ok.all():
                g = g[ok]
            if len(g):
                self.seq.update(g[:, 1], (g[:, 0] >> 22) & 0x3F, g[:, 0] & 0x3FFFFF)
            return
        ok = (lens >= 8) & ((buf[:, 0] >> 4) == 2)
        if ok.any():
            # the 8 header bytes of every row first (a strided copy), then the rows
            g = np.ascontiguousarray(buf[:, :8]).view(">u4").astype(np.uint32)
            if not ok.all():
                g = g[ok]
            self.seq.update(g[:, 1], (g[:, 0] >> 22) & 0x3F, g[:, 0] & 0x3FFFFF)

    def _run(self) -> None:
        assert self._sel is not None
        sel = self._sel
        ttl_ns = self.flows.ttl_ns
        while not self._stop.is_set():
            for key, _ in sel.select(timeout=0.5):
                if key.data is None:
                    try:
                        self._wake_r.recv(4096)  # type: ignore[union-attr]
                    except (BlockingIOError, InterruptedError):
                        pass
                    continue
                if isinstance(key.data, _ReaderKey):
                    try:
                        key.data.callback()
                    except Exception:
                        self._listener_errors += 1
                        log.exception("collector: reader %r failed", key.data.callback)
                    continue
                try:
                    key.data()
                except Exception:  # never let one bad batch stop the collector
                    log.exception("collector: a receive round failed")
            now = time.monotonic_ns()
            if now - self._last_expire > ttl_ns // 4:
                self._last_expire = now
                self.expire_flows(now)

    # -- decode + ingest (also usable without sockets) --------------------------------

    def feed_reports(self, datagrams: Sequence[bytes], arrival_ns: int | None = None) -> DecodedBatch:
        """Decode and ingest Telemetry Report datagrams (UDP payloads)."""
        t = time.monotonic_ns() if arrival_ns is None else arrival_ns
        pool = as_pool(datagrams, FIXED_LEN)   # one length: the socket path, one join
        with self._lock:
            if pool is not None:
                self._account_seq_rows(*pool)
                batch = self.report_decoder.decode_pool(pool[0], pool[1], t)
            else:
                self._account_seq(datagrams)
                batch = self.report_decoder.decode(datagrams, t)
        self.ingest(batch)
        return batch

    def _feed_sourced_reports(self, data: list[tuple[bytes, tuple[str, int]]]) -> DecodedBatch:
        """``feed_reports`` of (payload, source) pairs through the source check."""
        with self._lock:
            kept = self.admission.reports(data)
        return self.feed_reports(kept)

    def feed_agent_batches(self, datagrams: Sequence[bytes],
                           arrival_ns: int | None = None) -> DecodedBatch:
        """Decode and ingest host-agent batch datagrams."""
        t = time.monotonic_ns() if arrival_ns is None else arrival_ns
        with self._lock:
            if self.admission.verifier is not None:
                datagrams = self.admission.agent_batches(datagrams)
            batch = self.host_decoder.decode(datagrams, t)
        self.ingest(batch)
        return batch

    def _account_seq(self, datagrams: Sequence[bytes]) -> None:
        """Sequence accounting on every datagram with a v2 group header (even if its
        body is malformed: it still used a sequence number)."""
        pool = as_pool(datagrams, 8)
        if pool is not None:
            self._account_seq_rows(*pool)
            return
        heads = [d[:8] for d in datagrams if len(d) >= 8 and d[0] >> 4 == 2]
        if not heads:
            return
        g = np.frombuffer(b"".join(heads), ">u4").reshape(-1, 2).astype(np.uint32)
        self.seq.update(g[:, 1], (g[:, 0] >> 22) & 0x3F, g[:, 0] & 0x3FFFFF)

    def ingest(self, batch: DecodedBatch) -> np.ndarray:
        """Update hop and flow tables; returns the flow slot of every sample."""
        flow_slots = self._tables(batch)
        self._call_listeners(batch, flow_slots)
        return flow_slots

    def _tables(self, batch: DecodedBatch) -> np.ndarray:
        if len(batch.samples) == 0:
            return np.zeros(0, np.int64)
        with self._lock:
            a = batch.samples["arrival_ns"]
            if a[0] == a[-1] and (a == a[0]).all():   # a receive round: one arrival time
                arrival = np.full(len(batch.hops), a[0], np.int64)
            else:
                arrival = a[batch.hops["sample"]]
            hop_slots = self.hops.update(batch.hops, arrival)
            return self.flows.update(batch.samples, batch.hops, hop_slots)

    def _call_listeners(self, batch: DecodedBatch, flow_slots: np.ndarray) -> None:
        if len(batch.samples) == 0:
            return
        for fn in self.listeners:
            try:
                fn(batch, flow_slots)
            except Exception:
                self._listener_errors += 1
                log.exception("collector: listener %r failed", fn)

    def expire_flows(self, now_ns: int | None = None) -> int:
        """Age out idle flows (the receive thread does this every ttl/4); returns how many."""
        with self._lock:
            return self.flows.expire(time.monotonic_ns() if now_ns is None else now_ns)

    # -- reading ----------------------------------------------------------------------

    def hop_snapshot(self) -> HopSnapshot:
        with self._lock:
            return self.hops.snapshot()

    def flow_snapshot(self) -> FlowSnapshot:
        with self._lock:
            return self.flows.snapshot()

    @staticmethod
    def malformed_reasons() -> list[str]:
        """Every reason a malformed counter can have (the exporter's columns)."""
        return malformed_reasons()

    def stats(self) -> CollectorStats:
        # the kernel's counters are read before taking the lock: ingest must not wait
        drops = socket_drops(self._report_sock) + socket_drops(self._agent_sock)
        queued = socket_queued_bytes(self._report_sock) + socket_queued_bytes(self._agent_sock)
        kernel = self.kernel_rejected()
        # the kernel's sk_drops also counts what a socket filter dropped: not overload
        drops = max(0, drops - sum(kernel.values()))
        with self._lock:
            mal: Counter = Counter()
            for k, v in self.report_decoder.stats.malformed.items():
                mal[k.value] += v
            for k, v in self.host_decoder.stats.malformed.items():
                mal["agent_" + k.value] += v
            rs, hs = self.report_decoder.stats, self.host_decoder.stats
            return CollectorStats(
                report_datagrams=rs.datagrams,
                reports=rs.reports,
                report_hop_records=rs.hop_records,
                agent_datagrams=hs.datagrams,
                host_records=hs.records,
                host_hop_records=hs.hop_records,
                malformed=dict(mal),
                switches=[SeqState(**{f: getattr(s, f) for f in SeqState.__slots__})
                          for s in self.seq.switches.values()],
                agents=[AgentState(**{f: getattr(a, f) for f in AgentState.__slots__})
                        for a in hs.agents.values()],
                hops=len(self.hops),
                flows=len(self.flows),
                flows_expired=self.flows.expired,
                listener_errors=self._listener_errors,
                socket_drops=drops,
                rejected=_sum_counts(self.admission.rejected(), kernel),
                kernel_rejected=kernel,
                truncated=sum(p.truncated for p in self._pools.values()),
                socket_queued_bytes=queued,
                rounds=self._rounds,
                stage_ns=dict(self._stage_ns),
                last_round_ns=self._last_round_ns,
            )


def _sum_counts(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    out = dict(a)
    for k, n in b.items():
        out[k] = out.get(k, 0) + n
    return out


def malformed_reasons() -> list[str]:
    """Every reason name a malformed counter can have."""
    return [m.value for m in Malformed]


__all__ = ["Collector", "CollectorConfig", "CollectorStats", "Listener", "malformed_reasons"]
