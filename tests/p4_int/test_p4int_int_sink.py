"""INT sink in report mode: the packet leaves as it entered the INT domain, and a
Telemetry Report v2.0 goes to the collector. Reports are decoded here with struct
from formats/FORMATS.md, then cross-checked with the formats package's scapy layers."""
from __future__ import annotations

import struct

import pytest

from formats import int_md, roce, telemetry_report
from tests.helpers.p4int import (
    COLLECTOR_IP,
    COLLECTOR_MAC,
    DS_ID_HPCC,
    HPCC_DS,
    HPCC_INST,
    INT_UDP_PORT,
    Chain,
    decode_hop_words,
    decode_report,
    hexdump_diff,
    ip_int,
    mac_int,
    roce_frame,
    routed,
    split_int,
    switch_ip,
    switch_mac,
)


def report_chain(make_program, n: int = 3, *, payload_bytes: int = 12) -> Chain:
    chain = Chain.build(n, make_program, sink_mode="report")
    chain.switches[-1].report_to(3, payload_bytes=payload_bytes)
    return chain


def test_report_mode_restores_packet_byte_for_byte(make_program):
    chain = report_chain(make_program)
    frame = roce_frame(payload=bytes(range(100)))
    out = dict(chain.send(frame))
    assert sorted(out) == [2, 3]
    data = out[2]
    want = routed(frame, 3, last_node=3)
    assert data == want, hexdump_diff(data, want)
    ip_udp, pkt = roce.parse_frame(data)
    assert roce.verify_icrc(ip_udp, data[42:])
    assert pkt.bth.psn == 7
    s3 = chain.switches[-1]
    assert s3.event("sink_strip") == 1 and s3.event("report_sent") == 1


def test_report_format(make_program):
    chain = report_chain(make_program)
    frame = roce_frame(payload=bytes(range(100)))
    # What s3 receives: s1 and s2 have pushed their records.
    s1_out = chain.switches[0].process(1, frame)[0][1]
    s2_out = chain.switches[1].process(1, s1_out)[0][1]
    chain.switches[2].clock[0] += 3
    outs = dict(chain.switches[2].process(1, s2_out))
    rep = decode_report(outs[3])

    assert rep["eth_dst"] == bytes.fromhex(COLLECTOR_MAC.replace(":", ""))
    assert rep["eth_src"] == bytes.fromhex(switch_mac(3).replace(":", ""))
    assert rep["eth_type"] == b"\x08\x00"
    assert rep["ip_ok"] and rep["proto"] == 17 and rep["ttl"] == 64
    assert (rep["ip_src"], rep["ip_dst"]) == (ip_int(switch_ip(3)), ip_int(COLLECTOR_IP))
    assert rep["ip_total_len"] == len(outs[3]) - 14
    assert (rep["sport"], rep["dport"]) == (32766, 32766)
    assert rep["udp_len"] == rep["ip_total_len"] - 20 and rep["udp_csum"] == 0
    assert (rep["ver"], rep["hw_id"], rep["seq"], rep["node_id"]) == (2, 5, 0, 3)
    assert (rep["rep_type"], rep["in_type"]) == (1, 4)
    assert (rep["d"], rep["q"], rep["f"], rep["i"]) == (0, 0, 1, 0)
    assert rep["rep_md_bits"] == HPCC_INST & 0x7D00          # node ID is in the group header
    assert (rep["ds_id"], rep["ds_md_bits"], rep["ds_md_status"]) == (DS_ID_HPCC, HPCC_DS, 0)
    assert rep["md_len"] == 6
    assert rep["rep_len"] * 4 == len(outs[3]) - 50 - 4
    # Sink metadata: queue, egress timestamp, tx bytes, queue bytes, line rate of port 2.
    q, ets, txb, qb, rate = struct.unpack("!IQIII", rep["md"])
    assert q == 0 and ets == 3003
    assert txb == 0                              # nothing sent on port 2 before
    assert qb == len(s2_out)                     # the original is still queued
    assert rate == 25_002
    # Inner packet: the IPv4 packet as s3 received it, payload cut after the BTH.
    inner = rep["inner"]
    received_l3 = s2_out[20:]                    # after Ethernet + link sequence header
    d = split_int(s2_out)
    int_end = 28 + 4 + d["shim_len"] * 4
    assert inner == received_l3[:int_end + 12]
    inner_hops = decode_hop_words(d["stack"], d["inst"], d["ds"], d["hop_ml"])
    assert [h["node_id"] for h in inner_hops] == [2, 1]
    bth = roce.unpack_bth(inner[int_end:int_end + 12])
    assert bth.psn == 7 and bth.dest_qp == 0x11

    # The formats package's layers read the same report.
    from scapy.layers.l2 import Ether
    pkt = Ether(outs[3])
    grp = pkt[telemetry_report.TelemetryReportGroup]
    assert (grp.ver, grp.hw_id, grp.seq, grp.node_id) == (2, 5, 0, 3)
    ind = pkt[telemetry_report.TelemetryReportINT]
    assert ind.md_len == 6 and ind.rep_md_bits == 0x1400


def test_report_sequence_numbers_count_up(make_program):
    chain = report_chain(make_program, n=2)
    seqs = []
    for psn in range(4):
        out = dict(chain.send(roce_frame(psn=psn)))
        seqs.append(decode_report(out[3])["seq"])
    assert seqs == [0, 1, 2, 3]
    assert chain.switches[-1].reg("SwitchEgress.report_seq", 0) == 4


def test_report_payload_truncation(make_program):
    chain = report_chain(make_program, n=2, payload_bytes=30)   # rounded down to 28
    frame = roce_frame(payload=bytes(200))
    rep = decode_report(dict(chain.send(frame))[3])
    d_inner_shim = rep["inner"][28:32]
    shim_len = d_inner_shim[1]
    assert len(rep["inner"]) == 28 + 4 + shim_len * 4 + 28
    # A short payload is kept whole (in whole words).
    chain2 = report_chain(make_program, n=2, payload_bytes=1000)
    small = roce_frame(payload=bytes(8))                        # BTH 12 + 8 + ICRC 4
    rep2 = decode_report(dict(chain2.send(small))[3])
    assert rep2["inner"][29] == 3 + 7                           # one hop (s1) received
    assert len(rep2["inner"]) == 28 + 4 + 10 * 4 + 24


def test_source_and_report_sink_on_one_switch(make_program):
    chain = report_chain(make_program, n=1)
    frame = roce_frame()
    out = dict(chain.send(frame))
    assert out[2] == routed(frame, 1)
    rep = decode_report(out[3])
    inner = rep["inner"]
    assert struct.unpack_from("!H", inner, 22)[0] == INT_UDP_PORT
    tnr, words, orig = struct.unpack_from("!BBH", inner, 28)
    assert (tnr >> 4, words, orig) == (1, 3, 4791)      # fresh shim + MD, no hop yet
    assert rep["node_id"] == 1


def test_report_without_collector_is_dropped_and_counted(make_program):
    chain = Chain.build(2, make_program, sink_mode="report")
    from softswitch.v1model.pre import Replica
    chain.switches[-1].runtime.clone_session_set(500, [Replica(port=3, rid=0)])
    frame = roce_frame()
    out = chain.send(frame)
    assert [p for p, _ in out] == [2]
    assert out[0][1] == routed(frame, 2, last_node=2)
    s2 = chain.switches[-1]
    assert s2.event("report_no_collector") == 1 and s2.drops("report") == 1


def test_report_longer_than_255_words_is_not_sent(make_program):
    chain = Chain.build(8, make_program, sink_mode="report", watch={"inst": 0xFD00, "ds": 0xE000})
    chain.switches[-1].report_to(3, payload_bytes=1000)
    frame = roce_frame(payload=bytes(600))
    out = dict(chain.send(frame))
    assert sorted(out) == [2]
    assert out[2] == routed(frame, 8, last_node=8)
    assert chain.switches[-1].event("report_too_long") == 1


def test_host_mode_leaves_int_for_the_host(make_program):
    chain = Chain.build(2, make_program, sink_mode="host")
    frame = roce_frame()
    out = chain.send(frame)
    assert [p for p, _ in out] == [2]
    parsed = int_md.parse_int(out[0][1])
    assert [h.node_id for h in parsed.hops] == [2, 1]
    assert int_md.strip_int(out[0][1]) == routed(frame, 2, last_node=2)
    assert chain.switches[-1].event("sink_host") == 1


def test_reports_decode_in_the_controllers_collector(make_program):
    """The collector's vectorised decoder reads this program's reports: upstream hops
    from the inner packet, the sink's own hop from the report metadata."""
    decode = pytest.importorskip("controller.int.decode")
    chain = report_chain(make_program)
    datagrams = []
    for psn in range(3):
        out = dict(chain.send(roce_frame(psn=psn)))
        datagrams.append(out[3][42:])                    # UDP payload
    dec = decode.ReportDecoder()
    batch = dec.decode(datagrams, 0)
    assert dec.stats.reports == 3 and sum(dec.stats.malformed.values()) == 0
    assert list(batch.samples["seq"]) == [0, 1, 2]
    assert list(batch.samples["psn"]) == [0, 1, 2]
    assert sorted(set(batch.hops["node_id"])) == [1, 2, 3]
    assert len(batch.hops) == 9


def test_report_sampling_keeps_one_in_four(make_program):
    chain = report_chain(make_program, n=2)
    s2 = chain.switches[-1]
    s2.runtime.table_set_default("SwitchIngress.report_sampling", "set_report_sampling", [3])
    frames = [roce_frame(psn=i) for i in range(8)]
    reports, data = [], []
    for f in frames:
        out = dict(chain.send(f))
        data.append(out[2])
        if 3 in out:
            reports.append(decode_report(out[3]))
    assert data == [routed(f, 2, last_node=2) for f in frames]     # every packet restored
    assert [r["seq"] for r in reports] == [0, 1]
    psns = [roce.unpack_bth(r["inner"][-12:]).psn for r in reports]
    assert psns == [0, 4]
    assert s2.event("report_sent") == 2 and s2.event("report_sampled_out") == 6
    assert s2.reg("SwitchIngress.report_candidates", 0) == 8


def test_report_hop_latency_is_that_of_the_ports_last_packet(make_program):
    from softswitch.v1model.jobs import IngressJob
    chain = Chain.build(2, make_program, sink_mode="report", watch={"inst": 0x9400 | 0x2000})
    s1, s2 = chain.switches
    s2.report_to(3)
    f1 = s1.process(1, roce_frame(psn=0))[0][1]
    f2 = s1.process(1, roce_frame(psn=1))[0][1]
    # Packet 1 waits 50 us in s2: ingress at 5000, egress (clone first, then it) at 5050.
    s2.clock[0] = 5000
    _, jobs = s2.switch.run_ingress(IngressJob(port=1, data=f1))
    s2.clock[0] = 5050
    outs = {o.port: o.data for j in jobs for o in s2.switch.run_egress(j)[2]}
    assert sorted(outs) == [2, 3]
    r1 = decode_report(outs[3])
    assert r1["rep_md_bits"] == 0x3400 and r1["md_len"] == 7
    lat1, _q, ets1 = struct.unpack_from("!IIQ", r1["md"])
    assert (lat1, ets1) == (0, 5050)              # nothing had left port 2 yet
    assert s2.reg("SwitchEgress.last_hop_latency", 2) == 50
    r2 = decode_report(dict(s2.process(1, f2))[3])
    lat2, _q, ets2 = struct.unpack_from("!IIQ", r2["md"])
    assert (lat2, ets2) == (50, 5050)


def test_reports_to_two_collectors_each_with_its_own_sequence(make_program):
    """Two report destinations (clone replicas with instances 1 and 2, the second in
    report_collector): every packet gives one report to each, identical but for the
    Ethernet/IP/UDP destination, and each collector sees the sequence 0, 1, 2, ...
    without gaps (report_seq per instance), a third instance none at all."""
    from softswitch.tables import Exact
    from softswitch.v1model.pre import Replica
    chain = report_chain(make_program, n=2)
    sink = chain.switches[-1]
    standby_mac, standby_ip = "02:00:00:00:09:0a", "10.0.9.10"
    sink.runtime.table_add("SwitchEgress.report_collector", [Exact(2)], "set_report_collector",
                           [mac_int(standby_mac), ip_int(standby_ip), 40000])
    sink.runtime.clone_session_set(500, [Replica(port=3, rid=1), Replica(port=4, rid=2)])
    got: dict[int, list[dict]] = {3: [], 4: []}
    for psn in range(5):
        out = chain.send(roce_frame(psn=psn))
        assert sorted(p for p, _ in out) == [2, 3, 4]
        for port, data in out:
            if port in got:
                got[port].append(decode_report(data))
    for port, dst_mac, dst_ip, dport in ((3, COLLECTOR_MAC, COLLECTOR_IP, 32766),
                                         (4, standby_mac, standby_ip, 40000)):
        reps = got[port]
        assert [r["seq"] for r in reps] == [0, 1, 2, 3, 4]
        assert {(r["eth_dst"], r["ip_dst"], r["dport"]) for r in reps} == \
            {(bytes.fromhex(dst_mac.replace(":", "")), ip_int(dst_ip), dport)}
        assert all(r["ip_ok"] and r["ip_src"] == ip_int(switch_ip(2)) for r in reps)
    # the copies differ in their destination only: same hop metadata, same inner packet
    assert [(r["md"], r["inner"], r["node_id"]) for r in got[3]] == \
        [(r["md"], r["inner"], r["node_id"]) for r in got[4]]
    assert [sink.reg("SwitchEgress.report_seq", i) for i in range(4)] == [0, 5, 5, 0]
    assert sink.event("report_sent") == 10
