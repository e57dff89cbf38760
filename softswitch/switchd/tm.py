"""Traffic manager: one FIFO per egress port, paced at the port's rate.

BMv2 simple_switch rules kept here:
* a queue holds at most `depth_pkts` packets (default 64); an arrival at a full
  queue is tail-dropped and counted;
* ``enq_qdepth`` is the number of packets already queued when a packet arrives,
  ``deq_qdepth`` the number left behind when it leaves, ``deq_timedelta`` the µs it
  waited, ``enq_timestamp`` the µs clock at arrival (all on the switch's clock).

Pacing: a queue with a rate lets its head leave no earlier than the time the
previous departure finished serialising (length * 8 / rate). A late scheduler
catches up back to back, so the long-run rate is exact even when Python wakes
late. A queue with rate 0 is unpaced (packets leave as fast as egress runs).
The length that counts is what the port sends: egress may add bytes (an INT hop
record, a link sequence header) or drop the packet, so when `depart` returns the
bytes it sent, the serialisation time is corrected to them.  Pacing the queued
(ingress) length let a port send ~5 % more than its rate with INT on, and INT's
tx bytes then read above the line rate it reports.

Departure time: on a paced port a packet leaves when the schedule says (the previous
departure's end), not when Python gets round to it, and that is the time the queue
reports (``departure_us`` -> ``egress_global_timestamp``, and ``deq_timedelta`` the wait
until then), as the eBPF target does.  A late wake-up or a catch-up burst otherwise
shifts egress timestamps by milliseconds while the bytes stay on schedule: INT's
``tx bytes / (egress_ts - egress_ts')`` then read up to several times the line rate
for one packet and half of it for the next, and HPCC takes that jitter for load.

Pause: `pause(port)` stops a port's queue as a PFC PAUSE from its peer would (802.1Qbb):
it keeps taking packets (tail-dropping at its depth) and sends none until
`resume(port)`; the head then leaves at once and the rest at the rate, and the times
reported count the pause as waiting.  Tests use it to build a queue of a known size
whatever the host's speed: a burst queued behind a pause does not depend on the
pipeline taking its frames in faster than the port sends them.

The TM knows nothing of P4: it stores opaque items with their length and calls
`depart(item, QueueInfo)` from its own thread.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from softswitch.switchd.errors import OptionError
from softswitch.v1model.jobs import QueueInfo

LOG = logging.getLogger("softswitch.switchd")
DEFAULT_DEPTH_PKTS = 64
MAX_DEPTH_PKTS = 1 << 19        # enq_qdepth is bit<19>
ALL_PORTS_LABEL = "every port"


@dataclass(slots=True, kw_only=True)
class EgressQueue:
    """State and statistics of one port's queue."""

    port: int
    rate_bps: float = 0.0
    depth_pkts: int = DEFAULT_DEPTH_PKTS
    items: deque = field(default_factory=deque)   # (item, length, enq_ns, enq_us, enq_qdepth)
    next_free_ns: int = 0
    enqueued: int = 0
    dequeued: int = 0
    tail_drops: int = 0
    high_water: int = 0
    in_flight: int = 0      # taken off the queue (or bypassing it), egress not finished
    paused: bool = False    # sends nothing until resumed (a PFC PAUSE)

    def head_time_ns(self) -> int:
        """When the head packet may leave."""
        enq_ns = self.items[0][2]
        return max(enq_ns, self.next_free_ns) if self.rate_bps else enq_ns


def _where(port: int | str) -> str:
    return f"port {port}" if isinstance(port, int) else port


def check_rate(port: int | str, rate_bps: float) -> float:
    if not rate_bps >= 0 or rate_bps == float("inf"):
        raise OptionError(f"queue rate of {_where(port)}: {rate_bps} bit/s must be >= 0 (0 = unpaced)")
    return float(rate_bps)


def check_depth(port: int | str, depth: int) -> int:
    if not 1 <= depth <= MAX_DEPTH_PKTS:
        raise OptionError(f"queue depth of {_where(port)}: {depth} packets outside 1..{MAX_DEPTH_PKTS}")
    return int(depth)


class TrafficManager:
    """Per-port queues and the scheduler thread that drains them at their rates."""

    def __init__(self, depart: Callable[[Any, QueueInfo], int | None], *,
                 clock_us: Callable[[], int], default_depth_pkts: int = DEFAULT_DEPTH_PKTS,
                 default_rate_bps: float = 0.0) -> None:
        self._depart = depart
        self._clock_us = clock_us
        self.default_depth_pkts = check_depth(ALL_PORTS_LABEL, default_depth_pkts)
        self.default_rate_bps = check_rate(ALL_PORTS_LABEL, default_rate_bps)
        self.queues: dict[int, EgressQueue] = {}
        self._cv = threading.Condition(threading.Lock())
        self._stop = False
        self._thread: threading.Thread | None = None
        self.errors = 0
        self.paced = self.default_rate_bps > 0   # any queue with a rate (receive thread helps)

    # --------------------------------------------------------------- config
    def queue(self, port: int) -> EgressQueue:
        q = self.queues.get(port)
        if q is None:
            q = self.queues[port] = EgressQueue(port=port, rate_bps=self.default_rate_bps,
                                                depth_pkts=self.default_depth_pkts)
        return q

    def set_rate(self, port: int, rate_bps: float) -> None:
        with self._cv:
            self.queue(port).rate_bps = check_rate(port, rate_bps)
            self.paced = self.default_rate_bps > 0 or any(q.rate_bps for q in self.queues.values())
            self._cv.notify()

    def set_default_rate(self, rate_bps: float) -> None:
        """Rate of queues created from now on (ports configured later, the CPU port)."""
        with self._cv:
            self.default_rate_bps = check_rate(ALL_PORTS_LABEL, rate_bps)
            self.paced = self.paced or self.default_rate_bps > 0

    def set_depth(self, port: int, depth_pkts: int) -> None:
        with self._cv:
            self.queue(port).depth_pkts = check_depth(port, depth_pkts)

    def pause(self, port: int) -> None:
        """Stop `port`'s departures (it keeps queueing) until `resume`; see the header."""
        with self._cv:
            self.queue(port).paused = True

    def resume(self, port: int) -> None:
        """Let a paused port send again: its schedule restarts now, not in the past."""
        with self._cv:
            q = self.queue(port)
            if q.paused:
                q.paused = False
                q.next_free_ns = max(q.next_free_ns, time.monotonic_ns())
                self._cv.notify()

    # ------------------------------------------------------------ data path
    def enqueue(self, port: int, item: Any, length: int) -> bool:
        """Queue `item` for `port`; False when the queue is full (tail drop)."""
        now_ns = time.monotonic_ns()
        now_us = self._clock_us()
        with self._cv:
            q = self.queues.get(port) or self.queue(port)
            n = len(q.items)
            if n >= q.depth_pkts:
                q.tail_drops += 1
                return False
            q.items.append((item, length, now_ns, now_us, n))
            q.enqueued += 1
            q.high_water = max(q.high_water, n + 1)
            if n == 0:
                self._cv.notify()
        return True

    def queue_stats(self) -> dict[int, dict[str, float]]:
        """Per port: depth now, high-water mark, tail drops, rate and size (one consistent view)."""
        with self._cv:
            return {n: {"queue_depth": len(q.items), "queue_high_water": q.high_water,
                        "tail_drops": q.tail_drops, "queue_rate_bps": q.rate_bps,
                        "queue_size_pkts": q.depth_pkts} for n, q in self.queues.items()}

    def claim_bypass(self, port: int) -> bool:
        """True when a packet for `port` may skip the queue: unpaced, empty, nothing in flight.

        Then it leaves at once with zero depth and wait, exactly what the queue would
        give it, minus a thread hand-off; the caller must call `release(port)` after.
        """
        with self._cv:
            q = self.queues.get(port) or self.queue(port)
            if q.rate_bps or q.items or q.in_flight or q.paused:
                return False
            q.in_flight += 1
            q.enqueued += 1
            q.dequeued += 1
            q.high_water = max(q.high_water, 1)
            return True

    def release(self, port: int) -> None:
        """A departure (queued or bypassing) of `port` finished egress."""
        with self._cv:
            q = self.queues.get(port)
            if q is not None and q.in_flight:
                q.in_flight -= 1
                if q.items:
                    self._cv.notify()

    def clear(self) -> int:
        """Drop everything queued (pipeline replaced); returns how many."""
        with self._cv:
            n = 0
            for q in self.queues.values():
                n += len(q.items)
                q.items.clear()
            return n

    def _next(self) -> tuple[EgressQueue | None, float]:
        """The queue whose head leaves first, and the seconds until then (cv held).

        A queue with a departure still in egress is skipped: one at a time per port
        keeps each port's frames in order whichever thread departs them.
        """
        best, best_t = None, 0
        for q in self.queues.values():
            if q.items and not q.in_flight and not q.paused:
                t = q.head_time_ns()
                if best is None or t < best_t:
                    best, best_t = q, t
        if best is None:
            return None, 1.0
        return best, (best_t - time.monotonic_ns()) / 1e9

    def _pop(self, q: EgressQueue) -> tuple[Any, int, int, int, int, int | None]:
        """Take the head of `q` (cv held): item, length, enq µs, enq depth, deq depth and
        its departure µs on a paced port's schedule (None when unpaced)."""
        item, length, enq_ns, enq_us, enq_depth = q.items.popleft()
        departure_us = None
        if q.rate_bps:
            start = max(enq_ns, q.next_free_ns)
            q.next_free_ns = start + int(length * 8e9 / q.rate_bps)
            departure_us = enq_us + (start - enq_ns) // 1000
        q.dequeued += 1
        q.in_flight += 1
        return item, length, enq_us, enq_depth, len(q.items), departure_us

    def _leave(self, q: EgressQueue, item: Any, length: int, enq_us: int, enq_depth: int,
               deq_depth: int, departure_us: int | None) -> None:
        left_us = self._clock_us() if departure_us is None else departure_us
        info = QueueInfo(enq_qdepth=enq_depth, deq_qdepth=deq_depth,
                         deq_timedelta_us=max(0, left_us - enq_us),
                         enq_timestamp_us=enq_us, departure_us=departure_us)
        try:
            sent = self._depart(item, info)
            if sent is not None and sent != length and q.rate_bps:
                with self._cv:  # serialisation time of the bytes the port really sent
                    q.next_free_ns += int((sent - length) * 8e9 / q.rate_bps)
        except Exception:
            self.errors += 1
            LOG.exception("traffic manager: departure failed")
        finally:
            self.release(q.port)

    def depart_due(self, limit: int = 8) -> int:
        """Run up to `limit` departures that are due, in the caller's thread.

        Why: under overload the receive thread is busy with ingress and the scheduler
        thread waits for the interpreter; letting the receive thread send what is due
        keeps the paced ports at their rate. Returns how many left.
        """
        done = 0
        while done < limit:
            with self._cv:
                q, wait_s = self._next()
                if q is None or wait_s > 0:
                    return done
                popped = self._pop(q)
            self._leave(q, *popped)
            done += 1
        return done

    def _run(self) -> None:
        while True:
            with self._cv:
                while True:
                    if self._stop:
                        return
                    q, wait_s = self._next()
                    if q is not None and wait_s <= 0:
                        break
                    self._cv.wait(wait_s if q is not None else 0.5)
                popped = self._pop(q)
            self._leave(q, *popped)

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="switchd-tm", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)
