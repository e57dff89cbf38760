"""Each language feature parses and gets the types/annotations the backend relies on."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
from fe_helpers import check, ingress

from softswitch.frontend import ast as A
from softswitch.frontend import load_program
from softswitch.frontend import types as T

HERE = Path(__file__).parent
CONFORMANCE = sorted((HERE.parent / "conformance").glob("*.p4"))


def _nodes(prog, cls, file_part="t.p4"):
    return [n for n in A.iter_nodes(prog.program) if isinstance(n, cls) and file_part in n.loc.file]


def _assign_rhs(prog, lhs_text):
    """The right side of the first assignment whose left side is the member chain ``lhs_text``."""
    from softswitch.frontend.text import expr_text

    for s in _nodes(prog, A.AssignmentStatement):
        if expr_text(s.lhs) == lhs_text:
            return s.rhs
    raise AssertionError(lhs_text)


@pytest.mark.parametrize("path", CONFORMANCE, ids=lambda p: p.stem)
def test_conformance_programs_check(path):
    prog = load_program(path)
    assert prog.main is not None and prog.main.package == "V1Switch"
    assert [b.param for b in prog.main.blocks] == ["p", "vr", "ig", "eg", "ck", "dep"]
    assert isinstance(prog.main.block("p").decl, A.ParserDecl)
    for node in A.iter_nodes(prog.program):
        if isinstance(node, A.Expression):
            assert node.type is not None, (node.loc, type(node).__name__)
        if isinstance(node, A.PathExpression):
            assert node.decl is not None, (node.loc, node.name)


def test_feature_program_checks_fast():
    start = time.perf_counter()
    prog = load_program(HERE / "programs" / "features.p4")
    elapsed = time.perf_counter() - start
    assert prog.main.block("ig").decl.name == "MyIngress"
    assert elapsed < 5  # generous: includes building the parser once
    assert prog.errors[:3] == ["NoError", "PacketTooShort", "NoMatch"]
    assert "BadVersion" in prog.errors
    assert set(prog.match_kinds) >= {"exact", "ternary", "lpm", "range", "optional", "selector"}


def test_literal_width_inference_and_folding():
    src = ingress("""
        meta.m8 = meta.m8 + 1;
        meta.m8 = 300;
        meta.m16 = (bit<16>) (8w200 + 8w100);
        meta.m32 = 1 << 4;
        meta.m8 = -1;
        meta.m8 = 8w250 |+| 8w10;
        meta.m8 = 8w5 |-| 8w10;
    """)
    prog = check(src)
    adds = [s for s in _nodes(prog, A.AssignmentStatement)]
    inc = adds[0].rhs
    assert isinstance(inc, A.BinaryExpression) and inc.type == T.BitsType(8)
    assert inc.right.type == T.BitsType(8) and inc.right.const_value == 1
    assert adds[1].rhs.type == T.BitsType(8) and adds[1].rhs.const_value == 300 % 256
    assert adds[2].rhs.const_value == (300 % 256)
    assert adds[3].rhs.type == T.BitsType(32) and adds[3].rhs.const_value == 16
    assert adds[4].rhs.const_value == 255
    assert adds[5].rhs.const_value == 255
    assert adds[6].rhs.const_value == 0


def test_concat_slice_cast_ternary_types():
    src = ingress("""
        bit<24> c = meta.m8 ++ meta.m16;
        bit<4> s = meta.m16[11:8];
        int<8> i = (int<8>) meta.m8;
        bit<8> t = meta.f ? meta.m8 : 7;
        bool b = (bool) 1w1;
        bit<1> one = (bit<1>) true;
    """)
    prog = check(src)
    decls = {d.name: d for d in _nodes(prog, A.VariableDecl)}
    assert decls["c"].init.type == T.BitsType(24)
    sl = decls["s"].init
    assert isinstance(sl, A.SliceExpression) and (sl.hi_value, sl.lo_value) == (11, 8)
    assert sl.type == T.BitsType(4)
    assert decls["i"].init.type == T.BitsType(8, signed=True)
    tern = decls["t"].init
    assert tern.type == T.BitsType(8) and tern.else_.type == T.BitsType(8) and tern.else_.const_value == 7
    assert decls["b"].init.const_value is True
    assert decls["one"].init.const_value == 1


def test_header_stack_operations_and_validity():
    src = ingress("""
        hdr.st.push_front(2);
        hdr.st[0].setValid();
        hdr.st[1].v = (bit<8>) hdr.st.lastIndex;
        meta.m32 = hdr.st.size;
        hdr.st.pop_front(1);
        if (hdr.st[3].isValid()) { hdr.st[3].setInvalid(); }
    """)
    prog = check(src)
    calls = _nodes(prog, A.MethodCallExpression)
    builtins = [c.callee.member for c in calls if c.call_kind == A.CallKind.BUILTIN_METHOD]
    assert builtins == ["push_front", "setValid", "pop_front", "isValid", "setInvalid"]
    members = {m.member: m for m in _nodes(prog, A.MemberExpression)}
    assert members["lastIndex"].kind == A.MemberKind.STACK_LAST_INDEX
    assert members["size"].kind == A.MemberKind.STACK_SIZE and members["size"].const_value == 4
    assert members["st"].type == T.StackType(T.HeaderType("h8_t", (("v", T.BitsType(8)),)), 4)


def test_parser_select_masks_ranges_tuples_value_set_and_lookahead():
    parser = """
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    value_set<bit<8>>(4) vs;
    state start {
        meta.m8 = pkt.lookahead<bit<8>>();
        pkt.extract(hdr.a);
        transition select(hdr.a.v, meta.m8) {
            (0x10 &&& 0xF0, _): stack;
            (0x20 .. 0x2F, 1): accept;
            (vs, _): accept;
            default: reject;
        }
    }
    state stack {
        pkt.extract(hdr.st.next);
        pkt.advance(32w8);
        transition select(hdr.st.last.v) { 0: accept; default: stack; }
    }
}
"""
    prog = check(ingress("", parser=parser))
    p = prog.main.block("p").decl
    start = p.states[0]
    sel = start.transition
    assert isinstance(sel, A.SelectExpression)
    masked = sel.cases[0].keysets[0]
    assert isinstance(masked, A.MaskKeyset) and masked.value.const_value == 0x10 and masked.mask.type == T.BitsType(8)
    assert isinstance(sel.cases[1].keysets[0], A.RangeKeyset)
    assert isinstance(sel.cases[0].keysets[1], A.DefaultKeyset) and sel.cases[0].keysets[1].is_dont_care
    assert isinstance(sel.cases[2].keysets[0].expr.decl, A.ValueSetDecl)
    assert sel.cases[0].next_state.decl is p.states[1]
    assert sel.cases[3].next_state.decl is p.builtin_states["reject"]
    look = next(c for c in _nodes(prog, A.MethodCallExpression) if getattr(c.callee, "member", "") == "lookahead")
    assert look.type == T.BitsType(8) and look.type_bindings["T"] == T.BitsType(8)
    nxt = next(m for m in _nodes(prog, A.MemberExpression) if m.member == "next")
    assert nxt.kind == A.MemberKind.STACK_NEXT


def test_tables_const_entries_priorities_and_action_run_switch():
    locals_ = """
    direct_counter(CounterType.packets) dc;
    action fwd(bit<9> port) { sm.egress_spec = port; }
    action nop() { }
    table t {
        key = { hdr.a.v: ternary; meta.m16: range; meta.m8: exact @name("m8key"); }
        actions = { fwd; nop; }
        default_action = fwd(3);
        counters = dc;
        size = 64;
        const entries = {
            (0x01 &&& 0xFF, 1 .. 5, 1): fwd(1);
            priority = 7: (_, _, 2): nop();
            @priority(9) (0x02, 0 .. 9, 3): fwd(2);
        }
    }
"""
    body = """
        switch (t.apply().action_run) {
            fwd: { meta.m8 = 1; }
            nop: { }
            default: { }
        }
        if (t.apply().hit) { exit; }
"""
    prog = check(ingress(body, locals_))
    t = next(d for d in prog.main.block("ig").decl.locals if isinstance(d, A.TableDecl))
    assert [k.match_kind for k in t.keys] == ["ternary", "range", "exact"]
    assert t.size_value == 64
    assert t.default_action.decl.name == "fwd" and t.default_action.args[0].value.const_value == 3
    assert t.entries_const and [e.priority_value for e in t.entries] == [None, 7, 9]
    assert t.entries[0].action.args[0].value.type == T.BitsType(9)
    assert t.property("counters").value.decl.name == "dc"
    sw = _nodes(prog, A.SwitchStatement)[0]
    assert isinstance(sw.expr.type, T.ActionEnumType)
    assert sw.cases[0].label.decl.name == "fwd"
    apply_calls = [c for c in _nodes(prog, A.MethodCallExpression) if c.call_kind == A.CallKind.TABLE_APPLY]
    assert all(c.callee_decl is t for c in apply_calls)
    hit = next(m for m in _nodes(prog, A.MemberExpression) if m.member == "hit")
    assert hit.kind == A.MemberKind.TABLE_HIT and hit.type == T.BOOL


def test_enums_errors_typedefs_newtypes_and_consts():
    top = """
enum Color { Red, Green }
enum bit<8> Op { Add = 1, Sub = 0x10 }
typedef bit<8> byte_t;
type bit<16> port16_t;
error { Custom }
const byte_t K = 5;
const int BIG = 1 << 40;
"""
    body = """
        Color c = Color.Green;
        Op o = Op.Sub;
        byte_t b = K + Op.Sub;
        bit<8> raw = o;
        port16_t p = (port16_t) meta.m16;
        meta.m16 = (bit<16>) p;
        if (sm.parser_error == error.Custom) { b = 0; }
        meta.m32 = (bit<32>) BIG[39:8];
"""
    prog = check(ingress(body, top=top))
    members = {m.member: m for m in _nodes(prog, A.MemberExpression)}
    assert members["Green"].kind == A.MemberKind.ENUM_MEMBER and members["Green"].decl.int_value == 1
    assert members["Sub"].const_value == 0x10 and isinstance(members["Sub"].type, T.SerEnumType)
    assert members["Custom"].kind == A.MemberKind.ERROR_MEMBER
    assert members["Custom"].decl.int_value == prog.errors.index("Custom")
    decls = {d.name: d for d in _nodes(prog, A.VariableDecl)}
    assert decls["b"].type_ref.type == T.BitsType(8)
    assert decls["p"].type_ref.type == T.NewType("port16_t", T.BitsType(16))
    assert decls["b"].init.const_value == 5 + 0x10


def test_externs_calls_and_bindings():
    locals_ = """
    register<bit<32>>(16) r;
    counter(8, CounterType.packets) c;
    meter(8, MeterType.bytes) mt;
"""
    body = """
        bit<32> old;
        r.read(old, 3);
        r.write(3, old + 1);
        c.count(2);
        mt.execute_meter(1, meta.m8);
        hash(meta.m16, HashAlgorithm.crc16, 16w0, { hdr.a.v, meta.m32 }, 32w65536);
        mark_to_drop(sm);
        clone_preserving_field_list(CloneType.I2E, 5, 1);
        log_msg("x={}", { meta.m8 });
        random(meta.m8, 0, 10);
"""
    prog = check(ingress(body, locals_))
    calls = {getattr(c.callee, "member", getattr(c.callee, "name", "")): c for c in _nodes(prog, A.MethodCallExpression)}
    read = calls["read"]
    assert read.call_kind == A.CallKind.EXTERN_METHOD and read.type_bindings["T"] == T.BitsType(32)
    assert [p.name for p in read.params] == ["result", "index"]
    assert read.args[1].value.type == T.BitsType(32)
    h = calls["hash"]
    assert h.call_kind == A.CallKind.EXTERN_FUNCTION
    assert h.type_bindings["D"] == T.TupleType((T.BitsType(8), T.BitsType(32)))
    assert calls["execute_meter"].type_bindings["T"] == T.BitsType(8)
    assert calls["random"].args[2].value.type == T.BitsType(8)
    inst = [d for d in prog.main.block("ig").decl.locals if isinstance(d, A.InstantiationDecl)]
    assert inst[0].type_ref.type == T.ExternType("register", (T.BitsType(32),))
    assert inst[0].ctor.is_constructor and inst[0].args[0].value.type == T.BitsType(32)


def test_functions_actions_subcontrols_and_subparsers():
    top = """
bit<8> twice(in bit<8> x) { return x + x; }
control Sub(inout meta_t meta)(bit<8> step) {
    apply { meta.m8 = meta.m8 + step; }
}
parser SubP(packet_in pkt, inout headers_t hdr) {
    state start { pkt.extract(hdr.b); transition accept; }
}
"""
    parser = """
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    SubP() sp;
    state start { pkt.extract(hdr.a); sp.apply(pkt, hdr); transition accept; }
}
"""
    locals_ = """
    Sub(8w4) sub;
    action set(inout bit<8> dst, bit<8> v) { dst = v; return; }
"""
    body = """
        meta.m8 = twice(meta.m8);
        set(meta.m8, 3);
        sub.apply(meta);
"""
    prog = check(ingress(body, locals_, top=top, parser=parser))
    kinds = {c.call_kind for c in _nodes(prog, A.MethodCallExpression)}
    assert {A.CallKind.FUNCTION, A.CallKind.ACTION, A.CallKind.CONTROL_APPLY, A.CallKind.PARSER_APPLY} <= kinds
    sub = next(d for d in prog.main.block("ig").decl.locals if isinstance(d, A.InstantiationDecl))
    assert sub.type_decl.name == "Sub" and sub.args[0].value.const_value == 4


def test_header_union_varbit_and_struct_initialisers():
    top = """
header opt_t { varbit<64> data; }
header_union u_t { h8_t x; h16_t y; }
struct pair_t { bit<8> a; bit<16> b; }
struct hs_t { h8_t a; opt_t o; u_t u; }
"""
    parser = """
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    opt_t o;
    state start { pkt.extract(o, 32w16); transition accept; }
}
"""
    body = """
        pair_t p = { 1, 2 };
        pair_t q = { a = 3, b = 4 };
        u_t u;
        if (u.isValid()) { u.x.setValid(); }
        h8_t h = { 8w7 };
"""
    prog = check(ingress(body, top=top, parser=parser))
    decls = {d.name: d for d in _nodes(prog, A.VariableDecl)}
    assert isinstance(decls["p"].init, A.ListExpression) and decls["p"].init.type.name == "pair_t"
    assert decls["p"].init.elems[1].type == T.BitsType(16)
    assert isinstance(decls["q"].init, A.StructExpression) and decls["q"].init.type.name == "pair_t"
    assert isinstance(decls["u"].type_ref.type, T.HeaderUnionType)
    extract = next(c for c in _nodes(prog, A.MethodCallExpression) if getattr(c.callee, "member", "") == "extract")
    assert len(extract.args) == 2 and extract.callee_decl.params[1].name == "variableFieldSizeInBits"


def test_preprocessor_defines_includes_and_line_markers(tmp_path):
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "consts.p4").write_text("const bit<8> FROM_INCLUDE = WIDTH;\n")
    src = '#include "consts.p4"\n' + ingress("meta.m8 = FROM_INCLUDE;\n#ifdef EXTRA\nmeta.m16 = 1;\n#endif")
    path = tmp_path / "prog.p4"
    path.write_text(src)
    prog = load_program(path, include_dirs=[str(inc)], defines={"WIDTH": "9", "EXTRA": ""})
    const = prog.top_level["FROM_INCLUDE"]
    assert const.value.const_value == 9
    assert const.loc.file.endswith("consts.p4") and const.loc.line == 1
    assigns = [n for n in A.iter_nodes(prog.program) if isinstance(n, A.AssignmentStatement)
               and n.loc.file == str(path)]
    assert len(assigns) == 2  # m8, and m16 because EXTRA is defined
    assert assigns[0].loc.line == src.split("\n").index("meta.m8 = FROM_INCLUDE;") + 1


def test_syntax_corners_precedence_and_defaults():
    top = """
const bit<32> W = 8;
header u1_t { bit<8> v; }
header u2_t { bit<16> v; }
header_union uu_t { u1_t a; u2_t b; }
struct s2_t { uu_t[2] us; tuple<bit<8>, bool> tp; bit<(W)> wv; }
enum bit<8> E { A = 1, B = 2, }
bit<8> deflt(in bit<8> x, in bit<8> y = 5) { return x + y; }
@name(".gact") action gact() { }
"""
    locals_ = """
    s2_t s2;
    @name(".tbl") table t { key = { hdr.a.v: exact; } actions = { .NoAction; gact; } default_action = NoAction; }
"""
    body = """
        bit<8> a = 1 + 2 * 3 - (4 >> 1);
        bit<8> b = a & 3 == 3 ? 8w1 : 8w0;
        bit<16> d = a ++ b + 16w1;
        ;
        if (a == 0) ; else ;
        a = deflt(a);
        a = deflt(y = 1, x = 2);
        @atomic { a = 0d10 + 0o17 + 1_0 + 0b11; }
        s2.us[0].a.setValid();
        s2.wv = (bit<8>) (a);
        switch (hdr.a.v) { 1: 2: { a = 1; } default: { return; } }
        if (hdr.a == hdr.a) { t.apply(); }
        meta.m8 = (bit<8>) E.B;
"""
    prog = check(ingress(body, locals_, top=top))
    decls = {d.name: d for d in _nodes(prog, A.VariableDecl)}
    assert decls["a"].init.const_value == 5
    cond = decls["b"].init.cond  # '&' binds tighter than '==' in P4
    assert cond.op == "==" and cond.left.op == "&"
    assert decls["d"].init.op == "+" and decls["d"].init.left.op == "++"  # '++' is at '+' level
    calls = [c for c in _nodes(prog, A.MethodCallExpression) if getattr(c.callee, "name", "") == "deflt"]
    assert [a.value.const_value for a in calls[0].args] == [None, 5]  # default filled in
    assert [a.value.const_value for a in calls[1].args] == [2, 1]  # named args in parameter order
    folded = next(s for s in _nodes(prog, A.AssignmentStatement) if s.rhs.const_value == 10 + 15 + 10 + 3)
    assert folded.rhs.type == T.BitsType(8)
    t = next(d for d in prog.main.block("ig").decl.locals if isinstance(d, A.TableDecl))
    assert t.actions[0].name.dot_prefix and t.actions[0].decl.name == "NoAction"
    sw = _nodes(prog, A.SwitchStatement)[0]
    assert sw.cases[0].body is None and sw.cases[1].body is not None  # 1: falls through to 2:


def test_value_named_like_a_type_and_enum_members_by_path():
    top = "header meta_hdr { bit<8> v; }\nenum Color { Red, Blue }\n"
    locals_ = "action a(inout meta_hdr meta_hdr) { meta_hdr.v = 1; }"
    body = "meta.m8 = Color.Blue == Color.Red ? 8w1 : 8w2;"
    prog = check(ingress(body, locals_, top=top))
    blue = next(m for m in _nodes(prog, A.MemberExpression) if m.member == "Blue")
    assert blue.kind == A.MemberKind.ENUM_MEMBER and blue.decl.int_value == 1
    field = next(m for m in _nodes(prog, A.MemberExpression) if m.member == "v" and
                 isinstance(m.expr, A.PathExpression) and m.expr.name == "meta_hdr")
    assert isinstance(field.expr.decl, A.Parameter) and field.kind == A.MemberKind.FIELD
