"""A minimal pcap writer (classic format, microsecond stamps, Ethernet link type).

Why not scapy's PcapWriter: it builds a scapy packet per frame; here each record
is two struct-packed writes into a buffered file, cheap enough for the data path.
BMv2 names its captures ``<interface>_in.pcap`` / ``<interface>_out.pcap``; so do we.
"""
from __future__ import annotations

import struct
import threading
import time
from pathlib import Path

_GLOBAL = struct.Struct("<IHHiIII")
_RECORD = struct.Struct("<IIII")
MAGIC_US = 0xA1B2C3D4
LINKTYPE_ETHERNET = 1
SNAPLEN = 65535


class PcapWriter:
    """Appends frames to one pcap file; thread-safe; `close` flushes."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._f = open(self.path, "wb", buffering=1 << 16)  # noqa: SIM115 - closed in close()
        self._f.write(_GLOBAL.pack(MAGIC_US, 2, 4, 0, 0, SNAPLEN, LINKTYPE_ETHERNET))
        self._mu = threading.Lock()
        self.frames = 0

    def write(self, frame: bytes, ts_ns: int | None = None) -> None:
        ts = time.time_ns() if ts_ns is None else ts_ns
        sec, rem = divmod(ts, 1_000_000_000)
        n = len(frame)
        with self._mu:
            if self._f.closed:
                return
            self._f.write(_RECORD.pack(sec, rem // 1000, n, n))
            self._f.write(frame)
            self.frames += 1

    def flush(self) -> None:
        with self._mu:
            if not self._f.closed:
                self._f.flush()

    def close(self) -> None:
        with self._mu:
            if not self._f.closed:
                self._f.close()


def read_pcap(path: str | Path) -> list[bytes]:
    """The frames of a pcap file written by `PcapWriter` (for tests and tools)."""
    data = Path(path).read_bytes()
    if len(data) < _GLOBAL.size or _GLOBAL.unpack_from(data)[0] != MAGIC_US:
        raise ValueError(f"{path}: not a little-endian microsecond pcap file")
    out, off = [], _GLOBAL.size
    while off + _RECORD.size <= len(data):
        _, _, incl, _ = _RECORD.unpack_from(data, off)
        off += _RECORD.size
        out.append(data[off:off + incl])
        off += incl
    return out
