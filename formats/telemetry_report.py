"""Telemetry Report v2.0 (sink switch -> collector): scapy layers, numpy dtypes, builders.

A report datagram is the UDP payload sent by an INT sink to the collector
(destination port ``REPORT_UDP_PORT``, default 32766)::

    group header        8 B   ver 4 (=2), hw_id 6, sequence 22, node ID 32
    individual header   4 B   RepType 4 (1=INT), InType 4 (4=IPv4), report length 8,
                              MD length 8, D 1, Q 1, F 1, I 1, reserved 4
    main contents       8 B   RepMdBits 16, domain-specific ID 16, DSMdBits 16,
                              DSMdStatus 16
    sink metadata  4*MD len   fields chosen by RepMdBits (standard) then DSMdBits
    inner packet              IPv4 header on: UDP, INT shim, INT-MD, hop stack, BTH ...

Report length counts the 4-byte words after the first word of the individual
header (main contents + metadata + inner packet).  Several individual reports may
follow one group header (coalescing); each starts with its own individual header.

Every field of a report is aligned on a 4-byte word, which is what lets the
collector view a batch of same-length reports as a 2-D ``>u4`` matrix and decode
all of them with column gathers (see ``controller.int.decode``).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
from scapy.fields import BitField, ByteField, IntField, ShortField, StrLenField
from scapy.layers.inet import IP, UDP
from scapy.packet import Packet, bind_layers

from formats.int_md import INT_DS_ID_HPCC

REPORT_UDP_PORT = 32766
REPORT_VERSION = 2
REP_TYPE_INNER_ONLY = 0
REP_TYPE_INT = 1
IN_TYPE_NONE = 0
IN_TYPE_ETHERNET = 3
IN_TYPE_IPV4 = 4

GROUP_HEADER_LEN = 8
INDIVIDUAL_HEADER_LEN = 4
INT_MAIN_LEN = 8
#: Bytes before the sink metadata of the first individual report.
FIXED_LEN = GROUP_HEADER_LEN + INDIVIDUAL_HEADER_LEN + INT_MAIN_LEN

SEQ_BITS = 22
SEQ_MOD = 1 << SEQ_BITS

#: Bytes of optional baseline metadata per RepMdBits bit (bit 0 = MSB of the 16-bit map).
#: Bit 0 is reserved in reports (the node ID is in the group header); bits 9..14 are
#: reserved and are taken as one word each so that a length check stays possible.
REP_MD_BIT_BYTES: tuple[int, ...] = (0, 4, 4, 4, 8, 8, 8, 4, 4, 4, 4, 4, 4, 4, 4, 4)

#: Report flag bits inside the last byte of the individual header.
FLAG_D = 0x80
FLAG_Q = 0x40
FLAG_F = 0x20
FLAG_I = 0x10

# ---- numpy dtypes (network byte order) -------------------------------------------

#: Group header: word 0 packs ver/hw_id/sequence.
GROUP_HEADER_DTYPE = np.dtype([("ver_hw_seq", ">u4"), ("node_id", ">u4")])
#: Individual report header.
INDIVIDUAL_HEADER_DTYPE = np.dtype(
    [("types", "u1"), ("rep_len", "u1"), ("md_len", "u1"), ("flags", "u1")]
)
#: INT main contents (before the variable sink metadata).
INT_MAIN_DTYPE = np.dtype(
    [("rep_md_bits", ">u2"), ("domain_id", ">u2"), ("ds_md_bits", ">u2"), ("ds_md_status", ">u2")]
)
#: The 20 fixed bytes of a single-report datagram, for ``np.frombuffer``.
REPORT_FIXED_DTYPE = np.dtype(
    [
        ("ver_hw_seq", ">u4"),
        ("node_id", ">u4"),
        ("types", "u1"),
        ("rep_len", "u1"),
        ("md_len", "u1"),
        ("flags", "u1"),
        ("rep_md_bits", ">u2"),
        ("domain_id", ">u2"),
        ("ds_md_bits", ">u2"),
        ("ds_md_status", ">u2"),
    ]
)
assert REPORT_FIXED_DTYPE.itemsize == FIXED_LEN


class ReportFormatError(ValueError):
    """A report could not be built from the given values (names field and value)."""


def rep_md_length_bytes(rep_md_bits: int) -> int:
    """Bytes of standard sink metadata selected by ``rep_md_bits``."""
    return sum(n for bit, n in enumerate(REP_MD_BIT_BYTES) if rep_md_bits & (0x8000 >> bit))


def ds_md_length_bytes(ds_md_bits: int) -> int:
    """Bytes of domain-specific sink metadata (every DS field is one word)."""
    return 4 * (ds_md_bits & 0xFFFF).bit_count()


# ---- builders --------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class IndividualReport:
    """One individual INT report: the inner packet and the sink's own metadata."""

    inner: bytes
    rep_md_bits: int = 0
    domain_id: int = INT_DS_ID_HPCC
    ds_md_bits: int = 0
    ds_md_status: int = 0
    metadata: bytes = b""
    rep_type: int = REP_TYPE_INT
    in_type: int = IN_TYPE_IPV4
    flags: int = FLAG_F

    def encode(self) -> bytes:
        """Individual header + main contents + metadata + inner packet (word padded)."""
        want = rep_md_length_bytes(self.rep_md_bits) + ds_md_length_bytes(self.ds_md_bits)
        if len(self.metadata) != want:
            raise ReportFormatError(
                f"IndividualReport.metadata: {len(self.metadata)} bytes given, bitmaps "
                f"rep_md_bits={self.rep_md_bits:#06x} ds_md_bits={self.ds_md_bits:#06x} "
                f"ask for {want}"
            )
        inner = self.inner + b"\x00" * (-len(self.inner) % 4)
        body_words = (INT_MAIN_LEN + len(self.metadata) + len(inner)) // 4
        if body_words > 0xFF:
            raise ReportFormatError(
                f"IndividualReport: report length {body_words} words exceeds 255; "
                "truncate the inner packet"
            )
        for name, value, top in (("rep_type", self.rep_type, 15), ("in_type", self.in_type, 15)):
            if not 0 <= value <= top:
                raise ReportFormatError(f"IndividualReport.{name}={value} is outside 0..{top}")
        head = struct.pack(
            "!BBBBHHHH",
            (self.rep_type << 4) | self.in_type,
            body_words,
            len(self.metadata) // 4,
            self.flags & 0xF0,
            self.rep_md_bits,
            self.domain_id,
            self.ds_md_bits,
            self.ds_md_status,
        )
        return head + self.metadata + inner


def encode_group_header(*, node_id: int, seq: int, hw_id: int = 0) -> bytes:
    """The 8-byte group header; ``seq`` is taken modulo 2^22."""
    if not 0 <= hw_id < 64:
        raise ReportFormatError(f"group header: hw_id={hw_id} is outside 0..63")
    if not 0 <= node_id < 1 << 32:
        raise ReportFormatError(f"group header: node_id={node_id} is outside 0..2^32-1")
    word0 = (REPORT_VERSION << 28) | (hw_id << 22) | (seq % SEQ_MOD)
    return struct.pack("!II", word0, node_id)


def build_report(
    *, node_id: int, seq: int, reports: list[IndividualReport], hw_id: int = 0
) -> bytes:
    """A whole report datagram (UDP payload) with one or more individual reports."""
    if not reports:
        raise ReportFormatError("build_report: reports is empty; give at least one")
    return encode_group_header(node_id=node_id, seq=seq, hw_id=hw_id) + b"".join(
        r.encode() for r in reports
    )


def decode_group_header(data: bytes) -> tuple[int, int, int, int]:
    """(version, hw_id, sequence, node_id) of a report datagram (for debugging/tests)."""
    if len(data) < GROUP_HEADER_LEN:
        raise ReportFormatError(f"group header: {len(data)} bytes, need {GROUP_HEADER_LEN}")
    word0, node_id = struct.unpack_from("!II", data)
    return word0 >> 28, (word0 >> 22) & 0x3F, word0 & (SEQ_MOD - 1), node_id


# ---- scapy layers (debugging, tests) ---------------------------------------------


class TelemetryReportGroup(Packet):
    """Telemetry Report v2.0 group header."""

    name = "TelemetryReportGroup"
    fields_desc = [  # noqa: RUF012 - scapy reads the class attribute
        BitField("ver", REPORT_VERSION, 4),
        BitField("hw_id", 0, 6),
        BitField("seq", 0, 22),
        IntField("node_id", 0),
    ]


class TelemetryReportINT(Packet):
    """Individual report header + INT main contents + sink metadata (one layer)."""

    name = "TelemetryReportINT"
    fields_desc = [  # noqa: RUF012 - scapy reads the class attribute
        BitField("rep_type", REP_TYPE_INT, 4),
        BitField("in_type", IN_TYPE_IPV4, 4),
        ByteField("rep_len", None),
        ByteField("md_len", None),
        BitField("d", 0, 1),
        BitField("q", 0, 1),
        BitField("f", 1, 1),
        BitField("i", 0, 1),
        BitField("rsvd", 0, 4),
        ShortField("rep_md_bits", 0),
        ShortField("domain_id", INT_DS_ID_HPCC),
        ShortField("ds_md_bits", 0),
        ShortField("ds_md_status", 0),
        StrLenField("metadata", b"", length_from=lambda p: (p.md_len or 0) * 4),
    ]

    def post_build(self, pkt: bytes, pay: bytes) -> bytes:
        if self.md_len is None:
            pkt = pkt[:2] + bytes([len(self.metadata) // 4]) + pkt[3:]
        if self.rep_len is None:
            words = (len(pkt) - INDIVIDUAL_HEADER_LEN + len(pay) + 3) // 4
            pkt = pkt[:1] + bytes([min(words, 255)]) + pkt[2:]
        return pkt + pay

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        if self.in_type == IN_TYPE_IPV4:
            return IP
        return Packet.guess_payload_class(self, payload)


bind_layers(UDP, TelemetryReportGroup, dport=REPORT_UDP_PORT)
bind_layers(TelemetryReportGroup, TelemetryReportINT)

__all__ = [
    "FIXED_LEN",
    "FLAG_D",
    "FLAG_F",
    "FLAG_I",
    "FLAG_Q",
    "GROUP_HEADER_DTYPE",
    "INDIVIDUAL_HEADER_DTYPE",
    "INT_MAIN_DTYPE",
    "IN_TYPE_IPV4",
    "REPORT_FIXED_DTYPE",
    "REPORT_UDP_PORT",
    "REP_MD_BIT_BYTES",
    "REP_TYPE_INT",
    "SEQ_MOD",
    "IndividualReport",
    "ReportFormatError",
    "TelemetryReportGroup",
    "TelemetryReportINT",
    "build_report",
    "decode_group_header",
    "ds_md_length_bytes",
    "encode_group_header",
    "rep_md_length_bytes",
]
