"""p4/int_rocev2.p4 on real interfaces: two softswitch daemons, each in its own
network namespace, between two hosts and a collector (all namespaces joined by veths).

    h1 --1[s1]2 ==fabric== 1[s2]2 -- h2
                               3
                               |
                              col

h1 sends RoCEv2 packets from a kernel UDP socket to its gateway, which s1 answers by
proxy ARP; s1 inserts INT and pushes link sequence numbers towards s2; s2 is a
report-mode sink: h2's socket receives the packets as h1 sent them (ICRC verifies),
and the collector's socket receives one Telemetry Report per packet.
"""
from __future__ import annotations

import contextlib
import socket
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from formats import roce
from tests.helpers.p4int import (
    PROGRAM,
    IntSwitch,
    decode_hop_words,
    decode_report,
    split_int,
    switch_mac,
)

pytestmark = [pytest.mark.root, pytest.mark.slow]

SO_NO_CHECK = 11
IP_MTU_DISCOVER = 10
IP_PMTUDISC_DO = 2
SPORT = 49153


@dataclass(slots=True)
class TwoSwitchBed:
    s1: IntSwitch
    s2: IntSwitch
    sd1: Any
    sd2: Any
    tx: socket.socket           # in h1, bound to 10.0.1.1:SPORT
    rx: socket.socket           # in h2, bound to port 4791
    collector: socket.socket    # in col, bound to port 32766

    def send(self, psn: int, size: int = 256) -> bytes:
        payload = roce.build_udp_payload(
            src="10.0.1.1", dst="10.0.2.1", sport=SPORT, opcode=roce.Opcode.SEND_ONLY,
            dest_qp=0x42, psn=psn, payload=bytes([psn & 0xFF]) * size)
        self.tx.sendto(payload, ("10.0.2.1", roce.ROCEV2_UDP_PORT))
        return payload


@contextlib.contextmanager
def namespaces(*prefixes: str) -> Iterator[list]:
    from common.kernel.netns import Namespace
    made = []
    try:
        for p in prefixes:
            made.append(Namespace.create(p))
        yield made
    finally:
        for ns in reversed(made):
            ns.close()


def start_switch(ns, interfaces: dict[int, str], node_id: int, **opts: Any):
    from softswitch.switchd import SwitchOptions
    from softswitch.targets.python.daemon import Switchd
    sd = Switchd(SwitchOptions(program=str(PROGRAM), interfaces=interfaces,
                               grpc_server_addr=None, name=f"s{node_id}", **opts))
    with ns.enter():
        sd.start()
    return sd


def control(sd, node_id: int) -> IntSwitch:
    pipe = sd.device.pipeline
    s = IntSwitch(node_id=node_id, switch=pipe.switch.v1, runtime=pipe.switch.runtime, clock=[0])
    s.runtime.table_set_default("SwitchEgress.switch_config", "set_switch_config", [node_id])
    return s


@contextlib.contextmanager
def two_switch_bed(*, s1_opts: dict[str, Any] | None = None) -> Iterator[TwoSwitchBed]:
    """The topology above, configured as the controller would; torn down on exit."""
    from common.kernel.netns import veth_pair
    with namespaces("p4is1", "p4is2", "p4ih1", "p4ih2", "p4icol") as (ns1, ns2, h1, h2, col):
        s1p1, h1e = veth_pair(ns1, h1, prefix="p4i", addr_b="10.0.1.1/24")
        s1p2, s2p1 = veth_pair(ns1, ns2, prefix="p4i")
        s2p2, h2e = veth_pair(ns2, h2, prefix="p4i", addr_b="10.0.2.1/24")
        s2p3, cole = veth_pair(ns2, col, prefix="p4i", addr_b="10.0.9.9/24")
        for host, gw in ((h1, "10.0.1.254"), (h2, "10.0.2.254"), (col, "10.0.9.254")):
            host.run(["ip", "route", "add", "default", "via", gw])
        switches = []
        try:
            sd1 = start_switch(ns1, {1: s1p1.ifname, 2: s1p2.ifname}, 1, **(s1_opts or {}))
            switches.append(sd1)
            sd2 = start_switch(ns2, {1: s2p1.ifname, 2: s2p2.ifname, 3: s2p3.ifname}, 2)
            switches.append(sd2)
            with sd1.device.lock:
                s1 = control(sd1, 1)
                s1.route("10.0.1.1", 32, 1, h1e.mac)
                s1.route("10.0.0.0", 8, 2, switch_mac(2))
                s1.arp("10.0.1.254")
                s1.fabric(2)
                s1.line_rate(2, 10_000)
                s1.watch()
            with sd2.device.lock:
                s2 = control(sd2, 2)
                s2.route("10.0.2.1", 32, 2, h2e.mac)
                s2.route("10.0.9.9", 32, 3, cole.mac)
                s2.route("10.0.1.0", 24, 1, switch_mac(1))
                s2.arp("10.0.2.254")
                s2.arp("10.0.9.254")
                s2.fabric(1)
                s2.line_rate(2, 1_000)
                s2.sink(2, "report")
                s2.report_to(3, collector_mac=cole.mac, collector_ip="10.0.9.9")
            with h2.enter():
                rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            with col.enter():
                collector = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            with h1.enter():
                tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            with rx, collector, tx:
                rx.bind(("0.0.0.0", roce.ROCEV2_UDP_PORT))
                rx.settimeout(10)
                rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
                collector.bind(("0.0.0.0", 32766))
                collector.settimeout(10)
                collector.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
                tx.bind(("10.0.1.1", SPORT))
                tx.setsockopt(socket.SOL_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO)
                tx.setsockopt(socket.SOL_SOCKET, SO_NO_CHECK, 1)
                yield TwoSwitchBed(s1=s1, s2=s2, sd1=sd1, sd2=sd2, tx=tx, rx=rx,
                              collector=collector)
        finally:
            for sd in reversed(switches):
                sd.close()


def s1_hop(report: dict[str, Any]) -> dict[str, int]:
    """s1's hop record inside a report's inner packet."""
    d = split_int(bytes(14) + report["inner"])
    (hop,) = decode_hop_words(d["stack"], d["inst"], d["ds"], d["hop_ml"])
    return hop


def test_int_reports_and_restored_packets_over_veths():
    n = 20
    with two_switch_bed() as tb:
        sent = [tb.send(psn) for psn in range(n)]
        got = [tb.rx.recvfrom(4096) for _ in range(n)]
        reports = [decode_report(bytes(42) + tb.collector.recvfrom(4096)[0]) for _ in range(n)]
        # h2 sees exactly what h1 sent, and the ICRC verifies.
        assert sorted(p for p, _ in got) == sorted(sent)
        for payload, (ip, port) in got:
            assert (ip, port) == ("10.0.1.1", SPORT)
            assert roce.icrc_ok(payload, src=socket.inet_aton("10.0.1.1"),
                                dst=socket.inet_aton("10.0.2.1"), sport=SPORT)
        # One report per packet, numbered, from s2, carrying s1's hop record.
        assert sorted(r["seq"] for r in reports) == list(range(n))
        for r in reports:
            assert (r["ver"], r["node_id"], r["rep_type"], r["in_type"]) == (2, 2, 1, 4)
            assert r["md_len"] == 6
            d = split_int(bytes(14) + r["inner"])
            assert d["orig_dport"] == roce.ROCEV2_UDP_PORT
            hop = s1_hop(r)
            assert hop["node_id"] == 1 and hop["line_rate"] == 10_000
            _q, _ets, _tx, _qb, rate = struct.unpack("!IQIII", r["md"])
            assert rate == 1_000
        # Every packet crossed the fabric link with a sequence number; none lost.
        with tb.sd2.device.lock:
            assert tb.s2.reg("SwitchIngress.link_rx_expected", 1) == n
            assert tb.s2.reg("SwitchIngress.link_lost_packets", 1) == 0
            assert tb.s2.event("report_sent") == n
        with tb.sd1.device.lock:
            assert tb.s1.reg("SwitchEgress.link_tx_seq", 2) == n
            assert tb.s1.event("source_insert") == n


def test_queue_telemetry_and_ecn_under_a_paced_port():
    """s1's fabric port paused while a burst arrives, then paced at 2.5 Mbit/s: the hop
    records' queue bytes track the queue occupancy in frames (0 when it is empty), tx
    bytes grow by the frames sent, and ECN marks follow the RED profile on those queue
    bytes."""
    n, size = 60, 900
    frame_in = 14 + 20 + 8 + 12 + size + 4            # what s1 receives and enqueues
    kmin, kmax = 10 * frame_in, 30 * frame_in
    paced = {"queue_rates_bps": {2: 2.5e6}, "queue_depths_pkts": {2: 256}}
    with two_switch_bed(s1_opts=paced) as tb:
        with tb.sd1.device.lock:
            tb.s1.ecn(2, kmin, kmax, 32768)
        tb.tx.setsockopt(socket.SOL_IP, socket.IP_TOS, 0x02)       # ECT(0)
        # the port paused (as by a PFC PAUSE) until the whole burst is queued: how deep
        # the queue gets must not depend on how fast a loaded host's switch takes frames
        # in against a frame leaving every 3 ms (it did: 33 deep once under CI)
        tm = tb.sd1.device.tm
        tm.pause(2)
        for psn in range(n):
            tb.send(psn, size)
        deadline = time.monotonic() + 10
        while tm.queue_stats()[2]["queue_depth"] < n:
            assert time.monotonic() < deadline, tm.queue_stats()[2]
            time.sleep(0.01)
        tm.resume(2)
        reports = [decode_report(bytes(42) + tb.collector.recvfrom(4096)[0]) for _ in range(n)]
        for _ in range(n):
            tb.rx.recvfrom(4096)
    # departure order; packets that leave within one microsecond (a loaded machine's
    # switch catching up) tie on the timestamp, and their tx bytes give the order
    hops = sorted(((s1_hop(r), r) for r in reports),
                  key=lambda hr: (hr[0]["egress_ts"], hr[0]["tx_bytes"]))
    occupancy = [h["queue_occupancy"] for h, _ in hops]
    assert occupancy == list(range(n - 1, -1, -1)), occupancy    # the whole burst queued
    frame_out = frame_in + 16 + 28 + 6                    # INT + s1's hop + link header
    for k, (h, r) in enumerate(hops):
        # ingress counts a frame into queue_bytes before the traffic manager queues it,
        # and egress reads deq_qdepth when its packet left the queue; nothing arrives
        # while this queue drains, so the bytes are exactly the frames left behind
        assert h["queue_bytes"] == h["queue_occupancy"] * frame_in, (k, h)
        assert h["tx_bytes"] == k * frame_out
        ecn = r["inner"][1] & 3
        if h["queue_bytes"] >= kmax:
            assert ecn == 3
        elif h["queue_bytes"] <= kmin:
            assert ecn == 2
    marked = sum(r["inner"][1] & 3 == 3 for _, r in hops)
    assert 0 < marked < n
