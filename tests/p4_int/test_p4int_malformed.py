"""Malformed and unusual input: each case is forwarded or dropped as p4/README.md
documents, counted, and never disturbs the next, well-formed packet."""
from __future__ import annotations

import struct

import pytest

from formats import int_md, roce
from tests.helpers.p4int import (
    H1_IP,
    H1_MAC,
    H2_MAC,
    IntSwitch,
    decode_hop_words,
    hexdump_diff,
    roce_frame,
    routed,
    split_int,
    switch_mac,
)


def transit(make_program, *, sink: str | None = None) -> IntSwitch:
    s = IntSwitch.build(2, make_program())
    s.route("10.0.2.0", 24, 2, H2_MAC)
    s.watch()
    if sink:
        s.sink(2, sink)
        s.report_to(3)
    return s


def fix_ip(frame: bytearray) -> bytes:
    """Recompute the IPv4 header checksum of an edited frame."""
    frame[24:26] = b"\0\0"
    frame[24:26] = struct.pack("!H", roce.ipv4_checksum(bytes(frame[14:34])))
    return bytes(frame)


def int_frame(**kw) -> bytearray:
    hop = int_md.HopRecord(node_id=1, egress_ts=3, line_rate=100)
    kw.setdefault("remaining_hop_count", 7)
    return bytearray(int_md.insert_int(roce_frame(), [hop], **kw))


def set_len(frame: bytearray) -> bytes:
    """IPv4 and UDP lengths that match the frame as it is."""
    struct.pack_into("!H", frame, 16, len(frame) - 14)
    struct.pack_into("!H", frame, 38, len(frame) - 34)
    return fix_ip(frame)


def assert_next_packet_fine(s: IntSwitch) -> None:
    """A clean RoCEv2 packet right after: INT inserted with this switch's record."""
    frame = roce_frame(psn=99)
    (port, data), = s.process(1, frame)
    assert port == 2
    d = split_int(data)
    assert d["udp"][1] == 7777 and d["shim_len"] == 3 + 7 and d["rhc"] == 7
    hops = decode_hop_words(d["stack"], d["inst"], d["ds"], d["hop_ml"])
    assert [h["node_id"] for h in hops] == [2]
    assert int_md.strip_int(data) == routed(frame, 1, last_node=2)


def test_truncated_shim_is_dropped(make_program):
    s = transit(make_program)
    frame = int_frame()[:14 + 20 + 8 + 2]
    assert s.process(1, set_len(frame)) == []
    assert s.event("bad_shim_truncated") == 1 and s.drops("int_malformed") == 1
    assert_next_packet_fine(s)


def test_shim_length_beyond_the_packet_is_dropped(make_program):
    s = transit(make_program)
    frame = int_frame()
    frame[43] = 200                                      # shim length in words
    assert s.process(1, fix_ip(frame)) == []
    assert s.event("bad_shim_truncated") == 1
    assert_next_packet_fine(s)


@pytest.mark.parametrize("words", [0, 1, 2])
def test_shim_shorter_than_the_md_header_is_dropped(make_program, words):
    s = transit(make_program)
    frame = int_frame()
    frame[43] = words
    assert s.process(1, fix_ip(frame)) == []
    assert s.event("bad_shim_len") == 1 and s.drops("int_malformed") == 1
    assert_next_packet_fine(s)


def test_udp_length_disagreeing_with_ipv4_is_dropped(make_program):
    s = transit(make_program)
    frame = int_frame()
    struct.pack_into("!H", frame, 38, struct.unpack_from("!H", frame, 38)[0] + 4)
    assert s.process(1, fix_ip(frame)) == []
    assert s.event("bad_shim_len") == 1
    assert_next_packet_fine(s)


@pytest.mark.parametrize("hop_ml", [0, 31, 6])
def test_bad_hop_ml_is_forwarded_without_a_push(make_program, hop_ml):
    s = transit(make_program)
    frame = bytes(int_frame(hop_ml=hop_ml))
    (_port, data), = s.process(1, frame)
    assert data == routed(frame, 1, last_node=2), hexdump_diff(data, routed(frame, 1, last_node=2))
    assert s.event("bad_hop_ml") == 1 and s.event("transit_push") == 0
    assert_next_packet_fine(s)


def test_bad_hop_ml_at_a_report_sink_is_stripped_without_report(make_program):
    s = transit(make_program, sink="report")
    original = roce_frame()
    frame = int_md.insert_int(original, [int_md.HopRecord(node_id=1)], hop_ml=31,
                              remaining_hop_count=7)
    out = s.process(1, frame)
    assert out == [(2, routed(original, 1, last_node=2))]
    assert s.event("sink_strip") == 1 and s.event("report_sent") == 0


def test_remaining_hop_count_zero_sets_e(make_program):
    s = transit(make_program)
    frame = bytes(int_frame(remaining_hop_count=0))
    (_port, data), = s.process(1, frame)
    want = bytearray(routed(frame, 1, last_node=2))
    want[46] |= 0x04                                    # E bit (MD byte 0: ver 4, D, E, M, ...)
    assert data == bytes(want)
    assert s.event("hop_exhausted") == 1
    assert_next_packet_fine(s)


@pytest.mark.parametrize("version", [0, 1, 3, 15])
def test_unknown_md_version_is_forwarded_untouched(make_program, version):
    s = transit(make_program)
    frame = int_frame()
    frame[46] = (version << 4) | (frame[46] & 0x0F)
    (_port, data), = s.process(1, bytes(frame))
    assert data == routed(bytes(frame), 1, last_node=2)
    assert s.event("bad_version") == 1
    assert_next_packet_fine(s)


@pytest.mark.parametrize("shim_byte", [0x24, 0x14 | 0x08, 0x10])
def test_unknown_shim_type_or_npt_is_forwarded_untouched(make_program, shim_byte):
    """type 2 / NPT 3 / NPT 0: opaque, even at a report-mode sink."""
    s = transit(make_program, sink="report")
    frame = int_frame()
    frame[42] = shim_byte
    (_port, data), = s.process(1, bytes(frame))
    assert data == routed(bytes(frame), 1, last_node=2)
    assert s.event("unsupported_type") == 1 and s.event("report_sent") == 0


def test_ipv4_length_beyond_the_frame_is_dropped(make_program):
    s = transit(make_program)
    frame = bytearray(roce_frame())
    struct.pack_into("!H", frame, 16, len(frame) - 14 + 1)
    assert s.process(1, fix_ip(frame)) == []
    assert s.drops("ipv4_malformed") == 1
    assert_next_packet_fine(s)


def test_router_drops_are_counted(make_program):
    s = transit(make_program)
    bad_csum = bytearray(roce_frame())
    bad_csum[24] ^= 0xFF
    assert s.process(1, bytes(bad_csum)) == []
    assert s.drops("checksum") == 1
    assert s.process(1, roce_frame(ttl=1)) == []
    assert s.drops("ttl") == 1
    assert s.process(1, roce_frame(dst="192.168.1.1")) == []
    assert s.drops("no_route") == 1
    ipv6 = bytearray(roce_frame())
    ipv6[12:14] = b"\x86\xdd"
    assert s.process(1, bytes(ipv6)) == []
    assert s.drops("not_ip") == 1
    options = bytearray(roce_frame())
    options[14] = 0x46
    assert s.process(1, fix_ip(options)) == []
    assert s.drops("ipv4_malformed") == 1
    assert s.process(1, roce_frame()[:20]) == []
    assert s.drops("parser_error") == 1
    assert_next_packet_fine(s)


def test_fragments_get_no_int(make_program):
    s = transit(make_program)
    frame = bytearray(roce_frame())
    frame[20] |= 0x20                                   # MF
    (_port, data), = s.process(1, fix_ip(frame))
    assert split_int(data)["udp"][1] == 4791
    assert s.event("fragment") == 1
    assert_next_packet_fine(s)


def test_arp_requests_are_answered_by_the_switch(make_program):
    s = transit(make_program)
    s.arp("10.0.1.254")
    sha = bytes.fromhex(H1_MAC.replace(":", ""))
    spa = bytes(int(x) for x in H1_IP.split("."))
    tpa = bytes([10, 0, 1, 254])
    req = (b"\xff" * 6 + sha + b"\x08\x06"
           + struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + sha + spa + bytes(6) + tpa
           + bytes(18))
    (port, rep), = s.process(1, req)
    assert port == 1
    mine = bytes.fromhex(switch_mac(2).replace(":", ""))
    assert rep[0:6] == sha and rep[6:12] == mine and rep[12:14] == b"\x08\x06"
    htype, ptype, hlen, plen, oper = struct.unpack_from("!HHBBH", rep, 14)
    assert (htype, ptype, hlen, plen, oper) == (1, 0x0800, 6, 4, 2)
    assert rep[22:28] == mine and rep[28:32] == tpa
    assert rep[32:38] == sha and rep[38:42] == spa
    assert len(rep) == len(req)
    # Unknown targets and replies are dropped, counted.
    other = req[:38] + bytes([10, 0, 1, 77]) + req[42:]
    assert s.process(1, other) == []
    reply = req[:20] + b"\x00\x02" + req[22:]
    assert s.process(1, reply) == []
    assert s.drops("arp") == 2


def test_fuzzed_int_headers_never_break_the_switch(make_program):
    """Random bytes in the shim, MD header and first hop record: every packet is either
    dropped with a counted reason or forwarded with consistent lengths, and a good
    packet right after is processed exactly."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    s = transit(make_program)

    @settings(max_examples=120, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.lists(st.tuples(st.integers(42, 42 + 16 + 28 - 1), st.integers(0, 255)),
                    min_size=1, max_size=6))
    def run(edits):
        frame = int_frame()
        for off, val in edits:
            frame[off] = val
        frame = bytearray(fix_ip(frame))
        drops_before = sum(s.runtime.counter_read("drop_reasons", i)[0] for i in range(16))
        out = s.process(1, bytes(frame))
        drops_after = sum(s.runtime.counter_read("drop_reasons", i)[0] for i in range(16))
        if not out:
            assert drops_after == drops_before + 1
        else:
            (port, data), = out
            assert port == 2
            d = split_int(data)
            assert d["ip_total_len"] == len(data) - 14
            assert d["udp"][2] == d["ip_total_len"] - 20
            if d["udp"][1] == 7777 and d.get("ver") == 2 and d.get("shim_type") == 1:
                assert 4 + d["shim_len"] * 4 <= d["udp"][2] - 8
        assert_next_packet_fine(s)

    run()
