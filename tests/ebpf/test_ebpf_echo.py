"""INT echo: the receiver's sink keeps a QP's hops, its egress program appends them to
that QP's ACKs; real packets through a veth between two namespaces, real kernel programs."""
from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from ebpf.records import SinkStat
from ebpf.sink import IntSink, SinkConfig
from formats import int_echo, int_md, roce
from formats.int_echo import EchoHop
from formats.int_md import HopRecord
from tests.helpers.sockets import recv_datagrams

pytestmark = [pytest.mark.root, pytest.mark.bpf]

_IP_MTU_DISCOVER, _IP_PMTUDISC_DO = 10, 2


@pytest.fixture(scope="module")
def sink(pair) -> Iterator[IntSink]:
    with IntSink(pair.h2.ifname, netns=pair.h2.name, config=SinkConfig(echo=True)) as s:
        yield s


@pytest.fixture(scope="module")
def acker(pair) -> Iterator[tuple[socket.socket, socket.socket]]:
    """(h2's ACK sender, h1's receiver on 4791): the responder's and requester's sockets."""
    with pair.h2.enter():
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        tx.setsockopt(socket.IPPROTO_IP, _IP_MTU_DISCOVER, _IP_PMTUDISC_DO)
        tx.bind((pair.h2.ip, 0))
    with pair.h1.enter():
        rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        rx.bind((pair.h1.ip, 4791))
    yield tx, rx
    tx.close()
    rx.close()


def hop(i: int, seed: int) -> HopRecord:
    return HopRecord(node_id=0x100 * seed + i + 1, queue_id=0, queue_occupancy=3 + i,
                     egress_ts=0x7_FFFF_FFF0 + 1000 * seed + i, tx_bytes=0xFFFF_F000 + seed,
                     queue_bytes=1034 * (i + seed), line_rate=4 + i, egress_port=i + 2)


def data(pair, hops, *, qp: int, psn: int, ins: int = 0xD400) -> bytes:
    f = roce.build_frame(eth_src=pair.h1.mac, eth_dst=pair.h2.mac, src=pair.h1.ip,
                         dst=pair.h2.ip, sport=50000, opcode=roce.Opcode.WRITE_ONLY,
                         dest_qp=qp, psn=psn, payload=bytes(64), reth=(0x1000, qp, 64))
    return int_md.insert_int(f, hops, instruction_bitmap=ins, ds_instruction=0xE000)


def ack(pair, tx: socket.socket, *, qp: int, psn: int) -> bytes:
    sport = tx.getsockname()[1]
    return roce.build_udp_payload(src=pair.h2.ip, dst=pair.h1.ip, sport=sport,
                                  opcode=roce.Opcode.ACKNOWLEDGE, dest_qp=qp, psn=psn,
                                  aeth=(0, 1))


def echoed(h: HopRecord) -> EchoHop:
    return EchoHop(h.node_id, h.egress_ts & 0xFFFFFFFF, h.tx_bytes, h.queue_bytes, h.line_rate)


def exchange(pair, sink, acker, hops, *, qp: int, psn: int,
             ins: int = 0xD400) -> tuple[bytes, bytes]:
    """One INT data packet h1 -> h2, then one ACK h2 -> h1: (ACK sent, ACK received)."""
    tx, rx = acker
    if hops is not None:
        pair.send([data(pair, hops, qp=qp, psn=psn, ins=ins)])
        assert pair.recv_udp(1), "data packet did not reach h2"
    sent = ack(pair, tx, qp=qp, psn=psn)
    tx.sendto(sent, (pair.h1.ip, 4791))
    got = recv_datagrams(rx, 1, 2.0)
    assert got, "ACK did not reach h1"
    return sent, got[0]


@pytest.mark.parametrize("nhops", [1, 2, 8])
def test_ack_carries_the_latest_hops_of_its_qp(pair, sink, acker, nhops):
    qp = 0x20 + nhops
    exchange(pair, sink, acker, [hop(i, 1) for i in range(nhops)], qp=qp, psn=5)
    latest = [hop(i, 2) for i in range(nhops)]
    before = sink.stats()
    sent, got = exchange(pair, sink, acker, latest, qp=qp, psn=6)
    assert len(got) == len(sent) + int_echo.echo_len(nhops)
    assert got[4] & int_echo.ECHO_FLAG
    plain, hops = int_echo.split_echo(got)
    assert plain == sent
    assert hops == tuple(echoed(h) for h in latest)
    # the responder's ICRC still verifies once the echo is off
    tx = acker[0]
    assert roce.icrc_ok(plain, src=socket.inet_aton(pair.h2.ip),
                        dst=socket.inet_aton(pair.h1.ip), sport=tx.getsockname()[1])
    assert sink.stats()[SinkStat.ECHO_APPENDED] - before[SinkStat.ECHO_APPENDED] == 1
    entry = sink.echo_entries()[(int.from_bytes(socket.inet_aton(pair.h1.ip), "big"),
                                 int.from_bytes(socket.inet_aton(pair.h2.ip), "big"), qp)]
    assert entry == (6, int_echo.encode_echo([echoed(h) for h in latest]))
    # scapy reads the same bytes
    sc = int_echo.IntEcho(got[len(sent):])
    assert sc.hop_count == nhops and [h.node_id for h in sc.hops] == [h.node_id for h in latest]


@pytest.mark.parametrize("ins", [0x9400, int_md.SUPPORTED_INSTRUCTIONS],
                         ids=["hpcc-profile", "every-field"])
def test_hops_of_any_layout_are_echoed(pair, sink, acker, ins):
    """The HPCC profiles are copied straight from the packet, other layouts (here with
    tx utilisation between the timestamps and the DS fields) through the scratch copy:
    the same echo either way. The QP's flow entry holds them (one lookup per packet)."""
    qp = 0x40 + (ins == int_md.SUPPORTED_INSTRUCTIONS)
    latest = [hop(i, 3) for i in range(5)]
    sent, got = exchange(pair, sink, acker, latest, qp=qp, psn=9, ins=ins)
    plain, hops = int_echo.split_echo(got)
    assert plain == sent and hops == tuple(echoed(h) for h in latest)
    row = next(r for r in sink.flows() if r["key"]["dest_qp"] == qp)
    assert row["stats"]["packets"] == 1 and row["stats"]["highest_psn"] == 9


def test_ack_of_a_qp_without_int_leaves_unchanged(pair, sink, acker):
    before = sink.stats()
    sent, got = exchange(pair, sink, acker, None, qp=0x77, psn=1)
    assert got == sent
    assert sink.stats()[SinkStat.ECHO_NO_HOPS] - before[SinkStat.ECHO_NO_HOPS] == 1


def test_non_ack_packets_are_not_touched(pair, sink, acker):
    tx, rx = acker
    exchange(pair, sink, acker, [hop(0, 3)], qp=0x31, psn=1)
    sport = tx.getsockname()[1]
    cnp = roce.build_cnp(src=pair.h2.ip, dst=pair.h1.ip, sport=sport, dest_qp=0x31)
    tx.sendto(cnp, (pair.h1.ip, 4791))
    assert recv_datagrams(rx, 1, 2.0) == [cnp]
