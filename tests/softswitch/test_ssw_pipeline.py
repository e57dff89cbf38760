"""v1model pipeline rules and the structured trace."""
from __future__ import annotations

from ssw_helpers import EXAMPLES, load, program

from softswitch.tables import Lpm
from softswitch.v1model import Replica

DECLS = """
header h_t { bit<8> op; bit<8> itype; bit<16> rid; bit<8> port; }
struct headers_t { h_t h; }
struct meta_t { bit<8> x; }
"""
PARSER = "state start { pkt.extract(hdr.h); transition accept; }"
INGRESS = """
    apply {
        sm.egress_spec = 1;
        if (hdr.h.op == 1) { sm.mcast_grp = 3; }
        if (hdr.h.op == 2) { clone(CloneType.I2E, 5); }
        if (hdr.h.op == 3) { mark_to_drop(sm); }
        if (hdr.h.op == 5) { resubmit_preserving_field_list(0); }
        if (hdr.h.op == 6) { exit; }
        if (hdr.h.op == 6) { sm.egress_spec = 9; }
    }
"""
EGRESS = """
    apply {
        hdr.h.itype = (bit<8>) sm.instance_type;
        hdr.h.rid = sm.egress_rid;
        hdr.h.port = (bit<8>) sm.egress_port;
        if (hdr.h.op == 4) { mark_to_drop(sm); }
    }
"""


def make():
    return program(decls=DECLS, parser=PARSER, ingress=INGRESS, egress=EGRESS, deparser="pkt.emit(hdr.h);")


def test_multicast_replicas_and_clone_truncation():
    sw = make()
    sw.runtime.multicast_group_create(3, [Replica(port=4, rid=7), Replica(port=6, rid=8)])
    outs = sw.process(0, bytes([1, 0, 0, 0, 0]) + b"pay")
    assert outs == [(4, bytes([1, 5, 0, 7, 4]) + b"pay"), (6, bytes([1, 5, 0, 8, 6]) + b"pay")]
    sw.runtime.clone_session_set(5, [Replica(port=8)], truncate=3)
    outs = sorted(sw.process(0, bytes([2, 0, 0, 0, 0, 0xAA])))
    assert outs == [(1, bytes([2, 0, 0, 0, 1, 0xAA])), (8, bytes([2, 1, 0]))]


def test_drops_exit_and_resubmit_limit_are_traced():
    sw = make()
    outs, ev = sw.process_packet(0, bytes([3, 0, 0, 0, 0]), trace=True)
    assert outs == [] and [e.detail["reason"] for e in ev if e.kind == "drop"] == [
        "egress_spec is the drop port (mark_to_drop)"]
    outs, ev = sw.process_packet(0, bytes([4, 0, 0, 0, 0]), trace=True)
    assert outs == [] and "in egress" in next(e for e in ev if e.kind == "drop").detail["reason"]
    assert sw.process(0, bytes([6, 0, 0, 0, 0])) == [(1, bytes([6, 0, 0, 0, 1]))]
    outs, ev = sw.process_packet(0, bytes([5, 0, 0, 0, 0]), trace=True)
    assert outs == [] and "resubmit loop" in next(e for e in ev if e.kind == "drop").detail["reason"]
    assert sw.v1.stats.drops >= 3


def test_ipv4_trace_has_parser_states_tables_and_output():
    sw = load(EXAMPLES / "ipv4_forward.p4")
    sw.runtime.table_add("MyIngress.ipv4_lpm", [Lpm(0x0A000000, 8)], "MyIngress.ipv4_forward", [0x22, 2])
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    pkt = Ether() / IP(dst="10.1.2.3", ttl=9) / UDP()
    outs, ev = sw.process_packet(1, bytes(pkt), trace=True)
    kinds = [e.kind for e in ev]
    assert kinds[0] == "packet_in" and kinds[-1] == "output"
    assert [e.detail["state"] for e in ev if e.kind == "parser_state"] == ["start", "parse_ipv4"]
    assert [e.detail["header"] for e in ev if e.kind == "extract"] == ["hdr.ethernet", "hdr.ipv4"]
    (tab,) = [e for e in ev if e.kind == "table"]
    assert tab.detail["table"] == "MyIngress.ipv4_lpm" and tab.detail["hit"]
    assert tab.detail["key"] == (0x0A010203,) and tab.detail["action"] == "MyIngress.ipv4_forward"
    out = Ether(outs[0].data)
    assert out[IP].ttl == 8 and out.dst == "00:00:00:00:00:22"
    # the checksum the switch wrote is the one scapy computes
    fixed = out.copy()
    del fixed[IP].chksum
    assert Ether(bytes(fixed))[IP].chksum == out[IP].chksum
    # scapy packets in, (port, bytes) out
    assert sw.process(1, pkt)[0][0] == 2
    ((port, frame),) = sw.send(1, pkt)
    assert port == 2 and frame[IP].dst == "10.1.2.3" and frame[IP].ttl == 8


def test_jobs_api_lets_a_traffic_manager_sit_between_ingress_and_egress():
    from softswitch.v1model import IngressJob, QueueInfo
    sw = program(decls=DECLS, parser=PARSER, ingress=INGRESS, deparser="pkt.emit(hdr.h);", egress="""
    apply { hdr.h.rid = (bit<16>) sm.enq_qdepth; hdr.h.port = (bit<8>) sm.deq_timedelta; }""")
    sw.runtime.multicast_group_create(3, [Replica(port=4, rid=7), Replica(port=6, rid=8)])
    v1 = sw.v1
    new_ing, eg_jobs = v1.run_ingress(IngressJob(port=0, data=bytes([1, 0, 0, 0, 0])))
    assert new_ing == [] and [j.egress_port for j in eg_jobs] == [4, 6]
    v1.queue_model = lambda job: QueueInfo(enq_qdepth=job.egress_port * 10, deq_timedelta_us=25)
    outs = [o for j in eg_jobs for o in v1.run_egress(j)[2]]
    assert [(o.port, o.data) for o in outs] == [(4, bytes([1, 0, 0, 40, 25])), (6, bytes([1, 0, 0, 60, 25]))]
    assert all(o.instance_type == 5 for o in outs)
