"""Bounded, never-blocking shipping of host-record batches to the controller over UDP.

Records are cut into datagrams (``formats.agent_batch``); encoded datagrams wait in a
bounded queue; ``flush`` sends until the socket would block.  A full queue drops the
new batch and counts its records (reported to the controller in every header), so a
slow or absent controller never stalls the agent, and the data path never waits.

``ShipPolicy`` decides when held records leave (``BatchShipper.offer`` / ``due``):
as soon as ``records`` are waiting, when the oldest has waited ``interval_s``, or
when the oldest record that saw a queue at some hop has waited ``queued_interval_s``
(0: at once).  A queue is what the controller's HPCC must act on within a round
trip; telemetry of empty queues only feeds its slow additive increase and may share
a datagram.  Every receive round costs the controller a fixed amount of Python work
(decode, tables, the HPCC round: about half a millisecond, whatever it carries; a
loaded controller drains many datagrams per round), so fewer, fuller datagrams keep
it from falling behind, which is where the loop's tail latency came from
(``bench/bench_loop.py`` measures both).
"""

from __future__ import annotations

import collections
import dataclasses
import socket
import time
from collections.abc import Callable

import numpy as np

from formats.agent_batch import encode_batch, max_records

from .errors import ConfigError

__all__ = ["BatchShipper", "ShipPolicy", "ShipperStats", "UdpFanout", "queued_mask"]


@dataclasses.dataclass(slots=True, kw_only=True, frozen=True)
class ShipPolicy:
    """When held records are shipped (all of them): whichever comes first."""

    records: int = 32
    """Ship once this many records are held (1: every record at once, no holding)."""
    interval_s: float = 0.005
    """Longest a record is held."""
    queued_interval_s: float = 0.0
    """Longest a record that saw a queue at some hop is held (0: shipped at once)."""

    def __post_init__(self) -> None:
        if self.records < 1:
            raise ConfigError(f"ShipPolicy.records {self.records}: expected >= 1")
        for name in ("interval_s", "queued_interval_s"):
            if not 0 <= getattr(self, name) <= 10:
                raise ConfigError(f"ShipPolicy.{name} {getattr(self, name)}: expected 0..10 s")


IMMEDIATE = ShipPolicy(records=1, interval_s=0.0)
"""Every record shipped when read (the agent's behaviour before ``ShipPolicy``)."""


def queued_mask(records: np.ndarray) -> np.ndarray:
    """True for host records where some hop of the stack reported a queue (bytes or
    packets above zero); one vectorised pass, fields by name."""
    hops = records["hops"]
    present = np.arange(hops.shape[1])[None, :] < records["hop_count"][:, None]
    q = (hops["queue_bytes"] > 0) | (hops["queue_occupancy"] > 0)
    return np.asarray((q & present).any(axis=1), dtype=bool)


@dataclasses.dataclass(slots=True, kw_only=True)
class ShipperStats:
    batches_sent: int = 0
    records_sent: int = 0
    batches_dropped: int = 0
    records_dropped: int = 0
    send_errors: int = 0
    queued_batches: int = 0
    held_records: int = 0
    urgent_ships: int = 0
    """Times held records left early because one saw a queue (``ShipPolicy``)."""
    full_ships: int = 0
    """Times held records left because ``ShipPolicy.records`` were waiting."""
    timer_ships: int = 0
    """Times held records left because the oldest had waited ``ShipPolicy.interval_s``."""


class BatchShipper:
    """Queue of encoded batches for one destination; ``send`` is non-blocking."""

    def __init__(self, send: Callable[[bytes], object], *, agent_id: int,
                 record_size: int, queue_batches: int = 256,
                 batch_records: int | None = None, policy: ShipPolicy = IMMEDIATE,
                 clock_ns: Callable[[], int] = time.monotonic_ns) -> None:
        limit = max_records(record_size)
        self.policy = policy
        self._clock = clock_ns
        self._held: list[np.ndarray] = []
        self._held_n = 0
        self._held_since = 0
        self._queued_since: int | None = None
        self._send = send
        self._agent_id = agent_id
        self._batch_records = min(limit, batch_records or limit)
        if self._batch_records < 1:
            raise ValueError(f"batch_records {batch_records}: expected >= 1")
        self._queue: collections.deque[tuple[bytes, int]] = collections.deque()
        self._capacity = queue_batches
        self._seq = 0
        self.stats = ShipperStats()

    def offer(self, records: np.ndarray) -> None:
        """Hold ``records`` (or queue them at once, as the policy says); ``due`` ships
        what is held once its time comes."""
        if records.size == 0:
            return
        p = self.policy
        now = self._clock() if p.records > 1 else 0
        if not self._held:
            self._held_since = now
        self._held.append(records)
        self._held_n += records.size
        if p.records <= 1:
            self._release(None)
            return
        if p.queued_interval_s < p.interval_s and self._queued_since is None \
                and queued_mask(records).any():
            self._queued_since = now
            if p.queued_interval_s == 0:
                self._release("urgent_ships")
                return
        if self._held_n >= p.records:
            self._release("full_ships")
        self.stats.held_records = self._held_n

    def due(self) -> float | None:
        """Queue held records whose time has come; seconds until the next are due
        (None: nothing held), for the caller's wait."""
        if not self._held:
            return None
        now = self._clock()
        left = self.policy.interval_s - (now - self._held_since) * 1e-9
        if left <= 0:
            self._release("timer_ships")
            return None
        if self._queued_since is not None:
            q_left = self.policy.queued_interval_s - (now - self._queued_since) * 1e-9
            if q_left <= 0:
                self._release("urgent_ships")
                return None
            left = min(left, q_left)
        return left

    def release(self) -> None:
        """Queue everything held now (before a last ``flush``)."""
        if self._held:
            self._release(None)

    def _release(self, why: str | None) -> None:
        # joined as bytes: a field-wise copy (np.concatenate) would not keep the
        # records' struct padding exactly as the kernel wrote it
        held = self._held[0] if len(self._held) == 1 else np.frombuffer(
            b"".join(np.ascontiguousarray(h).tobytes() for h in self._held),
            self._held[0].dtype)
        self._held, self._held_n, self._queued_since = [], 0, None
        self.stats.held_records = 0
        if why is not None:
            setattr(self.stats, why, getattr(self.stats, why) + 1)
        self.push(held)

    def push(self, records: np.ndarray) -> None:
        """Cut ``records`` into datagrams and queue them (dropping what does not fit)."""
        for start in range(0, len(records), self._batch_records):
            chunk = records[start:start + self._batch_records]
            if len(self._queue) >= self._capacity:
                self.stats.batches_dropped += 1
                self.stats.records_dropped += len(chunk)
                continue
            data = encode_batch(chunk, agent_id=self._agent_id, batch_seq=self._seq,
                                dropped=self.stats.records_dropped)
            self._seq += 1
            self._queue.append((data, len(chunk)))
        self.stats.queued_batches = len(self._queue)

    def flush(self) -> None:
        """Send queued datagrams until the socket would block."""
        while self._queue:
            data, n = self._queue[0]
            try:
                self._send(data)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                # unreachable controller (ICMP refused, no route): the batch is lost
                self.stats.send_errors += 1
                self.stats.batches_dropped += 1
                self.stats.records_dropped += n
                self._queue.popleft()
                continue
            self._queue.popleft()
            self.stats.batches_sent += 1
            self.stats.records_sent += n
        self.stats.queued_batches = len(self._queue)


def udp_sender(sock: socket.socket, addr: tuple[str, int]) -> Callable[[bytes], object]:
    """A ``send`` function for ``BatchShipper`` over a non-blocking UDP socket."""
    sock.setblocking(False)
    return lambda data: sock.sendto(data, addr)


class UdpFanout:
    """A ``send`` function for ``BatchShipper`` that gives every datagram to the primary
    controller and a copy to each standby, so a standby keeps a warm view (the same
    batches, sequence numbers and sealed frames: each controller keeps its own replay
    window) and takes over without a gap in its loss map.

    The primary decides the shipper's flow control (its ``BlockingIOError`` retries the
    datagram, its errors count as lost batches); a standby never holds the primary
    back: what it cannot take is counted in ``standby_errors``."""

    def __init__(self, sock: socket.socket, primary: tuple[str, int],
                 standby: tuple[tuple[str, int], ...] = ()) -> None:
        sock.setblocking(False)
        self._sendto = sock.sendto
        self.primary = primary
        self.standby = tuple(standby)
        self.standby_errors: dict[tuple[str, int], int] = dict.fromkeys(self.standby, 0)

    def __call__(self, data: bytes) -> object:
        failed: OSError | None = None
        try:
            n: object = self._sendto(data, self.primary)
        except (BlockingIOError, InterruptedError):
            raise        # the shipper retries the datagram: the copies go with it then
        except OSError as exc:   # a failed primary must not starve the standbys
            failed, n = exc, None
        for addr in self.standby:
            try:
                self._sendto(data, addr)
            except OSError:   # would block, refused, no route: that copy is lost
                self.standby_errors[addr] += 1
        if failed is not None:
            raise failed
        return n
