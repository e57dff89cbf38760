"""More constructs: switch on values, enums, errors, signed header fields, dynamic stack
indexes, checksums over the payload, direct meters, more hash algorithms."""
from __future__ import annotations

import pytest
from ssw_helpers import program

from softswitch.backends.python.v1model import hash_symbol
from softswitch.errors import RuntimeApiError
from softswitch.externs.hashes import crc32, csum16, make_crc, xor16
from softswitch.externs.stateful import MeterConfig
from softswitch.tables import Exact


def test_switch_enum_error_signed_fields_and_stack_index():
    sw = program(decls="""
    enum bit<8> Op_t { INC = 1, DEC = 2 }
    enum Mode_t { FAST, SLOW }
    header h_t { Op_t op; int<8> v; bit<8> i; bit<8> res; }
    header e_t { bit<8> x; }
    struct headers_t { h_t h; e_t[3] es; }
    struct meta_t { }
    """, parser="""
    state start {
        pkt.extract(hdr.h);
        pkt.extract(hdr.es.next); pkt.extract(hdr.es.next); pkt.extract(hdr.es.next);
        verify(hdr.h.i < 3, error.NoMatch);
        transition accept;
    }
    """, ingress="""
    apply {
        sm.egress_spec = 1;
        Mode_t m = Mode_t.SLOW;
        if (sm.parser_error != error.NoError) { hdr.h.res = 0xEE; return; }
        switch (hdr.h.op) {
            Op_t.INC: { hdr.h.v = hdr.h.v + 1; }
            Op_t.DEC: { hdr.h.v = hdr.h.v - 1; }
        }
        switch (hdr.h.i) {
            0:
            1: { hdr.h.res = hdr.es[hdr.h.i].x; }
            default: { hdr.h.res = (bit<8>) hdr.es.lastIndex; }
        }
        if (m == Mode_t.SLOW) { hdr.es[hdr.h.i].x = 0x55; }
    }
    """, deparser="pkt.emit(hdr.h); pkt.emit(hdr.es);")
    # INC on int<8> 127 wraps to -128 (0x80); index 1 reads es[1]
    assert sw.process(0, bytes([1, 0x7F, 1, 0, 10, 11, 12])) == [(1, bytes([1, 0x80, 1, 11, 10, 0x55, 12]))]
    # DEC on -128 wraps to 127; index 2 takes the default branch (lastIndex = 2)
    assert sw.process(0, bytes([2, 0x80, 2, 0, 10, 11, 12])) == [(1, bytes([2, 0x7F, 2, 2, 10, 11, 0x55]))]
    # verify fails: parser error seen in ingress
    assert sw.process(0, bytes([1, 0, 3, 0, 10, 11, 12])) == [(1, bytes([1, 0, 3, 0xEE, 10, 11, 12]))]


def test_xor16_and_crc32_custom_in_a_program():
    sw = program(decls="""
    header h_t { bit<16> a; bit<16> b; bit<16> x; bit<32> c32; bit<16> ck; }
    struct headers_t { h_t h; }
    struct meta_t { }
    """, parser="state start { pkt.extract(hdr.h); transition accept; }", ingress="""
    apply {
        sm.egress_spec = 1;
        hash(hdr.h.x, HashAlgorithm.xor16, 16w0, { hdr.h.a, hdr.h.b }, 32w65536);
        hash(hdr.h.c32, HashAlgorithm.crc32_custom, 32w0, { hdr.h.a, hdr.h.b }, 64w4294967296);
    }
    """, deparser="pkt.emit(hdr.h);")
    assert hash_symbol("xor16") in sw.program.source
    out = sw.process(0, bytes.fromhex("12345678" "0000" "00000000" "0000") + b"pay")[0][1]
    assert out[4:6] == xor16(bytes.fromhex("12345678")).to_bytes(2, "big")
    assert out[6:10] == crc32(bytes.fromhex("12345678")).to_bytes(4, "big")
    # reconfigure crc32_custom as CRC-32C (Castagnoli), as BMv2's set_crc32_parameters does
    sw.runtime.hash_set_custom("crc32_custom", polynomial=0x1EDC6F41, initial=0xFFFFFFFF,
                               final_xor=0xFFFFFFFF)
    crc32c = make_crc(32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, True, True)
    assert crc32c(b"123456789") == 0xE3069283
    out = sw.process(0, bytes.fromhex("12345678" "0000" "00000000" "0000"))[0][1]
    assert out[6:10] == crc32c(bytes.fromhex("12345678")).to_bytes(4, "big")
    with pytest.raises(RuntimeApiError, match="only crc16_custom and crc32_custom"):
        sw.runtime.hash_set_custom("crc16", polynomial=1)


def test_update_checksum_with_payload_and_direct_meter():
    import textwrap

    from softswitch.targets.python.switch import Switch
    src = textwrap.dedent("""
    #include <core.p4>
    #include <v1model.p4>
    header h_t { bit<16> a; bit<16> ck; bit<8> color; }
    struct headers_t { h_t h; }
    struct meta_t { }
    parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
        state start { pkt.extract(hdr.h); transition accept; }
    }
    control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
    control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
        direct_meter<bit<8>>(MeterType.packets) dm;
        action paint() { dm.read(hdr.h.color); }
        table t { key = { hdr.h.a: exact; } actions = { paint; NoAction; } meters = dm; }
        apply { sm.egress_spec = 1; t.apply(); }
    }
    control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
    control CC(inout headers_t hdr, inout meta_t meta) {
        apply { update_checksum_with_payload(true, { hdr.h.a }, hdr.h.ck, HashAlgorithm.csum16); }
    }
    control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }
    V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
    """)
    now = [0]
    sw = Switch.from_source(src, clock_us=lambda: now[0])
    sw.runtime.table_add("Ing.t", [Exact(7)], "Ing.paint")
    sw.runtime.direct_meter_set("Ing.t", [Exact(7)], MeterConfig(cir=1, cburst=1, pir=1, pburst=2))
    colors = []
    for _ in range(3):
        out = sw.process(0, bytes.fromhex("0007 0000 00") + b"\xAB\xCD")[0][1]
        assert out[2:4] == csum16(bytes.fromhex("0007") + b"\xAB\xCD").to_bytes(2, "big")
        colors.append(out[4])
    assert colors == [0, 1, 2]


def test_out_header_parameter_starts_invalid():
    sw = program(decls="""
    header h_t { bit<8> a; }
    struct headers_t { h_t h; h_t g; }
    struct meta_t { }
    void clear(out h_t x) { }
    void fill(out h_t x) { x.setValid(); x.a = 0x42; }
    """, parser="state start { pkt.extract(hdr.h); pkt.extract(hdr.g); transition accept; }",
        ingress="apply { sm.egress_spec = 1; clear(hdr.h); fill(hdr.g); }",
        deparser="pkt.emit(hdr.h); pkt.emit(hdr.g);")
    assert sw.process(0, bytes([1, 2, 3])) == [(1, bytes([0x42, 3]))]


def test_short_circuit_and_conditional_skip_side_effects():
    sw = program(decls="""
    header h_t { bit<8> a; bit<8> b; bit<8> c; bit<8> d; }
    struct headers_t { h_t h; }
    struct meta_t { }
    bool touch(inout bit<8> v) { v = v + 1; return true; }
    """, parser="state start { pkt.extract(hdr.h); transition accept; }", ingress="""
    action mark() { hdr.h.d = hdr.h.d + 0x10; }
    table t { actions = { mark; } default_action = mark(); }
    apply {
        sm.egress_spec = 1;
        bool x;
        x = hdr.h.a == 0 || touch(hdr.h.b);
        x = hdr.h.a == 0 && touch(hdr.h.c);
        if (hdr.h.a != 0 && t.apply().hit) { hdr.h.d = 0xFF; }
        hdr.h.a = hdr.h.a == 0 ? 8w9 : (touch(hdr.h.a) ? hdr.h.a : 8w0);
    }
    """, deparser="pkt.emit(hdr.h);")
    # a == 0: the || skips touch(b), the && runs touch(c); the table is not applied
    assert sw.process(0, bytes([0, 0, 0, 0])) == [(1, bytes([9, 0, 1, 0]))]
    # a != 0: touch(b) runs, touch(c) skipped, table applied (miss -> mark), ?: touches a
    assert sw.process(0, bytes([1, 0, 0, 0])) == [(1, bytes([2, 1, 0, 0x10]))]


def test_user_declared_error_from_verify():
    sw = program(decls="""
    error { BadVersion }
    header h_t { bit<8> ver; bit<8> res; }
    struct headers_t { h_t h; }
    struct meta_t { }
    """, parser="state start { pkt.extract(hdr.h); verify(hdr.h.ver == 2, error.BadVersion); transition accept; }",
        ingress="""apply {
        sm.egress_spec = 1;
        hdr.h.res = sm.parser_error == error.BadVersion ? 8w1 : 8w0;
    }""", deparser="pkt.emit(hdr.h);")
    assert sw.process(0, bytes([2, 9])) == [(1, bytes([2, 0]))]
    outs, ev = sw.process_packet(0, bytes([3, 9]), trace=True)
    assert outs[0].data == bytes([3, 1])
    assert next(e for e in ev if e.kind == "parser_error").detail["error"] == "BadVersion"


def test_stack_push_pop_keep_holes_and_shift_validity():
    sw = program(decls="""
    header op_t { bit<8> op; bit<8> n; }
    header e_t { bit<8> v; }
    struct headers_t { op_t o; e_t[3] s; }
    struct meta_t { }
    """, parser="""
    state start { pkt.extract(hdr.o); transition select(hdr.o.n) { 0: accept; default: more; } }
    state more { pkt.extract(hdr.s.next); hdr.o.n = hdr.o.n - 1;
                 transition select(hdr.o.n) { 0: accept; default: more; } }
    """, ingress="""apply {
        sm.egress_spec = 1;
        if (hdr.o.op == 1) { hdr.s.push_front(1); }
        if (hdr.o.op == 2) { hdr.s.push_front(3); }
        if (hdr.o.op == 3) { hdr.s.pop_front(1); }
        if (hdr.o.op == 4) { hdr.s[2].setValid(); hdr.s[2].v = 0xCC; hdr.s.pop_front(1); }
        hdr.o.n = (bit<8>) hdr.s.lastIndex;
    }""", deparser="pkt.emit(hdr.o); pkt.emit(hdr.s);")
    # two parsed (nextIndex 2): push 1 -> [inv, 10, 20], nextIndex 3, lastIndex 2
    assert sw.process(0, bytes([1, 2, 0x10, 0x20])) == [(1, bytes([1, 2, 0x10, 0x20]))]
    # push 3 on a stack of 3: everything shifted out
    assert sw.process(0, bytes([2, 2, 0x10, 0x20])) == [(1, bytes([2, 2]))]
    # pop 1: [20, inv, inv], lastIndex 0
    assert sw.process(0, bytes([3, 2, 0x10, 0x20])) == [(1, bytes([3, 0, 0x20]))]
    # a hole: one parsed, s[2] made valid, pop 1 -> [inv, CC, inv]; lastIndex -1 wraps to 0xFF
    assert sw.process(0, bytes([4, 1, 0x10])) == [(1, bytes([4, 0xFF, 0xCC]))]


def test_equality_of_headers_with_varbit_and_of_stacks():
    sw = program(decls="""
    header v_t { bit<8> n; varbit<16> d; }
    header r_t { bit<8> bits; }
    struct headers_t { v_t x; v_t[2] s; r_t r; }
    struct meta_t { }
    """, parser="""state start {
        pkt.extract(hdr.x, (bit<32>) pkt.lookahead<bit<8>>() * 8);
        pkt.extract(hdr.s.next, (bit<32>) pkt.lookahead<bit<8>>() * 8);
        pkt.extract(hdr.s.next, (bit<32>) pkt.lookahead<bit<8>>() * 8);
        transition accept;
    }""", ingress="""apply {
        sm.egress_spec = 1;
        hdr.r.setValid();
        hdr.r.bits = 0;
        if (hdr.x == hdr.s[0]) { hdr.r.bits = hdr.r.bits | 1; }
        v_t[2] copy = hdr.s;
        if (copy == hdr.s) { hdr.r.bits = hdr.r.bits | 2; }
        copy[1].setInvalid();
        if (copy == hdr.s) { hdr.r.bits = hdr.r.bits | 4; }
    }""", deparser="pkt.emit(hdr.r);")
    # x = (1, AA); s[0] = (1, AA): equal; a copy of the stack equals it until changed
    assert sw.process(0, bytes([1, 0xAA, 1, 0xAA, 2, 0xBB, 0xCC])) == [(1, bytes([3]))]
    # same first byte of data but a different length: not equal
    assert sw.process(0, bytes([1, 0xAA, 2, 0xAA, 0x00, 0])) == [(1, bytes([2]))]


def test_const_entries_smallest_priority_wins_then_list_order():
    sw = program(decls="""
    header h_t { bit<8> k; bit<8> res; }
    struct headers_t { h_t h; }
    struct meta_t { }
    """, parser="state start { pkt.extract(hdr.h); transition accept; }", ingress="""
    action set(bit<8> v) { hdr.h.res = v; }
    table t {
        key = { hdr.h.k: ternary; }
        actions = { set; }
        const entries = {
            0x01 &&& 0x0F : set(1) @priority(30);
            0x11          : set(2);
            0x11 &&& 0xF1 : set(3) @priority(10);
            _             : set(4);
        }
    }
    apply { sm.egress_spec = 1; t.apply(); }
    """, deparser="pkt.emit(hdr.h);")
    # priorities: entry 1: 30, entry 2: 31 (previous + 1), entry 3: 10, entry 4: 11
    # 0x11 matches all four: entry 3 (10) wins
    assert sw.process(0, bytes([0x11, 0])) == [(1, bytes([0x11, 3]))]
    # 0x21 matches entries 1 (30) and 4 (11): entry 4 wins
    assert sw.process(0, bytes([0x21, 0])) == [(1, bytes([0x21, 4]))]
    # 0x01 matches entries 1 (30), 3? no (0x01 & 0xF1 = 0x01), 4 (11): entry 4
    assert sw.process(0, bytes([0x01, 0])) == [(1, bytes([0x01, 4]))]
