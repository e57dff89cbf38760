"""IPv4/UDP headers and the RoCEv2 ICRC.

ICRC: CRC-32 (the zlib/Ethernet polynomial) over 8 bytes of 0xFF (stand-in for the
InfiniBand LRH), the IPv4 header with TOS (DSCP+ECN), TTL and header checksum set to
all ones, the UDP header with its checksum set to all ones, the BTH with its resv8a byte
(FECN, BECN, reserved 6) set to all ones, and everything after the BTH up to the ICRC.
The CRC is written least significant byte first, as scapy.contrib.roce and the Linux
soft-RoCE driver do.  Because the IP identification and flags are covered, a sender
that lets the kernel build IP/UDP must know them: an unconnected UDP socket with
``IP_PMTUDISC_DO`` makes Linux send ID 0 with DF set, which :func:`ipv4_header` uses by
default (formats/FORMATS.md "ICRC").
"""
from __future__ import annotations

import ipaddress
import socket
import struct
import zlib
from typing import Final

import numpy as np

from formats.roce.headers import (
    BTH_LEN,
    ICRC_LEN,
    IPV4_LEN,
    ROCEV2_UDP_PORT,
    UDP_LEN,
    RoceFormatError,
    check_range,
)

_LRH_STANDIN: Final = b"\xff" * 8
_CRC_AFTER_LRH: Final = zlib.crc32(_LRH_STANDIN)
ICRC_FIELD = struct.Struct("<I")  # the ICRC, least significant byte first
_IPV4 = struct.Struct("!BBHHHBBH4s4s")
_UDP = struct.Struct("!HHHH")


def ipv4_bytes(a: str | bytes) -> bytes:
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
    check_range("total_length", total, 16, "IPv4")
    hdr = _IPV4.pack(0x45, tos, total, ip_id, 0x4000 if df else 0, ttl, proto, 0,
                     ipv4_bytes(src), ipv4_bytes(dst))
    c = ipv4_checksum(hdr)
    return hdr[:10] + struct.pack("!H", c) + hdr[12:]


def udp_header(sport: int, dport: int, payload_len: int, checksum: int = 0) -> bytes:
    """Return an 8-byte UDP header (RoCEv2 sends checksum 0)."""
    check_range("sport", sport, 16, "UDP")
    check_range("dport", dport, 16, "UDP")
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
    (got,) = ICRC_FIELD.unpack_from(udp_payload, n - ICRC_LEN)
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
    check_range("sport", sport, 16, "UDP")
    check_range("dport", dport, 16, "UDP")
    prefix = masked_crc_prefix(ipv4_bytes(src), ipv4_bytes(dst), sport, dport, len(ib) + ICRC_LEN,
                               ip_id=ip_id, df=df)
    return icrc_continue(prefix, bytes(ib) + bytes(ICRC_LEN))


def verify_icrc(ip_udp_header: bytes | bytearray | memoryview,
                udp_payload: bytes | bytearray | memoryview) -> bool:
    """True when the last 4 bytes of ``udp_payload`` are the right ICRC."""
    if len(udp_payload) < BTH_LEN + ICRC_LEN:
        return False
    (got,) = ICRC_FIELD.unpack_from(udp_payload, len(udp_payload) - ICRC_LEN)
    return got == icrc(ip_udp_header, udp_payload[:-ICRC_LEN])

