"""INT source, transit and host-mode sink of p4/int_rocev2.p4 on the softswitch.

Expected bytes come from the formats package (the Python side of formats/FORMATS.md) and
from a struct decoder in the harness, never from the program under test.
"""
from __future__ import annotations

import struct

import pytest

from formats import int_md, roce
from tests.helpers.p4int import (
    DS_ID_HPCC,
    H2_MAC,
    HPCC_DS,
    HPCC_INST,
    INT_UDP_PORT,
    Chain,
    IntSwitch,
    decode_hop_words,
    hexdump_diff,
    ipv4_checksum_ok,
    roce_frame,
    routed,
    split_int,
    strip_link_seq,
)


def test_source_inserts_int_byte_exact(make_program):
    chain = Chain.build(1, make_program)
    frame = roce_frame()
    out = chain.send(frame)
    assert [p for p, _ in out] == [2]
    got = out[0][1]
    # s1's clock reads 1003 us when the packet passes: ingress = egress timestamp.
    hop = int_md.HopRecord(node_id=1, queue_occupancy=0, egress_ts=1003, tx_bytes=0,
                           queue_bytes=0, line_rate=25_000)
    want = int_md.insert_int(routed(frame, 1), [hop], instruction_bitmap=HPCC_INST,
                             ds_instruction=HPCC_DS, remaining_hop_count=7)
    assert got == want, hexdump_diff(got, want)
    assert ipv4_checksum_ok(got[14:34])
    s1 = chain.switches[0]
    assert s1.event("source_insert") == 1
    assert s1.event("transit_push") == 1
    assert s1.event("sink_host") == 1


@pytest.mark.parametrize("n", [1, 2, 5, 9])
def test_transit_pushes_one_record_per_switch(make_program, n):
    chain = Chain.build(n, make_program)
    frame = roce_frame(payload=bytes(200))
    out = chain.send(frame, step_us=3)
    assert [p for p, _ in out] == [2]
    got = out[0][1]
    d = split_int(got)
    pushed = min(n, 8)
    assert d["ver"] == 2 and d["shim_type"] == 1 and d["npt"] == 1
    assert d["orig_dport"] == roce.ROCEV2_UDP_PORT
    assert d["hop_ml"] == 7
    assert d["rhc"] == 8 - pushed
    assert d["e"] == (1 if n > 8 else 0)
    assert d["m"] == 0
    assert d["shim_len"] == 3 + 7 * pushed
    assert d["ip_total_len"] == len(frame) - 14 + 16 + 28 * pushed
    assert d["udp"][2] == d["ip_total_len"] - 20
    assert d["ttl"] == 64 - n
    hops = decode_hop_words(d["stack"], d["inst"], d["ds"], d["hop_ml"])
    assert [h["node_id"] for h in hops] == list(range(pushed, 0, -1))
    for h in hops:
        k = h["node_id"]
        # Switch k's clock: 1000 * k, advanced 3 us when the packet passes.
        assert h["egress_ts"] == 1000 * k + 3
        assert h["line_rate"] == 25_000 + k - 1
        assert h["queue_id"] == 0 and h["queue_occupancy"] == 0
        assert h["tx_bytes"] == 0 and h["queue_bytes"] == 0
    # The formats package reads the same packet the same way.
    parsed = int_md.parse_int(got)
    assert [h.node_id for h in parsed.hops] == list(range(pushed, 0, -1))
    # Stripping INT (what the host's eBPF sink does) gives the packet as sent.
    restored = int_md.strip_int(got)
    assert restored == routed(frame, n, last_node=n)
    ip_udp, _ = roce.parse_frame(restored)
    assert roce.verify_icrc(ip_udp, restored[42:])
    if n > 8:
        assert chain.switches[-1].event("hop_exhausted") == 1


def test_tx_bytes_count_frames_as_sent(make_program):
    chain = Chain.build(1, make_program)
    first = chain.send(roce_frame(psn=1))[0][1]
    second = chain.send(roce_frame(psn=2))[0][1]
    h2 = decode_hop_words(split_int(second)["stack"], HPCC_INST, HPCC_DS, 7)[0]
    assert h2["tx_bytes"] == len(first)
    s1 = chain.switches[0]
    assert s1.reg("SwitchEgress.tx_bytes", 2) == len(first) + len(second)


@pytest.mark.parametrize("inst,ds", [
    (0x8000, 0x0000),
    (0x4000, 0x0000),
    (0x2000 | 0x0800, 0x2000),
    (0x0100, 0x8000),
    (0xFD00, 0xE000),
    (0xFFFF, 0xFFFF),   # unsupported bits are masked off by the source
])
def test_instruction_bitmap_subsets(make_program, inst, ds):
    chain = Chain.build(2, make_program, watch={"inst": inst, "ds": ds})
    out = chain.send(roce_frame())
    d = split_int(out[0][1])
    want_inst, want_ds = inst & 0xFD00, ds & 0xE000
    assert (d["inst"], d["ds"], d["ds_id"]) == (want_inst, want_ds, DS_ID_HPCC)
    assert d["hop_ml"] == int_md.hop_words(want_inst, want_ds)
    hops = decode_hop_words(d["stack"], d["inst"], d["ds"], d["hop_ml"])
    assert len(hops) == 2
    newest = hops[0]
    if want_inst & 0x8000:
        assert newest["node_id"] == 2
    if want_inst & 0x4000:
        assert (newest["ingress_port"], newest["egress_port"]) == (1, 2)
    if want_inst & 0x2000:
        assert newest["hop_latency"] == 0
    if want_inst & 0x0800:
        assert newest["ingress_ts"] == 2003
    if want_inst & 0x0400:
        assert newest["egress_ts"] == 2003
    if want_inst & 0x0100:
        assert newest["tx_util"] == 0
    if want_ds & 0x2000:
        assert newest["line_rate"] == 25_001


def test_non_watchlisted_traffic_is_only_routed(make_program):
    chain = Chain.build(2, make_program)
    plain_udp = roce_frame(dport=5000)
    out = chain.send(plain_udp)
    assert [p for p, _ in out] == [2]
    assert out[0][1] == routed(plain_udp, 2, last_node=2)
    # TCP (protocol 6) is routed too and never gets INT.
    tcp = bytearray(roce_frame())
    tcp[14 + 9] = 6
    tcp[24:26] = b"\0\0"
    tcp[24:26] = struct.pack("!H", roce.ipv4_checksum(bytes(tcp[14:34])))
    out = chain.send(bytes(tcp))
    assert out[0][1] == routed(bytes(tcp), 2, last_node=2)
    assert all(s.event("source_insert") == 0 for s in chain.switches)


def test_int_on_flow_without_watchlist_is_transit(make_program):
    """A switch with an empty watchlist still pushes onto INT it receives."""
    s = IntSwitch.build(4, make_program())
    s.route("10.0.2.0", 24, 2, H2_MAC)
    hop = int_md.HopRecord(node_id=9, egress_ts=5)
    frame = int_md.insert_int(roce_frame(), [hop], remaining_hop_count=3)
    out = s.process(1, frame)
    d = split_int(out[0][1])
    hops = decode_hop_words(d["stack"], d["inst"], d["ds"], d["hop_ml"])
    assert [h["node_id"] for h in hops] == [4, 9]
    assert d["rhc"] == 2


def test_fabric_links_carry_link_sequence_numbers(make_program):
    chain = Chain.build(2, make_program)
    s1 = chain.switches[0]
    seqs = []
    for psn in range(3):
        out = s1.process(1, roce_frame(psn=psn))
        (port, data), = out
        assert port == 2
        assert struct.unpack_from("!H", data, 12)[0] == 0x88B5
        seq, inner_type = struct.unpack_from("!IH", data, 14)
        assert inner_type == 0x0800
        seqs.append(seq)
        assert split_int(data)["udp"][1] == INT_UDP_PORT
        # the next switch pops it again
        (_port2, data2), = chain.switches[1].process(1, data)
        assert struct.unpack_from("!H", data2, 12)[0] == 0x0800
        assert strip_link_seq(data2) == data2
    assert seqs == [0, 1, 2]
    assert s1.reg("SwitchEgress.link_tx_seq", 2) == 3
    assert chain.switches[1].reg("SwitchIngress.link_lost_packets", 1) == 0


def test_port_and_watchlist_counters(make_program):
    from softswitch.tables import Ternary
    chain = Chain.build(1, make_program)
    s1 = chain.switches[0]
    s1.watch(src_addr=(0x0A000101, 0xFFFFFFFF), priority=20)   # h1 only, wins over the default
    frames = [roce_frame(psn=i) for i in range(3)] + [roce_frame(src="10.0.1.2")]
    sent = [chain.send(f)[0][1] for f in frames]
    rt = s1.runtime
    assert rt.counter_read("SwitchIngress.ingress_port_counter", 1) == (
        4, sum(len(f) for f in frames))
    # v1model counters count packet_length: the frame as received by this switch.
    assert rt.counter_read("SwitchEgress.egress_port_counter", 2) == (
        4, sum(len(f) for f in frames))
    assert s1.reg("SwitchEgress.tx_bytes", 2) == sum(len(f) for f in sent)
    any_key = [Ternary(0, 0), Ternary(0, 0), Ternary(0, 0), Ternary(4791, 0xFFFF), Ternary(0, 0)]
    h1_key = [Ternary(0x0A000101, 0xFFFFFFFF)] + any_key[1:]
    assert rt.direct_counter_read("SwitchIngress.int_watchlist", h1_key, 20) == (
        3, sum(len(f) for f in frames[:3]))
    assert rt.direct_counter_read("SwitchIngress.int_watchlist", any_key, 10)[0] == 1
