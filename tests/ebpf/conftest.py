"""Shared fixtures: two namespaces joined by a veth, raw senders and receivers in them."""
from __future__ import annotations

import contextlib
import errno
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from common.kernel.netns import Namespace, two_hosts
from tests.helpers.sockets import recv_datagrams

SO_RCVBUFFORCE = 33  # linux/socket.h; the socket module does not name it


@dataclass
class Pair:
    h1: Namespace
    h2: Namespace
    tx: socket.socket          # AF_PACKET on h1's end: sends whole frames
    raw_rx: socket.socket      # AF_INET raw UDP on h2: the IP packet after the sink
    udp_rx: socket.socket      # UDP 4791 on h2: what a RoCEv2 receiver gets

    def send(self, frames: list[bytes], gap_s: float = 0.0) -> None:
        for f in frames:
            self._send_one(f)
            if gap_s:
                time.sleep(gap_s)

    def _send_one(self, frame: bytes) -> None:
        """Send one frame; ENOBUFS (the veth's queue full while the receiving CPU is
        busy elsewhere, on a loaded host) waits for it to drain instead of losing it."""
        for _ in range(2000):
            try:
                self.tx.send(frame)
                return
            except OSError as e:
                if e.errno != errno.ENOBUFS:
                    raise
                time.sleep(0.001)
        raise OSError(errno.ENOBUFS, "the veth's queue stayed full for 2 s")

    def recv_raw(self, n: int, timeout_s: float = 2.0) -> list[bytes]:
        return recv_datagrams(self.raw_rx, n, timeout_s)

    def recv_udp(self, n: int, timeout_s: float = 2.0) -> list[bytes]:
        return recv_datagrams(self.udp_rx, n, timeout_s)

    def drain(self) -> None:
        """Discard everything queued on the receivers (after in-flight packets land)."""
        time.sleep(0.05)
        for s in (self.raw_rx, self.udp_rx):
            while True:
                try:
                    s.recv(65535, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    break


@contextlib.contextmanager
def host_pair(prefix: str = "teb", subnet: str = "10.77.5.0/24") -> Iterator[Pair]:
    with two_hosts(prefix, subnet=subnet) as (h1, h2):
        with h1.enter():
            tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
            tx.bind((h1.ifname, 0))
        with h2.enter():
            raw_rx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
            udp_rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            udp_rx.bind(("0.0.0.0", 4791))
            for s in (raw_rx, udp_rx):   # room for bursts of a few thousand packets
                s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 16 << 20)
        try:
            yield Pair(h1=h1, h2=h2, tx=tx, raw_rx=raw_rx, udp_rx=udp_rx)
        finally:
            for s in (tx, raw_rx, udp_rx):
                s.close()


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    with host_pair() as p:
        yield p
