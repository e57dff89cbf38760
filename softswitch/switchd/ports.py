"""Switch ports on Linux interfaces: one raw AF_PACKET socket pair per interface.

Why two sockets: the receive socket asks for a virtio-net header in front of each
frame (PACKET_VNET_HDR). A frame from a veth whose sender left the UDP/TCP checksum
to "hardware" arrives with only the pseudo-header sum in place; the header says so
(NEEDS_CSUM, csum_start, csum_offset) and we finish the checksum before the
pipeline sees the frame, as a NIC would. The transmit socket has protocol 0, so it
receives nothing, and the receive socket sets PACKET_IGNORE_OUTGOING, so the switch
never reads back its own frames. Both are bound to the interface, which is put in
promiscuous mode for as long as the socket lives (PACKET_ADD_MEMBERSHIP).
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import socket
import struct
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from softswitch.switchd.errors import PortError
from softswitch.switchd.gso import segment_tcp
from softswitch.switchd.pcap import PcapWriter

LOG = logging.getLogger("softswitch.switchd")

SOL_PACKET = 263
PACKET_ADD_MEMBERSHIP = 1
PACKET_MR_PROMISC = 1
PACKET_VNET_HDR = 15
PACKET_STATISTICS = 6
PACKET_IGNORE_OUTGOING = 23
TPACKET_STATS = struct.Struct("II")   # struct tpacket_stats: tp_packets, tp_drops
ETH_P_ALL = 0x0003
CLONE_NEWNET = 0x40000000
VNET_HDR = struct.Struct("<BBHHHH")  # flags, gso_type, hdr_len, gso_size, csum_start, csum_offset
VNET_F_NEEDS_CSUM = 1
MAX_FRAME = 9000 + 18        # jumbo payload + Ethernet header and one VLAN tag
RX_BUFFER = 65536 + VNET_HDR.size


@contextlib.contextmanager
def in_netns(netns: str | None) -> Iterator[None]:
    """Run the block with the calling thread in network namespace `netns`.

    `netns` is a name under /var/run/netns or a path such as /proc/PID/ns/net. Sockets
    opened in the block stay in that namespace, which lets a switch keep its ports in
    the switch's namespace and its P4Runtime server where the controller is.
    """
    if not netns:
        yield
        return
    path = netns if "/" in netns else f"/var/run/netns/{netns}"
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        target = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise PortError(f"--netns {netns}: cannot open {path}: {exc.strerror}") from None
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        if libc.setns(target, CLONE_NEWNET) != 0:
            raise PortError(f"--netns {netns}: setns failed: {os.strerror(ctypes.get_errno())}")
        try:
            yield
        finally:
            if libc.setns(home, CLONE_NEWNET) != 0:
                raise PortError(f"--netns {netns}: cannot return to the original namespace")
    finally:
        os.close(target)
        os.close(home)


def finish_checksum(frame: bytearray, start: int, offset: int) -> bool:
    """Complete a partial L4 checksum in place; False when the offsets do not fit the frame.

    The field holds the folded pseudo-header sum; the ones'-complement sum of
    ``frame[start:]`` is that big-endian number modulo 0xFFFF (2**16 = 1 mod 0xFFFF).
    """
    pos = start + offset
    if start >= len(frame) or pos + 2 > len(frame):
        return False
    seg = frame[start:]
    if len(seg) & 1:
        seg += b"\x00"
    s = int.from_bytes(seg, "big") % 0xFFFF
    csum = 0xFFFF - s if s else 0xFFFF
    frame[pos] = csum >> 8
    frame[pos + 1] = csum & 0xFF
    return True


@dataclass(slots=True)
class PortCounters:
    """Per-port target statistics (what `switch --print-stats` shows)."""

    rx_packets: int = 0
    rx_bytes: int = 0
    tx_packets: int = 0
    tx_bytes: int = 0
    rx_dropped: int = 0      # oversize or segmentation-offload frames we cannot take
    rx_gso_frames: int = 0   # large TCP frames cut into segments here (each segment counts in rx)
    tx_errors: int = 0       # the kernel refused the frame (too big for the MTU, link down)
    # frames the kernel dropped because the receive socket was full (the switch's
    # process too slow to read them): lost inside the switch before any P4 counter
    rx_socket_drops: int = 0


@dataclass(slots=True, kw_only=True, eq=False)
class Port:
    """One switch port: number, interface, sockets, counters, optional captures."""

    number: int
    ifname: str
    rx: socket.socket
    tx: socket.socket
    counters: PortCounters = field(default_factory=PortCounters)
    pending: deque[bytes] = field(default_factory=deque)   # segments of a cut GSO frame
    pcap_in: PcapWriter | None = None
    pcap_out: PcapWriter | None = None
    _warned_gso: bool = False

    @classmethod
    def open(cls, number: int, ifname: str, *, pcap_dir: str | None = None) -> Port:
        """Open the sockets on `ifname` (must exist in the caller's namespace)."""
        try:
            ifindex = socket.if_nametoindex(ifname)
        except OSError:
            raise PortError(f"port {number}: interface {ifname!r} does not exist in this "
                            f"network namespace") from None
        rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        tx = None
        try:
            rx.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
            try:
                rx.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            except OSError as exc:
                raise PortError(f"port {number} ({ifname}): kernel lacks PACKET_IGNORE_OUTGOING "
                                f"(Linux >= 4.20 needed): {exc}") from None
            mreq = struct.pack("iHH8s", ifindex, PACKET_MR_PROMISC, 0, b"")
            rx.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP, mreq)
            rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            rx.bind((ifname, ETH_P_ALL))
            rx.setblocking(False)
            tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
            tx.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
            tx.bind((ifname, 0))
        except OSError as exc:
            rx.close()
            if tx is not None:
                tx.close()
            raise PortError(f"port {number}: cannot open raw sockets on {ifname}: {exc}") from None
        port = cls(number=number, ifname=ifname, rx=rx, tx=tx)
        if pcap_dir:
            port.pcap_in = PcapWriter(f"{pcap_dir}/{ifname}_in.pcap")
            port.pcap_out = PcapWriter(f"{pcap_dir}/{ifname}_out.pcap")
        return port

    def receive(self, buf: bytearray, view: memoryview) -> bytes | None:
        """One frame from the interface, or None when none is waiting (non-blocking).

        A TCP frame the sender left to segmentation offload is cut into segments here
        (`gso.segment_tcp`), handed out one per call. Frames we cannot take (other
        offload aggregates, oversize) are counted in rx_dropped and skipped; the
        caller loops until None.
        """
        if self.pending:
            return self._count_in(self.pending.popleft())
        while True:
            try:
                n = self.rx.recv_into(buf, RX_BUFFER)
            except BlockingIOError:
                return None
            except OSError as exc:
                if exc.errno in (errno.ENETDOWN, errno.ENXIO, errno.ENODEV):
                    LOG.warning("port %d (%s): interface down or gone: %s", self.number,
                                self.ifname, exc.strerror)
                    return None
                if exc.errno == errno.EINTR:
                    return None
                raise
            hl = VNET_HDR.size
            if n < hl + 14:
                self.counters.rx_dropped += 1
                continue
            flags, gso_type, _, gso_size, cstart, coff = VNET_HDR.unpack_from(buf)
            if gso_type:
                segs = segment_tcp(view[hl:n], gso_type, gso_size)
                if segs:
                    self.counters.rx_gso_frames += 1
                    self.pending.extend(segs[1:])
                    return self._count_in(segs[0])
            if gso_type or n - hl > MAX_FRAME:
                self.counters.rx_dropped += 1
                if not self._warned_gso:
                    self._warned_gso = True
                    LOG.warning("port %d (%s): dropping a %d-byte %s frame; turn off TSO/GSO on "
                                "the sending side (ethtool -K IF tso off gso off)", self.number,
                                self.ifname, n - hl, "segmentation-offload" if gso_type else "oversize")
                continue
            if flags & VNET_F_NEEDS_CSUM:
                frame = bytearray(view[hl:n])
                finish_checksum(frame, cstart, coff)
                data = bytes(frame)
            else:
                data = bytes(view[hl:n])
            return self._count_in(data)

    def _count_in(self, data: bytes) -> bytes:
        c = self.counters
        c.rx_packets += 1
        c.rx_bytes += len(data)
        if self.pcap_in is not None:
            self.pcap_in.write(data)
        return data

    def read_socket_drops(self) -> int:
        """Add the kernel's receive-socket drops since the last read to
        ``counters.rx_socket_drops`` and return the total.

        Why: a frame the kernel could not queue on the full receive socket never reaches
        the pipeline, so neither the P4 program nor the traffic manager counts it; the
        kernel does (PACKET_STATISTICS, reset by each read)."""
        try:
            raw = self.rx.getsockopt(SOL_PACKET, PACKET_STATISTICS, TPACKET_STATS.size)
        except OSError:   # socket closed (the switch stopping): nothing new
            return self.counters.rx_socket_drops
        self.counters.rx_socket_drops += TPACKET_STATS.unpack(raw)[1]
        return self.counters.rx_socket_drops

    def transmit(self, frame: bytes) -> bool:
        """Send one frame; False (and tx_errors + 1) when the kernel refuses it."""
        try:
            self.tx.send(frame)
        except OSError as exc:
            self.counters.tx_errors += 1
            if self.counters.tx_errors == 1:
                LOG.warning("port %d (%s): transmit of %d bytes failed: %s", self.number,
                            self.ifname, len(frame), exc)
            return False
        c = self.counters
        c.tx_packets += 1
        c.tx_bytes += len(frame)
        if self.pcap_out is not None:
            self.pcap_out.write(frame)
        return True

    def close(self) -> None:
        for s in (self.rx, self.tx):
            s.close()
        for w in (self.pcap_in, self.pcap_out):
            if w is not None:
                w.close()
