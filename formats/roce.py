"""RoCEv2 wire format: pure byte builders, parsers, ICRC, numpy dtypes, scapy glue.

Why this module exists: every part of the project that touches RoCEv2 (the traffic
generator, the eBPF host sink tests, the P4 program tests) must agree on the same bytes.
Builders here return ``bytes`` and need no socket; the fast path of the traffic
generator uses :class:`PacketTemplate` to rewrite the PSN and the ICRC in place
instead of building a packet per send.

Layout (FORMATS.md, InfiniBand RoCEv2 annex)::

    Ethernet / IPv4 / UDP dport 4791 / BTH 12 B / [RETH 16 B] / [AETH 4 B] / payload / ICRC 4 B

ICRC: CRC-32 (the zlib/Ethernet polynomial) over 8 bytes of 0xFF (stand-in for the
InfiniBand LRH), the IPv4 header with TOS (DSCP+ECN), TTL and header checksum set to
all ones, the UDP header with its checksum set to all ones, the BTH with its resv8a byte
(FECN, BECN, reserved 6) set to all ones, and everything after the BTH up to the ICRC.
The CRC is written least significant byte first, as scapy.contrib.roce and the Linux
soft-RoCE driver do.  Because the IP identification and flags are covered, a sender
that lets the kernel build IP/UDP must know them: an unconnected UDP socket with
``IP_PMTUDISC_DO`` makes Linux send ID 0 with DF set, which :func:`ipv4_header` uses by
default.

Project extensions (carried inside standard RoCEv2 packets, documented here because
they have no public specification):

* SACK block after the AETH of an ACKNOWLEDGE (selective-repeat QPs, in the style of
  IRN): 4 B header ``words 8, base PSN 24`` then ``words`` 32-bit words of bitmap, bit
  0 = most significant bit of the first byte = PSN ``base``; a set bit means received.
* FEC repair packet, opcode ``0xC0`` (manufacturer-specific range): BTH PSN = first PSN
  of the block, then an 8 B FEC header ``k 8, m 8, index 8, reserved 8, symbol length
  16, data count 16`` and the repair symbol.  A symbol encodes one data packet as
  ``opcode 8, flags 8 (bit 0: RETH present), payload length 16, RETH 16 B (zero when
  absent), payload`` zero-padded to the symbol length.
"""
from __future__ import annotations

import ipaddress
import socket
import struct
import zlib
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

import numpy as np

__all__ = [
    "AETH_DTYPE",
    "AETH_LEN",
    "BTH_DTYPE",
    "BTH_LEN",
    "CNP_PAD_LEN",
    "FEC_HDR_LEN",
    "ICRC_LEN",
    "PSN_MASK",
    "RETH_DTYPE",
    "RETH_LEN",
    "ROCEV2_UDP_PORT",
    "SACK_HDR_LEN",
    "SYMBOL_HDR_LEN",
    "Aeth",
    "AethSyndrome",
    "Bth",
    "FecHeader",
    "Opcode",
    "PacketTemplate",
    "Reth",
    "RoceFormatError",
    "RocePacket",
    "SackBlock",
    "build_cnp",
    "build_frame",
    "build_ipv4_packet",
    "build_udp_payload",
    "icrc",
    "icrc_continue",
    "icrc_for",
    "icrc_ok",
    "ipv4_checksum",
    "ipv4_header",
    "masked_crc_prefix",
    "pack_aeth",
    "pack_bth",
    "pack_fec_header",
    "pack_reth",
    "pack_sack",
    "parse_frame",
    "parse_udp_payload",
    "psn_add",
    "psn_diff",
    "psn_lt",
    "to_scapy",
    "udp_header",
    "unpack_aeth",
    "unpack_bth",
    "unpack_fec_header",
    "unpack_reth",
    "unpack_sack",
    "verify_icrc",
]

ROCEV2_UDP_PORT: Final = 4791
PSN_MASK: Final = 0xFFFFFF
PSN_HALF: Final = 0x800000
BTH_LEN: Final = 12
RETH_LEN: Final = 16
AETH_LEN: Final = 4
ICRC_LEN: Final = 4
CNP_PAD_LEN: Final = 16
FEC_HDR_LEN: Final = 8
SYMBOL_HDR_LEN: Final = 20
SACK_HDR_LEN: Final = 4
IPV4_LEN: Final = 20
UDP_LEN: Final = 8
ETH_LEN: Final = 14
DEFAULT_PKEY: Final = 0xFFFF

_LRH_STANDIN: Final = b"\xff" * 8
_CRC_AFTER_LRH: Final = zlib.crc32(_LRH_STANDIN)

_BTH = struct.Struct("!BBHI I")  # opcode, se|m|pad|tver, pkey, resv8a|dqp, ackreq|psn
_RETH = struct.Struct("!QII")
_AETH = struct.Struct("!I")
_FEC = struct.Struct("!BBBBHH")
_ICRC = struct.Struct("<I")
_IPV4 = struct.Struct("!BBHHHBBH4s4s")
_UDP = struct.Struct("!HHHH")
_ETH = struct.Struct("!6s6sH")
_PSN_FIELD = struct.Struct("!I")


class Opcode(IntEnum):
    """BTH opcodes used by the project (RC transport, CNP, project FEC repair)."""

    SEND_ONLY = 0x04
    WRITE_FIRST = 0x06
    WRITE_MIDDLE = 0x07
    WRITE_LAST = 0x08
    WRITE_ONLY = 0x0A
    ACKNOWLEDGE = 0x11
    CNP = 0x81
    FEC_REPAIR = 0xC0


#: opcodes that carry a RETH after the BTH
RETH_OPCODES: Final = frozenset({Opcode.WRITE_FIRST, Opcode.WRITE_ONLY})
#: opcodes that end a message
LAST_OPCODES: Final = frozenset({Opcode.WRITE_LAST, Opcode.WRITE_ONLY, Opcode.SEND_ONLY})
#: opcodes that start a message
FIRST_OPCODES: Final = frozenset({Opcode.WRITE_FIRST, Opcode.WRITE_ONLY, Opcode.SEND_ONLY})
DATA_OPCODES: Final = frozenset(
    {Opcode.SEND_ONLY, Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST,
     Opcode.WRITE_ONLY}
)


class AethSyndrome(IntEnum):
    """AETH syndromes: ACK with unlimited credit, NAK PSN sequence error, RNR NAK."""

    ACK = 0x1F  # 0b000 + credit count 11111 (invalid/unlimited credit)
    NAK_PSN_SEQ_ERROR = 0x60
    NAK_INVALID_REQUEST = 0x61
    RNR_NAK = 0x20

    @staticmethod
    def is_nak(syndrome: int) -> bool:
        return (syndrome & 0x60) == 0x60


class RoceFormatError(ValueError):
    """A RoCEv2 packet could not be built or parsed; the message says what and where."""


# -- numpy dtypes (big-endian, packed) for vectorised decoding of captured headers --
BTH_DTYPE: Final = np.dtype(
    [("opcode", "u1"), ("flags", "u1"), ("pkey", ">u2"), ("dqp", ">u4"), ("psn", ">u4")]
)
"""BTH as 12 bytes: ``dqp`` keeps resv8a in its top byte, ``psn`` keeps AckReq|resv7 in
its top byte; mask both with ``PSN_MASK``."""
RETH_DTYPE: Final = np.dtype([("va", ">u8"), ("rkey", ">u4"), ("dma_len", ">u4")])
AETH_DTYPE: Final = np.dtype([("aeth", ">u4")])
"""AETH word: syndrome = ``aeth >> 24``, MSN = ``aeth & PSN_MASK``."""


# -- 24-bit PSN arithmetic ---------------------------------------------------------
def psn_add(psn: int, n: int) -> int:
    """``psn + n`` modulo 2**24."""
    return (psn + n) & PSN_MASK


def psn_diff(a: int, b: int) -> int:
    """Signed distance ``a - b`` in the 24-bit PSN space, in [-2**23, 2**23)."""
    d = (a - b) & PSN_MASK
    return d - 0x1000000 if d >= PSN_HALF else d


def psn_lt(a: int, b: int) -> bool:
    """True when PSN ``a`` comes before ``b`` (half-space comparison)."""
    return psn_diff(a, b) < 0


# -- header dataclasses ----------------------------------------------------------------
@dataclass(slots=True, kw_only=True, frozen=True)
class Bth:
    opcode: int
    dest_qp: int
    psn: int
    solicited: bool = False
    mig_req: bool = False
    pad_count: int = 0
    tver: int = 0
    p_key: int = DEFAULT_PKEY
    fecn: bool = False
    becn: bool = False
    ack_req: bool = False


@dataclass(slots=True, kw_only=True, frozen=True)
class Reth:
    va: int
    r_key: int
    dma_length: int


@dataclass(slots=True, kw_only=True, frozen=True)
class Aeth:
    syndrome: int
    msn: int

    @property
    def is_nak(self) -> bool:
        return AethSyndrome.is_nak(self.syndrome)


@dataclass(slots=True, kw_only=True, frozen=True)
class FecHeader:
    k: int
    m: int
    index: int
    symbol_len: int
    data_count: int


@dataclass(slots=True, kw_only=True, frozen=True)
class SackBlock:
    base_psn: int
    bitmap: bytes

    def received_psns(self) -> list[int]:
        """PSNs whose bit is set, in order."""
        bits = np.unpackbits(np.frombuffer(self.bitmap, dtype=np.uint8))
        return [psn_add(self.base_psn, int(i)) for i in np.flatnonzero(bits)]


@dataclass(slots=True, kw_only=True, frozen=True)
class RocePacket:
    """A parsed RoCEv2 UDP payload (BTH up to and including the ICRC)."""

    bth: Bth
    reth: Reth | None
    aeth: Aeth | None
    sack: SackBlock | None
    fec: FecHeader | None
    payload: bytes
    icrc: int


# -- builders --------------------------------------------------------------------------
def _check_range(name: str, value: int, bits: int, where: str) -> None:
    if not 0 <= value < (1 << bits):
        raise RoceFormatError(f"{where}: {name}={value!r} does not fit in {bits} bits")


def pack_bth(
    opcode: int,
    dest_qp: int,
    psn: int,
    *,
    solicited: bool = False,
    mig_req: bool = False,
    pad_count: int = 0,
    tver: int = 0,
    p_key: int = DEFAULT_PKEY,
    fecn: bool = False,
    becn: bool = False,
    ack_req: bool = False,
) -> bytes:
    """Return the 12-byte BTH."""
    _check_range("opcode", opcode, 8, "BTH")
    _check_range("dest_qp", dest_qp, 24, "BTH")
    _check_range("psn", psn, 24, "BTH")
    _check_range("pad_count", pad_count, 2, "BTH")
    _check_range("tver", tver, 4, "BTH")
    _check_range("p_key", p_key, 16, "BTH")
    b1 = (solicited << 7) | (mig_req << 6) | (pad_count << 4) | tver
    w2 = (fecn << 31) | (becn << 30) | dest_qp
    w3 = (ack_req << 31) | psn
    return _BTH.pack(opcode, b1, p_key, w2, w3)


def pack_reth(va: int, r_key: int, dma_length: int) -> bytes:
    """Return the 16-byte RETH (virtual address, R_Key, DMA length)."""
    _check_range("va", va, 64, "RETH")
    _check_range("r_key", r_key, 32, "RETH")
    _check_range("dma_length", dma_length, 32, "RETH")
    return _RETH.pack(va, r_key, dma_length)


def pack_aeth(syndrome: int, msn: int) -> bytes:
    """Return the 4-byte AETH."""
    _check_range("syndrome", syndrome, 8, "AETH")
    _check_range("msn", msn & PSN_MASK, 24, "AETH")
    return _AETH.pack((syndrome << 24) | (msn & PSN_MASK))


def pack_fec_header(*, k: int, m: int, index: int, symbol_len: int, data_count: int) -> bytes:
    """Return the 8-byte project FEC repair header (see the module docstring)."""
    for name, v, bits in (("k", k, 8), ("m", m, 8), ("index", index, 8),
                          ("symbol_len", symbol_len, 16), ("data_count", data_count, 16)):
        _check_range(name, v, bits, "FEC header")
    return _FEC.pack(k, m, index, 0, symbol_len, data_count)


def pack_sack(base_psn: int, bitmap: bytes) -> bytes:
    """Return a SACK block: header (words, base PSN) then the bitmap (multiple of 4 B)."""
    if len(bitmap) % 4 or len(bitmap) // 4 > 255:
        raise RoceFormatError(
            f"SACK: bitmap of {len(bitmap)} bytes must be a multiple of 4 and at most 1020"
        )
    _check_range("base_psn", base_psn, 24, "SACK")
    return _AETH.pack(((len(bitmap) // 4) << 24) | base_psn) + bytes(bitmap)


def unpack_bth(buf: bytes | bytearray | memoryview, offset: int = 0) -> Bth:
    if len(buf) - offset < BTH_LEN:
        raise RoceFormatError(
            f"BTH: truncated at offset {offset}: {len(buf) - offset} bytes, need {BTH_LEN}"
        )
    op, b1, pkey, w2, w3 = _BTH.unpack_from(buf, offset)
    return Bth(
        opcode=op, solicited=bool(b1 >> 7), mig_req=bool((b1 >> 6) & 1),
        pad_count=(b1 >> 4) & 3, tver=b1 & 15, p_key=pkey, fecn=bool(w2 >> 31),
        becn=bool((w2 >> 30) & 1), dest_qp=w2 & PSN_MASK, ack_req=bool(w3 >> 31),
        psn=w3 & PSN_MASK,
    )


def unpack_reth(buf: bytes | bytearray | memoryview, offset: int = 0) -> Reth:
    if len(buf) - offset < RETH_LEN:
        raise RoceFormatError(f"RETH: truncated at offset {offset}")
    va, rkey, dlen = _RETH.unpack_from(buf, offset)
    return Reth(va=va, r_key=rkey, dma_length=dlen)


def unpack_aeth(buf: bytes | bytearray | memoryview, offset: int = 0) -> Aeth:
    if len(buf) - offset < AETH_LEN:
        raise RoceFormatError(f"AETH: truncated at offset {offset}")
    (w,) = _AETH.unpack_from(buf, offset)
    return Aeth(syndrome=w >> 24, msn=w & PSN_MASK)


def unpack_fec_header(buf: bytes | bytearray | memoryview, offset: int = 0) -> FecHeader:
    if len(buf) - offset < FEC_HDR_LEN:
        raise RoceFormatError(f"FEC header: truncated at offset {offset}")
    k, m, index, _resv, slen, dcount = _FEC.unpack_from(buf, offset)
    return FecHeader(k=k, m=m, index=index, symbol_len=slen, data_count=dcount)


def unpack_sack(buf: bytes | bytearray | memoryview, offset: int = 0) -> SackBlock:
    if len(buf) - offset < SACK_HDR_LEN:
        raise RoceFormatError(f"SACK: truncated header at offset {offset}")
    (w,) = _AETH.unpack_from(buf, offset)
    n = (w >> 24) * 4
    start = offset + SACK_HDR_LEN
    if len(buf) - start < n:
        raise RoceFormatError(f"SACK: bitmap of {n} bytes truncated at offset {start}")
    return SackBlock(base_psn=w & PSN_MASK, bitmap=bytes(buf[start:start + n]))


# -- IPv4 / UDP headers and ICRC -------------------------------------------------------
def _addr(a: str | bytes) -> bytes:
    if isinstance(a, bytes):
        if len(a) != 4:
            raise RoceFormatError(f"IPv4 address {a!r} must be 4 bytes")
        return a
    try:
        return ipaddress.IPv4Address(a).packed
    except ValueError as e:
        raise RoceFormatError(f"IPv4 address {a!r}: {e}") from None


def ipv4_checksum(header: bytes | bytearray) -> int:
    """Internet checksum of an IPv4 header (checksum field included as is)."""
    if len(header) % 2:
        header = bytes(header) + b"\0"
    s = int(np.frombuffer(bytes(header), dtype=">u2").sum(dtype=np.uint64))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ipv4_header(
    src: str | bytes,
    dst: str | bytes,
    payload_len: int,
    *,
    tos: int = 0,
    ttl: int = 64,
    ip_id: int = 0,
    df: bool = True,
    proto: int = socket.IPPROTO_UDP,
) -> bytes:
    """Return a 20-byte IPv4 header with a valid checksum.

    Defaults match what Linux sends from an unconnected UDP socket with
    ``IP_PMTUDISC_DO`` (ID 0, DF), so a sender can predict the ICRC.
    """
    total = IPV4_LEN + payload_len
    _check_range("total_length", total, 16, "IPv4")
    hdr = _IPV4.pack(0x45, tos, total, ip_id, 0x4000 if df else 0, ttl, proto, 0,
                     _addr(src), _addr(dst))
    c = ipv4_checksum(hdr)
    return hdr[:10] + struct.pack("!H", c) + hdr[12:]


def udp_header(sport: int, dport: int, payload_len: int, checksum: int = 0) -> bytes:
    """Return an 8-byte UDP header (RoCEv2 sends checksum 0)."""
    _check_range("sport", sport, 16, "UDP")
    _check_range("dport", dport, 16, "UDP")
    return _UDP.pack(sport, dport, UDP_LEN + payload_len, checksum)


def _masked_ip_udp(ip_udp: bytes | bytearray | memoryview) -> bytes:
    b = bytearray(ip_udp[: IPV4_LEN + UDP_LEN])
    b[1] = 0xFF  # TOS: DSCP + ECN
    b[8] = 0xFF  # TTL
    b[10] = b[11] = 0xFF  # header checksum
    b[26] = b[27] = 0xFF  # UDP checksum
    return bytes(b)


_MASKED = struct.Struct("!BBHHHBBH4s4sHHHH")


def masked_crc_prefix(src: bytes, dst: bytes, sport: int, dport: int, udp_payload_len: int,
                      *, ip_id: int = 0, df: bool = True) -> int:
    """CRC state after the LRH stand-in and the masked IPv4+UDP headers (fast path).

    The masked fields do not need computing, so no checksum work is done here.
    """
    hdr = _MASKED.pack(0x45, 0xFF, IPV4_LEN + UDP_LEN + udp_payload_len, ip_id,
                       0x4000 if df else 0, 0xFF, socket.IPPROTO_UDP, 0xFFFF, src, dst,
                       sport, dport, UDP_LEN + udp_payload_len, 0xFFFF)
    return zlib.crc32(hdr, _CRC_AFTER_LRH)


def icrc_continue(prefix_crc: int, udp_payload: bytes | bytearray | memoryview) -> int:
    """Finish an ICRC from :func:`masked_crc_prefix` over BTH..payload (ICRC excluded)."""
    n = len(udp_payload) - ICRC_LEN
    crc = zlib.crc32(bytes(udp_payload[:4]) + b"\xff" + bytes(udp_payload[5:BTH_LEN]),
                     prefix_crc)
    return zlib.crc32(memoryview(udp_payload)[BTH_LEN:n], crc)


def icrc_ok(udp_payload: bytes | bytearray | memoryview, *, src: bytes, dst: bytes,
            sport: int, dport: int = ROCEV2_UDP_PORT) -> bool:
    """Verify a received UDP payload's ICRC from the addresses the socket reported.

    The IPv4 identification and flags are assumed to be what a RoCEv2 sender of this
    project puts there (ID 0, DF); TTL, DSCP/ECN and checksums are masked anyway.
    """
    n = len(udp_payload)
    if n < BTH_LEN + ICRC_LEN:
        return False
    (got,) = _ICRC.unpack_from(udp_payload, n - ICRC_LEN)
    return got == icrc_continue(masked_crc_prefix(src, dst, sport, dport, n), udp_payload)


def icrc(ip_udp_header: bytes | bytearray | memoryview,
         ib: bytes | bytearray | memoryview) -> int:
    """ICRC of a packet given its 28-byte IPv4+UDP header and its BTH..payload bytes.

    ``ib`` runs from the first BTH byte up to (not including) the ICRC.
    """
    if len(ip_udp_header) < IPV4_LEN + UDP_LEN:
        raise RoceFormatError(f"ICRC: IPv4+UDP header of {len(ip_udp_header)} bytes, need 28")
    if (ip_udp_header[0] & 0x0F) != 5:
        raise RoceFormatError("ICRC: IPv4 options are not supported (IHL != 5)")
    if len(ib) < BTH_LEN:
        raise RoceFormatError(f"ICRC: {len(ib)} bytes after UDP, need at least a BTH")
    crc = zlib.crc32(_masked_ip_udp(ip_udp_header), _CRC_AFTER_LRH)
    crc = zlib.crc32(bytes(ib[:4]) + b"\xff" + bytes(ib[5:BTH_LEN]), crc)
    return zlib.crc32(ib[BTH_LEN:], crc)


def icrc_for(src: str | bytes, dst: str | bytes, sport: int, ib: bytes | bytearray,
             *, dport: int = ROCEV2_UDP_PORT, ip_id: int = 0, df: bool = True) -> int:
    """ICRC for ``ib`` (BTH..payload) as a kernel UDP socket will carry it."""
    if len(ib) < BTH_LEN:
        raise RoceFormatError(f"ICRC: {len(ib)} bytes after UDP, need at least a BTH")
    _check_range("sport", sport, 16, "UDP")
    _check_range("dport", dport, 16, "UDP")
    prefix = masked_crc_prefix(_addr(src), _addr(dst), sport, dport, len(ib) + ICRC_LEN,
                               ip_id=ip_id, df=df)
    return icrc_continue(prefix, bytes(ib) + bytes(ICRC_LEN))


def verify_icrc(ip_udp_header: bytes | bytearray | memoryview,
                udp_payload: bytes | bytearray | memoryview) -> bool:
    """True when the last 4 bytes of ``udp_payload`` are the right ICRC."""
    if len(udp_payload) < BTH_LEN + ICRC_LEN:
        return False
    (got,) = _ICRC.unpack_from(udp_payload, len(udp_payload) - ICRC_LEN)
    return got == icrc(ip_udp_header, udp_payload[:-ICRC_LEN])


def build_udp_payload(
    *,
    src: str | bytes,
    dst: str | bytes,
    sport: int,
    opcode: int,
    dest_qp: int,
    psn: int,
    payload: bytes = b"",
    reth: tuple[int, int, int] | None = None,
    aeth: tuple[int, int] | None = None,
    extra: bytes = b"",
    dport: int = ROCEV2_UDP_PORT,
    ip_id: int = 0,
    df: bool = True,
    **bth_flags: bool | int,
) -> bytes:
    """Return BTH [RETH] [AETH] extra payload ICRC: what a UDP socket sends.

    ``extra`` goes between the extension headers and ``payload`` (SACK block, FEC
    header, CNP padding).  The ICRC uses the IP/UDP header values the kernel will use.
    """
    ib = pack_bth(opcode, dest_qp, psn, **bth_flags)  # type: ignore[arg-type]
    if reth is not None:
        ib += pack_reth(*reth)
    if aeth is not None:
        ib += pack_aeth(*aeth)
    ib += extra + payload
    return ib + _ICRC.pack(icrc_for(src, dst, sport, ib, dport=dport, ip_id=ip_id, df=df))


def build_cnp(*, src: str | bytes, dst: str | bytes, sport: int, dest_qp: int,
              p_key: int = DEFAULT_PKEY) -> bytes:
    """UDP payload of a CNP (opcode 0x81, BECN set, 16 reserved bytes, ICRC)."""
    return build_udp_payload(src=src, dst=dst, sport=sport, opcode=Opcode.CNP,
                             dest_qp=dest_qp, psn=0, extra=bytes(CNP_PAD_LEN), becn=True,
                             p_key=p_key)


def build_ipv4_packet(*, src: str, dst: str, sport: int, tos: int = 0, ttl: int = 64,
                      ip_id: int = 0, df: bool = True, dport: int = ROCEV2_UDP_PORT,
                      **kw) -> bytes:
    """IPv4 + UDP + RoCEv2 bytes (arguments as :func:`build_udp_payload`)."""
    body = build_udp_payload(src=src, dst=dst, sport=sport, dport=dport, ip_id=ip_id,
                             df=df, **kw)
    return (ipv4_header(src, dst, UDP_LEN + len(body), tos=tos, ttl=ttl, ip_id=ip_id, df=df)
            + udp_header(sport, dport, len(body)) + body)


def _mac(m: str | bytes) -> bytes:
    if isinstance(m, bytes):
        return m
    parts = m.split(":")
    if len(parts) != 6:
        raise RoceFormatError(f"MAC address {m!r} must have 6 octets")
    return bytes(int(p, 16) for p in parts)


def build_frame(*, eth_src: str = "02:00:00:00:00:01", eth_dst: str = "02:00:00:00:00:02",
                **kw) -> bytes:
    """Ethernet + IPv4 + UDP + RoCEv2 frame (no FCS); see :func:`build_ipv4_packet`."""
    return _ETH.pack(_mac(eth_dst), _mac(eth_src), 0x0800) + build_ipv4_packet(**kw)


# -- parsers ---------------------------------------------------------------------------
def parse_udp_payload(buf: bytes | bytearray | memoryview) -> RocePacket:
    """Parse BTH..ICRC.  Raises :class:`RoceFormatError` on truncation (ICRC unchecked)."""
    n = len(buf)
    if n < BTH_LEN + ICRC_LEN:
        raise RoceFormatError(f"RoCEv2: {n} bytes is shorter than BTH + ICRC (16)")
    bth = unpack_bth(buf)
    end = n - ICRC_LEN
    off = BTH_LEN
    reth = aeth = None
    sack = None
    fec = None
    if bth.opcode in RETH_OPCODES:
        if end - off < RETH_LEN:
            raise RoceFormatError(f"RoCEv2 opcode {bth.opcode:#04x}: RETH truncated")
        reth = unpack_reth(buf, off)
        off += RETH_LEN
    elif bth.opcode == Opcode.ACKNOWLEDGE:
        if end - off < AETH_LEN:
            raise RoceFormatError("RoCEv2 ACKNOWLEDGE: AETH truncated")
        aeth = unpack_aeth(buf, off)
        off += AETH_LEN
        if end - off >= SACK_HDR_LEN:
            sack = unpack_sack(bytes(buf[:end]), off)
            off += SACK_HDR_LEN + len(sack.bitmap)
    elif bth.opcode == Opcode.FEC_REPAIR:
        if end - off < FEC_HDR_LEN:
            raise RoceFormatError("RoCEv2 FEC repair: FEC header truncated")
        fec = unpack_fec_header(buf, off)
        off += FEC_HDR_LEN
    (ic,) = _ICRC.unpack_from(buf, end)
    return RocePacket(bth=bth, reth=reth, aeth=aeth, sack=sack, fec=fec,
                      payload=bytes(buf[off:end]), icrc=ic)


def parse_frame(frame: bytes) -> tuple[bytes, RocePacket]:
    """Split an Ethernet/IPv4/UDP frame; return (IPv4+UDP header, parsed RoCEv2)."""
    if len(frame) < ETH_LEN + IPV4_LEN + UDP_LEN:
        raise RoceFormatError(f"frame of {len(frame)} bytes is too short for Eth/IPv4/UDP")
    (etype,) = struct.unpack_from("!H", frame, 12)
    if etype != 0x0800:
        raise RoceFormatError(f"frame: EtherType {etype:#06x} is not IPv4")
    ihl = (frame[ETH_LEN] & 0x0F) * 4
    if ihl != IPV4_LEN:
        raise RoceFormatError(f"frame: IPv4 IHL {ihl} bytes, only 20 supported")
    udp_off = ETH_LEN + ihl
    (ulen,) = struct.unpack_from("!H", frame, udp_off + 4)
    hdr = frame[ETH_LEN: udp_off + UDP_LEN]
    return hdr, parse_udp_payload(frame[udp_off + UDP_LEN: udp_off + ulen])


# -- fast path -------------------------------------------------------------------------
class PacketTemplate:
    """Pre-built RoCEv2 UDP payload for one QP with in-place PSN and ICRC updates.

    The masked IPv4+UDP pseudo header depends only on addresses, ports and length, so
    its CRC state is cached per payload length; a send then costs one ``pack_into`` for
    the PSN and one CRC over the BTH and payload.
    """

    __slots__ = ("_crc_by_len", "dport", "dst", "sport", "src")

    def __init__(self, *, src: str, dst: str, sport: int, dport: int = ROCEV2_UDP_PORT):
        self.src = _addr(src)
        self.dst = _addr(dst)
        self.sport = sport
        self.dport = dport
        self._crc_by_len: dict[int, int] = {}

    def _prefix_crc(self, total_len: int) -> int:
        c = self._crc_by_len.get(total_len)
        if c is None:
            c = masked_crc_prefix(self.src, self.dst, self.sport, self.dport, total_len)
            if len(self._crc_by_len) < 4096:
                self._crc_by_len[total_len] = c
        return c

    def finish(self, buf: bytearray, psn: int | None = None) -> bytearray:
        """Set the PSN (keeping AckReq) if given and write the ICRC into the last 4 bytes.

        ``buf`` is a whole UDP payload including 4 bytes of room for the ICRC.
        """
        if psn is not None:
            (w,) = _PSN_FIELD.unpack_from(buf, 8)
            _PSN_FIELD.pack_into(buf, 8, (w & 0xFF000000) | (psn & PSN_MASK))
        n = len(buf)
        crc = self._prefix_crc(n)
        resv = buf[4]
        buf[4] = 0xFF
        crc = zlib.crc32(memoryview(buf)[: n - ICRC_LEN], crc)
        buf[4] = resv
        _ICRC.pack_into(buf, n - ICRC_LEN, crc)
        return buf

    def check(self, buf: bytes | bytearray | memoryview, *, src: bytes, dst: bytes,
              sport: int) -> bool:
        """Verify a received payload's ICRC, reconstructing the header from its addresses."""
        return icrc_ok(buf, src=src, dst=dst, sport=sport, dport=self.dport)


# -- scapy glue (debugging and cross-checks, never the fast path) ----------------------
def to_scapy(data: bytes, *, layer: str = "ether"):
    """Dissect bytes with scapy.contrib.roce layers (``layer``: ether, ip or udp)."""
    from scapy.contrib import roce  # noqa: F401  (binds UDP/4791 -> BTH)
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    cls = {"ether": Ether, "ip": IP, "udp": UDP}.get(layer)
    if cls is None:
        raise RoceFormatError(f"to_scapy: layer {layer!r} is not one of ether, ip, udp")
    return cls(data)
