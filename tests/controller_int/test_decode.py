"""Report decoding: field-by-field round trips against two independent encoders."""
from __future__ import annotations

import socket
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, UDP, IPOption_NOP
from scapy.layers.l2 import Ether

from controller.int.decode import ReportDecoder
from controller.int.errors import Malformed
from controller.int.records import FIELD_PORTS, FIELD_TX_BYTES, SOURCE_REPORT
from controller.int.synth import HPCC_DS_BITMAP, HPCC_INS_BITMAP, Hop, build_hpcc_report
from formats import int_md
from formats.telemetry_report import (
    IndividualReport,
    TelemetryReportGroup,
    TelemetryReportINT,
    build_report,
    decode_group_header,
)


def _hops(n: int, base: int = 0) -> list[Hop]:
    return [
        Hop(node_id=base + k + 1, ingress_port=k + 1, egress_port=k + 2, hop_latency_us=10 + k,
            queue_id=k % 8, queue_pkts=3 * k, ingress_ts_us=(1 << 40) + 100 * k,
            egress_ts_us=(1 << 40) + 100 * k + 7, tx_bytes=0xFFFFFF00 + k, queue_bytes=1500 * k,
            line_rate_mbps=25000)
        for k in range(n)
    ]


@pytest.mark.parametrize("n_hops", [0, 1, 5, 8])
@pytest.mark.parametrize(
    "ins,ds",
    [(HPCC_INS_BITMAP, HPCC_DS_BITMAP), (0xFC00, 0xE000), (0xC000, 0), (0x2000, 0x4000)],
)
def test_synth_round_trip(n_hops: int, ins: int, ds: int) -> None:
    hops = _hops(n_hops)
    d = build_hpcc_report(node_id=77, seq=12345, hops=hops, src_ip="10.1.2.3",
                          dst_ip="10.4.5.6", sport=50000, dest_qp=0xABCDE, psn=0x123456,
                          ins_bitmap=ins, ds_bitmap=ds)
    b = ReportDecoder().decode([d], 42)
    assert len(b.samples) == 1
    s = b.samples[0]
    assert (s["reporter"], s["seq"], s["source"]) == (77, 12345, SOURCE_REPORT)
    assert s["src_ip"] == int.from_bytes(socket.inet_aton("10.1.2.3"), "big")
    assert s["dst_ip"] == int.from_bytes(socket.inet_aton("10.4.5.6"), "big")
    assert (s["sport"], s["dport"], s["dest_qp"], s["psn"]) == (50000, 4791, 0xABCDE, 0x123456)
    assert s["has_bth"] == 1 and s["hop_count"] == n_hops
    assert len(b.hops) == n_hops
    for rec in b.hops:
        want = hops[rec["hop_index"]]
        if ins & 0x8000:
            assert rec["node_id"] == want.node_id
        if ins & 0x4000:
            assert (rec["ingress_port"], rec["egress_port"]) == (want.ingress_port, want.egress_port)
            assert rec["fields"] & FIELD_PORTS
        if ins & 0x2000:
            assert rec["hop_latency_us"] == want.hop_latency_us
        if ins & 0x1000:
            assert (rec["queue_id"], rec["queue_pkts"]) == (want.queue_id, want.queue_pkts)
        if ins & 0x0800:
            assert rec["ingress_ts_us"] == want.ingress_ts_us
        if ins & 0x0400:
            assert rec["egress_ts_us"] == want.egress_ts_us
        if ds & 0x8000:
            assert rec["tx_bytes"] == want.tx_bytes and rec["fields"] & FIELD_TX_BYTES
        if ds & 0x4000:
            assert rec["queue_bytes"] == want.queue_bytes
        if ds & 0x2000:
            assert rec["line_rate_mbps"] == want.line_rate_mbps


def test_sink_metadata_becomes_last_hop() -> None:
    sink = Hop(egress_port=9, queue_pkts=4, egress_ts_us=999, tx_bytes=5, queue_bytes=6000,
               line_rate_mbps=100000)
    d = build_hpcc_report(node_id=5, seq=1, hops=_hops(2), sink=sink)
    b = ReportDecoder().decode([d], 0)
    assert b.samples["hop_count"][0] == 3
    last = b.hops[b.hops["hop_index"] == 2][0]
    assert (last["node_id"], last["egress_port"], last["queue_pkts"]) == (5, 9, 4)
    assert (last["tx_bytes"], last["queue_bytes"], last["line_rate_mbps"]) == (5, 6000, 100000)


def _frame_with_int(hops: list[int_md.HopRecord], *, options: bool, psn: int) -> bytes:
    ip = IP(src="10.0.0.1", dst="10.0.0.2", options=[IPOption_NOP()] * 4 if options else [])
    frame = bytes(Ether() / ip / UDP(sport=1234, dport=4791, chksum=0)
                  / BTH(opcode=4, dqpn=0x77, psn=psn) / (b"\x00" * 32))
    return int_md.insert_int(frame, hops)


@pytest.mark.parametrize("options", [False, True])
def test_against_int_md_encoder(options: bool) -> None:
    """Inner packets built by formats.int_md (newest hop first on the wire)."""
    wire = [int_md.HopRecord(node_id=10 + k, queue_occupancy=k, egress_ts=1000 + k,
                             tx_bytes=k * 100, queue_bytes=k * 10, line_rate=40000)
            for k in range(4)]
    inner = _frame_with_int(wire, options=options, psn=99)[14:]
    d = build_report(node_id=3, seq=7, reports=[IndividualReport(inner=inner)])
    b = ReportDecoder().decode([d], 0)
    assert len(b.samples) == 1 and b.samples["psn"][0] == 99 and b.samples["dest_qp"][0] == 0x77
    by_pos = {int(h["hop_index"]): h for h in b.hops}
    for k, w in enumerate(wire):  # wire index 0 = newest = last on the path
        h = by_pos[len(wire) - 1 - k]
        assert (h["node_id"], h["queue_pkts"], h["egress_ts_us"], h["tx_bytes"],
                h["queue_bytes"], h["line_rate_mbps"]) == (
            w.node_id, w.queue_occupancy, w.egress_ts, w.tx_bytes, w.queue_bytes, w.line_rate)


def test_many_shapes_and_coalesced_in_one_batch() -> None:
    a = build_hpcc_report(node_id=1, seq=1, hops=_hops(3))
    b = build_hpcc_report(node_id=2, seq=1, hops=_hops(5, 100))
    c = build_hpcc_report(node_id=3, seq=1, hops=_hops(2), ins_bitmap=0xFC00, ds_bitmap=0)
    # coalesced: two individual reports behind one group header
    r1 = IndividualReport(inner=_frame_with_int([int_md.HopRecord(node_id=50)], options=False, psn=1)[14:])
    r2 = IndividualReport(inner=_frame_with_int([int_md.HopRecord(node_id=60)], options=False, psn=2)[14:])
    co = build_report(node_id=4, seq=9, reports=[r1, r2])
    dec = ReportDecoder()
    out = dec.decode([a, b, c, co, a], 0)
    assert len(out.samples) == 6
    assert len(out.hops) == 3 + 5 + 2 + 1 + 1 + 3
    assert sorted(out.samples["reporter"].tolist()) == [1, 1, 2, 3, 4, 4]
    assert not dec.stats.malformed
    # every hop points at a sample with the right hop count
    counts = np.bincount(out.hops["sample"], minlength=len(out.samples))
    assert counts.tolist() == out.samples["hop_count"].tolist()


def test_scapy_layers_parse_builder_output() -> None:
    d = build_hpcc_report(node_id=0xDEAD, seq=0x3FFFFF, hops=_hops(2))
    p = TelemetryReportGroup(d)
    assert (p.ver, p.seq, p.node_id) == (2, 0x3FFFFF, 0xDEAD)
    rep = p[TelemetryReportINT]
    assert (rep.rep_type, rep.in_type, rep.rep_len) == (1, 4, (len(d) - 12) // 4)
    assert p[IP].src == "10.0.0.1"
    assert decode_group_header(d) == (2, 0, 0x3FFFFF, 0xDEAD)
    rebuilt = bytes(TelemetryReportGroup(seq=5, node_id=1) / TelemetryReportINT() / IP(bytes(p[IP])))
    assert ReportDecoder().decode([rebuilt], 0).samples["hop_count"][0] == 2


@pytest.mark.parametrize(
    "mutate,reason",
    [
        (lambda d: d[:16], Malformed.SHORT),
        (lambda d: d + b"\x00", Malformed.UNALIGNED),
        (lambda d: bytes([0x10]) + d[1:], Malformed.BAD_VERSION),
        (lambda d: d[:9] + bytes([255]) + d[10:], Malformed.REPORT_LENGTH),
        (lambda d: d[:8] + bytes([0x24]) + d[9:], Malformed.UNSUPPORTED_REPORT_TYPE),
        (lambda d: d[:8] + bytes([0x15]) + d[9:], Malformed.UNSUPPORTED_INNER_TYPE),
        (lambda d: d[:10] + bytes([1]) + d[11:], Malformed.MD_LENGTH),
        (lambda d: d[:20] + bytes([0x65]) + d[21:], Malformed.BAD_IPV4),
        (lambda d: d[:29] + bytes([6]) + d[30:], Malformed.NOT_UDP),
        (lambda d: d[:48] + bytes([0x24]) + d[49:], Malformed.NOT_INT_MD),
        (lambda d: d[:49] + bytes([2]) + d[50:], Malformed.BAD_SHIM),
        (lambda d: d[:49] + bytes([3 + 7 * 30]) + d[50:], Malformed.INNER_TRUNCATED),
        (lambda d: d[:52] + bytes([0x10]) + d[53:], Malformed.BAD_MD_VERSION),
        (lambda d: d[:54] + bytes([6]) + d[55:], Malformed.HOP_ML_MISMATCH),
    ],
)
def test_malformed_counted_by_reason(mutate, reason) -> None:  # type: ignore[no-untyped-def]
    good = build_hpcc_report(node_id=1, seq=1, hops=_hops(2))
    # offsets used above: IPv4 at 20, UDP at 40, shim at 48, MD at 52
    assert good[20] == 0x45 and struct.unpack_from("!H", good, 42)[0] == 7777
    dec = ReportDecoder()
    out = dec.decode([mutate(good), good], 0)
    assert len(out.samples) == 1
    assert dec.stats.malformed == {reason: 1}


def test_layout_sizes_agree_with_int_md() -> None:
    """The decoder's record sizes equal formats.int_md's for every supported bitmap pair."""
    from formats.int_fields import word_offsets

    std = [int_md.INS_NODE_ID, int_md.INS_PORTS, int_md.INS_HOP_LATENCY, int_md.INS_QUEUE,
           int_md.INS_INGRESS_TS, int_md.INS_EGRESS_TS, int_md.INS_TX_UTIL]
    for mask in range(1 << len(std)):
        ins = sum(b for i, b in enumerate(std) if mask >> i & 1)
        for ds in (0, int_md.DS_TX_BYTES, int_md.HPCC_DS_INSTRUCTION):
            assert word_offsets(ins, ds).words == int_md.hop_words(ins, ds)


_u32 = st.integers(0, 2**32 - 1)
_hop = st.builds(Hop, node_id=_u32, ingress_port=st.integers(0, 0xFFFF),
                 egress_port=st.integers(0, 0xFFFF), hop_latency_us=_u32,
                 queue_id=st.integers(0, 255), queue_pkts=st.integers(0, 0xFFFFFF),
                 ingress_ts_us=st.integers(0, 2**64 - 1), egress_ts_us=st.integers(0, 2**64 - 1),
                 tx_bytes=_u32, queue_bytes=_u32, line_rate_mbps=_u32)
_FIELDS = {0x8000: ("node_id",), 0x4000: ("ingress_port", "egress_port"),
           0x2000: ("hop_latency_us",), 0x1000: ("queue_id", "queue_pkts"),
           0x0800: ("ingress_ts_us",), 0x0400: ("egress_ts_us",)}
_DS = {0x8000: ("tx_bytes",), 0x4000: ("queue_bytes",), 0x2000: ("line_rate_mbps",)}


@settings(max_examples=150, deadline=None)
@given(hops=st.lists(_hop, max_size=8), sink=st.none() | _hop,
       ins=st.sets(st.sampled_from(sorted(_FIELDS))), ds=st.sets(st.sampled_from(sorted(_DS))),
       seq=st.integers(0, 2**22 - 1), node=_u32)
def test_round_trip_property(hops, sink, ins, ds, seq, node) -> None:  # type: ignore[no-untyped-def]
    ins_bits, ds_bits = sum(ins), sum(ds)
    if not ins_bits and not ds_bits:
        hops = []  # records of zero words cannot be told apart
    d = build_hpcc_report(node_id=node, seq=seq, hops=hops, sink=sink, ins_bitmap=ins_bits,
                          ds_bitmap=ds_bits)
    dec = ReportDecoder()
    b = dec.decode([d], 0)
    assert not dec.stats.malformed
    n = len(hops) + (sink is not None)
    assert (b.samples["reporter"][0], b.samples["seq"][0], b.samples["hop_count"][0]) == (node, seq, n)
    assert b.hops["hop_index"].tolist() == list(range(n))
    for rec, want in zip(b.hops[: len(hops)], hops):
        present = [n for b, ns in _FIELDS.items() if b & ins_bits for n in ns]
        present += [n for b, ns in _DS.items() if b & ds_bits for n in ns]
        for name in present:
            assert rec[name] == getattr(want, name), name
    if sink is not None:
        last = b.hops[-1]
        assert last["node_id"] == node
        assert (last["egress_port"], last["queue_pkts"], last["egress_ts_us"]) == (
            sink.egress_port, sink.queue_pkts, sink.egress_ts_us)
        assert (last["tx_bytes"], last["queue_bytes"], last["line_rate_mbps"]) == (
            sink.tx_bytes, sink.queue_bytes, sink.line_rate_mbps)


def test_mixed_shapes_keep_arrival_order() -> None:
    ds = []
    for i in range(30):
        n = 1 + i % 4  # four lengths (buckets), interleaved
        ds.append(build_hpcc_report(node_id=1, seq=i, hops=_hops(n), psn=i,
                                    ins_bitmap=0xFC00 if i % 3 == 0 else HPCC_INS_BITMAP))
    b = ReportDecoder().decode(ds, 0)
    assert b.samples["psn"].tolist() == list(range(30))
    assert b.hops["sample"].tolist() == sorted(b.hops["sample"].tolist())
    assert np.bincount(b.hops["sample"]).tolist() == [1 + i % 4 for i in range(30)]
    assert b.hops["node_id"][b.hops["sample"] == 3].tolist() == [1, 2, 3, 4]


def test_report_dtypes_match_builder() -> None:
    from formats.telemetry_report import (
        GROUP_HEADER_DTYPE,
        INDIVIDUAL_HEADER_DTYPE,
        INT_MAIN_DTYPE,
        REPORT_FIXED_DTYPE,
    )

    sink = Hop(egress_port=3, queue_pkts=1, egress_ts_us=2, tx_bytes=3, queue_bytes=4,
               line_rate_mbps=5)
    d = build_hpcc_report(node_id=0x01020304, seq=77, hops=_hops(2), sink=sink)
    f = np.frombuffer(d[:20], REPORT_FIXED_DTYPE)[0]
    assert f["ver_hw_seq"] >> 28 == 2 and f["ver_hw_seq"] & 0x3FFFFF == 77
    assert f["node_id"] == 0x01020304 and f["types"] == 0x14
    assert f["rep_len"] == (len(d) - 12) // 4 and f["md_len"] == 7
    assert (f["rep_md_bits"], f["domain_id"], f["ds_md_bits"]) == (0x5400, 0x4850, 0xE000)
    g = np.frombuffer(d[:8], GROUP_HEADER_DTYPE)[0]
    i = np.frombuffer(d[8:12], INDIVIDUAL_HEADER_DTYPE)[0]
    m = np.frombuffer(d[12:20], INT_MAIN_DTYPE)[0]
    assert g["node_id"] == f["node_id"] and i["md_len"] == 7 and m["ds_md_bits"] == 0xE000
