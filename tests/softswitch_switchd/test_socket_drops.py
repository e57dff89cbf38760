"""Frames the kernel drops on a full receive socket are counted, on a switch port and
on a host: losses no P4 counter or link sequence number sees."""
from __future__ import annotations

import os
import socket
import subprocess
import time

import pytest

from common.kernel.netns import two_hosts
from mininet_topos.faults.p4 import udp_rcvbuf_errors
from softswitch.switchd.ports import Port

pytestmark = [pytest.mark.root]

FLOOD = 400   # datagrams of 1 kB: far more than a 4 kB receive buffer holds


def _flood(src_ns, dst_ip: str, port: int) -> None:
    with src_ns.enter():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _ in range(FLOOD):
            s.sendto(b"x" * 1000, (dst_ip, port))
    finally:
        s.close()


def _until_in_another_namespace(pid: int) -> None:
    """Wait until ``pid`` (``ip netns exec``) has entered its namespace."""
    mine = os.readlink("/proc/self/ns/net")
    for _ in range(500):
        if os.readlink(f"/proc/{pid}/ns/net") != mine:
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} never left the test's network namespace")


def test_a_switch_port_counts_the_frames_its_full_receive_socket_dropped() -> None:
    with two_hosts("tsdk", subnet="10.79.0.0/24") as (h1, h2):
        h1.run(["ip", "neigh", "replace", h2.ip, "lladdr", h2.mac, "dev", h1.ifname])
        with h2.enter():
            port = Port.open(1, h2.ifname)
        try:
            port.rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            assert port.read_socket_drops() == 0
            _flood(h1, h2.ip, 9)          # nobody reads the port: its socket fills
            first = port.read_socket_drops()
            assert 0 < first <= FLOOD
            # the kernel resets its count on each read; the port keeps the total
            assert port.read_socket_drops() == first == port.counters.rx_socket_drops
            _flood(h1, h2.ip, 9)
            assert port.read_socket_drops() > first
        finally:
            port.close()
        assert port.read_socket_drops() == port.counters.rx_socket_drops   # closed: no raise


def test_a_hosts_udp_receive_buffer_drops_are_read_from_its_namespace() -> None:
    with two_hosts("tsdu", subnet="10.79.1.0/24") as (h1, h2):
        h1.run(["ip", "neigh", "replace", h2.ip, "lladdr", h2.mac, "dev", h1.ifname])
        anchor = h2.popen(["sleep", "30"], stdout=subprocess.DEVNULL)
        try:
            _until_in_another_namespace(anchor.pid)
            before = udp_rcvbuf_errors(anchor.pid)
            assert before is not None
            with h2.enter():
                rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            rx.bind((h2.ip, 4791))
            try:
                _flood(h1, h2.ip, 4791)
                after = udp_rcvbuf_errors(anchor.pid)
                assert after is not None and 0 < after - before <= FLOOD
                assert udp_rcvbuf_errors(1) is not None   # (the root namespace: its own)
            finally:
                rx.close()
        finally:
            anchor.kill()
            anchor.wait()
        assert udp_rcvbuf_errors(anchor.pid) is None   # gone: unreadable, not an error
