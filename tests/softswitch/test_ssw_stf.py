"""STF reading and running: numbers with wildcards, LPM forms, priorities, `$`, failures."""
from __future__ import annotations

import pytest
from ssw_helpers import program

from softswitch.errors import StfError
from softswitch.stf import StfRunner, match_expected, parse_number, parse_stf

DECLS = """
header h_t { bit<8> a; bit<8> b; bit<16> c; }
struct headers_t { h_t h; }
struct meta_t { }
"""
INGRESS = """
    action fwd(bit<9> port, bit<8> tag) { sm.egress_spec = port; hdr.h.b = tag; }
    action drop() { mark_to_drop(sm); }
    table tern { key = { hdr.h.a: ternary; hdr.h.c: lpm; } actions = { fwd; drop; } default_action = drop(); }
    apply { tern.apply(); }
"""


@pytest.fixture()
def sw():
    return program(decls=DECLS, parser="state start { pkt.extract(hdr.h); transition accept; }",
                   ingress=INGRESS, deparser="pkt.emit(hdr.h);")


def run(sw, text: str):
    return StfRunner(sw).run(parse_stf(text, "t.stf"), "t.stf")


def test_numbers():
    assert parse_number("0x1*", "x") == (0x10, 0xF0)
    assert parse_number("0b1*0", "x") == (0b100, 0b101)
    assert parse_number("17", "x") == (17, None)
    with pytest.raises(StfError, match="bad number"):
        parse_number("0xZZ", "x")


def test_expect_wildcards_and_exact_end():
    assert match_expected("01**03", False, bytes.fromhex("01ff0304"))
    assert not match_expected("01**03", True, bytes.fromhex("01ff0304"))
    assert match_expected("01**03", True, bytes.fromhex("01ff03"))
    assert not match_expected("01**03", False, bytes.fromhex("01ff"))


def test_priorities_wildcards_lpm_and_pass(sw):
    res = run(sw, """
# ternary with * nibble, lpm as value/length; the higher priority wins
add tern 10 hdr.h.a:0x1* hdr.h.c:0x1200/8 fwd(port:2, tag:0xAA)
add tern 20 hdr.h.a:0x12 hdr.h.c:0x0000/0 fwd(port:3, tag:0xBB)
packet 0 12 00 1234
expect 3 12 BB 1234$
packet 0 13 00 12FF
expect 2 13 AA 12FF$
packet 0 13 00 13FF
""")
    assert res.ok, res.failures
    assert res.packets_sent == 3 and res.packets_checked == 2


def run_strict(sw, text: str):
    return StfRunner(sw, strict=True).run(parse_stf(text, "t.stf"), "t.stf")


def test_failures_are_reported(sw):
    res = run(sw, """
add tern 1 hdr.h.a:0x** hdr.h.c:0x0000/0 fwd(port:2, tag:1)
setdefault tern fwd(port:5, tag:9)
packet 0 00 00 0000
expect 2 00 02 0000
expect 4 00 00 0000
""")
    assert not res.ok
    text = "\n".join(res.failures)
    assert "t.stf:5: packet 1 on port 2 differs" in text
    assert "t.stf:6: expected a packet on port 4, none came" in text
    # a port some line names is watched: an extra packet there fails
    res = run(sw, "packet 2 00 00 0000\npacket 0 00 00 0000\n")
    assert res.failures and "unexpected packet 1 on port 2" in res.failures[0]


def test_ports_are_watched_as_p4c_runner_does(sw):
    """p4c's BMv2 runner opens interfaces only for ports its lines name: packets to
    other ports are not seen; `expect PORT` without data takes any packets."""
    sw.runtime.table("tern").set_default("Ing.fwd", [2, 7])
    assert run(sw, "packet 0 00 00 0000\n").ok
    res = run_strict(sw, "packet 0 00 00 0000\n")
    assert res.failures and "unexpected packet 1 on port 2" in res.failures[0]
    assert run(sw, "packet 0 00 00 0000\npacket 0 00 00 0000\nexpect 2\n").ok
    assert run(sw, "expect 2\n").ok
    with pytest.raises(StfError, match="both with and without packet data"):
        run(sw, "expect 2\nexpect 2 00\n")


def test_empty_packet_is_sent(sw):
    res = run(sw, "packet 0\nexpect 0\n")
    assert res.ok and res.packets_sent == 1


def test_bad_files_raise(sw):
    with pytest.raises(StfError, match="unknown STF command 'bogus'"):
        parse_stf("bogus 1 2", "t.stf")
    with pytest.raises(StfError, match="t.stf:1: .*has no key 'nope'"):
        run(sw, "add tern 1 nope:1 fwd(port:1, tag:1)")
    with pytest.raises(StfError, match="parameter tag not given"):
        run(sw, "add tern 1 hdr.h.a:1 fwd(port:1)")


def test_valid_bit_keys_and_entry_ids():
    sw = program(decls="header h_t { bit<8> a; } struct headers_t { h_t h; } struct meta_t { }",
                 parser="state start { pkt.extract(hdr.h); transition accept; }",
                 ingress="""action f(bit<9> p) { sm.egress_spec = p; }
                 table t { key = { hdr.h.isValid(): exact; hdr.h.a: exact; } actions = { f; } }
                 apply { t.apply(); }""", deparser="pkt.emit(hdr.h);")
    res = run(sw, "add t hdr.h.$valid$:1 hdr.h.a:5 f(p:3) = A\npacket 0 05\nexpect 3 05$\n")
    assert res.ok, res.failures


def test_stack_element_keys_priority_zero_and_out_argument_bound_in_table():
    sw = program(decls="""
    header e_t { bit<8> k; bit<8> v; }
    struct headers_t { e_t[2] s; }
    struct meta_t { }
    """, parser="state start { pkt.extract(hdr.s.next); pkt.extract(hdr.s.next); transition accept; }",
        ingress="""
    action setbyte(out bit<8> reg, bit<8> val) { reg = val; }
    table t { key = { hdr.s[1].k: ternary; } actions = { setbyte(hdr.s[0].v); NoAction; } }
    apply { sm.egress_spec = 1; t.apply(); }""", deparser="pkt.emit(hdr.s);")
    res = run(sw, """
add t 0 s$1.k:0x1* setbyte(val:0x11)
add t 5 s$1.k:0x12 setbyte(val:0x22)
packet 0 00 00 13 00
expect 1 00 11 13 00$
packet 0 00 00 12 00
expect 1 00 22 12 00$
""")
    assert res.ok, res.failures


def test_expectation_may_end_in_half_a_byte(sw):
    """p4c compares expectations nibble by nibble: an odd digit count is allowed there;
    packet data is read in digit pairs."""
    sw.runtime.table("tern").set_default("Ing.fwd", [2, 7])
    assert run(sw, "packet 0 00 00 12f0\nexpect 2 00 07 1*\n").ok
    assert not run(sw, "packet 0 00 00 12f0\nexpect 2 00 07 2\n").ok
    # in packet data a lone last digit is a byte of its own (p4c's digit pairs)
    assert run(sw, "packet 0 00 00 12f\nexpect 2 00 07 12 0f$\n").ok
