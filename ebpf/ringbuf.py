"""Batch consumer of a BPF ring buffer of fixed-size records, straight from mmap.

bcc's ``ring_buffer_poll`` calls a Python function per record; at a million records
per second that callback is the bottleneck.  The kernel lets user space map the ring
(consumer page read-write, producer page and data read-only, data mapped twice so a
wrapped run of records is contiguous), so every record between the consumer and the
producer position can be viewed as one numpy array and copied in one step.

Ring layout (kernel/bpf/ringbuf.c): each record is an 8-byte header (u32 length with
BUSY bit 31 and DISCARD bit 30, u32 page offset) followed by the data, padded to 8.
A record still BUSY ends the batch; DISCARDed ones are skipped.  All records here have
the same size, which is what makes the vectorised walk possible: a record of another
size is an error (it would mean another program writes to our ring).
"""

from __future__ import annotations

import mmap
import select
import struct

import numpy as np

from .errors import EbpfError

__all__ = ["RingBufReader", "decode_slots", "slot_size"]

_BUSY = 0x80000000
_DISCARD = 0x40000000
_HDR = 8
_U64 = struct.Struct("<Q")


def slot_size(dtype: np.dtype) -> int:
    """Bytes one record of ``dtype`` takes in the ring (header + data, 8-aligned)."""
    return (dtype.itemsize + _HDR + 7) & ~7


def decode_slots(raw: np.ndarray, dtype: np.dtype) -> tuple[np.ndarray, int]:
    """Records from consecutive ring slots in ``raw`` (uint8); returns (records, slots used).

    Stops before the first record still being written (BUSY); skips DISCARDed ones.
    Bytes are copied, not fields, so struct padding is kept exactly as written (a
    field-wise numpy copy would leave it uninitialised).
    """
    slot = slot_size(dtype)
    n = raw.size // slot
    rows = raw[:n * slot].reshape(n, slot)
    lens = rows[:, :4].copy().view("<u4").reshape(n)
    busy = np.flatnonzero(lens & np.uint32(_BUSY))
    if busy.size:
        n = int(busy[0])
        rows, lens = rows[:n], lens[:n]
    sizes = lens & np.uint32(~(_BUSY | _DISCARD) & 0xFFFFFFFF)
    wrong = np.flatnonzero(sizes != dtype.itemsize)
    if wrong.size:
        raise EbpfError(f"ring buffer record {int(wrong[0])} of {int(sizes[wrong[0]])} B, "
                        f"expected {dtype.itemsize} B")
    keep = (lens & np.uint32(_DISCARD)) == 0
    body = rows[:, _HDR:_HDR + dtype.itemsize]
    if not keep.all():
        body = body[keep]
    return np.ascontiguousarray(body).view(dtype).reshape(-1), n


class RingBufReader:
    """Read records of ``dtype`` from the ring buffer map ``map_fd`` in batches.

    ``data_size`` is the map's max_entries (bytes of data area, a power of two
    multiple of the page size).  Not thread-safe: one consumer per ring.
    """

    def __init__(self, map_fd: int, data_size: int, dtype: np.dtype) -> None:
        page = mmap.PAGESIZE
        if data_size <= 0 or data_size % page or data_size & (data_size - 1):
            raise EbpfError(f"ring buffer size {data_size}: expected a power of two "
                            f"multiple of {page}")
        self._dtype = dtype
        self._size = data_size
        self._slot = slot_size(dtype)
        self._page = page
        try:
            self._cons = mmap.mmap(map_fd, page, mmap.MAP_SHARED,
                                   mmap.PROT_READ | mmap.PROT_WRITE, offset=0)
            self._prod = mmap.mmap(map_fd, page + 2 * data_size, mmap.MAP_SHARED,
                                   mmap.PROT_READ, offset=page)
        except OSError as exc:
            raise EbpfError(f"cannot mmap ring buffer fd {map_fd}: {exc}") from None
        self._data = np.frombuffer(self._prod, np.uint8)
        self._fd = map_fd
        self._poll = select.poll()
        self._poll.register(map_fd, select.POLLIN)
        self.records_read = 0
        self.discarded = 0

    def pending_bytes(self) -> int:
        """Bytes written by the kernel and not consumed yet."""
        return _U64.unpack_from(self._prod, 0)[0] - _U64.unpack_from(self._cons, 0)[0]

    def wait(self, timeout_s: float, extra_fds: tuple[int, ...] = ()) -> bool:
        """Block up to ``timeout_s`` until records (or input on ``extra_fds``) arrive."""
        if self.pending_bytes():
            return True
        poll = self._poll
        if extra_fds:
            poll = select.poll()
            poll.register(self._fd, select.POLLIN)
            for fd in extra_fds:
                poll.register(fd, select.POLLIN)
        ms = int(timeout_s * 1000)
        if ms <= 0 and timeout_s > 0:
            ms = 1   # a sub-millisecond wait (a held record due soon) is not a busy loop
        return bool(poll.poll(max(0, ms)))

    def read(self, max_records: int = 1 << 16) -> np.ndarray:
        """Copy out up to ``max_records`` committed records and release their space."""
        cons = _U64.unpack_from(self._cons, 0)[0]
        prod = _U64.unpack_from(self._prod, 0)[0]
        n = min((prod - cons) // self._slot, max_records)
        if n <= 0:
            return np.empty(0, self._dtype)
        start = self._page + (cons & (self._size - 1))
        out, consumed = decode_slots(self._data[start:start + n * self._slot], self._dtype)
        self.discarded += consumed - out.size
        self.records_read += out.size
        _U64.pack_into(self._cons, 0, cons + consumed * self._slot)
        return out

    def close(self) -> None:
        """Unmap the ring (views handed out before are copies and stay valid)."""
        self._data = np.empty(0, np.uint8)
        for m in (self._cons, self._prod):
            try:
                m.close()
            except BufferError:
                pass
