"""v1model behaviours found by running p4c's sample STF tests: each case is a small
program of our own with the BMv2 behaviour it pins down (one case per fixed departure)."""
from __future__ import annotations

from ssw_helpers import from_source, program, run_stf

from softswitch.stf import StfRunner, parse_stf

ETH = "header eth_t { bit<48> dst; bit<48> src; bit<16> type; }\n"


def test_core_and_v1model_guards_are_defined():
    """Programs test p4c's include guards (`#ifdef _CORE_P4_`) to pick their code."""
    sw = from_source("""
#include <core.p4>
#include <v1model.p4>
#if defined(_CORE_P4_) && defined(_V1_MODEL_P4_)
header h_t { bit<8> a; }
struct hs_t { h_t h; }
struct m_t { }
parser P(packet_in b, out hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    state start { b.extract(hdr.h); transition accept; }
}
control VC(inout hs_t hdr, inout m_t m) { apply { } }
control I(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    apply { hdr.h.a = hdr.h.a + 1; sm.egress_spec = 3; }
}
control E(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs_t hdr, inout m_t m) { apply { } }
control D(packet_out b, in hs_t hdr) { apply { b.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
#endif
""")
    run_stf(sw, "packet 0 41\nexpect 3 42$\n")


IPV4_OPTIONS = """
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
header ip_t {
    bit<4> version; bit<4> ihl; bit<8> tos; bit<16> len; bit<16> id; bit<16> frag;
    bit<8> ttl; bit<8> proto; bit<16> csum; bit<32> src; bit<32> dst;
    varbit<320> options;
}
header ihl_t { bit<4> version; bit<4> ihl; }
struct hs_t { eth_t eth; ip_t ip; }
struct m_t { }
parser P(packet_in b, out hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    state start { b.extract(hdr.eth); transition select(hdr.eth.type) { 0x0800: ip; default: accept; } }
    state ip {
        b.extract(hdr.ip, (bit<32>)(((bit<9>)b.lookahead<ihl_t>().ihl * 4 - 20) * 8));
        transition accept;
    }
}
control VC(inout hs_t hdr, inout m_t m) { apply { } }
control I(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    apply { hdr.ip.ttl = hdr.ip.ttl - 1; sm.egress_spec = 1; }
}
control E(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs_t hdr, inout m_t m) {
    apply {
        update_checksum(hdr.ip.isValid(), { hdr.ip.version, hdr.ip.ihl, hdr.ip.tos, hdr.ip.len,
            hdr.ip.id, hdr.ip.frag, hdr.ip.ttl, hdr.ip.proto, hdr.ip.src, hdr.ip.dst,
            hdr.ip.options }, hdr.ip.csum, HashAlgorithm.csum16);
    }
}
control D(packet_out b, in hs_t hdr) { apply { b.emit(hdr.eth); b.emit(hdr.ip); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def ones_complement_checksum(data: bytes) -> int:
    total = sum(int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def test_varbit_field_in_checksum_field_list():
    """update_checksum over a header with options: the varbit adds the bytes it holds now."""
    sw = from_source(IPV4_OPTIONS)
    eth = "020000000001 020000000002 0800 "
    ip_in = bytes.fromhex("46000018 0001 0000 40 11 0000 0a000001 0a000002 83031000".replace(" ", ""))
    out = bytearray(ip_in)
    out[8] = 0x3F
    out[10:12] = ones_complement_checksum(bytes(out)).to_bytes(2, "big")
    run_stf(sw, f"packet 0 {eth}{ip_in.hex()} cafe\nexpect 1 {eth}{out.hex()} cafe$\n")


LIST_DECLS = ETH + """
struct pair_t { bit<8> a; bit<8> b; }
struct headers_t { eth_t eth; }
struct meta_t { }
eth_t make_eth(in bit<16> t) { return { 1, 2, t }; }
bit<8> sum_pair(in pair_t p) { return p.a + p.b; }
bit<16> type_of(in headers_t hs) { return hs.eth.type; }
"""


def test_list_expression_as_return_value_and_argument():
    """`{...}` where a function returns a header or takes a struct is a value of that
    type (a returned header is valid)."""
    sw = program(decls=LIST_DECLS,
                 parser="state start { pkt.extract(hdr.eth); transition accept; }",
                 ingress="""apply {
        bit<8> s = sum_pair({ 3, 4 });
        bit<16> t = type_of({ { 9, 9, 0x0800 } });
        hdr.eth = make_eth((bit<16>)s);
        hdr.eth.src = (bit<48>)t;
        sm.egress_spec = 2;
    }""", deparser="pkt.emit(hdr.eth);")
    run_stf(sw, "packet 0 ffffffffffff ffffffffffff ffff\n"
                "expect 2 000000000001 000000000800 0007$\n")


SER_ENUM = """
#include <core.p4>
#include <v1model.p4>
enum bit<16> Kind { A = 10, B = 0xab00 }
header h_t { Kind k; bit<8> x; }
struct hs_t { h_t h; }
struct m_t { }
parser P(packet_in b, out hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    state start { b.extract(hdr.h); transition accept; }
}
control VC(inout hs_t hdr, inout m_t m) { apply { } }
control I(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    action send(bit<9> port) { sm.egress_spec = port; }
    table t {
        key = { hdr.h.k: ternary; }
        actions = { send; }
        default_action = send(9);
        const entries = {
            ((bit<16>)Kind.B) &&& 0xff00 : send(2);
            Kind.A &&& 0xffff : send(3);
        }
    }
    apply { t.apply(); }
}
control E(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs_t hdr, inout m_t m) { apply { } }
control D(packet_out b, in hs_t hdr) { apply { b.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_serializable_enum_key_takes_masks_of_its_underlying_type():
    """A mask entry for an enum key may be written with numbers of the underlying type."""
    sw = from_source(SER_ENUM)
    run_stf(sw, "packet 0 abcd 00\nexpect 2 abcd 00$\npacket 0 000a 00\nexpect 3 000a 00$\n"
                "packet 0 0001 00\nexpect 9 0001 00$\n")


VARBIT_ERRORS = """
#include <core.p4>
#include <v1model.p4>
header len_t { bit<8> bits; bit<8> err; }
header opt_t { varbit<16> data; }
struct hs_t { len_t len; opt_t opt; }
struct m_t { }
parser P(packet_in b, out hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    state start { b.extract(hdr.len); b.extract(hdr.opt, (bit<32>)hdr.len.bits); transition accept; }
}
control VC(inout hs_t hdr, inout m_t m) { apply { } }
control I(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    apply {
        if (sm.parser_error == error.ParserInvalidArgument) { hdr.len.err = 6; }
        else if (sm.parser_error == error.HeaderTooShort) { hdr.len.err = 4; }
        else if (sm.parser_error == error.PacketTooShort) { hdr.len.err = 1; }
        sm.egress_spec = 1;
    }
}
control E(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs_t hdr, inout m_t m) { apply { } }
control D(packet_out b, in hs_t hdr) { apply { b.emit(hdr.len); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_varbit_extract_errors_as_bmv2():
    """A varbit length that is not whole bytes is ParserInvalidArgument, one over the
    maximum HeaderTooShort (even with data left), a short packet PacketTooShort; the
    unread bytes stay in the payload."""
    sw = from_source(VARBIT_ERRORS)
    run_stf(sw, "packet 0 10 00 aabb cc\nexpect 1 10 00 cc$\n"
                "packet 0 07 00 aabb cc\nexpect 1 07 06 aabb cc$\n"
                "packet 0 18 00 aabbcc dd\nexpect 1 18 04 aabbcc dd$\n"
                "packet 0 10 00 aa\nexpect 1 10 01 aa$\n")


LOOKAHEAD_STRUCT = """
#include <core.p4>
#include <v1model.p4>
struct pair_t { bit<4> hi; int<4> lo; bool flag; bit<7> rest; }
header out_t { bit<8> hi; bit<8> lo; bit<8> flag; }
struct hs_t { out_t o; }
struct m_t { }
parser P(packet_in b, out hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    state start {
        pair_t p = b.lookahead<pair_t>();
        hdr.o.setValid();
        hdr.o.hi = (bit<8>)p.hi;
        hdr.o.lo = (bit<8>)(int<8>)p.lo;
        hdr.o.flag = p.flag ? 8w1 : 8w0;
        b.lookahead<bit<64>>();
        transition accept;
    }
}
control VC(inout hs_t hdr, inout m_t m) { apply { } }
control I(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (sm.parser_error == error.PacketTooShort) { hdr.o.flag = 0xee; }
    }
}
control E(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs_t hdr, inout m_t m) { apply { } }
control D(packet_out b, in hs_t hdr) { apply { b.emit(hdr.o); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_lookahead_of_a_struct():
    """lookahead<S>() with S a struct reads its fields without consuming them; a
    discarded lookahead past the end still signals PacketTooShort."""
    sw = from_source(LOOKAHEAD_STRUCT)
    run_stf(sw, "packet 0 3c 80 0102030405060708\nexpect 1 03 fc 01 3c80 0102030405060708$\n"
                "packet 0 3c 80\nexpect 1 03 fc ee 3c80$\n")


EXIT_COPY_OUT = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; bit<8> c; }
struct hs_t { h_t h; }
struct m_t { }
parser P(packet_in b, out hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    state start { b.extract(hdr.h); transition accept; }
}
control VC(inout hs_t hdr, inout m_t m) { apply { } }
control Sub(inout bit<8> x, out bit<8> y) {
    action leave(inout bit<8> v) { v = v + 1; exit; }
    apply { y = 7; leave(x); y = 9; }
}
control I(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    Sub() sub;
    apply {
        sm.egress_spec = 1;
        sub.apply(hdr.h.a, hdr.h.b);
        hdr.h.c = 0xff;
    }
}
control E(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs_t hdr, inout m_t m) { apply { } }
control D(packet_out b, in hs_t hdr) { apply { b.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_exit_still_copies_out_arguments():
    """`exit` inside an action or a sub-control still copies out/inout arguments back,
    through every level of calls; nothing after the exit runs."""
    sw = from_source(EXIT_COPY_OUT)
    run_stf(sw, "packet 0 10 00 00\nexpect 1 11 07 00$\n")


FOR_LOOPS = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> n; bit<8> sum; bit<8> odd; bit<8> stack_sum; bit<8> first_big; }
header e_t { bit<8> v; }
struct hs_t { h_t h; e_t[3] e; }
struct m_t { }
parser P(packet_in b, out hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    state start { b.extract(hdr.h); b.extract(hdr.e.next); b.extract(hdr.e.next);
                  b.extract(hdr.e.next); transition accept; }
}
control VC(inout hs_t hdr, inout m_t m) { apply { } }
bit<8> triangle(in bit<8> n) {
    bit<8> s = 0;
    for (bit<8> i in 1 .. n) { s = s + i; }
    return s;
}
control I(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    action odd_count() {
        hdr.h.odd = 0;
        for (bit<8> i = 0, bit<8> j = 0; i < hdr.h.n; i = i + 1, j = j + 2) {
            if (i[0:0] == 0) { continue; }
            hdr.h.odd = hdr.h.odd + 1;
        }
    }
    apply {
        sm.egress_spec = 1;
        hdr.h.sum = triangle(hdr.h.n);
        odd_count();
        hdr.h.stack_sum = 0;
        for (e_t x in hdr.e) { hdr.h.stack_sum = hdr.h.stack_sum + x.v; x.v = 0; }
        hdr.h.first_big = 0xff;
        for (bit<8> k = 0; ; k = k + 1) {
            if (k == 3) { break; }
            if (hdr.e[k].v > 10) { hdr.h.first_big = k; break; }
        }
    }
}
control E(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs_t hdr, inout m_t m) { apply { } }
control D(packet_out b, in hs_t hdr) { apply { b.emit(hdr); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_for_loops():
    """P4_16 1.2.5 loops: C-style with several init/update steps, `continue` still runs
    the update, `break`, a missing condition; `in lo .. hi` (inclusive, empty when
    hi < lo); over a header stack (the loop variable is a copy)."""
    sw = from_source(FOR_LOOPS)
    run_stf(sw, "packet 0 05 00 00 00 00 01 0b 03\nexpect 1 05 0f 02 0f 01 01 0b 03$\n"
                "packet 0 00 00 00 00 00 01 02 03\nexpect 1 00 00 00 06 ff 01 02 03$\n")


def test_break_outside_a_loop_is_refused():
    import pytest

    from softswitch.frontend.errors import P4Error
    src = FOR_LOOPS.replace("odd_count();", "odd_count(); break;")
    with pytest.raises(P4Error, match="'break' outside a for loop"):
        from_source(src)


BLOCKS_AS_VALUES = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<16> x; bit<16> y; bit<8> z; }
struct hs_t { h_t h; }
struct m_t { }
parser Sub(packet_in b, out h_t h) { state start { b.extract(h); transition accept; } }
parser P(packet_in b, out hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    state start { Sub.apply(b, hdr.h); transition accept; }
}
control VC(inout hs_t hdr, inout m_t m) { apply { } }
control step_t(inout bit<16> x);
control AddOne(inout bit<16> x) {
    register<bit<16>>(1) calls;
    apply { bit<16> n; calls.read(n, 0); calls.write(0, n + 1); x = x + 1; }
}
control Twice(inout bit<16> x)(step_t s) { apply { s.apply(x); s.apply(x); } }
control Shift(inout bit<16> x)(step_t s, bit<4> by) { apply { x = x << by; s.apply(x); } }
control I(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    AddOne() one;
    Twice(one) twice;
    Shift(AddOne(), 4) shift;
    apply {
        sm.egress_spec = 1;
        twice.apply(hdr.h.x);
        shift.apply(hdr.h.y);
        AddOne.apply(hdr.h.y);
    }
}
control E(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs_t hdr, inout m_t m) { apply { } }
control D(packet_out b, in hs_t hdr) { apply { b.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_direct_invocation_and_blocks_as_constructor_arguments():
    """`Type.apply(...)` runs an anonymous instance; a control instance (named or made
    in place) may be passed to a control's constructor parameter of a control type."""
    sw = from_source(BLOCKS_AS_VALUES)
    run_stf(sw, "packet 0 0010 0001 00\nexpect 1 0012 0012 00$\n")


UNION_STACK = """
#include <core.p4>
#include <v1model.p4>
header t_t { bit<8> t; }
header one_t { bit<8> v; }
header two_t { bit<16> v; }
header_union u_t { one_t one; two_t two; }
struct hs_t { t_t t; u_t[2] u; u_t w; }
struct m_t { }
parser P(packet_in b, out hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    state start {
        b.extract<t_t>(_);
        b.extract(hdr.t);
        transition select(hdr.t.t) { 1: short_long; default: long_short; }
    }
    state short_long { b.extract(hdr.u.next.one); b.extract(hdr.u.next.two); transition both; }
    state long_short { b.extract(hdr.u.next.two); b.extract(hdr.u.next.one); transition both; }
    state both { b.extract(hdr.w.one); b.extract(hdr.w.two); transition accept; }
}
control VC(inout hs_t hdr, inout m_t m) { apply { } }
control I(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    apply { sm.egress_spec = 1; }
}
control E(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs_t hdr, inout m_t m) { apply { } }
control D(packet_out b, in hs_t hdr) { apply { b.emit(hdr); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_header_union_stack_next_member_and_extract_into_dont_care():
    """`extract(s.next.member)` on a stack of header unions fills the next union and
    moves on; extracting a union member leaves only it valid; `extract<H>(_)` skips an
    H."""
    sw = from_source(UNION_STACK)
    run_stf(sw, "packet 0 ee 01 11 2222 33 4444 55\nexpect 1 01 11 2222 4444 55$\n"
                "packet 0 ee 02 2222 11 33 4444 55\nexpect 1 02 2222 11 4444 55$\n")


LEFT_TO_RIGHT = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; bit<8> c; bit<8> d; bit<8> e; }
struct hs_t { h_t h; }
struct m_t { }
parser P(packet_in b, out hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    state start { b.extract(hdr.h); transition accept; }
}
control VC(inout hs_t hdr, inout m_t m) { apply { } }
bit<8> bump(inout bit<8> x) { x = x + 10; return 1; }
control I(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    h_t saved;
    apply {
        sm.egress_spec = 1;
        saved = { hdr.h.a, bump(hdr.h.a), hdr.h.a, 0, 0 };
        hdr.h.d = hdr.h.b + bump(hdr.h.b);
        hdr.h.e = saved.a[3:0] ++ saved.c[3:0];
        hdr.h.c = saved.b;
    }
}
control E(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs_t hdr, inout m_t m) { apply { } }
control D(packet_out b, in hs_t hdr) { apply { b.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_operands_are_evaluated_left_to_right():
    """An operand read before a call that writes it back keeps its earlier value
    (`{ x, f(x), x }`, `y + f(y)`), as p4c and BMv2 evaluate left to right."""
    sw = from_source(LEFT_TO_RIGHT)
    run_stf(sw, "packet 0 01 02 00 00 00\nexpect 1 0b 0c 01 03 1b$\n")


DIRECT_TABLES = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct hs_t { h_t h; }
struct m_t { }
parser P(packet_in b, out hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    state start { b.extract(hdr.h); transition accept; }
}
control VC(inout hs_t hdr, inout m_t m) { apply { } }
control Mark(inout bit<8> x) {
    action set(bit<8> v) { x = v; }
    table t { key = { x: exact; } actions = { set; NoAction; } default_action = NoAction(); }
    apply { t.apply(); }
}
control I(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    apply { sm.egress_spec = 1; Mark.apply(hdr.h.a); Mark.apply(hdr.h.b); }
}
control E(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs_t hdr, inout m_t m) { apply { } }
control D(packet_out b, in hs_t hdr) { apply { b.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_directly_invoked_controls_have_their_own_tables_named_as_in_p4info():
    from softswitch.frontend import load_source
    from softswitch.p4info import build_p4info
    info = build_p4info(load_source(DIRECT_TABLES, filename="case.p4"))
    names = sorted(t.preamble.name for t in info.tables)
    assert names == ["I.Mark.t", "I.Mark_1.t"]
    sw = from_source(DIRECT_TABLES)
    assert sorted(sw.program.tables) == names
    run_stf(sw, "add I.Mark.t x:1 I.Mark.set(v:7)\nadd I.Mark_1.t x:1 I.Mark_1.set(v:9)\n"
                "packet 0 01 01\nexpect 1 07 09$\n")


STACK_INDEX = """
#include <core.p4>
#include <v1model.p4>
header i_t { bit<8> i; bit<8> seen; bit<8> valid; }
header e_t { bit<8> v; }
struct hs_t { i_t i; e_t[2] e; }
struct m_t { }
parser P(packet_in b, out hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    state start { b.extract(hdr.i); b.extract(hdr.e.next); b.extract(hdr.e.next); transition accept; }
}
control VC(inout hs_t hdr, inout m_t m) { apply { } }
control I(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    action bump(inout bit<8> x) { x = x + 1; }
    apply {
        sm.egress_spec = 1;
        hdr.i.seen = hdr.e[hdr.i.i].v;
        hdr.i.valid = hdr.e[hdr.i.i].isValid() ? 8w1 : 8w0;
        hdr.e[hdr.i.i].v = 0x77;
        bump(hdr.e[hdr.i.i].v);
    }
}
control E(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs_t hdr, inout m_t m) { apply { } }
control D(packet_out b, in hs_t hdr) { apply { b.emit(hdr); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_run_time_stack_index_out_of_range_reads_zero_and_writes_nowhere():
    """As p4c compiles a run-time index for BMv2 (a chain of compares): out of range,
    a read sees an invalid element with zero fields, a write has no effect, and the
    packet is not dropped."""
    sw = from_source(STACK_INDEX)
    run_stf(sw, "packet 0 01 00 00 11 22\nexpect 1 01 22 01 11 78$\n"
                "packet 0 05 00 00 11 22\nexpect 1 05 00 00 11 22$\n")


def test_assignment_target_index_is_evaluated_before_the_right_side():
    """`s[f(i)] = g(i)` with g changing i: the element is chosen first (left to right)."""
    src = STACK_INDEX.replace("""        hdr.e[hdr.i.i].v = 0x77;
        bump(hdr.e[hdr.i.i].v);""", """        hdr.e[hdr.i.i].v = reset(hdr.i.i);""").replace(
        "control I(", "bit<8> reset(inout bit<8> x) { x = 0; return 0x55; }\ncontrol I(")
    sw = from_source(src)
    run_stf(sw, "packet 0 01 00 00 11 22\nexpect 1 00 22 01 11 55$\n")


CLI_STATE = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; bit<8> color; }
struct hs_t { h_t h; }
struct m_t { }
parser P(packet_in b, out hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    state start { b.extract(hdr.h); transition accept; }
}
control VC(inout hs_t hdr, inout m_t m) { apply { } }
control I(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    register<bit<8>>(4) r;
    counter(4, CounterType.packets) c;
    meter(2, MeterType.packets) mt;
    apply {
        r.read(hdr.h.a, 2);
        c.count(1);
        mt.execute_meter(1, hdr.h.color);
        if (hdr.h.b == 1) { sm.mcast_grp = 5; }
        else { sm.egress_spec = 1; clone(CloneType.I2E, 7); }
    }
}
control E(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs_t hdr, inout m_t m) { apply { } }
control D(packet_out b, in hs_t hdr) { apply { b.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_simple_switch_cli_commands_in_stf():
    """register_write/reset, counter_write, meter rates, mc_node_update and
    mirroring_add_mc/delete act as on simple_switch_CLI; reads only check names."""
    sw = from_source(CLI_STATE)
    run_stf(sw, """
register_write I.r 2 0x42
counter_write I.c 1 10 0
meter_array_set_rates I.mt 0.000001:1 0.000001:1
meter_get_rates I.mt 1
mc_mgrp_create 5
mc_node_create 0 3
mc_node_associate 5 0
mc_node_update 0 4
packet 0 00 01 00
expect 4 42 01 00$
register_reset I.r
mirroring_add_mc 7 5
packet 0 00 02 00
expect 1 00 02 02$
expect 4 00 02 00$
mirroring_delete 7
packet 0 00 02 00
expect 1 00 02 02$
check_counter I.c(1) packets == 13
register_read I.r 2
counter_read I.c 1
mirroring_get 7
""")


DIRECT_COUNTER = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; }
struct hs_t { h_t h; }
struct m_t { }
parser P(packet_in b, out hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    state start { b.extract(hdr.h); transition accept; }
}
control VC(inout hs_t hdr, inout m_t m) { apply { } }
control I(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    direct_counter(CounterType.packets_and_bytes) hits;
    action send(bit<9> p) { sm.egress_spec = p; hits.count(); }
    table t { key = { hdr.h.a: exact; } actions = { send; NoAction; } counters = hits;
              default_action = NoAction(); }
    apply { t.apply(); }
}
control E(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs_t hdr, inout m_t m) { apply { } }
control D(packet_out b, in hs_t hdr) { apply { b.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_check_counter_of_a_named_entry_reads_its_direct_counter():
    sw = from_source(DIRECT_COUNTER)
    res = StfRunner(sw).run(parse_stf(
        "add t h.a:1 send(p:2) = first\nadd t h.a:2 send(p:3) = second\n"
        "packet 0 01\npacket 0 01 ff\npacket 0 02\nexpect 2\nexpect 3\n"
        "check_counter hits(first) packets == 2\ncheck_counter hits(first) bytes == 3\n"
        "check_counter hits(second) packets == 1\ncheck_counter hits(second) packets == 5\n",
        "case.stf"), "case.stf")
    assert res.failures == ["case.stf:11: counter hits[second] packets is 1, expected == 5"]
