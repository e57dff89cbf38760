"""INT over UDP in INT-MD mode (INT spec v2.1) as the project uses it.

One Python definition of the formats in formats/FORMATS.md, "INT over UDP" and "Host records":

* scapy layers ``IntShim`` and ``IntMD`` (the MD header carries the raw hop stack,
  sized by the shim length), bound behind ``UDP(dport=INT_UDP_PORT)``;
* ``HopRecord``: one hop's metadata, encoded/decoded by the instruction bitmaps
  with precompiled ``struct`` layouts (no per-field branching on hot paths);
* ``insert_int`` / ``build_int_packet`` (what an INT source plus transit hops
  produce) and ``strip_int`` (what the host sink does), working on frame bytes;
* ``HOP_RECORD_DTYPE`` and ``HOST_RECORD_DTYPE``: numpy mirrors of the C structs in
  ``ebpf/int_formats.h`` (tests compare sizes and offsets against the C compiler).

Bit numbers follow the spec: bit 0 is the most significant bit of a 16-bit bitmap.
Hop records are always listed in wire order: newest hop (the last switch) first.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
from collections.abc import Sequence

import numpy as np
from scapy.fields import BitField, ByteField, ShortField, StrLenField, XShortField
from scapy.layers.inet import UDP
from scapy.packet import Packet, Raw, bind_layers

from formats.int_fields import HOP_FIELDS, HopField, field_named
from formats.roce.headers import ROCEV2_UDP_PORT

__all__ = [
    "DEFAULT_REMAINING_HOP_COUNT",
    "DS_LINE_RATE",
    "DS_QUEUE_BYTES",
    "DS_TX_BYTES",
    "HOP_RECORD_DTYPE",
    "HOST_RECORD_DTYPE",
    "HOST_RECORD_SIZE",
    "HPCC_DS_INSTRUCTION",
    "HPCC_HOP_BYTES",
    "HPCC_INSTRUCTION_BITMAP",
    "HPCC_PORTS_INSTRUCTION_BITMAP",
    "INS_EGRESS_TS",
    "INS_HOP_LATENCY",
    "INS_INGRESS_TS",
    "INS_NODE_ID",
    "INS_PORTS",
    "INS_QUEUE",
    "INS_TX_UTIL",
    "INT_DS_ID_HPCC",
    "INT_FIXED_LEN",
    "INT_MD_LEN",
    "INT_MD_VERSION",
    "INT_SHIM_LEN",
    "INT_SHIM_NPT_UDP_PORT",
    "INT_SHIM_TYPE_MD",
    "INT_UDP_PORT",
    "MAX_HOPS",
    "ROCEV2_UDP_PORT",
    "SUPPORTED_DS_INSTRUCTIONS",
    "SUPPORTED_INSTRUCTIONS",
    "HopRecord",
    "IntFormatError",
    "IntHeader",
    "IntMD",
    "IntShim",
    "bit",
    "build_int_packet",
    "decode_hops",
    "encode_hop",
    "encode_hops",
    "hop_words",
    "hops_to_array",
    "insert_int",
    "parse_int",
    "path_signature",
    "psn_runs_to_packets",
    "strip_int",
]

# --- constants --------------------------------------------------------------------
INT_UDP_PORT = 7777
"""UDP destination port that announces an INT shim (compile-time constant elsewhere)."""
INT_SHIM_TYPE_MD = 1
INT_SHIM_NPT_UDP_PORT = 1
"""Next-protocol type 1: the shim's last 16 bits hold the original UDP destination port."""
INT_MD_VERSION = 2
INT_DS_ID_HPCC = 0x4850
"""Domain-specific ID "HP": HPCC fields in the DS instruction bitmap."""
MAX_HOPS = 8
DEFAULT_REMAINING_HOP_COUNT = 8
INT_SHIM_LEN = 4
INT_MD_LEN = 12
INT_FIXED_LEN = INT_SHIM_LEN + INT_MD_LEN
IPV4_HEADER_LEN = 20
UDP_HEADER_LEN = 8
MAX_HOP_ML = 31


def bit(n: int) -> int:
    """Mask of spec bit ``n`` in a 16-bit bitmap (bit 0 is the most significant)."""
    if not 0 <= n <= 15:
        raise IntFormatError(f"bitmap bit number {n} out of range 0..15")
    return 0x8000 >> n


class IntFormatError(ValueError):
    """An INT header, bitmap or hop stack that does not follow formats/FORMATS.md."""


INS_NODE_ID = field_named("node_id").mask          # bit 0: node ID, 4 B
INS_PORTS = field_named("ports").mask              # bit 1: ingress port 16, egress port 16
INS_HOP_LATENCY = field_named("hop_latency").mask  # bit 2: hop latency (us), 4 B
INS_QUEUE = field_named("queue").mask              # bit 3: queue ID 8, queue occupancy 24
INS_INGRESS_TS = field_named("ingress_ts").mask    # bit 4: ingress timestamp (us), 8 B
INS_EGRESS_TS = field_named("egress_ts").mask      # bit 5: egress timestamp (us), 8 B
INS_TX_UTIL = field_named("tx_util").mask          # bit 7: egress port tx utilisation, 4 B
DS_TX_BYTES = field_named("tx_bytes").mask         # DS bit 0: tx bytes mod 2^32
DS_QUEUE_BYTES = field_named("queue_bytes").mask   # DS bit 1: queue bytes
DS_LINE_RATE = field_named("line_rate").mask       # DS bit 2: line rate (Mbit/s)

SUPPORTED_INSTRUCTIONS = functools.reduce(int.__or__, (f.mask for f in HOP_FIELDS if not f.ds))
SUPPORTED_DS_INSTRUCTIONS = functools.reduce(int.__or__, (f.mask for f in HOP_FIELDS if f.ds))
HPCC_INSTRUCTION_BITMAP = INS_NODE_ID | INS_QUEUE | INS_EGRESS_TS          # 0x9400
HPCC_DS_INSTRUCTION = DS_TX_BYTES | DS_QUEUE_BYTES | DS_LINE_RATE          # 0xE000
HPCC_PORTS_INSTRUCTION_BITMAP = HPCC_INSTRUCTION_BITMAP | INS_PORTS        # 0xD400
"""The HPCC profile plus ingress/egress ports, so hops are told apart per egress port."""
HPCC_HOP_BYTES = 28

_CODE = {8: "B", 16: "H", 32: "I", 64: "Q"}


def _codec_of(f: HopField) -> tuple[str, tuple[str, ...]]:
    """Struct codes and HopRecord names of one table row; parts that are no whole
    struct type (the queue's 8 + 24 bits) travel as one packed word ``_<name>``."""
    if all(p.bits in _CODE for p in f.parts):
        return "".join(_CODE[p.bits] for p in f.parts), tuple(p.name for p in f.parts)
    return _CODE[f.nbits], ("_" + f.name,)


# (mask, struct code, HopRecord fields) in bit order; standard fields, then DS fields.
_STD_LAYOUT: tuple[tuple[int, str, tuple[str, ...]], ...] = tuple(
    (f.mask, *_codec_of(f)) for f in HOP_FIELDS if not f.ds)
_DS_LAYOUT: tuple[tuple[int, str, tuple[str, ...]], ...] = tuple(
    (f.mask, *_codec_of(f)) for f in HOP_FIELDS if f.ds)
#: packed name -> (row, shifts) for the rows packed into one word
_PACKED = {"_" + f.name: (f, f.shifts()) for f in HOP_FIELDS
           if not all(p.bits in _CODE for p in f.parts)}


# --- hop records ------------------------------------------------------------------
@dataclasses.dataclass(slots=True, kw_only=True, frozen=True)
class HopRecord:
    """One switch's INT metadata; fields its bitmaps did not ask for stay 0.

    Units (formats/FORMATS.md): timestamps and latency in microseconds, queue occupancy in
    packets, queue/tx bytes in bytes (tx modulo 2^32), line rate in Mbit/s.
    """

    node_id: int = 0
    ingress_port: int = 0
    egress_port: int = 0
    hop_latency: int = 0
    queue_id: int = 0
    queue_occupancy: int = 0
    ingress_ts: int = 0
    egress_ts: int = 0
    tx_util: int = 0
    tx_bytes: int = 0
    queue_bytes: int = 0
    line_rate: int = 0

    def masked(self, instruction_bitmap: int, ds_instruction: int = 0) -> HopRecord:
        """This record with the fields the bitmaps do not carry set to 0 (as a sink sees it)."""
        layout = _layout(instruction_bitmap, ds_instruction)
        keep = set(layout.fields)
        for packed, (f, _) in _PACKED.items():
            if packed in keep:
                keep |= {p.name for p in f.parts}
        return HopRecord(**{f.name: getattr(self, f.name) if f.name in keep else 0
                            for f in dataclasses.fields(HopRecord)})


@dataclasses.dataclass(slots=True, frozen=True)
class _Layout:
    codec: struct.Struct
    fields: tuple[str, ...]
    words: int


def _check_bitmaps(instruction_bitmap: int, ds_instruction: int) -> None:
    if not 0 <= instruction_bitmap <= 0xFFFF or instruction_bitmap & ~SUPPORTED_INSTRUCTIONS:
        raise IntFormatError(
            f"instruction bitmap 0x{instruction_bitmap:04x}: unsupported bits "
            f"0x{instruction_bitmap & ~SUPPORTED_INSTRUCTIONS & 0xFFFF:04x} "
            f"(supported 0x{SUPPORTED_INSTRUCTIONS:04x})")
    if not 0 <= ds_instruction <= 0xFFFF or ds_instruction & ~SUPPORTED_DS_INSTRUCTIONS:
        raise IntFormatError(
            f"DS instruction bitmap 0x{ds_instruction:04x}: unsupported bits "
            f"0x{ds_instruction & ~SUPPORTED_DS_INSTRUCTIONS & 0xFFFF:04x} "
            f"(supported 0x{SUPPORTED_DS_INSTRUCTIONS:04x})")


@functools.lru_cache(maxsize=256)
def _layout(instruction_bitmap: int, ds_instruction: int) -> _Layout:
    """Precompiled struct for one bitmap pair (cached: a run uses a handful of pairs)."""
    _check_bitmaps(instruction_bitmap, ds_instruction)
    codes = ["!"]
    names: list[str] = []
    for mask, code, fields in _STD_LAYOUT:
        if instruction_bitmap & mask:
            codes.append(code)
            names.extend(fields)
    for mask, code, fields in _DS_LAYOUT:
        if ds_instruction & mask:
            codes.append(code)
            names.extend(fields)
    codec = struct.Struct("".join(codes))
    return _Layout(codec=codec, fields=tuple(names), words=codec.size // 4)


def hop_words(instruction_bitmap: int, ds_instruction: int = 0) -> int:
    """Hop ML: 4-byte words per hop record for these bitmaps."""
    return _layout(instruction_bitmap, ds_instruction).words


def encode_hop(hop: HopRecord, instruction_bitmap: int, ds_instruction: int = 0) -> bytes:
    """Bytes one switch pushes for ``hop`` under these bitmaps."""
    layout = _layout(instruction_bitmap, ds_instruction)
    values = []
    for name in layout.fields:
        packed = _PACKED.get(name)
        if packed is None:
            values.append(getattr(hop, name))
            continue
        f, shifts = packed
        word = 0
        for p, sh in zip(f.parts, shifts):
            v = getattr(hop, p.name)
            if not 0 <= v < 1 << p.bits:
                raise IntFormatError(
                    f"hop node {hop.node_id}: {p.name} {v} does not fit {p.bits} bits")
            word |= v << sh
        values.append(word)
    try:
        return layout.codec.pack(*values)
    except struct.error as exc:
        raise IntFormatError(f"hop node {hop.node_id}: field out of range ({exc})") from None


def encode_hops(hops: Sequence[HopRecord], instruction_bitmap: int,
                ds_instruction: int = 0) -> bytes:
    """Hop stack bytes for ``hops`` in wire order (newest first)."""
    return b"".join(encode_hop(h, instruction_bitmap, ds_instruction) for h in hops)


def decode_hops(stack: bytes, instruction_bitmap: int, ds_instruction: int = 0,
                hop_ml: int | None = None) -> list[HopRecord]:
    """Hop records (wire order) from a hop stack; checks hop ML against the bitmaps."""
    layout = _layout(instruction_bitmap, ds_instruction)
    if hop_ml is not None and hop_ml != layout.words:
        raise IntFormatError(
            f"hop ML {hop_ml} does not match bitmaps 0x{instruction_bitmap:04x}/"
            f"0x{ds_instruction:04x} ({layout.words} words per hop)")
    size = layout.codec.size
    if size == 0:
        if stack:
            raise IntFormatError(f"hop stack of {len(stack)} B with empty bitmaps")
        return []
    if len(stack) % size:
        raise IntFormatError(f"hop stack of {len(stack)} B is not a multiple of {size} B per hop")
    out = []
    for values in layout.codec.iter_unpack(stack):
        kw = dict(zip(layout.fields, values))
        for packed, (f, shifts) in _PACKED.items():
            word = kw.pop(packed, None)
            if word is not None:
                for p, sh in zip(f.parts, shifts):
                    kw[p.name] = (word >> sh) & ((1 << p.bits) - 1)
        out.append(HopRecord(**kw))
    return out


def path_signature(node_ids: Sequence[int]) -> int:
    """FNV-1a over the node IDs in wire order, 32 bits (same as the eBPF sink)."""
    sig = 0x811C9DC5
    for nid in node_ids:
        sig = ((sig ^ (nid & 0xFFFFFFFF)) * 0x01000193) & 0xFFFFFFFF
    return sig


# --- scapy layers -----------------------------------------------------------------
class IntShim(Packet):
    """INT shim over UDP (4 B); ``length`` counts words after the shim."""

    name = "INT shim"
    fields_desc = [  # noqa: RUF012 - scapy declares fields as a class list
        BitField("type", INT_SHIM_TYPE_MD, 4),
        BitField("npt", INT_SHIM_NPT_UDP_PORT, 2),
        BitField("reserved", 0, 2),
        ByteField("length", None),
        ShortField("orig_dport", ROCEV2_UDP_PORT),
    ]

    def post_build(self, pkt: bytes, pay: bytes) -> bytes:
        if self.length is None:
            md = self.payload
            stack = getattr(md, "hop_stack", b"") or b""
            pkt = pkt[:1] + bytes([(INT_MD_LEN + len(stack)) // 4]) + pkt[2:]
        return pkt + pay


def _stack_len(pkt: Packet) -> int:
    shim = pkt.underlayer
    if isinstance(shim, IntShim) and shim.length is not None:
        return max(0, shim.length * 4 - INT_MD_LEN)
    return 0


class IntMD(Packet):
    """INT-MD header (12 B) followed by the raw hop stack (newest hop first)."""

    name = "INT-MD"
    fields_desc = [  # noqa: RUF012 - scapy declares fields as a class list
        BitField("version", INT_MD_VERSION, 4),
        BitField("d", 0, 1),
        BitField("e", 0, 1),
        BitField("m", 0, 1),
        BitField("reserved", 0, 12),
        BitField("hop_ml", HPCC_HOP_BYTES // 4, 5),
        ByteField("remaining_hop_count", DEFAULT_REMAINING_HOP_COUNT),
        XShortField("instruction_bitmap", HPCC_INSTRUCTION_BITMAP),
        XShortField("ds_id", INT_DS_ID_HPCC),
        XShortField("ds_instruction", HPCC_DS_INSTRUCTION),
        XShortField("ds_flags", 0),
        StrLenField("hop_stack", b"", length_from=_stack_len),
    ]

    def hops(self) -> list[HopRecord]:
        """Decoded hop records, wire order."""
        return decode_hops(bytes(self.hop_stack), self.instruction_bitmap,
                           self.ds_instruction, self.hop_ml)

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        shim = self.underlayer
        if isinstance(shim, IntShim) and shim.orig_dport == ROCEV2_UDP_PORT:
            from scapy.contrib.roce import BTH
            return BTH
        return Raw


bind_layers(UDP, IntShim, dport=INT_UDP_PORT)
bind_layers(IntShim, IntMD, type=INT_SHIM_TYPE_MD)


# --- frame-level helpers ----------------------------------------------------------
@dataclasses.dataclass(slots=True, kw_only=True, frozen=True)
class IntHeader:
    """Parsed shim + MD header + hops of one frame (what ``parse_int`` returns)."""

    orig_dport: int
    hop_ml: int
    remaining_hop_count: int
    instruction_bitmap: int
    ds_id: int
    ds_instruction: int
    ds_flags: int
    flags_dem: int
    hops: tuple[HopRecord, ...]
    int_len: int
    """Bytes of shim + MD + hop stack (what the sink removes)."""


def _ipv4_checksum(header: bytes) -> int:
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _l4_offset(frame: bytes, l3_offset: int) -> int:
    if len(frame) < l3_offset + IPV4_HEADER_LEN + UDP_HEADER_LEN:
        raise IntFormatError(f"frame of {len(frame)} B too short for IPv4 + UDP")
    vihl = frame[l3_offset]
    if vihl >> 4 != 4:
        raise IntFormatError(f"frame at offset {l3_offset}: IP version {vihl >> 4}, expected 4")
    if frame[l3_offset + 9] != 17:
        raise IntFormatError(f"frame: IP protocol {frame[l3_offset + 9]}, expected UDP (17)")
    return l3_offset + (vihl & 0xF) * 4


def _relength(frame: bytearray, l3_offset: int, l4_offset: int, delta: int) -> None:
    ip_len, = struct.unpack_from("!H", frame, l3_offset + 2)
    udp_len, = struct.unpack_from("!H", frame, l4_offset + 4)
    struct.pack_into("!H", frame, l3_offset + 2, ip_len + delta)
    struct.pack_into("!H", frame, l4_offset + 4, udp_len + delta)
    struct.pack_into("!H", frame, l3_offset + 10, 0)
    struct.pack_into("!H", frame, l3_offset + 10,
                     _ipv4_checksum(bytes(frame[l3_offset:l4_offset])))


def insert_int(frame: bytes, hops: Sequence[HopRecord] = (), *,
               instruction_bitmap: int = HPCC_INSTRUCTION_BITMAP,
               ds_instruction: int = HPCC_DS_INSTRUCTION, ds_id: int = INT_DS_ID_HPCC,
               remaining_hop_count: int | None = None, ds_flags: int = 0,
               d: int = 0, e: int = 0, m: int = 0, hop_ml: int | None = None,
               int_port: int = INT_UDP_PORT, l3_offset: int = 14) -> bytes:
    """INT source + transit hops applied to an IPv4/UDP ``frame`` (Ethernet by default).

    Inserts shim, MD header and ``hops`` (wire order, newest first) after UDP, moves
    the UDP destination port into the shim, grows UDP and IPv4 lengths and rewrites
    the IPv4 checksum; the UDP checksum is left as is (RoCEv2 sends 0).
    ``hop_ml`` overrides the computed value (to build malformed test packets).
    """
    l4 = _l4_offset(frame, l3_offset)
    if len(hops) > MAX_HOPS:
        raise IntFormatError(f"{len(hops)} hops, at most {MAX_HOPS}")
    stack = encode_hops(hops, instruction_bitmap, ds_instruction)
    ml = hop_words(instruction_bitmap, ds_instruction) if hop_ml is None else hop_ml
    if not 0 <= ml <= MAX_HOP_ML:
        raise IntFormatError(f"hop ML {ml} out of range 0..{MAX_HOP_ML}")
    rhc = max(0, DEFAULT_REMAINING_HOP_COUNT - len(hops)) if remaining_hop_count is None \
        else remaining_hop_count
    words = (INT_MD_LEN + len(stack)) // 4
    orig_dport, = struct.unpack_from("!H", frame, l4 + 2)
    shim = struct.pack("!BBH", INT_SHIM_TYPE_MD << 4 | INT_SHIM_NPT_UDP_PORT << 2, words,
                       orig_dport)
    md = struct.pack("!IHHHH",
                     INT_MD_VERSION << 28 | d << 27 | e << 26 | m << 25 | ml << 8 | rhc,
                     instruction_bitmap, ds_id, ds_instruction, ds_flags)
    out = bytearray(frame[:l4 + UDP_HEADER_LEN])
    struct.pack_into("!H", out, l4 + 2, int_port)
    out += shim + md + stack + frame[l4 + UDP_HEADER_LEN:]
    _relength(out, l3_offset, l4, len(shim) + len(md) + len(stack))
    return bytes(out)


def build_int_packet(frame: bytes, hops: Sequence[HopRecord] = (), **kw: object) -> bytes:
    """Alias of ``insert_int`` under the name the other parts look for."""
    return insert_int(frame, hops, **kw)  # type: ignore[arg-type]


def parse_int(frame: bytes, *, int_port: int = INT_UDP_PORT,
              l3_offset: int = 14) -> IntHeader | None:
    """INT header of ``frame``, or None when its UDP destination port is not ``int_port``.

    Raises ``IntFormatError`` for a malformed INT header (same checks as the eBPF sink).
    """
    l4 = _l4_offset(frame, l3_offset)
    if struct.unpack_from("!H", frame, l4 + 2)[0] != int_port:
        return None
    base = l4 + UDP_HEADER_LEN
    if len(frame) < base + INT_FIXED_LEN:
        raise IntFormatError(f"frame of {len(frame)} B too short for INT shim + MD header")
    tnr, words, orig_dport = struct.unpack_from("!BBH", frame, base)
    if tnr >> 4 != INT_SHIM_TYPE_MD or (tnr >> 2) & 3 != INT_SHIM_NPT_UDP_PORT:
        raise IntFormatError(f"INT shim type {tnr >> 4} / NPT {(tnr >> 2) & 3}, expected 1 / 1")
    w0, ins, ds_id, ds_ins, ds_flags = struct.unpack_from("!IHHHH", frame, base + 4)
    if w0 >> 28 != INT_MD_VERSION:
        raise IntFormatError(f"INT-MD version {w0 >> 28}, expected {INT_MD_VERSION}")
    ml = (w0 >> 8) & 0x1F
    int_len = INT_SHIM_LEN + words * 4
    if words < 3 or len(frame) < base + int_len:
        raise IntFormatError(f"INT shim length {words} words beyond the {len(frame)} B frame")
    ip_len, = struct.unpack_from("!H", frame, l3_offset + 2)
    udp_len, = struct.unpack_from("!H", frame, l4 + 4)
    if udp_len < UDP_HEADER_LEN + int_len or ip_len < (l4 - l3_offset) + UDP_HEADER_LEN + int_len \
            or len(frame) < l3_offset + ip_len:
        raise IntFormatError(f"INT of {int_len} B does not fit UDP length {udp_len} / IPv4 "
                             f"length {ip_len} / frame of {len(frame)} B")
    if orig_dport == ROCEV2_UDP_PORT and len(frame) < base + int_len + 12:
        raise IntFormatError(f"no room for a BTH after {int_len} B of INT in a "
                             f"{len(frame)} B frame")
    stack = frame[base + INT_FIXED_LEN:base + int_len]
    hops = decode_hops(stack, ins, ds_ins if ds_id == INT_DS_ID_HPCC else 0, ml)
    if len(hops) > MAX_HOPS:
        raise IntFormatError(f"INT hop stack holds {len(hops)} hops, at most {MAX_HOPS}")
    return IntHeader(orig_dport=orig_dport, hop_ml=ml, remaining_hop_count=w0 & 0xFF,
                     instruction_bitmap=ins, ds_id=ds_id, ds_instruction=ds_ins,
                     ds_flags=ds_flags, flags_dem=(w0 >> 25) & 7, hops=tuple(hops),
                     int_len=int_len)


def strip_int(frame: bytes, *, int_port: int = INT_UDP_PORT, l3_offset: int = 14) -> bytes:
    """Reference sink: the frame as the source sent it (``frame`` itself if not INT)."""
    hdr = parse_int(frame, int_port=int_port, l3_offset=l3_offset)
    if hdr is None:
        return frame
    l4 = _l4_offset(frame, l3_offset)
    out = bytearray(frame[:l4 + UDP_HEADER_LEN])
    struct.pack_into("!H", out, l4 + 2, hdr.orig_dport)
    out += frame[l4 + UDP_HEADER_LEN + hdr.int_len:]
    _relength(out, l3_offset, l4, -hdr.int_len)
    return bytes(out)


# --- numpy mirrors of ebpf/int_formats.h ------------------------------------------
# Little-endian, as the C structs on the hosts we run on (the C header refuses others).
HOP_RECORD_DTYPE = np.dtype({
    "names": ["ingress_ts", "egress_ts", "node_id", "hop_latency", "queue_occupancy",
              "tx_util", "tx_bytes", "queue_bytes", "line_rate", "ingress_port",
              "egress_port", "queue_id"],
    "formats": ["<u8", "<u8", "<u4", "<u4", "<u4", "<u4", "<u4", "<u4", "<u4", "<u2",
                "<u2", "u1"],
    "offsets": [0, 8, 16, 20, 24, 28, 32, 36, 40, 44, 46, 48],
    "itemsize": 56,
})
"""``struct int_hop_rec``: one hop inside a host record (absent fields 0)."""

HOST_RECORD_DTYPE = np.dtype({
    "names": ["capture_ns", "src_ip", "dst_ip", "src_port", "orig_dport", "dest_qp", "psn",
              "ip_total_len", "opcode", "hop_count", "instruction_bitmap", "ds_id",
              "ds_instruction", "ds_flags", "hop_ml", "remaining_hop_count", "md_flags",
              "ip_tos", "ifindex", "psn_count", "sample_psn", "run_first_ns", "run_last_ns",
              "hops"],
    "formats": ["<u8", "<u4", "<u4", "<u2", "<u2", "<u4", "<u4", "<u2", "u1", "u1", "<u2",
                "<u2", "<u2", "<u2", "u1", "u1", "u1", "u1", "<u4", "<u4", "<u4", "<u8", "<u8",
                (HOP_RECORD_DTYPE, (MAX_HOPS,))],
    "offsets": [0, 8, 12, 16, 18, 20, 24, 28, 30, 31, 32, 34, 36, 38, 40, 41, 42, 43, 44,
                48, 52, 56, 64, 72],
    "itemsize": 72 + MAX_HOPS * 56,
})
"""``struct int_host_record``: a run of INT packets of one flow seen by a host sink,
with one INT sample.

The run: ``psn_count`` packets whose PSNs are ``psn``, ``psn + 1``, ...
``psn + psn_count - 1`` (mod 2^24), received in that order between ``run_first_ns``
and ``run_last_ns`` (CLOCK_MONOTONIC at tick resolution); each packet the sink strips
is in exactly one run (``psn_runs_to_packets`` expands them).  A packet whose PSN does
not follow the run (a gap, a late or repeated packet), a run of ``run_packets``
packets, or one older than ``run_ns`` closes it.  The sample is the packet that
closed the run (``sample_psn``; its last packet or the next one): ``capture_ns``
(CLOCK_MONOTONIC, bpf_ktime_get_ns), the header fields and its hops; a run the agent
flushed after the flow went idle has no sample (``hop_count`` 0).  Packets without a
BTH (``orig_dport`` not 4791) are runs of one.  IPv4 addresses are host-order
integers; ports, QP and PSN host order; md_flags = D<<2 | E<<1 | M; ip_total_len is
the restored (original) IPv4 length; hops[0] is the newest hop (last switch).
"""
HOST_RECORD_SIZE = HOST_RECORD_DTYPE.itemsize

_HOP_FIELDS = tuple(f.name for f in dataclasses.fields(HopRecord))


def hops_to_array(hops: Sequence[HopRecord]) -> np.ndarray:
    """``HOP_RECORD_DTYPE`` array of ``MAX_HOPS`` rows for ``hops`` (rest zero)."""
    if len(hops) > MAX_HOPS:
        raise IntFormatError(f"{len(hops)} hops, at most {MAX_HOPS}")
    arr = np.zeros(MAX_HOPS, HOP_RECORD_DTYPE)
    for i, h in enumerate(hops):
        for name in _HOP_FIELDS:
            arr[i][name] = getattr(h, name)
    return arr


def psn_runs_to_packets(psn: np.ndarray, count: np.ndarray, first_ns: np.ndarray,
                        last_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Host-record runs -> one row per packet: (record index, PSN, time), vectorised.

    Run ``i`` stands for ``count[i]`` packets with PSNs ``psn[i] + k`` (mod 2^24),
    k = 0 .. count - 1, in that order; their times are spread evenly from
    ``first_ns[i]`` to ``last_ns[i]`` (the sink keeps only the ends).  A count of 0
    (never written by the sink) counts as 1.
    """
    n = np.maximum(np.asarray(count, np.int64), 1)
    idx = np.repeat(np.arange(n.size, dtype=np.int64), n)
    start = np.cumsum(n) - n
    k = np.arange(idx.size, dtype=np.int64) - start[idx]
    p = (np.asarray(psn, np.int64)[idx] + k) & 0xFFFFFF
    t0 = np.asarray(first_ns, np.int64)[idx]
    span = np.maximum(np.asarray(last_ns, np.int64)[idx] - t0, 0)
    t = t0 + span * k // np.maximum(n[idx] - 1, 1)
    return idx, p, t
