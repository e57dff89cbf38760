"""Language features through small programs: tables and action_run, functions, exit,
sub-controls, sub-parsers, unions, varbit, lookahead, value_set, const entries, structs."""
from __future__ import annotations

import pytest
from ssw_helpers import program

from softswitch.tables import Exact, Ternary

HDRS = """
header h_t { bit<8> a; bit<8> b; bit<8> c; }
header opt_t { bit<8> len; varbit<64> data; }
header u8_t { bit<8> v; }
header u16_t { bit<16> v; }
header_union u_t { u8_t short; u16_t long; }
struct pair_t { bit<8> x; bit<8> y; }
struct headers_t { h_t h; opt_t opt; u_t u; }
struct meta_t { pair_t p; bit<8> r; }
"""
PARSER_H = "state start { pkt.extract(hdr.h); transition accept; }"


def run1(sw, data: bytes, port: int = 0):
    outs = sw.process(port, data)
    assert len(outs) == 1, outs
    return outs[0]


def test_table_action_run_switch_hit_miss_and_const_entries():
    sw = program(decls=HDRS, parser=PARSER_H, deparser="pkt.emit(hdr.h);", ingress="""
    action set_b(bit<8> v) { hdr.h.b = v; }
    action set_c(bit<8> v) { hdr.h.c = v; }
    table t { key = { hdr.h.a: exact; } actions = { set_b; set_c; NoAction; } default_action = NoAction(); }
    table k { key = { hdr.h.a: ternary; } actions = { set_c; NoAction; }
              const entries = { 0x10 &&& 0xF0: set_c(0xC1); _ : set_c(0xC2); } }
    apply {
        sm.egress_spec = 1;
        switch (t.apply().action_run) {
            set_b: { hdr.h.c = 0xBB; }
            default: { if (k.apply().hit) { hdr.h.b = hdr.h.b + 1; } }
        }
    }""")
    sw.runtime.table_add("Ing.t", [Exact(1)], "Ing.set_b", [0x55])
    assert run1(sw, bytes([1, 0, 0])) == (1, bytes([1, 0x55, 0xBB]))
    assert run1(sw, bytes([0x12, 0, 0])) == (1, bytes([0x12, 1, 0xC1]))
    assert run1(sw, bytes([0x22, 0, 0])) == (1, bytes([0x22, 1, 0xC2]))
    first = sw.runtime.table_entries("Ing.k")[0]
    with pytest.raises(Exception, match="const"):
        sw.runtime.table_delete("Ing.k", [Ternary(0x10, 0xF0)], priority=first.priority)


def test_functions_exit_and_sub_control_with_inout_scalars():
    sw = program(decls=HDRS + """
    bit<8> max8(in bit<8> x, in bit<8> y) { if (x > y) { return x; } return y; }
    control Sub(inout bit<8> v, in bit<8> add)(bit<8> scale) { apply { v = v + add * scale; } }
    """, parser=PARSER_H, deparser="pkt.emit(hdr.h);", ingress="""
    Sub(2) sub;
    action swap(inout bit<8> x, inout bit<8> y) { bit<8> t = x; x = y; y = t; }
    apply {
        sm.egress_spec = 2;
        hdr.h.c = max8(hdr.h.a, hdr.h.b);
        sub.apply(hdr.h.c, 3);
        swap(hdr.h.a, hdr.h.b);
        if (hdr.h.c == 0x10) { exit; }
        hdr.h.c = 0xEE;
    }""")
    assert run1(sw, bytes([5, 9, 0])) == (2, bytes([9, 5, 0xEE]))
    assert run1(sw, bytes([10, 2, 0])) == (2, bytes([2, 10, 0x10]))


def test_varbit_union_lookahead_and_subparser():
    sw = program(decls=HDRS + """
    parser Opt(packet_in pkt, out opt_t o) {
        state start {
            bit<8> n = pkt.lookahead<bit<8>>();
            pkt.extract(o, (bit<32>) n * 8);
            transition accept;
        }
    }
    """, parser="""
    Opt() opt_p;
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.a) { 1: p_opt; 2: p_short; 3: p_long; default: accept; }
    }
    state p_opt { opt_p.apply(pkt, hdr.opt); transition accept; }
    state p_short { pkt.extract(hdr.u.short); transition accept; }
    state p_long { pkt.extract(hdr.u.long); transition accept; }
    """, deparser="pkt.emit(hdr.h); pkt.emit(hdr.opt); pkt.emit(hdr.u);", ingress="""
    apply {
        sm.egress_spec = 1;
        if (hdr.u.short.isValid()) { hdr.u.long.setValid(); hdr.u.long.v = 0xABCD; }
        if (hdr.u.isValid()) { hdr.h.c = 1; }
    }""")
    # the sub-parser peeks len=2 and extracts len plus a 16-bit varbit; emitted back as read
    assert run1(sw, bytes([1, 0, 0, 2, 0xAA, 0xFF, 0x77])) == (1, bytes([1, 0, 0, 2, 0xAA, 0xFF, 0x77]))
    # union: setting long valid makes short invalid; emit shows only long
    assert run1(sw, bytes([2, 0, 0, 0x11, 0x99])) == (1, bytes([2, 0, 1, 0xAB, 0xCD, 0x99]))


def test_struct_assignment_copies_and_value_set():
    sw = program(decls=HDRS, parser="""
    value_set<bit<8>>(4) special;
    state start { pkt.extract(hdr.h); transition select(hdr.h.a) { special: mark; default: accept; } }
    state mark { meta.r = 1; transition accept; }
    """, deparser="pkt.emit(hdr.h);", ingress="""
    apply {
        sm.egress_spec = 1;
        pair_t q = { hdr.h.a, hdr.h.b };
        meta.p = q;
        q.x = 0;
        hdr.h.b = meta.p.x + meta.r;
    }""")
    assert run1(sw, bytes([7, 0, 0])) == (1, bytes([7, 7, 0]))
    sw.runtime.value_set_add("P.special", 7)
    assert run1(sw, bytes([7, 0, 0])) == (1, bytes([7, 8, 0]))


def test_table_action_with_directional_argument_bound_in_the_action_list():
    sw = program(decls=HDRS, parser=PARSER_H, deparser="pkt.emit(hdr.h);", ingress="""
    action copy_to(in bit<8> src, bit<9> port) { hdr.h.c = src; sm.egress_spec = port; }
    table t { key = { hdr.h.a: exact; } actions = { copy_to(hdr.h.b); NoAction; } }
    apply { t.apply(); }""")
    sw.runtime.table_add("Ing.t", [Exact(1)], "Ing.copy_to", [4])
    assert run1(sw, bytes([1, 0x77, 0])) == (4, bytes([1, 0x77, 0x77]))
