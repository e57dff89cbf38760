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
from collections.abc import Iterator

import pytest
from p4int_harness import (
    PROGRAM,
    IntSwitch,
    decode_hop_words,
    decode_report,
    split_int,
    switch_mac,
)

from formats import roce

pytestmark = [pytest.mark.root, pytest.mark.slow]

SO_NO_CHECK = 11
IP_MTU_DISCOVER = 10
IP_PMTUDISC_DO = 2
SPORT = 49153
N_PACKETS = 20


@contextlib.contextmanager
def namespaces(*prefixes: str) -> Iterator[list]:
    from mininet_topos.netns import Namespace
    made = []
    try:
        for p in prefixes:
            made.append(Namespace.create(p))
        yield made
    finally:
        for ns in reversed(made):
            ns.close()


def start_switch(ns, interfaces: dict[int, str], node_id: int):
    from softswitch.switchd import Switchd, SwitchOptions
    sd = Switchd(SwitchOptions(program=str(PROGRAM), interfaces=interfaces,
                               grpc_server_addr=None, name=f"s{node_id}"))
    with ns.enter():
        sd.start()
    return sd


def control(sd, node_id: int) -> IntSwitch:
    pipe = sd.device.pipeline
    s = IntSwitch(node_id=node_id, switch=pipe.switch.v1, runtime=pipe.switch.runtime, clock=[0])
    s.runtime.table_set_default("SwitchEgress.switch_config", "set_switch_config", [node_id])
    return s


def test_int_reports_and_restored_packets_over_veths():
    from mininet_topos.netns import veth_pair
    with namespaces("p4is1", "p4is2", "p4ih1", "p4ih2", "p4icol") as (ns1, ns2, h1, h2, col):
        s1p1, h1e = veth_pair(ns1, h1, prefix="p4i", addr_b="10.0.1.1/24")
        s1p2, s2p1 = veth_pair(ns1, ns2, prefix="p4i")
        s2p2, h2e = veth_pair(ns2, h2, prefix="p4i", addr_b="10.0.2.1/24")
        s2p3, cole = veth_pair(ns2, col, prefix="p4i", addr_b="10.0.9.9/24")
        for host, gw in ((h1, "10.0.1.254"), (h2, "10.0.2.254"), (col, "10.0.9.254")):
            host.run(["ip", "route", "add", "default", "via", gw])
        switches = []
        try:
            sd1 = start_switch(ns1, {1: s1p1.ifname, 2: s1p2.ifname}, 1)
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
                collector.bind(("0.0.0.0", 32766))
                collector.settimeout(10)
                tx.bind(("10.0.1.1", SPORT))
                tx.setsockopt(socket.SOL_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO)
                tx.setsockopt(socket.SOL_SOCKET, SO_NO_CHECK, 1)
                sent = []
                for psn in range(N_PACKETS):
                    payload = roce.build_udp_payload(
                        src="10.0.1.1", dst="10.0.2.1", sport=SPORT,
                        opcode=roce.Opcode.SEND_ONLY, dest_qp=0x42, psn=psn,
                        payload=bytes([psn]) * 256)
                    sent.append(payload)
                    tx.sendto(payload, ("10.0.2.1", roce.ROCEV2_UDP_PORT))

                got = [rx.recvfrom(4096) for _ in range(N_PACKETS)]
                reports = [collector.recvfrom(4096)[0] for _ in range(N_PACKETS)]

            # h2 sees exactly what h1 sent, and the ICRC verifies.
            assert sorted(p for p, _ in got) == sorted(sent)
            for payload, (ip, port) in got:
                assert (ip, port) == ("10.0.1.1", SPORT)
                assert roce.icrc_ok(payload, src=socket.inet_aton("10.0.1.1"),
                                    dst=socket.inet_aton("10.0.2.1"), sport=SPORT)
            # One report per packet, numbered, from s2, carrying s1's hop record.
            decoded = [decode_report(bytes(42) + r) for r in reports]
            assert sorted(r["seq"] for r in decoded) == list(range(N_PACKETS))
            for r in decoded:
                assert (r["ver"], r["node_id"], r["rep_type"], r["in_type"]) == (2, 2, 1, 4)
                assert r["md_len"] == 6
                inner = bytes(14) + r["inner"]
                d = split_int(inner)
                assert d["orig_dport"] == roce.ROCEV2_UDP_PORT
                hops = decode_hop_words(d["stack"], d["inst"], d["ds"], d["hop_ml"])
                assert [h["node_id"] for h in hops] == [1]
                assert hops[0]["line_rate"] == 10_000
                _q, _ets, _tx, _qb, rate = struct.unpack("!IQIII", r["md"])
                assert rate == 1_000
            # Every packet crossed the fabric link with a sequence number; none lost.
            with sd2.device.lock:
                assert s2.reg("SwitchIngress.link_rx_expected", 1) == N_PACKETS
                assert s2.reg("SwitchIngress.link_lost_packets", 1) == 0
                assert s2.event("report_sent") == N_PACKETS
            with sd1.device.lock:
                assert s1.reg("SwitchEgress.link_tx_seq", 2) == N_PACKETS
                assert s1.event("source_insert") == N_PACKETS
        finally:
            for sd in reversed(switches):
                sd.close()
