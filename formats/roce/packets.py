"""Whole RoCEv2 packets: build a UDP payload, IPv4 packet or Ethernet frame; parse them.

Why apart from the headers: these put the headers, the payload and the ICRC together
in the order the opcode asks for, and are what tests and the slow paths use; the
traffic generator's fast path is :class:`formats.roce.template.PacketTemplate`.
"""
from __future__ import annotations

import struct

from formats.roce.headers import (
    AETH_LEN,
    BTH_LEN,
    CNP_PAD_LEN,
    DEFAULT_PKEY,
    ETH_LEN,
    FEC_HDR_LEN,
    ICRC_LEN,
    IPV4_LEN,
    RETH_LEN,
    RETH_OPCODES,
    ROCEV2_UDP_PORT,
    SACK_HDR_LEN,
    UDP_LEN,
    Opcode,
    RoceFormatError,
    RocePacket,
    pack_aeth,
    pack_bth,
    pack_reth,
    unpack_aeth,
    unpack_bth,
    unpack_fec_header,
    unpack_reth,
    unpack_sack,
)
from formats.roce.icrc import ICRC_FIELD, icrc_for, ipv4_header, udp_header

_ETH = struct.Struct("!6s6sH")


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
    return ib + ICRC_FIELD.pack(icrc_for(src, dst, sport, ib, dport=dport, ip_id=ip_id, df=df))


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
    (ic,) = ICRC_FIELD.unpack_from(buf, end)
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
