"""The switch process's `Device`: real ports, a traffic manager, the CPU port.

Implements the contract of `softswitch.p4runtime.device.Device` so the P4Runtime
server drives it exactly like the in-process `LocalDevice`:

* receive thread: epoll over the ports' sockets; each frame runs parser and
  ingress (under `lock`), its egress jobs go to the traffic manager;
* traffic-manager thread: at each departure runs egress with the queue metadata
  (`QueueInfo` -> enq_qdepth, deq_qdepth, deq_timedelta, enq_timestamp) and
  transmits; a frame for the CPU port becomes a PacketIn for the listeners;
* `packet_out` runs ingress on the CPU port in the caller's thread.

Two shortcuts keep Python work per packet small without changing what the program
sees: a packet for an idle unpaced queue departs at once in the receive thread
(zero depth and wait, as the queue would report), and when some port is paced the
receive thread also runs departures that are due, so a flood on ingress cannot
starve the scheduler thread of the interpreter. Either way one departure per port
is in egress at a time, so each port's frames stay in order.

Replacing the pipeline drops what is queued: queued packets hold the old program's
headers. A packet that makes the pipeline raise is counted and logged, never fatal.
"""
from __future__ import annotations

import logging
import os
import select
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from softswitch.p4runtime.device import (
    DeviceListener,
    ListenerSet,
    Pipeline,
    build_packet_out,
    drain_digests,
    split_packet_in,
)
from softswitch.p4runtime.errors import DeviceError
from softswitch.switchd.errors import OptionError
from softswitch.switchd.ports import RX_BUFFER, Port, PortCounters
from softswitch.switchd.tm import DEFAULT_DEPTH_PKTS, TrafficManager
from softswitch.v1model.jobs import EgressJob, IngressJob, QueueInfo
from softswitch.v1model.ports import DEFAULT_CPU_PORT, DROP_PORT

LOG = logging.getLogger("softswitch.switchd")
RX_BATCH = 64  # frames read from one port before looking at the others
IDLE_QUEUE = QueueInfo()  # what an empty unpaced queue reports: no depth, no wait


@dataclass(slots=True, kw_only=True)
class DeviceCounters:
    """Whole-switch counters (per-port ones live on the ports and queues)."""

    no_pipeline: int = 0       # frames received before any program was installed
    pipeline_errors: int = 0   # frames on which the pipeline raised (bug or bad program)
    no_such_port: int = 0      # frames sent to a port number with no interface
    stale: int = 0             # queued frames dropped because the pipeline was replaced
    packet_ins: int = 0
    rx_errors: int = 0         # socket errors the receive thread survived


class SwitchDevice:
    """A P4 switch on Linux interfaces; see the module docstring."""

    def __init__(self, ports: Mapping[int, Port], *, device_id: int = 0,
                 cpu_port: int = DEFAULT_CPU_PORT, name: str = "softswitch",
                 default_depth_pkts: int = DEFAULT_DEPTH_PKTS) -> None:
        if not 0 < cpu_port < DROP_PORT:
            raise OptionError(f"{name}: cpu port {cpu_port} outside 1..{DROP_PORT - 1}")
        if cpu_port in ports:
            raise OptionError(f"{name}: cpu port {cpu_port} is also interface "
                              f"{ports[cpu_port].ifname}; pick another --cpu-port")
        self.device_id = device_id
        self.cpu_port = cpu_port
        self.name = name
        self.lock = threading.RLock()
        self.ports: dict[int, Port] = dict(ports)
        self.counters = DeviceCounters()
        self._pipeline: Pipeline | None = None
        self._generation = 0
        self._listeners = ListenerSet()
        self._qinfo = QueueInfo()
        self._t0 = time.monotonic_ns()
        self.tm = TrafficManager(self._depart, clock_us=self.clock_us,
                                 default_depth_pkts=default_depth_pkts)
        self._stop = threading.Event()
        self._rx_thread: threading.Thread | None = None
        self._wake_r, self._wake_w = _pipe()

    def clock_us(self) -> int:
        """The switch's µs clock (timestamps in standard_metadata)."""
        return (time.monotonic_ns() - self._t0) // 1000

    # ------------------------------------------------------------ Device API
    @property
    def pipeline(self) -> Pipeline | None:
        return self._pipeline

    def build_switch(self, path: Path, *, name: str) -> Any:
        from softswitch.targets.python.switch import Switch
        return Switch.from_file(path, name=name)

    def set_pipeline(self, pipeline: Pipeline, *, reconcile: bool = False) -> None:
        from softswitch.p4runtime.reconcile import carry_state
        v1 = pipeline.switch.v1
        v1.clock_us = self.clock_us
        v1.queue_model = self._queue_model
        v1.name = self.name
        with self.lock:
            if reconcile and self._pipeline is not None:
                carry_state(self._pipeline.switch, pipeline.switch)
            self._pipeline = pipeline
            self._generation += 1
            self.counters.stale += self.tm.clear()
        LOG.info("%s: pipeline installed (%d tables)", self.name, len(pipeline.switch.program.tables))

    def packet_out(self, payload: bytes, metadata: Mapping[str, int]) -> None:
        with self.lock:
            pipe = self._pipeline
            if pipe is None:
                raise DeviceError(f"{self.name}: no pipeline installed; packet-out refused")
            frame = build_packet_out(pipe, payload, metadata)
            self._ingress(pipe, self.cpu_port, frame)

    def add_listener(self, listener: DeviceListener) -> None:
        self._listeners.add(listener)

    def remove_listener(self, listener: DeviceListener) -> None:
        self._listeners.remove(listener)

    # ------------------------------------------------------------ data path
    def _queue_model(self, job: EgressJob) -> QueueInfo:
        return self._qinfo

    def _ingress(self, pipe: Pipeline, port: int, data: bytes) -> None:
        """Parser + ingress for one frame (lock held); egress jobs go to the TM."""
        v1 = pipe.switch.v1
        v1.stats.packets_in += 1
        gen = self._generation
        jobs = deque((IngressJob(port=port, data=data),))
        try:
            while jobs:
                ing, eg = v1.run_ingress(jobs.popleft())
                jobs.extend(ing)
                for job in eg:
                    self._enqueue(gen, job)
        except Exception as exc:  # noqa: BLE001 - a packet must never stop the switch
            self._pipeline_error(port, exc)
        self._digests(pipe)

    def _enqueue(self, gen: int, job: EgressJob) -> None:
        port = job.egress_port
        if self.tm.claim_bypass(port):   # unpaced and idle: egress now, in this thread
            try:
                self._depart((gen, job), IDLE_QUEUE)
            finally:
                self.tm.release(port)
            return
        self.tm.enqueue(port, (gen, job), job.length)

    def _pipeline_error(self, port: int, exc: BaseException) -> None:
        self.counters.pipeline_errors += 1
        if self.counters.pipeline_errors <= 10:
            LOG.error("%s: packet from port %d: pipeline raised %s: %s", self.name, port,
                      type(exc).__name__, exc)

    def _digests(self, pipe: Pipeline) -> None:
        for name, values in drain_digests(pipe.switch):
            self._listeners.digest(name, values)

    def _depart(self, item: tuple[int, EgressJob], info: QueueInfo) -> int | None:
        """TM thread: egress for one dequeued packet, then transmit or packet-in.

        Returns the bytes sent on the packet's egress port (what its queue's pacing
        is charged), None when nothing ran (stale pipeline, egress error)."""
        gen, job = item
        with self.lock:
            pipe = self._pipeline
            if pipe is None or gen != self._generation:
                self.counters.stale += 1
                return None
            v1 = pipe.switch.v1
            self._qinfo = info
            try:
                ing, eg, outs = v1.run_egress(job)
                for e in eg:
                    self._enqueue(gen, e)
                for i in ing:   # recirculation: back through ingress
                    self._reingress(pipe, gen, i)
            except Exception as exc:  # noqa: BLE001
                self._pipeline_error(job.egress_port, exc)
                return None
            self._digests(pipe)
        sent = 0
        for out in outs:
            self._emit(pipe, out.port, out.data)
            if out.port == job.egress_port:
                sent += len(out.data)
        return sent

    def _reingress(self, pipe: Pipeline, gen: int, job: IngressJob) -> None:
        jobs = deque((job,))
        while jobs:
            ing, eg = pipe.switch.v1.run_ingress(jobs.popleft())
            jobs.extend(ing)
            for e in eg:
                self._enqueue(gen, e)

    def _emit(self, pipe: Pipeline, port: int, data: bytes) -> None:
        if port == self.cpu_port:
            try:
                pkt = split_packet_in(pipe, data)
            except DeviceError:
                return  # shorter than the packet_in header: dropped, as BMv2 does
            self.counters.packet_ins += 1
            self._listeners.packet_in(pkt)
            return
        p = self.ports.get(port)
        if p is None:
            self.counters.no_such_port += 1
            return
        p.transmit(data)

    def _rx_loop(self) -> None:
        ep = select.epoll()
        by_fd = {}
        for p in self.ports.values():
            ep.register(p.rx.fileno(), select.EPOLLIN)
            by_fd[p.rx.fileno()] = p
        ep.register(self._wake_r, select.EPOLLIN)
        buf = bytearray(RX_BUFFER)
        view = memoryview(buf)
        try:
            while not self._stop.is_set():
                for fd, _ in ep.poll(1.0):
                    port = by_fd.get(fd)
                    if port is None:
                        continue
                    try:
                        self._drain(port, buf, view)
                    except Exception:  # the receive thread must survive
                        self.counters.rx_errors += 1
                        if self.counters.rx_errors <= 10:
                            LOG.exception("%s: port %d: receive failed", self.name, port.number)
        finally:
            ep.close()

    def _drain(self, port: Port, buf: bytearray, view: memoryview) -> None:
        taken = 0
        while taken < RX_BATCH or port.pending:   # segments never wait for epoll
            data = port.receive(buf, view)
            if data is None:
                return
            self._receive(port.number, data)
            if self.tm.paced:
                self.tm.depart_due()
            taken += 1

    def _receive(self, port: int, data: bytes) -> None:
        with self.lock:
            pipe = self._pipeline
            if pipe is None:
                self.counters.no_pipeline += 1
                return
            self._ingress(pipe, port, data)

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self.tm.start()
        self._rx_thread = threading.Thread(target=self._rx_loop, name="switchd-rx", daemon=True)
        self._rx_thread.start()

    def stop(self) -> None:
        """Stop both threads, close sockets, flush captures. Safe to call twice."""
        self._stop.set()
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass
        if self._rx_thread is not None:
            self._rx_thread.join(timeout=5)
        self.tm.stop()
        for p in self.ports.values():
            p.close()
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass
        self._wake_r = self._wake_w = -1

    # ------------------------------------------------------------ statistics
    def snapshot(self) -> dict[str, Any]:
        """Per-port and whole-switch statistics as plain data (JSON-ready)."""
        queues = self.tm.queue_stats()
        idle = {"queue_depth": 0, "queue_high_water": 0, "tail_drops": 0,
                "queue_rate_bps": self.tm.default_rate_bps, "queue_size_pkts": self.tm.default_depth_pkts}
        ports = []
        for n in sorted(set(self.ports) | set(queues)):
            p = self.ports.get(n)
            if p is not None:
                p.read_socket_drops()
            pc = p.counters if p is not None else PortCounters()
            ifname = p.ifname if p is not None else ("cpu" if n == self.cpu_port else "")
            ports.append({"port": n, "ifname": ifname, **asdict(pc), **queues.get(n, idle)})
        pipe = self._pipeline
        v1s = pipe.switch.v1.stats if pipe is not None else None
        return {
            "name": self.name, "device_id": self.device_id, "cpu_port": self.cpu_port,
            "uptime_s": round((time.monotonic_ns() - self._t0) / 1e9, 3),
            "pipeline": pipe is not None,
            "packets_in": v1s.packets_in if v1s else 0, "packets_out": v1s.packets_out if v1s else 0,
            "pipeline_drops": v1s.drops if v1s else 0, "tm_errors": self.tm.errors,
            **asdict(self.counters), "ports": ports,
        }


def _pipe() -> tuple[int, int]:
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    return r, w
