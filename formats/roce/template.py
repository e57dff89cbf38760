"""The traffic generator's fast path: one pre-built packet per QP, PSN and ICRC
rewritten in place.
"""
from __future__ import annotations

import zlib

from formats.roce.headers import ICRC_LEN, PSN_FIELD, PSN_MASK, ROCEV2_UDP_PORT
from formats.roce.icrc import ICRC_FIELD, icrc_ok, ipv4_bytes, masked_crc_prefix


class PacketTemplate:
    """Pre-built RoCEv2 UDP payload for one QP with in-place PSN and ICRC updates.

    The masked IPv4+UDP pseudo header depends only on addresses, ports and length, so
    its CRC state is cached per payload length; a send then costs one ``pack_into`` for
    the PSN and one CRC over the BTH and payload.
    """

    __slots__ = ("_crc_by_len", "dport", "dst", "sport", "src")

    def __init__(self, *, src: str, dst: str, sport: int, dport: int = ROCEV2_UDP_PORT):
        self.src = ipv4_bytes(src)
        self.dst = ipv4_bytes(dst)
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
            (w,) = PSN_FIELD.unpack_from(buf, 8)
            PSN_FIELD.pack_into(buf, 8, (w & 0xFF000000) | (psn & PSN_MASK))
        n = len(buf)
        crc = self._prefix_crc(n)
        resv = buf[4]
        buf[4] = 0xFF
        crc = zlib.crc32(memoryview(buf)[: n - ICRC_LEN], crc)
        buf[4] = resv
        ICRC_FIELD.pack_into(buf, n - ICRC_LEN, crc)
        return buf

    def check(self, buf: bytes | bytearray | memoryview, *, src: bytes, dst: bytes,
              sport: int) -> bool:
        """Verify a received payload's ICRC, reconstructing the header from its addresses."""
        return icrc_ok(buf, src=src, dst=dst, sport=sport, dport=self.dport)

