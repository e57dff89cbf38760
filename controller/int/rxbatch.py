"""Batched receive into a preallocated slot pool: many datagrams per system call.

``RxPool`` owns one ``(slots, stride)`` byte matrix; ``receive`` fills it from a
non-blocking UDP socket and returns how many slots hold a datagram (``lens``,
``src_ip``, ``src_port`` per slot).  Decoders read the matrix in place: no bytes
object per datagram, and datagrams of one length are one strided numpy view.

Two ways to fill it, measured by ``python -m bench.bench_collector --rx`` (same run):

* ``recvmmsg``: ``rxbatch.c``, built with gcc at first use by ``controller.int.native``
  (cached by the source's hash under ``$XDG_CACHE_HOME``), up to 1024 datagrams per call;
* ``recvmsg_into``: the standard library, one call per datagram, when gcc is missing.

Both ask the kernel for ``SO_RXQ_OVFL``: every message then carries the socket's
drop counter (datagrams the kernel threw away because the receive buffer was full),
kept in ``kernel_drops``.  A datagram longer than a slot is counted in ``truncated``
and its slot is skipped (``lens`` 0).

``head`` (recvmmsg only): the matrix holds the first ``head`` bytes of each slot and
a spill matrix the rest of the few longer datagrams, so a round of short datagrams
sits in dense rows (Telemetry Reports: 512-byte rows instead of 9216, a fifth less
receive CPU, bench/README.md).  ``rows(n)`` gives the round as one matrix either way,
widened (a copy) only in rounds that hold a longer datagram.  ``sources=False`` asks
the kernel for no source addresses (``src_ip``/``src_port`` stay 0): for a socket
whose sources nobody checks.
"""
from __future__ import annotations

import ctypes
import os
import socket
import struct

import numpy as np

from controller.int.native import build

__all__ = ["SO_RXQ_OVFL", "RxPool", "native_available"]

SO_RXQ_OVFL = getattr(socket, "SO_RXQ_OVFL", 40)
_TRUNCATED = 0xFFFFFFFF
_MAX_CALL = 1024
_SIGNATURES = {"rx_batch": (ctypes.c_int, [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32,
                                            ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p,
                                            ctypes.c_void_p, ctypes.c_void_p,
                                            ctypes.c_void_p, ctypes.c_uint32])}


def _load() -> ctypes.CDLL | None:
    """The compiled helper (controller.int.native.build); None without gcc."""
    return build("rxbatch", "batched receive uses recvmsg_into", _SIGNATURES)


def native_available() -> bool:
    """True when the recvmmsg helper is (or could be) built and loaded."""
    return _load() is not None


class RxPool:
    """A slot pool bound to one socket (see the module docstring)."""

    def __init__(self, sock: socket.socket, *, slots: int, stride: int,
                 method: str = "auto", head: int | None = None,
                 sources: bool = True) -> None:
        if method not in ("auto", "recvmmsg", "recvmsg_into"):
            raise ValueError(f"RxPool method {method!r}: auto, recvmmsg or recvmsg_into")
        self.sock = sock
        self.slots, self.stride = slots, stride
        lib = _load() if method != "recvmsg_into" else None
        if method == "recvmmsg" and lib is None:
            raise RuntimeError("recvmmsg helper unavailable (gcc missing or build failed)")
        #: bytes of a slot in ``buf``; the rest of a longer datagram is in ``spill``
        self.head = head if lib is not None and head is not None and 0 < head < stride \
            else stride
        self.buf = np.zeros((slots, self.head), np.uint8)
        self.spill = (np.zeros((slots, stride - self.head), np.uint8)
                      if self.head < stride else None)
        self.sources = sources or lib is None
        self.lens = np.zeros(slots, np.uint32)
        self.src_ip = np.zeros(slots, np.uint32)
        self.src_port = np.zeros(slots, np.uint16)
        self.kernel_drops = 0
        """The socket's drop counter as the newest message reported it."""
        self.truncated = 0
        self._ovfl = np.zeros(1, np.uint32)
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_RXQ_OVFL, 1)
        except OSError:
            pass
        self.method = "recvmmsg" if lib is not None else "recvmsg_into"
        self._fn = lib.rx_batch if lib is not None else None
        self._views = [memoryview(self.buf[i]) for i in range(slots)] if lib is None else []
        self._anc = socket.CMSG_SPACE(4)
        # the arrays' addresses once (they are never replaced): ``.ctypes.data`` costs
        # a microsecond or more, five a call were 3-4 % of the receive
        self._addr = (self.buf.ctypes.data, self.lens.ctypes.data,
                      self.src_ip.ctypes.data if self.sources else None,
                      self.src_port.ctypes.data, self._ovfl.ctypes.data)
        self._spill = ((self.spill.ctypes.data, stride - self.head) if self.spill is not None
                       else (None, 0))

    def receive(self, max_datagrams: int | None = None, max_bytes: int | None = None) -> int:
        """Fill slots from the socket until it would block, the pool is full,
        ``max_datagrams`` are in or ``max_bytes`` are in; returns the slot count."""
        limit = self.slots if max_datagrams is None else min(max_datagrams, self.slots)
        budget = max_bytes if max_bytes is not None else 1 << 62
        got = 0
        if self._fn is not None:
            fd = self.sock.fileno()
            base, lens_p, ip_p, port_p, ovfl_p = self._addr
            spill, spill_stride = self._spill
            head = self.head
            while got < limit and budget > 0:
                want = min(limit - got, _MAX_CALL, max(1, budget // self.stride) if
                           max_bytes is not None else _MAX_CALL)
                n = self._fn(fd, base + got * head, head, want, lens_p + 4 * got,
                             ip_p and ip_p + 4 * got, port_p + 2 * got, ovfl_p,
                             spill and spill + got * spill_stride, spill_stride)
                if n < 0:
                    raise OSError(-n, os.strerror(-n))
                if n == 0:
                    break
                budget -= int(self.lens[got:got + n].sum(dtype=np.int64))
                got += n
                if n < want:
                    break
            if got:
                self.kernel_drops = int(self._ovfl[0])
                trunc = self.lens[:got] == _TRUNCATED
                if trunc.any():
                    self.truncated += int(trunc.sum())
                    self.lens[:got][trunc] = 0
            return got
        recv = self.sock.recvmsg_into
        anc = self._anc
        views = self._views
        try:
            while got < limit and budget > 0:
                n, ancdata, flags, addr = recv([views[got]], anc)
                if flags & socket.MSG_TRUNC:
                    self.truncated += 1
                    n = 0
                for level, kind, data in ancdata:
                    if level == socket.SOL_SOCKET and kind == SO_RXQ_OVFL and len(data) >= 4:
                        self.kernel_drops = struct.unpack("=I", data[:4])[0]
                self.lens[got] = n
                self.src_ip[got] = struct.unpack("!I", socket.inet_aton(addr[0]))[0]
                self.src_port[got] = addr[1]
                budget -= n
                got += 1
        except (BlockingIOError, InterruptedError):
            pass
        return got

    def rows(self, n: int) -> np.ndarray:
        """The first ``n`` slots as one ``(n, width)`` matrix, row i holding datagram i
        (``lens[i]`` bytes): ``buf`` itself when every datagram fits in ``head``, else
        a copy of the heads and the spilled rests, as wide as the longest (rounded up
        to 64 bytes)."""
        if self.spill is None or n == 0:
            return self.buf[:n]
        longest = int(self.lens[:n].max())
        if longest <= self.head:
            return self.buf[:n]
        width = min(self.stride, -(-longest // 64) * 64)
        out = np.empty((n, width), np.uint8)
        out[:, :self.head] = self.buf[:n]
        out[:, self.head:] = self.spill[:n, :width - self.head]
        return out

    def datagrams(self, n: int) -> list[memoryview]:
        """The first ``n`` slots as memoryviews of their datagrams (skipped slots empty)."""
        rows = self.rows(n)
        return [memoryview(rows[i])[:ln] for i, ln in enumerate(self.lens[:n].tolist())]

    def addresses(self, n: int) -> list[tuple[str, int]]:
        """(source address, port) of the first ``n`` slots."""
        return [(socket.inet_ntoa(struct.pack("!I", ip)), port)
                for ip, port in zip(self.src_ip[:n].tolist(), self.src_port[:n].tolist())]
