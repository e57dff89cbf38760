"""Host-agent batches: how an agent ships host records to the controller over UDP.

One UDP datagram = a 24-byte header in network byte order followed by ``count``
host records of ``record_size`` bytes each, exactly as ``HOST_RECORD_DTYPE``
(formats.int_md, little-endian C struct of ebpf/int_formats.h) lays them out::

    magic        u32   0x494E5442 ("INTB")
    version      u8    1
    flags        u8    0 (reserved)
    record_size  u16   bytes per record (the collector checks it against its dtype)
    count        u32   records in this datagram
    agent_id     u32   chosen by the agent (e.g. its IPv4 address as an integer)
    batch_seq    u32   per agent, +1 per datagram (lost batches are counted)
    dropped      u32   records the agent dropped since start (bounded queue full)

The header is fixed size and 8-byte aligned so the records behind it stay aligned
for ``np.frombuffer``.  A datagram must carry exactly ``24 + count*record_size``
bytes; ``max_records(record_size)`` tells how many fit in one UDP datagram.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

AGENT_BATCH_MAGIC = 0x494E5442
AGENT_BATCH_VERSION = 1
AGENT_BATCH_HEADER_LEN = 24
AGENT_BATCH_UDP_PORT = 32767
MAX_UDP_PAYLOAD = 65507

AGENT_BATCH_HEADER_DTYPE = np.dtype(
    [
        ("magic", ">u4"),
        ("version", "u1"),
        ("flags", "u1"),
        ("record_size", ">u2"),
        ("count", ">u4"),
        ("agent_id", ">u4"),
        ("batch_seq", ">u4"),
        ("dropped", ">u4"),
    ]
)
assert AGENT_BATCH_HEADER_DTYPE.itemsize == AGENT_BATCH_HEADER_LEN

_HEADER = struct.Struct("!IBBHIIII")


class AgentBatchError(ValueError):
    """A batch could not be encoded or its header is invalid (names field and value)."""


@dataclass(slots=True, kw_only=True, frozen=True)
class AgentBatchHeader:
    """Decoded batch header."""

    record_size: int
    count: int
    agent_id: int
    batch_seq: int
    dropped: int
    version: int = AGENT_BATCH_VERSION
    flags: int = 0


def max_records(record_size: int, payload_limit: int = MAX_UDP_PAYLOAD) -> int:
    """Records that fit in one datagram of at most ``payload_limit`` bytes."""
    if record_size <= 0:
        raise AgentBatchError(f"max_records: record_size={record_size} must be positive")
    return max(0, (payload_limit - AGENT_BATCH_HEADER_LEN) // record_size)


def encode_batch(records: np.ndarray, *, agent_id: int, batch_seq: int, dropped: int = 0) -> bytes:
    """One datagram holding ``records`` (a structured array, e.g. HOST_RECORD_DTYPE)."""
    size = records.dtype.itemsize
    if len(records) > max_records(size):
        raise AgentBatchError(
            f"encode_batch: {len(records)} records of {size} B exceed one datagram "
            f"(at most {max_records(size)})"
        )
    head = _HEADER.pack(
        AGENT_BATCH_MAGIC,
        AGENT_BATCH_VERSION,
        0,
        size,
        len(records),
        agent_id & 0xFFFFFFFF,
        batch_seq & 0xFFFFFFFF,
        dropped & 0xFFFFFFFF,
    )
    return head + np.ascontiguousarray(records).tobytes()


def decode_batch_header(data: bytes) -> AgentBatchHeader:
    """Header of a batch datagram; checks magic, version and total length."""
    if len(data) < AGENT_BATCH_HEADER_LEN:
        raise AgentBatchError(f"agent batch: {len(data)} bytes, header needs {AGENT_BATCH_HEADER_LEN}")
    magic, version, flags, size, count, agent, seq, dropped = _HEADER.unpack_from(data)
    if magic != AGENT_BATCH_MAGIC:
        raise AgentBatchError(f"agent batch: magic {magic:#010x}, expected {AGENT_BATCH_MAGIC:#010x}")
    if version != AGENT_BATCH_VERSION:
        raise AgentBatchError(f"agent batch: version {version}, expected {AGENT_BATCH_VERSION}")
    if len(data) != AGENT_BATCH_HEADER_LEN + count * size:
        raise AgentBatchError(
            f"agent batch: {len(data)} bytes, header says {count} records of {size} B "
            f"(= {AGENT_BATCH_HEADER_LEN + count * size})"
        )
    return AgentBatchHeader(record_size=size, count=count, agent_id=agent, batch_seq=seq,
                            dropped=dropped, version=version, flags=flags)


__all__ = [
    "AGENT_BATCH_HEADER_DTYPE",
    "AGENT_BATCH_HEADER_LEN",
    "AGENT_BATCH_MAGIC",
    "AGENT_BATCH_UDP_PORT",
    "AGENT_BATCH_VERSION",
    "AgentBatchError",
    "AgentBatchHeader",
    "decode_batch_header",
    "encode_batch",
    "max_records",
]
