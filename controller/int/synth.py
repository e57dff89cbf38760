"""Synthetic Telemetry Reports: what a sink switch would send, built from field values.

Used by tests, the collector benchmark and demos without switches.  Hops are
given in path order (the INT source first); the stack is written newest first as
the data plane does.  Byte layouts follow formats/FORMATS.md (INT-MD v2.1 over UDP, HPCC
domain 0x4850, Telemetry Report v2.0).
"""
from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

from formats.int_fields import word_offsets
from formats.int_md import HPCC_DS_INSTRUCTION as HPCC_DS_BITMAP
from formats.int_md import HPCC_INSTRUCTION_BITMAP as HPCC_INS_BITMAP
from formats.int_md import INT_DS_ID_HPCC, INT_UDP_PORT, ROCEV2_UDP_PORT
from formats.telemetry_report import IndividualReport, build_report


@dataclass(slots=True, kw_only=True)
class Hop:
    """Field values of one hop record (fields not asked for by the bitmaps are ignored),
    named as the collector's ``HOP_DTYPE`` columns."""

    node_id: int = 0
    ingress_port: int = 0
    egress_port: int = 0
    hop_latency_us: int = 0
    queue_id: int = 0
    queue_pkts: int = 0
    ingress_ts_us: int = 0
    egress_ts_us: int = 0
    tx_util: int = 0
    tx_bytes: int = 0
    queue_bytes: int = 0
    line_rate_mbps: int = 0


def encode_record(h: Hop, bitmap: int, ds_bitmap: int, *, report: bool = False) -> bytes:
    """One hop record (or report sink metadata) holding the fields the bitmaps ask for,
    packed as ``formats.int_fields`` says (values read by their collector column names)."""
    layout = word_offsets(bitmap, ds_bitmap, report=report)
    out = bytearray(4 * layout.words)
    for f, off in layout.fields:
        value = 0
        for p, sh in zip(f.parts, f.shifts()):
            value |= (getattr(h, p.col) & ((1 << p.bits) - 1)) << sh
        out[4 * off : 4 * (off + f.words)] = value.to_bytes(4 * f.words, "big")
    return bytes(out)


def build_int_inner(
    *,
    hops: list[Hop],
    src_ip: str = "10.0.0.1",
    dst_ip: str = "10.0.1.1",
    sport: int = 49152,
    dest_qp: int = 0x11,
    psn: int = 0,
    opcode: int = 0x04,
    ins_bitmap: int = HPCC_INS_BITMAP,
    ds_bitmap: int = HPCC_DS_BITMAP,
    remaining_hops: int = 8,
    e_bit: bool = False,
    payload_len: int = 0,
) -> bytes:
    """IPv4/UDP/INT shim/INT-MD/hop stack/BTH/payload as it reaches the sink (IPv4 and
    UDP checksums left 0: the collector does not check them)."""
    layout = word_offsets(ins_bitmap, ds_bitmap)
    stack = b"".join(encode_record(h, ins_bitmap, ds_bitmap) for h in reversed(hops))
    shim_len = 3 + len(stack) // 4
    shim = struct.pack("!BBH", (1 << 4) | (1 << 2), shim_len, ROCEV2_UDP_PORT)
    md = struct.pack(
        "!IHHHH",
        (2 << 28) | (int(e_bit) << 26) | (layout.words << 8) | max(remaining_hops - len(hops), 0),
        ins_bitmap,
        INT_DS_ID_HPCC,
        ds_bitmap,
        0,
    )
    bth = struct.pack("!BBHII", opcode, 0, 0xFFFF, dest_qp & 0xFFFFFF, psn & 0xFFFFFF)
    body = shim + md + stack + bth + b"\x00" * payload_len
    udp = struct.pack("!HHHH", sport, INT_UDP_PORT, 8 + len(body), 0)
    total = 20 + len(udp) + len(body)
    ip = struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, total, 0, 0x4000, 64, 17, 0,
        socket.inet_aton(src_ip), socket.inet_aton(dst_ip),
    )
    return ip + udp + body


def build_hpcc_report(
    *,
    node_id: int,
    seq: int,
    hops: list[Hop],
    sink: Hop | None = None,
    **inner: object,
) -> bytes:
    """A report datagram for one packet; ``sink`` adds the sink's metadata (ports,
    queue, egress ts; DS tx bytes, queue bytes, line rate)."""
    rep_md_bits = 0
    ds_md_bits = 0
    metadata = b""
    if sink is not None:
        rep_md_bits = 0x4000 | 0x1000 | 0x0400
        ds_md_bits = HPCC_DS_BITMAP
        metadata = encode_record(sink, rep_md_bits, ds_md_bits, report=True)
    rep = IndividualReport(
        inner=build_int_inner(hops=hops, **inner),  # type: ignore[arg-type]
        rep_md_bits=rep_md_bits,
        ds_md_bits=ds_md_bits,
        metadata=metadata,
    )
    return build_report(node_id=node_id, seq=seq, reports=[rep])


__all__ = [
    "HPCC_DS_BITMAP",
    "HPCC_INS_BITMAP",
    "Hop",
    "build_hpcc_report",
    "build_int_inner",
    "encode_record",
]
