"""Example programs driven from Python: queue depth from a traffic manager (ECN),
flow spreading (ECMP), and error cases of the compiler and parser."""
from __future__ import annotations

import pytest
from ssw_helpers import EXAMPLES, load, program

from softswitch.errors import CompileError
from softswitch.tables import Exact, Lpm
from softswitch.v1model import QueueInfo


def udp(dst: str, sport: int = 1, tos: int = 2, src: str = "10.0.0.1") -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    return bytes(Ether() / IP(src=src, dst=dst, tos=tos) / UDP(sport=sport, dport=4791))


def test_ecn_marks_only_when_the_queue_reaches_the_threshold():
    from scapy.layers.inet import IP
    from scapy.layers.l2 import Ether
    sw = load(EXAMPLES / "ecn_marking.p4")
    sw.runtime.table_add("MyIngress.ipv4_host", [Exact(0x0A000002)], "MyIngress.forward", [2])
    sw.runtime.table_set_default("MyEgress.ecn_config", "MyEgress.set_threshold", [10])
    depth = [0]
    sw.v1.queue_model = lambda job: QueueInfo(enq_qdepth=depth[0], deq_qdepth=depth[0])
    for d, ecn in [(0, 2), (9, 2), (10, 3), (50, 3)]:
        depth[0] = d
        (port, data), = sw.process(1, udp("10.0.0.2"))
        ip = Ether(data)[IP]
        assert port == 2 and ip.tos & 3 == ecn, (d, ip.tos)
        fixed = ip.copy()
        del fixed.chksum
        assert IP(bytes(fixed)).chksum == ip.chksum


def test_ecmp_spreads_flows_and_keeps_each_flow_on_one_path():
    sw = load(EXAMPLES / "ecmp.p4")
    rt = sw.runtime
    rt.table_add("MyIngress.ecmp_group", [Lpm(0x0A020000, 16)], "MyIngress.set_ecmp_group", [1, 4])
    for i in range(4):
        rt.table_add("MyIngress.ecmp_nhop", [Exact(1), Exact(i)], "MyIngress.set_nhop", [0x200 + i, 2 + i])
    seen = {}
    for i in range(200):
        flow = udp("10.2.0.9", 1000 + 7 * i, src=f"10.0.{i % 7}.{i % 251}")
        ports = {sw.process(1, flow)[0][0] for _ in range(2)}
        assert len(ports) == 1
        seen[i] = ports.pop()
    counts = {p: list(seen.values()).count(p) for p in set(seen.values())}
    assert set(counts) == {2, 3, 4, 5} and min(counts.values()) > 25


def test_parser_stack_overflow_sets_stack_out_of_bounds():
    sw = program(decls="""
    header e_t { bit<8> v; }
    header r_t { bit<8> v; }
    struct headers_t { e_t e; r_t[2] rs; }
    struct meta_t { }
    """, parser="""
    state start { pkt.extract(hdr.e); transition more; }
    state more { pkt.extract(hdr.rs.next); transition select(hdr.rs.last.v) { 0: accept; default: more; } }
    """, ingress="""
    apply { sm.egress_spec = 1; hdr.e.v = (sm.parser_error == error.StackOutOfBounds) ? 8w1 : 8w0; }
    """, deparser="pkt.emit(hdr.e); pkt.emit(hdr.rs);")
    assert sw.process(0, bytes([9, 5, 0, 0xAA])) == [(1, bytes([0, 5, 0, 0xAA]))]
    assert sw.process(0, bytes([9, 5, 6, 7, 0])) == [(1, bytes([1, 5, 6, 7, 0]))]


def test_unsupported_construct_is_a_clear_compile_error():
    with pytest.raises(CompileError, match="unsupported: extern Blinker"):
        program(decls="""
        extern Blinker { Blinker(); void blink(); }
        header e_t { bit<8> v; }
        struct headers_t { e_t e; }
        struct meta_t { }
        """, parser="state start { pkt.extract(hdr.e); transition accept; }", ingress="""
        Blinker() led;
        apply { led.blink(); }
        """, deparser="pkt.emit(hdr.e);")
