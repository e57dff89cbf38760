"""INT echoed in ACKs: the hop records of a data packet, carried back to its sender.

Why: HPCC's sender reacts to the INT of every ACK, within one round trip.  The
receiver's host sink (``ebpf/int_sink.c``) reads and strips INT from each data packet
and keeps the latest hop records per QP; its egress program appends them to the next
ACK of that QP.  The sender's endpoint takes them off again before it checks the ICRC.
Project extension (no public specification); the C mirror is ``struct int_echo_hop``
and ``struct int_echo_trailer`` in ``ebpf/int_formats.h``.

Where (formats/FORMATS.md "INT echo in ACKs"): at the very end of the UDP payload of
an ACKNOWLEDGE (opcode 0x11), *after* its ICRC.  Its presence is flagged by bit
``0x20`` of the BTH resv8a byte (byte 4: FECN, BECN, then six reserved bits; this is
the first reserved bit).  The ICRC masks the
whole resv8a byte, and the echo lies behind the ICRC, so once the echo is removed and
the UDP/IPv4 lengths are taken from what is left, the responder's ICRC verifies
unchanged::

    UDP payload = BTH (resv8a & 0x20) | AETH | [SACK] | ICRC | hop 0 .. hop n-1 | trailer

Hop record, 20 B, fields big-endian, newest hop (the last switch) first, as in the
data packet's INT-MD hop stack; a field the data packet's bitmaps did not carry is 0::

    node ID 32 | egress timestamp 32 (us, low 32 bits) | tx bytes 32 (mod 2^32)
    | queue bytes 32 | line rate 32 (Mbit/s)

Trailer, the last 4 B of the UDP payload (read first, from the end)::

    magic 8 (= 0xE1) | version 4 (= 1) | flags 4 (reserved, 0) | hop count 8 (0..8)
    | hop words 8 (= 5: 4-byte words per hop record)

So an echo is 4 + 20 n bytes, n <= 8 (the program's maximum hop count,
:data:`formats.int_md.MAX_HOPS`): at most 164 B.  Timestamps and tx bytes wrap (32
bits); a sender computes deltas modulo 2^32.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

import numpy as np
from scapy.fields import BitField, ByteField, IntField, PacketListField, XByteField
from scapy.packet import Packet

from formats.int_md import MAX_HOPS

__all__ = [
    "ECHO_FLAG",
    "ECHO_HOP_DTYPE",
    "ECHO_HOP_LEN",
    "ECHO_HOP_WORDS",
    "ECHO_MAGIC",
    "ECHO_MAX_LEN",
    "ECHO_TRAILER_LEN",
    "ECHO_VERSION",
    "EchoHop",
    "IntEcho",
    "IntEchoError",
    "IntEchoHop",
    "append_echo",
    "echo_len",
    "encode_echo",
    "split_echo",
]

ECHO_FLAG: Final = 0x20          # in BTH byte 4 (resv8a), masked by the ICRC
ECHO_MAGIC: Final = 0xE1
ECHO_VERSION: Final = 1
ECHO_HOP_WORDS: Final = 5
ECHO_HOP_LEN: Final = 4 * ECHO_HOP_WORDS
ECHO_TRAILER_LEN: Final = 4
ECHO_MAX_LEN: Final = ECHO_TRAILER_LEN + MAX_HOPS * ECHO_HOP_LEN  # 164
_BTH_FLAGS_OFF: Final = 4
_OPCODE_ACK: Final = 0x11
_MIN_ACK: Final = 12 + 4 + 4     # BTH + AETH + ICRC

_HOP = struct.Struct("!IIIII")
_TRAILER = struct.Struct("!BBBB")

#: one echoed hop as numpy sees the wire bytes
ECHO_HOP_DTYPE = np.dtype([("node_id", ">u4"), ("egress_ts", ">u4"), ("tx_bytes", ">u4"),
                           ("queue_bytes", ">u4"), ("line_rate", ">u4")])


class IntEchoError(ValueError):
    """A malformed INT echo; the message says which field and why."""


@dataclass(frozen=True, slots=True)
class EchoHop:
    """One hop as the sender sees it (units of the INT fields it came from)."""

    node_id: int
    egress_ts: int    # us mod 2^32
    tx_bytes: int     # mod 2^32
    queue_bytes: int
    line_rate: int    # Mbit/s


def echo_len(hop_count: int) -> int:
    """Bytes of an echo with ``hop_count`` hops (trailer included)."""
    return ECHO_TRAILER_LEN + hop_count * ECHO_HOP_LEN


def encode_echo(hops: list[EchoHop] | tuple[EchoHop, ...]) -> bytes:
    """Echo bytes (hop records, then the trailer) for ``hops`` in wire order."""
    if len(hops) > MAX_HOPS:
        raise IntEchoError(f"INT echo: {len(hops)} hops, at most {MAX_HOPS}")
    body = b"".join(_HOP.pack(h.node_id & 0xFFFFFFFF, h.egress_ts & 0xFFFFFFFF,
                              h.tx_bytes & 0xFFFFFFFF, h.queue_bytes & 0xFFFFFFFF,
                              h.line_rate & 0xFFFFFFFF) for h in hops)
    return body + _TRAILER.pack(ECHO_MAGIC, ECHO_VERSION << 4, len(hops), ECHO_HOP_WORDS)


def append_echo(ack_payload: bytes, hops: list[EchoHop] | tuple[EchoHop, ...]) -> bytes:
    """What the receiver's egress program makes of an ACK's UDP payload."""
    if len(ack_payload) < _MIN_ACK or ack_payload[0] != _OPCODE_ACK:
        raise IntEchoError("INT echo: only an ACKNOWLEDGE (opcode 0x11) carries an echo")
    buf = bytearray(ack_payload)
    buf[_BTH_FLAGS_OFF] |= ECHO_FLAG
    return bytes(buf) + encode_echo(hops)


def split_echo(udp_payload: bytes) -> tuple[bytes, tuple[EchoHop, ...] | None]:
    """Separate an ACK from its echo: (RoCEv2 bytes as the responder sent them, hops).

    Packets without the echo flag come back unchanged with ``None``.  A flagged packet
    whose trailer is wrong raises :class:`IntEchoError` naming the field.
    """
    n = len(udp_payload)
    if n < 5 or not udp_payload[_BTH_FLAGS_OFF] & ECHO_FLAG:
        return udp_payload, None
    if udp_payload[0] != _OPCODE_ACK:
        raise IntEchoError(f"INT echo flag on opcode {udp_payload[0]:#04x}, not an ACK")
    if n < _MIN_ACK + ECHO_TRAILER_LEN:
        raise IntEchoError(f"INT echo: {n} bytes cannot hold an ACK and a trailer")
    magic, vf, count, words = _TRAILER.unpack_from(udp_payload, n - ECHO_TRAILER_LEN)
    if magic != ECHO_MAGIC:
        raise IntEchoError(f"INT echo trailer: magic {magic:#04x}, expected {ECHO_MAGIC:#04x}")
    if vf >> 4 != ECHO_VERSION:
        raise IntEchoError(f"INT echo trailer: version {vf >> 4}, expected {ECHO_VERSION}")
    if words != ECHO_HOP_WORDS:
        raise IntEchoError(f"INT echo trailer: hop words {words}, expected {ECHO_HOP_WORDS}")
    if count > MAX_HOPS:
        raise IntEchoError(f"INT echo trailer: hop count {count} above {MAX_HOPS}")
    total = echo_len(count)
    if n - total < _MIN_ACK:
        raise IntEchoError(f"INT echo of {count} hops ({total} B) longer than the "
                           f"{n}-byte payload allows")
    start = n - total
    hops = tuple(EchoHop(*_HOP.unpack_from(udp_payload, start + i * ECHO_HOP_LEN))
                 for i in range(count))
    ack = bytearray(udp_payload[:start])
    ack[_BTH_FLAGS_OFF] &= ~ECHO_FLAG & 0xFF
    return bytes(ack), hops


# -- scapy (debugging and cross-checks) ------------------------------------------------
class IntEchoHop(Packet):
    """One echoed hop record (20 B)."""

    name = "INT echo hop"
    fields_desc = [  # noqa: RUF012 - scapy declares fields as a class list
                   IntField("node_id", 0), IntField("egress_ts", 0), IntField("tx_bytes", 0),
                   IntField("queue_bytes", 0), IntField("line_rate", 0)]

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        return b"", s


class IntEcho(Packet):
    """The echo behind an ACK's ICRC: hop records then the 4-byte trailer.

    The trailer comes last on the wire but holds the hop count, so dissection reads
    it first (``pre_dissect`` moves it to the front) and building puts it back.
    """

    name = "INT echo"
    fields_desc = [  # noqa: RUF012 - scapy declares fields as a class list
                   XByteField("magic", ECHO_MAGIC), BitField("version", ECHO_VERSION, 4),
                   BitField("flags", 0, 4), ByteField("hop_count", None),
                   ByteField("hop_words", ECHO_HOP_WORDS),
                   PacketListField("hops", [], IntEchoHop,
                                   count_from=lambda p: p.hop_count)]

    def pre_dissect(self, s: bytes) -> bytes:
        if len(s) < ECHO_TRAILER_LEN:
            return s
        return s[-ECHO_TRAILER_LEN:] + s[:-ECHO_TRAILER_LEN]

    def post_build(self, p: bytes, pay: bytes) -> bytes:
        if self.hop_count is None:
            p = p[:2] + bytes([len(self.hops)]) + p[3:]
        return p[ECHO_TRAILER_LEN:] + p[:ECHO_TRAILER_LEN] + pay
