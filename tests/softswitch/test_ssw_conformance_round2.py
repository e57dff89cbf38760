"""v1model behaviours found by a second run of p4c's sample STF tests: each case is a
small program of our own with the BMv2 behaviour it pins down (one case per fix)."""
from __future__ import annotations

import pytest
from ssw_helpers import from_source, run_stf

from softswitch.frontend.errors import P4Error


def one_header(fields: str, ingress: str, *, extra: str = "", stack: str = "") -> str:
    """A program with header `d_t` (`fields`), optionally a stack `w_t[4] ws` of 8-bit
    words, and `ingress` as the ingress apply body."""
    return f"""
#include <core.p4>
#include <v1model.p4>
header d_t {{ {fields} }}
header w_t {{ bit<8> x; }}
struct hs_t {{ d_t d; {stack} }}
struct m_t {{ }}
{extra}
parser P(packet_in b, out hs_t hdr, inout m_t m, inout standard_metadata_t sm) {{
    state start {{
        b.extract(hdr.d);
        {"b.extract(hdr.ws.next); b.extract(hdr.ws.next); b.extract(hdr.ws.next); b.extract(hdr.ws.next);" if stack else ""}
        transition accept;
    }}
}}
control VC(inout hs_t hdr, inout m_t m) {{ apply {{ }} }}
control I(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) {{
    apply {{ {ingress} }}
}}
control E(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) {{ apply {{ }} }}
control CC(inout hs_t hdr, inout m_t m) {{ apply {{ }} }}
control D(packet_out b, in hs_t hdr) {{ apply {{ b.emit(hdr); }} }}
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_compound_assignment_operators():
    """P4_16 1.2.5's `a op= b` (p4c's opassign1-bmv2): every operator, signed and
    saturating ones included, and in a `for` loop's update step."""
    sw = from_source(one_header(
        "bit<8> a; bit<8> b; bit<8> c; bit<8> d; bit<8> e; bit<8> f; bit<8> g; bit<8> h;"
        " bit<8> i; bit<8> j; bit<8> k; bit<8> l; int<8> s; bit<8> n;",
        """
        hdr.d.a += 3; hdr.d.b -= 3; hdr.d.c *= 3; hdr.d.d /= 3; hdr.d.e %= 3;
        hdr.d.f &= 0x0f; hdr.d.g |= 0x0f; hdr.d.h ^= 0xff; hdr.d.i <<= 2; hdr.d.j >>= 2;
        hdr.d.k |+|= 0xf0; hdr.d.l |-|= 0x20; hdr.d.s |-|= 100;
        for (bit<8> x = 0; x < 4; x += 1) { hdr.d.n += 2; }
        hdr.d.a[7:4] += 1;
        """))
    run_stf(sw, "packet 0 10 10 10 10 10 10 10 10 10 10 20 10 C0 00\n"
                "expect 0 23 0D 30 05 01 00 1F EF 40 04 FF 00 80 08$\n")


def test_compound_assignment_evaluates_its_target_once():
    """`s[f()].x |= v` calls `f` once (p4c's opassign2-bmv2): the target's run-time
    index is read and written through the one evaluation."""
    sw = from_source(one_header(
        "bit<8> i; bit<8> v;",
        """
        if (hdr.ws[3].isValid()) {
            hdr.ws[postincr(hdr.d.i) & 3].x |= hdr.d.v;
            hdr.ws[postincr(hdr.d.i) & 3].x += hdr.d.v;
        }
        """,
        stack="w_t[4] ws;",
        extra="bit<8> postincr(inout bit<8> x) { bit<8> r = x; x += 1; return r; }"))
    run_stf(sw, "packet 0 01 05 10 20 30 40\nexpect 0 03 05 10 25 35 40$\n")


def test_compound_assignment_needs_an_lvalue():
    """The left side of `op=` is checked like the left side of `=`."""
    with pytest.raises(P4Error, match="left side"):
        from_source(one_header("bit<8> a;", "K += 2;", extra="const bit<8> K = 1;"))


ERROR_KEYED = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct hs_t { h_t h; }
struct m_t { error e; }
parser P(packet_in b, out hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    state start { b.extract(hdr.h); transition accept; }
}
control VC(inout hs_t hdr, inout m_t m) { apply { } }
control I(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    action fwd(bit<9> p) { sm.egress_spec = p; }
    table by_error {
        key = { sm.parser_error : exact; }
        actions = { fwd; }
        const entries = {
            error.NoError : fwd(1);
            error.PacketTooShort : fwd(2);
        }
        default_action = fwd(7);
    }
    table meta_error {
        key = { m.e : exact @name("e"); }
        actions = { fwd; NoAction; }
        default_action = NoAction;
    }
    apply {
        by_error.apply();
        m.e = sm.parser_error;
        meta_error.apply();
    }
}
control E(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs_t hdr, inout m_t m) { apply { } }
control D(packet_out b, in hs_t hdr) { apply { b.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_table_keyed_on_an_error():
    """A table key of type `error` (p4c's issue1062-1-bmv2): const entries name error
    members, run-time entries give the error's code (PacketTooShort is 1)."""
    sw = from_source(ERROR_KEYED)
    run_stf(sw, "packet 0 0102\nexpect 1 0102$\n"
                "packet 0 01\nexpect 2 01$\n"
                "add I.meta_error e:1 I.fwd(p:3)\n"
                "packet 0 05\nexpect 3 05$\n"
                "packet 0 0506\nexpect 1 0506$\n")


IN_IS_A_COPY = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; bit<8> c; bit<8> d; }
struct hs_t { h_t h; }
struct m_t { }
parser P(packet_in b, out hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    state start { b.extract(hdr.h); transition accept; }
}
control VC(inout hs_t hdr, inout m_t m) { apply { } }
control Sub(inout hs_t all, in h_t v) {
    apply { all.h.a = 0xEE; all.h.c = v.a; }
}
bit<8> twice(inout hs_t all, in hs_t v) { all.h.b = 0xDD; return v.h.b; }
control I(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    Sub() sub;
    action act(in h_t v) { hdr.h.d = 0xCC; hdr.h.d = v.d + 1; }
    apply {
        act(hdr.h);
        sub.apply(hdr, hdr.h);
        hdr.h.b = twice(hdr, hdr);
    }
}
control E(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs_t hdr, inout m_t m) { apply { } }
control D(packet_out b, in hs_t hdr) { apply { b.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_in_arguments_are_copies():
    """An `in` header or struct argument is copied in (p4c's gauntlet_indirect_hdr_
    assign_2-bmv2): the callee reads the value at the call even after writing the
    argument's original through another parameter or the enclosing control."""
    sw = from_source(IN_IS_A_COPY)
    run_stf(sw, "packet 0 01 02 03 04\nexpect 0 EE 02 01 05$\n")


STRUCT_IN_HEADER = """
#include <core.p4>
#include <v1model.p4>
struct inner_t { bit<4> x; bool f; bit<3> y; }
struct row_t { bit<8> e; inner_t inn; int<8> s; }
header h_t { bit<8> tag; row_t row; }
struct hs_t { h_t a; h_t b; }
struct m_t { }
parser P(packet_in b, out hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    state start { b.extract(hdr.a); transition accept; }
}
control VC(inout hs_t hdr, inout m_t m) { apply { } }
control I(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    action fwd(bit<9> p) { sm.egress_spec = p; }
    table t {
        key = { hdr.a.row.e : exact; hdr.a.row.inn.f : exact; }
        actions = { fwd; NoAction; }
        const entries = { (0x01, true) : fwd(1); (0x01, false) : fwd(2); }
        default_action = NoAction();
    }
    apply {
        t.apply();
        hdr.b = hdr.a;
        hdr.b.row.inn.y = hdr.b.row.inn.y + 1;
        hdr.b.row.s = hdr.b.row.s - 2;
        if (hdr.b == hdr.a) { hdr.a.tag = 0xEE; }
        if (hdr.b.row.inn == hdr.a.row.inn) { hdr.a.tag = 0xDD; }
        hdr.b.tag = (bit<8>)hdr.a.row.inn.x;
    }
}
control E(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs_t hdr, inout m_t m) { apply { } }
control D(packet_out b, in hs_t hdr) { apply { b.emit(hdr); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_struct_fields_in_a_header():
    """A header may hold a struct of fixed-width fields (p4c's bvec-hdr-bmv2): it is
    extracted and emitted field by field, its members are keys and lvalues, and
    copying the header copies the struct (the copy's edits leave the original alone)."""
    sw = from_source(STRUCT_IN_HEADER)
    # tag 07 | e 01 | x=9 f=1 y=5 -> 1001 1 101 = 9D | s = 03
    run_stf(sw, "packet 0 07 01 9D 03 AA\nexpect 1 07 01 9D 03 09 01 9E 01 AA$\n"
                "packet 0 07 01 95 03\nexpect 2 07 01 95 03 09 01 96 01$\n"
                "packet 0 07 02 9F 80\nexpect 0 07 02 9F 80 09 02 98 7E$\n")


def test_header_fields_may_not_be_headers_or_varbit_structs():
    """Only fixed-width structs nest in a header."""
    with pytest.raises(P4Error, match="header field"):
        from_source(STRUCT_IN_HEADER.replace("struct inner_t { bit<4> x; bool f; bit<3> y; }",
                                             "header inner_t { bit<4> x; bool f; bit<3> y; }"))


def test_p4info_of_a_program_with_a_struct_in_a_header():
    """Tables keyed on a struct member of a header describe as usual; a digest of such a
    header is refused with a named error (P4Runtime header members are bit strings)."""
    from softswitch.p4info import P4InfoError, build_p4info

    sw = from_source(STRUCT_IN_HEADER)
    info = build_p4info(sw.program.checked)
    keys = [m.name for t in info.tables for m in t.match_fields]
    assert keys == ["hdr.a.row.e", "hdr.a.row.inn.f"]
    with_digest = STRUCT_IN_HEADER.replace(
        "        t.apply();\n", "        t.apply();\n        digest<h_t>(1, hdr.a);\n", 1)
    with pytest.raises(P4InfoError, match="h_t.*row.*struct"):
        build_p4info(from_source(with_digest).program.checked)


def test_p4info_describes_a_digested_header():
    """A digest of a header type lists the header in type_info with bit-string members
    (P4Runtime's header members are bit/int/varbit; bool is one bit)."""
    from softswitch.p4info import build_p4info

    src = ERROR_KEYED.replace("header h_t { bit<8> a; bit<8> b; }",
                              "header h_t { bit<8> a; int<8> b; bool c; bit<7> pad; }")
    src = src.replace("        by_error.apply();\n", "        by_error.apply();\n        digest<h_t>(1, hdr.h);\n", 1)
    info = build_p4info(from_source(src).program.checked)
    members = {m.name: m.type_spec for m in info.type_info.headers["h_t"].members}
    assert members["a"].bit.bitwidth == 8
    assert members["b"].int.bitwidth == 8
    assert members["c"].bit.bitwidth == 1
    assert info.digests[0].type_spec.header.name == "h_t"


TOP_LEVEL_DIRECT = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct hs_t { h_t h; }
struct m_t { bit<32> color; }
parser P(packet_in b, out hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    state start { b.extract(hdr.h); transition accept; }
}
control VC(inout hs_t hdr, inout m_t m) { apply { } }
@name("namedmeter") direct_meter<bit<32>>(MeterType.packets) my_meter;
direct_counter(CounterType.packets) my_counter;
action_profile(32w16) my_profile;
control I(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    @name("fwd") action fwd_metered(bit<9> p) { sm.egress_spec = p; my_meter.read(m.color); }
    @name("fwd") action fwd_plain(bit<9> p) { sm.egress_spec = p; }
    table metered {
        key = { hdr.h.a : exact; }
        actions = { fwd_metered; NoAction; }
        meters = my_meter;
        default_action = NoAction();
    }
    table counted {
        key = { hdr.h.b : exact; }
        actions = { fwd_plain; NoAction; }
        counters = my_counter;
        default_action = NoAction();
    }
    action set_b(bit<8> v) { hdr.h.b = v; }
    table indirect {
        key = { hdr.h.a : exact; }
        actions = { set_b; NoAction; }
        implementation = my_profile;
        default_action = NoAction();
    }
    apply {
        indirect.apply();
        metered.apply();
        counted.apply();
        hdr.h.a = (bit<8>)m.color;
    }
}
control E(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs_t hdr, inout m_t m) { apply { } }
control D(packet_out b, in hs_t hdr) { apply { b.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_direct_resources_and_profiles_declared_at_the_top_level():
    """A direct meter, direct counter or action profile instantiated outside any control
    (p4c's named_meter_1-bmv2) is the table's `meters`/`counters`/`implementation`."""
    sw = from_source(TOP_LEVEL_DIRECT)
    run_stf(sw, "add I.metered hdr.h.a:1 I.fwd(p:3)\n"
                "add I.counted hdr.h.b:2 I.fwd(p:4) = e\n"
                "packet 0 01 05\nexpect 3 00 05$\n"
                "packet 0 07 02\nexpect 4 00 02$\n"
                "check_counter my_counter(e) packets == 1\n")


def test_p4info_merges_actions_of_one_name_and_links_top_level_direct_meters():
    """Two actions under one `@name` are one P4Info action (as p4c makes it), and a
    top-level direct meter keeps its plain name and links to its table."""
    from softswitch.p4info import build_p4info

    info = build_p4info(from_source(TOP_LEVEL_DIRECT).program.checked)
    assert [a.preamble.name for a in info.actions].count("I.fwd") == 1
    tables = {t.preamble.name: t for t in info.tables}
    (meter,) = info.direct_meters
    assert meter.preamble.name == "namedmeter"
    assert meter.direct_table_id == tables["I.metered"].preamble.id
    assert list(tables["I.metered"].direct_resource_ids) == [meter.preamble.id]


STRUCT_VALUE_SETS = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; bit<8> c; }
struct hs_t { h_t h; }
struct pair_t { bit<8> x; bit<8> y; }
struct one_t { bit<8> x; }
struct m_t { }
parser P(packet_in b, out hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    value_set<pair_t>(4) pvs;
    value_set<one_t>(4) pvs1;
    state start {
        b.extract(hdr.h);
        transition select(hdr.h.a, hdr.h.b) { pvs: yes; (0x07, 0x07): seven; default: no; }
    }
    state yes { hdr.h.c = 1; transition select(hdr.h.a) { pvs1: one; default: accept; } }
    state one { hdr.h.c = 3; transition accept; }
    state seven { hdr.h.c = 7; transition accept; }
    state no { hdr.h.c = 2; transition accept; }
}
control VC(inout hs_t hdr, inout m_t m) { apply { } }
control I(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) { apply { } }
control E(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs_t hdr, inout m_t m) { apply { } }
control D(packet_out b, in hs_t hdr) { apply { b.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_value_sets_of_structs_match_all_select_keys():
    """A value_set of a struct over a multi-key select matches the keys concatenated
    in field order (before, only the first key was compared); a one-field struct serves
    a single key (p4c's pvs-struct-1-bmv2)."""
    sw = from_source(STRUCT_VALUE_SETS)
    sw.runtime.value_set_add("P.pvs", 0x0102)
    sw.runtime.value_set_add("P.pvs", 0x0500, 0xFF00)  # a = 5, any b
    sw.runtime.value_set_add("P.pvs1", 0x01)
    got = {pkt: [d.hex() for _, d in sw.process(0, bytes.fromhex(pkt))]
           for pkt in ("010200", "010300", "020200", "0001ff", "05aa00", "070700")}
    assert got == {"010200": ["010203"], "010300": ["010302"], "020200": ["020202"],
                   "0001ff": ["000102"], "05aa00": ["05aa01"], "070700": ["070707"]}


def test_value_set_element_must_fit_the_keys():
    """A struct whose fields do not follow the keys' types is a located type error."""
    with pytest.raises(P4Error, match="value_set of pair_t used for keys"):
        from_source(STRUCT_VALUE_SETS.replace("struct pair_t { bit<8> x; bit<8> y; }",
                                              "struct pair_t { bit<8> x; bit<16> y; }"))


def test_value_set_of_a_nested_struct_over_sliced_keys():
    """Nested struct fields count one by one (p4c's pvs-nested-struct), and keys may be
    slices of odd widths (pvs-struct-2-bmv2: 16 + 3 bits)."""
    src = STRUCT_VALUE_SETS.replace(
        "struct pair_t { bit<8> x; bit<8> y; }",
        "struct low_t { bit<3> y; }\nstruct pair_t { bit<8> x; low_t low; }").replace(
        "transition select(hdr.h.a, hdr.h.b) {", "transition select(hdr.h.a, hdr.h.b[7:5]) {").replace(
        "(0x07, 0x07): seven;", "(0x07, 0x7): seven;")
    sw = from_source(src)
    sw.runtime.value_set_add("P.pvs", (0x01 << 3) | 0x5)  # a = 1, b[7:5] = 5
    got = {pkt: [d.hex() for _, d in sw.process(0, bytes.fromhex(pkt))]
           for pkt in ("01a000", "01bf00", "01c000", "07e000")}
    assert got == {"01a000": ["01a001"], "01bf00": ["01bf01"], "01c000": ["01c002"],
                   "07e000": ["07e007"]}


def _prio_program(props: str, entries: str) -> str:
    return f"""
#include <core.p4>
#include <v1model.p4>
header h_t {{ bit<8> k; bit<8> r; }}
struct hs_t {{ h_t h; }}
struct m_t {{ }}
parser P(packet_in b, out hs_t hdr, inout m_t m, inout standard_metadata_t sm) {{
    state start {{ b.extract(hdr.h); transition accept; }}
}}
control VC(inout hs_t hdr, inout m_t m) {{ apply {{ }} }}
control I(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) {{
    action set(bit<8> v) {{ hdr.h.r = v; }}
    table t {{
        key = {{ hdr.h.k : ternary; }}
        actions = {{ set; NoAction; }}
        default_action = NoAction();
        {props}
        entries = {{ {entries} }}
    }}
    apply {{ t.apply(); }}
}}
control E(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) {{ apply {{ }} }}
control CC(inout hs_t hdr, inout m_t m) {{ apply {{ }} }}
control D(packet_out b, in hs_t hdr) {{ apply {{ b.emit(hdr.h); }} }}
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


@pytest.mark.parametrize("props, entries, winner", [
    # largest_priority_wins defaults to true: 1001 beats 1000
    ("", "priority=1000: 0x01 &&& 0x0F : set(1); priority=1001: 0x01 &&& 0xFF : set(2);", 2),
    # an entry without a priority takes the previous one minus priority_delta (1000 - 100)
    ("priority_delta = 100;",
     "priority=1000: 0x01 &&& 0x0F : set(1); 0x01 &&& 0xFF : set(2); priority=950: 0x01 &&& 0xFF : set(3);", 1),
    ("priority_delta = 100;",
     "priority=1000: 0x02 &&& 0x0F : set(1); 0x01 &&& 0xFF : set(2); priority=950: 0x01 &&& 0xFF : set(3);", 3),
    # smallest wins, and the missing priority is the previous one plus the delta (10 + 10)
    ("largest_priority_wins = false; priority_delta = 10;",
     "priority=10: 0x02 &&& 0x0F : set(1); 0x01 &&& 0xFF : set(2); priority=15: 0x01 &&& 0x0F : set(3);", 3),
    ("largest_priority_wins = false;",
     "priority=10: 0x01 &&& 0x0F : set(1); priority=5: 0x01 &&& 0xFF : set(2);", 2),
    # mutable and const entries mixed; no priorities at all: the first listed wins
    ("", "0x01 &&& 0x0F : set(1); const 0x01 &&& 0xFF : set(2);", 1),
])
def test_entry_priorities_follow_the_language_rules(props, entries, winner):
    """`priority = N :` entries (P4_16 1.2.4, p4c's init-entries-bmv2): the numerically
    largest priority wins unless `largest_priority_wins = false`; entries without a
    priority are numbered from the previous one by `priority_delta`."""
    sw = from_source(_prio_program(props, entries))
    assert [d.hex() for _, d in sw.process(0, b"\x01\x00")] == [f"01{winner:02x}"]


def test_first_entry_must_name_its_priority():
    with pytest.raises(Exception, match="first entry must have a priority"):
        from_source(_prio_program("", "0x01 &&& 0x0F : set(1); priority=5: 0x01 &&& 0xFF : set(2);"))


ENUM_DIGESTS = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; }
enum kind_t { Small, Big }
enum bit<8> code_t { foo = 28, gah = 42 }
struct d1_t { bit<8> a; error e; kind_t k; }
struct d2_t { code_t c; }
struct hs_t { h_t h; }
struct m_t { d1_t d1; d2_t d2; }
parser P(packet_in b, out hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    state start { b.extract(hdr.h); transition accept; }
}
control VC(inout hs_t hdr, inout m_t m) { apply { } }
control I(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    apply {
        m.d1.a = hdr.h.a;
        m.d1.e = error.PacketTooShort;
        m.d1.k = kind_t.Big;
        digest(1, m.d1);
        m.d2.c = code_t.gah;
        digest(2, m.d2);
    }
}
control E(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs_t hdr, inout m_t m) { apply { } }
control D(packet_out b, in hs_t hdr) { apply { b.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_digests_carrying_errors_and_enums():
    """A digest of a struct with `error`, enum and serializable-enum members (p4c's
    v1model-digest-containing-ser-enum): it compiles, the runtime hands out codes, P4Info
    describes the types in type_info, and P4Runtime sends names and enum_value bytes."""
    from softswitch.p4info import build_p4info
    from softswitch.p4runtime.digests import _encode_member
    from softswitch.p4runtime.schema import Schema

    sw = from_source(ENUM_DIGESTS)
    sw.process(0, b"\x07")
    assert sw.runtime.digest_pop("d1_t") == [(7, 1, 1)]
    assert sw.runtime.digest_pop("d2_t") == [(42,)]
    info = build_p4info(sw.program.checked)
    assert [m.name for m in info.type_info.enums["kind_t"].members] == ["Small", "Big"]
    assert [(m.name, m.value) for m in info.type_info.serializable_enums["code_t"].members] == [
        ("foo", b"\x1c"), ("gah", b"\x2a")]
    assert "PacketTooShort" in info.type_info.error.members
    schema = Schema(info)
    d1 = schema.digest_by_name["d1_t"]
    encoded = [_encode_member(v, 8, False, sym) for v, sym in zip((7, 1, 1), d1.symbols)]
    assert encoded[0].bitstring == b"\x07"
    assert encoded[1].error == "PacketTooShort"
    assert encoded[2].enum == "Big"
    d2 = schema.digest_by_name["d2_t"]
    assert _encode_member(42, 0, False, d2.symbols[0]).enum_value == b"\x2a"


def test_in_arguments_bound_in_a_table_action_list_are_copies():
    """`actions = { act(hdr.h) }` with `action act(in h_t v)`: the table's call copies
    `hdr.h` in, like a direct call does."""
    src = IN_IS_A_COPY.replace(
        "    apply {\n        act(hdr.h);",
        "    table t { key = { hdr.h.a : exact; } actions = { act(hdr.h); NoAction; }\n"
        "              default_action = act(hdr.h); }\n"
        "    apply {\n        t.apply();", 1)
    assert "t.apply();" in src
    sw = from_source(src)
    run_stf(sw, "packet 0 01 02 03 04\nexpect 0 EE 02 01 05$\n")
