"""Bounded, never-blocking shipping of host-record batches to the controller over UDP.

Records are cut into datagrams (``formats.agent_batch``); encoded datagrams wait in a
bounded queue; ``flush`` sends until the socket would block.  A full queue drops the
new batch and counts its records (reported to the controller in every header), so a
slow or absent controller never stalls the agent, and the data path never waits.
"""

from __future__ import annotations

import collections
import dataclasses
import socket
from collections.abc import Callable

import numpy as np

from formats.agent_batch import encode_batch, max_records

__all__ = ["BatchShipper", "ShipperStats"]


@dataclasses.dataclass(slots=True, kw_only=True)
class ShipperStats:
    batches_sent: int = 0
    records_sent: int = 0
    batches_dropped: int = 0
    records_dropped: int = 0
    send_errors: int = 0
    queued_batches: int = 0


class BatchShipper:
    """Queue of encoded batches for one destination; ``send`` is non-blocking."""

    def __init__(self, send: Callable[[bytes], object], *, agent_id: int,
                 record_size: int, queue_batches: int = 256,
                 batch_records: int | None = None) -> None:
        limit = max_records(record_size)
        self._send = send
        self._agent_id = agent_id
        self._batch_records = min(limit, batch_records or limit)
        if self._batch_records < 1:
            raise ValueError(f"batch_records {batch_records}: expected >= 1")
        self._queue: collections.deque[tuple[bytes, int]] = collections.deque()
        self._capacity = queue_batches
        self._seq = 0
        self.stats = ShipperStats()

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
