"""N collector processes behind one report port and one agent port, their tables merged.

Each process runs a ``Collector`` whose sockets join one SO_REUSEPORT group per port.
Telemetry Reports are steered by inner flow (``controller.int.steer``), host-agent
batches by agent (the kernel's default choice by source), so every flow's state --
its flow-table row, its sequence of samples -- lives in exactly one process and
the processes never talk while ingesting.  What is global is merged on read:

* flows: the union of the processes' flow tables (disjoint by construction);
* hops (switch, egress port): seen by flows of every process, so the merged row is
  the one updated last (queue, rates, latency) with the samples summed;
* counters: summed; per switch / per agent sequence states listed from every process.

``CollectorShards`` offers the read side of ``Collector`` (``stats``,
``flow_snapshot``, ``hop_snapshot``) over pipes to the worker processes.  Processes
are spawned (no fork of a threaded parent); worker i binds after worker i-1, so its
socket is index i of the group, which is the index the steering program returns.

Listeners (the HPCC loop, the per-flow loss map) run in the parent, as they would on
one collector's thread: each worker sends every decoded round (samples, hop records,
flow slots) through a pipe, and one dispatch thread calls the listeners with the
worker's flow slots moved to ``worker * flow_capacity + slot``, the slot
``flow_snapshot()`` gives the merged flow.  So listener state sized
``flow_capacity`` (``CollectorShards.flow_capacity``: n times the config's) is indexed
like one big collector's.  A worker whose pipe is full blocks in its round, its
socket fills and the kernel counts the drops (``socket_drops``): the listeners'
speed bounds the whole, as on one collector.  Without listeners nothing is sent.
"""
from __future__ import annotations

import dataclasses
import logging
import multiprocessing as mp
import os
import pickle
import selectors
import signal
import socket
import threading
import time
from collections import Counter
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any, Self

import numpy as np

from controller.int.collector import (
    Collector,
    CollectorConfig,
    CollectorStats,
    HasFileno,
    Listener,
    Reader,
    malformed_reasons,
)
from controller.int.errors import ConfigError
from controller.int.records import DecodedBatch
from controller.int.seq import SeqState
from controller.int.state import FlowSnapshot, HopSnapshot
from controller.int.steer import attach_flow_steering
from formats.telemetry_report import SEQ_MOD

__all__ = ["CollectorShards", "merge_flows", "merge_hops", "merge_seq", "merge_stats"]

log = logging.getLogger("controller.int")


def _forwarder(data: Connection) -> Listener:
    """A worker's listener: the round to the parent (its dispatch thread)."""
    def forward(batch: DecodedBatch, flow_slots: np.ndarray) -> None:
        data.send((batch.samples, batch.hops, flow_slots))
    return forward


def _worker(index: int, n: int, config: CollectorConfig, conn: Connection,
            data: Connection | None, cpu: int | None = None) -> None:
    """One collector process: serve reads until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the parent stops us
    try:
        if cpu is not None:   # threads started later inherit it; numpy's pool is there
            for tid in os.listdir("/proc/self/task"):
                os.sched_setaffinity(int(tid), {cpu})
        col = Collector(config, listeners=[_forwarder(data)] if data is not None else ())
        col.start()
        if index == 0:
            attach_flow_steering(col._report_sock, n)  # type: ignore[arg-type]
    except (ConfigError, OSError) as exc:
        conn.send(("error", str(exc)))
        return
    conn.send(("ready", (col.report_address, col.agent_address)))
    try:
        while True:
            try:
                what = conn.recv()
            except EOFError:
                break
            if what == "stop":
                break
            reply: Any = {"stats": col.stats, "flows": col.flow_snapshot,
                          "hops": col.hop_snapshot}[what]()
            conn.send(reply)
    finally:
        col.stop()
        if data is not None:
            data.close()


class CollectorShards:
    """``n`` collector processes on the ports of ``config`` (see the module docstring);
    ``listeners`` and ``add_reader`` as on ``Collector``, on the parent's dispatch
    thread.  ``cpus``: worker i runs on core ``cpus[i % len(cpus)]`` only (pinned, as
    the receive queues of a NIC are pinned to cores: a worker keeps its caches and
    frees on its core what the kernel received there); None: where the scheduler
    puts it."""

    def __init__(self, config: CollectorConfig, n: int, *,
                 listeners: Sequence[Listener] = (), cpus: Sequence[int] | None = None) -> None:
        if not 1 <= n <= 256:
            raise ConfigError(f"collectors={n}: expected 1..256")
        if cpus is not None:
            allowed = os.sched_getaffinity(0)
            if not cpus or not set(cpus) <= allowed:
                raise ConfigError(f"cpus={list(cpus)}: expected cores among {sorted(allowed)}")
        self.cpus = list(cpus) if cpus is not None else None
        self.config = dataclasses.replace(config, reuse_port=True)
        self.n = n
        self.listeners: list[Listener] = list(listeners)
        #: slots of the merged flows (and of the listeners' flow slots): 0 .. this
        self.flow_capacity = n * config.flow_capacity
        self.wall_offset_ns = time.time_ns() - time.monotonic_ns()
        self.procs: list[mp.process.BaseProcess] = []
        self._conns: list[Connection] = []
        self._data: list[Connection] = []
        self._readers: list[tuple[HasFileno, Reader]] = []
        self._listener_errors = 0
        self._listener_ns = 0
        self._sel: selectors.BaseSelector | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.report_address: tuple[str, int] | None = None
        self.agent_address: tuple[str, int] | None = None

    def start(self) -> Self:
        ctx = mp.get_context("spawn")
        cfg = self.config
        try:
            for i in range(self.n):
                parent, child = ctx.Pipe()
                data_r, data_w = ctx.Pipe(duplex=False) if self.listeners else (None, None)
                cpu = self.cpus[i % len(self.cpus)] if self.cpus else None
                p = ctx.Process(target=_worker, args=(i, self.n, cfg, child, data_w, cpu),
                                name=f"int-collector-{i}", daemon=True)
                p.start()
                child.close()
                if data_w is not None and data_r is not None:
                    data_w.close()
                    self._data.append(data_r)
                self.procs.append(p)
                self._conns.append(parent)
                try:
                    if not parent.poll(60):
                        raise ConfigError(f"collector process {i} did not start within 60 s")
                    kind, value = parent.recv()
                except EOFError:
                    raise ConfigError(f"collector process {i} exited at start (exit code "
                                      f"{p.exitcode})") from None
                if kind == "error":
                    raise ConfigError(f"collector process {i}: {value}")
                if i == 0:   # port 0: the others join the ports the first one got
                    self.report_address, self.agent_address = value
                    cfg = dataclasses.replace(
                        cfg, report_port=value[0][1],
                        agent_port=value[1][1] if value[1] is not None else None)
            self._start_dispatch()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_dispatch(self) -> None:
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        sel = self._sel = selectors.DefaultSelector()
        sel.register(self._wake_r, selectors.EVENT_READ, None)
        for i, d in enumerate(self._data):
            sel.register(d, selectors.EVENT_READ, i)
        for fileobj, cb in self._readers:
            sel.register(fileobj, selectors.EVENT_READ, cb)
        self._stop.clear()
        self._thread = threading.Thread(target=self._dispatch, name="int-shards-dispatch",
                                        daemon=True)
        self._thread.start()

    def _dispatch(self) -> None:
        """The listeners' thread: rounds from the workers, and the readers."""
        assert self._sel is not None
        sel = self._sel
        while not self._stop.is_set() or self._pending():
            for key, _ in sel.select(timeout=0.5 if not self._stop.is_set() else 0):
                if key.data is None:
                    try:
                        self._wake_r.recv(4096)  # type: ignore[union-attr]
                    except (BlockingIOError, InterruptedError):
                        pass
                elif isinstance(key.data, int):
                    self._round(key.data, key.fileobj)  # type: ignore[arg-type]
                else:
                    try:
                        key.data()
                    except Exception:
                        self._listener_errors += 1
                        log.exception("collector shards: reader %r failed", key.data)

    def _pending(self) -> bool:
        """After stop: a worker's rounds still in its pipe (drained before exiting)."""
        return any(d.poll(0) for d in self._data if not d.closed)

    def _round(self, index: int, conn: Connection) -> None:
        try:
            samples, hops, slots = conn.recv()
        except (EOFError, OSError, pickle.UnpicklingError) as exc:
            # the worker is gone (EOF), or died in the middle of a message
            if not isinstance(exc, EOFError):
                log.warning("collector shards: worker %d's pipe broke (%s)", index, exc)
            assert self._sel is not None
            self._sel.unregister(conn)
            conn.close()
            return
        t0 = time.thread_time_ns()
        slots = np.where(slots >= 0, slots + index * self.config.flow_capacity, slots)
        batch = DecodedBatch(samples=samples, hops=hops)
        for fn in self.listeners:
            try:
                fn(batch, slots)
            except Exception:
                self._listener_errors += 1
                log.exception("collector shards: listener %r failed", fn)
        self._listener_ns += time.thread_time_ns() - t0

    def add_reader(self, fileobj: HasFileno, callback: Reader) -> None:
        """As ``Collector.add_reader``: ``callback`` on the dispatch thread (the
        listeners' thread) when ``fileobj`` is readable."""
        self._readers.append((fileobj, callback))
        if self._sel is not None:
            self._sel.register(fileobj, selectors.EVENT_READ, callback)
            assert self._wake_w is not None
            self._wake_w.send(b"r")

    def stop(self) -> None:
        for c in self._conns:
            try:
                c.send("stop")
            except (OSError, ValueError):
                pass
        for p in self.procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()
        if self._thread is not None:   # the workers are gone: drain their pipes, stop
            self._stop.set()
            assert self._wake_w is not None
            self._wake_w.send(b"x")
            self._thread.join(timeout=10)
            self._thread = None
        for c in self._conns + self._data:
            c.close()
        for s in (self._wake_r, self._wake_w):
            if s is not None:
                s.close()
        if self._sel is not None:
            self._sel.close()
        self._sel = self._wake_r = self._wake_w = None
        self.procs.clear()
        self._conns.clear()
        self._data.clear()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs if p.pid is not None]

    def hold(self) -> None:
        """Stop the worker processes (SIGSTOP) until ``release()``: what is sent
        meanwhile waits in their sockets, each in the queue of the process the steering
        program chose, as a burst would.  For a backlog's tests and benchmarks (the
        sender takes no core from the workers while they drain it); reads (``stats``)
        block until released."""
        for pid in self.pids:
            os.kill(pid, signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while not all(_stopped(pid) for pid in self.pids):   # kill() does not wait
            if time.monotonic() > deadline:
                raise ConfigError("collector processes did not stop within 10 s")
            time.sleep(0.001)

    def release(self) -> int:
        """Continue the held workers (SIGCONT), all at once; the CLOCK_MONOTONIC ns
        just before the first is continued (``CollectorStats.last_round_ns`` minus this
        is how long they took to drain what was queued)."""
        t0 = time.monotonic_ns()
        for pid in self.pids:
            os.kill(pid, signal.SIGCONT)
        return t0

    def _ask(self, what: str) -> list[Any]:
        for c in self._conns:
            c.send(what)
        return [c.recv() for c in self._conns]

    def shard_stats(self) -> list[CollectorStats]:
        return self._ask("stats")

    def stats(self) -> CollectorStats:
        """The workers' counters merged; the listeners' errors and CPU are the parent's
        (its dispatch thread runs them)."""
        out = merge_stats(self.shard_stats())
        if self.listeners:
            out.listener_errors += self._listener_errors
            out.stage_ns["listeners"] = out.stage_ns.get("listeners", 0) + self._listener_ns
        return out

    @staticmethod
    def malformed_reasons() -> list[str]:
        return malformed_reasons()

    def flow_snapshot(self) -> FlowSnapshot:
        """Merged flows; ``slot`` is ``worker * config.flow_capacity + slot`` (the
        listeners' slots), ``path_slot`` points into ``hop_snapshot()``'s rows."""
        flows = self._ask("flows")
        return merge_flows(flows, merge_hops(self._ask("hops")),
                           stride=self.config.flow_capacity)

    def hop_snapshot(self) -> HopSnapshot:
        return merge_hops(self._ask("hops"))

    def cpu_seconds(self) -> float:
        """User + system CPU of the worker processes so far."""
        total = 0.0
        for pid in self.pids:
            with open(f"/proc/{pid}/stat") as fh:
                f = fh.read().rsplit(")", 1)[1].split()
            total += (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
        return total


def _stopped(pid: int) -> bool:
    """Every thread of process ``pid`` is stopped (state T in /proc)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return True
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] not in ("T", "t", "Z", "X"):
                    return False
        except FileNotFoundError:
            pass
    return True


def _concat(parts: list[Any], cls: type) -> Any:
    return cls(**{f.name: np.concatenate([getattr(p, f.name) for p in parts])
                  for f in dataclasses.fields(cls)})


def merge_flows(parts: list[FlowSnapshot], hops: HopSnapshot, *,
                stride: int = 1 << 32) -> FlowSnapshot:
    """The union of the processes' flows; ``slot`` becomes ``process * stride + slot``
    (``stride``: at least the processes' flow capacity) and ``path_slot`` the row of
    each hop in ``hops`` (a ``merge_hops`` result)."""
    out: FlowSnapshot = _concat([dataclasses.replace(p, slot=p.slot.astype(np.int64) + i * stride)
                                 for i, p in enumerate(parts)], FlowSnapshot)
    hk = (hops.node_id.astype(np.uint64) << np.uint64(16)) | hops.egress_port
    fk = (out.path_node.astype(np.uint64) << np.uint64(16)) | out.path_port
    pos = np.searchsorted(hk, fk).clip(0, max(len(hk) - 1, 0))
    found = (out.path_slot >= 0) & (len(hk) > 0)
    if len(hk):
        found &= hk[pos] == fk
    out.path_slot = np.where(found, hops.slot[pos] if len(hk) else -1, -1)
    return out


def merge_hops(parts: list[HopSnapshot]) -> HopSnapshot:
    """One row per (switch, egress port): the values of the process that updated it
    last, samples summed over the processes."""
    allh = _concat(parts, HopSnapshot)
    if not len(allh.node_id):
        return allh  # type: ignore[no-any-return]
    key = (allh.node_id.astype(np.uint64) << np.uint64(16)) | allh.egress_port
    order = np.lexsort((allh.last_update_ns, key))
    ks = key[order]
    last = np.append(ks[1:] != ks[:-1], True)
    group = np.cumsum(np.concatenate(([0], (ks[1:] != ks[:-1]).astype(np.int64))))
    samples = np.bincount(group, weights=allh.samples[order].astype(np.float64))
    pick = order[last]
    out = HopSnapshot(**{f.name: getattr(allh, f.name)[pick]
                         for f in dataclasses.fields(HopSnapshot)})
    out.samples = samples.astype(np.uint64)
    out.slot = np.arange(len(pick), dtype=np.int64)   # rows sorted by (node, port)
    return out


def merge_seq(states: list[SeqState]) -> list[SeqState]:
    """One sequence state per switch from the processes' partial ones.

    Flow steering spreads a switch's reports over the processes, so each sees gaps
    that the others filled.  Each process unwraps from the first sequence number it
    saw; aligned to one reference (differences under 2^21) the union spans
    ``min(first) .. max(highest)``, and every report was received by one process."""
    by: dict[tuple[int, int], list[SeqState]] = {}
    for st in states:
        by.setdefault((st.node_id, st.hw_id), []).append(st)
    out = []
    for (node, hw), group in sorted(by.items()):
        ref = group[0].first
        firsts, highs = [], []
        for st in group:
            d = (st.first - ref) % SEQ_MOD
            d = d - SEQ_MOD if d >= SEQ_MOD // 2 else d
            firsts.append(ref + d)
            highs.append(ref + d + st.highest - st.first)
        out.append(SeqState(node_id=node, hw_id=hw, first=min(firsts), highest=max(highs),
                            last=max(highs), received=sum(s.received for s in group),
                            late=sum(s.late for s in group),
                            duplicates=sum(s.duplicates for s in group)))
    return out


def merge_stats(parts: list[CollectorStats]) -> CollectorStats:
    """Counters summed, per-switch sequence states merged (``merge_seq``), per-agent
    states of every process listed (an agent's batches go to one process), the last
    round's time the latest of the processes'."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(CollectorStats):
        vals = [getattr(p, f.name) for p in parts]
        if isinstance(vals[0], int):
            out[f.name] = sum(vals)
        elif isinstance(vals[0], dict):
            c: Counter = Counter()
            for v in vals:
                c.update(v)
            out[f.name] = dict(c)
        else:
            out[f.name] = [x for v in vals for x in v]
    out["switches"] = merge_seq(out["switches"])
    out["last_round_ns"] = max(p.last_round_ns for p in parts)   # a time, not a count
    return CollectorStats(**out)
