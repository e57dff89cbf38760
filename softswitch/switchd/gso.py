"""Software segmentation of TCP frames a sender handed over as one large "GSO" frame.

Why: a host whose interface offers TCP segmentation offload (veth does, by default)
passes frames of up to 64 KB to the wire; a real NIC would cut them into MSS-sized
segments, and the packet socket reports them with a virtio-net header saying so
(gso_type, gso_size). The switch does that cutting before the pipeline, so each
segment is a normal frame: IPv4 total length, identification and header checksum,
or IPv6 payload length, per segment; TCP sequence number advanced; FIN and PSH only
on the last segment, CWR only on the first; TCP checksum complete.
"""
from __future__ import annotations

import struct

GSO_TCPV4 = 1
GSO_TCPV6 = 4
GSO_ECN = 0x80
_ETH_VLAN = (0x8100, 0x88A8)


def ones_sum(data: bytes | bytearray | memoryview) -> int:
    """Ones'-complement sum of 16-bit big-endian words, modulo 0xFFFF (0 stands for 0xFFFF)."""
    if len(data) & 1:
        data = bytes(data) + b"\x00"
    return int.from_bytes(data, "big") % 0xFFFF


def fold_checksum(total: int) -> int:
    """The checksum field for a ones'-complement sum computed with `ones_sum` pieces."""
    s = total % 0xFFFF
    return 0xFFFF - s if s else 0xFFFF


def l3_offset(frame: bytes | bytearray | memoryview) -> tuple[int, int]:
    """(offset of the network header, EtherType), skipping up to two VLAN tags."""
    off = 12
    etype = int.from_bytes(frame[off:off + 2], "big")
    off += 2
    for _ in range(2):
        if etype not in _ETH_VLAN:
            break
        etype = int.from_bytes(frame[off + 2:off + 4], "big")
        off += 4
    return off, etype


def segment_tcp(frame: bytes | bytearray | memoryview, gso_type: int, mss: int) -> list[bytes] | None:
    """Cut a TCP GSO frame into segments of at most `mss` payload bytes; None if it is not
    a plain TCP over IPv4/IPv6 frame we can cut (the caller then drops it, counted)."""
    kind = gso_type & ~GSO_ECN
    if kind not in (GSO_TCPV4, GSO_TCPV6) or mss <= 0:
        return None
    l3, etype = l3_offset(frame)
    if kind == GSO_TCPV4:
        if etype != 0x0800 or len(frame) < l3 + 20:
            return None
        ihl = (frame[l3] & 0x0F) * 4
        if ihl < 20 or frame[l3 + 9] != 6:
            return None
        l4 = l3 + ihl
    else:
        if etype != 0x86DD or len(frame) < l3 + 40 or frame[l3 + 6] != 6:
            return None     # extension headers in front of TCP: not cut here
        l4 = l3 + 40
    if len(frame) < l4 + 20:
        return None
    thl = (frame[l4 + 12] >> 4) * 4
    if thl < 20 or len(frame) < l4 + thl:
        return None
    head = bytes(frame[:l4 + thl])
    payload = memoryview(bytes(frame[l4 + thl:]))
    if not payload:
        return None
    seq0 = int.from_bytes(head[l4 + 4:l4 + 8], "big")
    flags0 = head[l4 + 13]
    ip_id0 = int.from_bytes(head[l3 + 4:l3 + 6], "big") if kind == GSO_TCPV4 else 0
    addr_sum = ones_sum(head[l3 + 12:l3 + 20]) if kind == GSO_TCPV4 else ones_sum(head[l3 + 8:l3 + 40])
    out = []
    n = (len(payload) + mss - 1) // mss
    for i in range(n):
        chunk = payload[i * mss:(i + 1) * mss]
        h = bytearray(head)
        seg_len = thl + len(chunk)
        if kind == GSO_TCPV4:
            struct.pack_into("!HH", h, l3 + 2, ihl + seg_len, (ip_id0 + i) & 0xFFFF)
            h[l3 + 10:l3 + 12] = b"\x00\x00"
            h[l3 + 10:l3 + 12] = fold_checksum(ones_sum(h[l3:l4])).to_bytes(2, "big")
        else:
            struct.pack_into("!H", h, l3 + 4, seg_len)
        flags = flags0
        if i < n - 1:
            flags &= ~0x09          # FIN, PSH only on the last segment
        if i > 0:
            flags &= ~0x80          # CWR only on the first
        h[l4 + 13] = flags
        struct.pack_into("!I", h, l4 + 4, (seq0 + i * mss) & 0xFFFFFFFF)
        h[l4 + 16:l4 + 18] = b"\x00\x00"
        total = addr_sum + 6 + seg_len + ones_sum(h[l4:l4 + thl]) + ones_sum(chunk)
        h[l4 + 16:l4 + 18] = fold_checksum(total).to_bytes(2, "big")
        out.append(bytes(h) + bytes(chunk))
    return out
