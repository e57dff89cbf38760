"""Each error class gives the right message at the right place (file:line:col)."""
from __future__ import annotations

import pytest
from fe_helpers import PRELUDE, check, ingress, line_of

from softswitch.frontend import P4Error
from softswitch.frontend.errors import (
    P4NameError,
    P4PreprocessError,
    P4SyntaxError,
    P4TypeError,
    P4Unsupported,
)


def _err(src: str, cls=P4Error) -> P4Error:
    with pytest.raises(cls) as info:
        check(src)
    return info.value


def test_syntax_error_location_and_expected_token():
    src = PRELUDE + "header bad_t { bit<8> a }\n"
    e = _err(src, P4SyntaxError)
    assert (e.file, e.line) == ("t.p4", line_of(src, "header bad_t"))
    assert e.col == src.split("\n")[e.line - 1].index("}") + 1
    assert e.message == "syntax error: unexpected '}' (expected ';')"
    assert e.render() == f"t.p4:{e.line}:{e.col}: error: syntax error: unexpected '}}' (expected ';')"


def test_syntax_error_at_end_of_input():
    e = _err(PRELUDE + "control C(inout bit<8> x) { apply {", P4SyntaxError)
    assert e.message == "syntax error: unexpected end of input"


def test_undeclared_name_with_suggestion():
    src = ingress("meta.m8 = hdr.a.v + metta.m8;")
    e = _err(src, P4NameError)
    assert e.message == "undeclared name 'metta'; did you mean 'meta'?"
    assert e.line == line_of(src, "metta") and e.col == src.split("\n")[e.line - 1].index("metta") + 1


def test_unknown_field_with_suggestion():
    e = _err(ingress("meta.m8 = hdr.a.vv;"), P4NameError)
    assert e.message == "h8_t has no field 'vv'; did you mean 'v'?"


def test_undeclared_type():
    e = _err(PRELUDE + "struct s_t { ethernet_t e; }\n", P4NameError)
    assert e.message.startswith("undeclared type 'ethernet_t'")


def test_width_mismatch_in_assignment_and_operator():
    src = ingress("meta.m8 = meta.m16;")
    e = _err(src, P4TypeError)
    assert e.message == "assignment: width mismatch: expected bit<8>, got bit<16>"
    assert e.line == line_of(src, "meta.m8 = meta.m16")
    e = _err(ingress("meta.m8 = meta.m8 + meta.m16[7:0] + meta.m16;"), P4TypeError)
    assert e.message == "width mismatch: operands of '+' are bit<8> and bit<16>"


def test_type_mismatch_bool_vs_bits():
    e = _err(ingress("if (meta.m8) { }"), P4TypeError)
    assert e.message == "condition of 'if' must be bool, got bit<8>"
    e = _err(ingress("meta.f = meta.m8;"), P4TypeError)
    assert e.message == "assignment: type mismatch: expected bool, got bit<8>"


def test_wrong_argument_counts():
    e = _err(ingress("mark_to_drop(sm, sm);"), P4TypeError)
    assert e.message == "wrong number of arguments to function 'mark_to_drop': expected 0 or 1, got 2"
    e = _err(ingress("r.write(1);", "register<bit<8>>(4) r;"), P4TypeError)
    assert e.message == "wrong number of arguments to method 'register.write': expected 2, got 1"
    e = _err(ingress("a(1, 2);", "action a(bit<8> x) { }"), P4TypeError)
    assert e.message == "wrong number of arguments to action 'a': expected 1, got 2"


def test_out_argument_must_be_lvalue_and_in_params_are_read_only():
    e = _err(ingress("r.read(8w1, 0);", "register<bit<8>>(4) r;"), P4TypeError)
    assert e.message == ("argument 1 ('result') of method 'register.read' for out parameter "
                         "must be an l-value (a variable, field or out/inout parameter)")
    src = ingress("", "action a(bit<8> v) { v = 1; }")
    e = _err(src, P4TypeError)
    assert e.message == "left side of '=' must be an l-value; 'v' is a directionless parameter and read-only"


def test_missing_include():
    src = "#include <core.p4>\n#include \"missing_file.p4\"\n"
    e = _err(src, P4PreprocessError)
    assert (e.file, e.line) == ("t.p4", 2)
    assert e.message == "missing_file.p4: No such file or directory"


def test_unsupported_construct_is_an_error():
    src = PRELUDE + "header g_t<T> { T f; }\n"
    e = _err(src, P4Unsupported)
    assert e.message == "unsupported: generic header/struct declarations"
    assert e.line == line_of(src, "header g_t")


def test_parser_errors_undeclared_state_and_keyset_count():
    parser = """
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.a); transition select(hdr.a.v) { 1: parse_b; default: acept; } }
    state parse_b { transition accept; }
}
"""
    e = _err(ingress("", parser=parser), P4NameError)
    assert e.message == "undeclared state 'acept' in parser 'P'; did you mean 'accept'?"
    parser2 = parser.replace("1: parse_b; default: acept;", "(1, 2): parse_b; default: accept;")
    e = _err(ingress("", parser=parser2), P4TypeError)
    assert e.message == "select case has 2 keyset(s) for 1 key(s)"


def test_table_errors():
    base = """
    action fwd(bit<9> p) { sm.egress_spec = p; }
    action other() { }
    table t { key = { hdr.a.v: %s; } actions = { fwd; } %s }
"""
    e = _err(ingress("", base % ("exakt", "")), P4NameError)
    assert e.message == "unknown match kind 'exakt' in table 't'; did you mean 'exact'?"
    e = _err(ingress("", base % ("exact", "default_action = other();")), P4NameError)
    assert e.message == "default action 'other' is not in the actions of table 't'"
    e = _err(ingress("", base % ("exact", "const entries = { (1, 2): fwd(1); }")), P4TypeError)
    assert e.message == "entry of table 't' has 2 key value(s), the table has 1 key(s)"
    e = _err(ingress("", base % ("exact", "const entries = { 1 &&& 3: fwd(1); }")), P4TypeError)
    assert e.message == "entry of table 't': a mask is not allowed for exact key"


def test_duplicate_declaration_and_stack_bounds():
    e = _err(ingress("", "bit<8> x; bit<8> x;"), P4NameError)
    assert e.message.startswith("'x' is already declared (previous declaration at t.p4:")
    e = _err(ingress("hdr.st[4].setValid();"), P4TypeError)
    assert e.message == "index 4 out of bounds for header stack of size 4"


def test_concat_needs_widths_and_package_arguments_checked():
    e = _err(ingress("meta.m16 = meta.m8 ++ 1;"), P4TypeError)
    assert e.message == "right operand of '++' has no width; write it with one, e.g. 8w1"
    src = ingress("").replace("V1Switch(P(), VC(), Ing(),", "V1Switch(P(), VC(), VC(),")
    e = _err(src, P4TypeError)
    assert e.message == "argument 'ig' of V1Switch: 'VC' has 2 parameter(s), Ingress needs 3"


def test_error_render_format():
    src = ingress("meta.m8 = nope;")
    e = _err(src)
    line = line_of(src, "nope")
    col = src.split("\n")[line - 1].index("nope") + 1
    assert str(e) == f"t.p4:{line}:{col}: error: undeclared name 'nope'"


def test_packet_method_argument_kinds():
    parser = """
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(meta); transition accept; }
}
"""
    e = _err(ingress("", parser=parser), P4TypeError)
    assert e.message == "extract needs a header, got meta_t"
    e = _err(ingress("", parser=parser.replace("pkt.extract(meta)", "pkt.extract(hdr.a, 32w8)")), P4TypeError)
    assert e.message == "extract with a size needs a header with a varbit field; h8_t has none"
    src = ingress("").replace("pkt.emit(hdr.a);", "pkt.emit(hdr.a.v);")
    e = _err(src, P4TypeError)
    assert e.message == "emit needs a header, header stack, header union or struct of those, got bit<8>"


def test_generic_function_is_unsupported():
    src = ingress("", top="T pick<T>(in T a) { return a; }\n")
    e = _err(src, P4Unsupported)
    assert e.message == "unsupported: generic function 'pick'"
    assert e.line == line_of(src, "T pick<T>")


def test_several_errors_reported_in_one_run_without_follow_ups():
    from softswitch.frontend.errors import P4ErrorList

    body = """
        meta.m8 = hdr.a.v + 16w1;
        meta.nope = 1;
        bit<8> z = meta.f;
        z = z + 1;
        if (meta.m8) { }
"""
    src = ingress(body)
    e = _err(src, P4ErrorList)
    assert [x.message for x in e.errors] == [
        "width mismatch: operands of '+' are bit<8> and bit<16>",
        "meta_t has no field 'nope'",
        "initial value of 'z': type mismatch: expected bit<8>, got bool",
        "condition of 'if' must be bool, got bit<8>",
    ]
    assert [x.line for x in e.errors] == [line_of(src, s) for s in ("16w1", "nope", "bit<8> z", "if (meta.m8)")]
    assert e.render().count(": error: ") == 4


def test_context_rules_exit_return_and_apply():
    e = _err(ingress("", "table t { actions = { NoAction; } }\naction a() { t.apply(); }"), P4TypeError)
    assert e.message == "table 't' cannot be applied inside an action"
    parser = """
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { exit; }
}
"""
    e = _err(ingress("", parser=parser), P4TypeError)
    assert e.message == "'exit' is not allowed in a parser"
    e = _err(ingress("", parser=parser.replace("exit;", "return;")), P4TypeError)
    assert e.message == "'return' is not allowed in a parser state"


def test_mutated_programs_fail_only_with_p4_errors():
    """Bad input gets a clear error, never an internal exception (seeded mutations)."""
    import random
    import re
    from pathlib import Path

    src = (Path(__file__).parent / "programs" / "features.p4").read_text()
    toks = re.findall(r"\w+|[^\w\s]|\s+", src)
    words = [t for t in toks if re.match(r"^[A-Za-z_]\w*$|^\d+$", t)]
    rnd = random.Random(2026)
    for _ in range(25):
        mutated = list(toks)
        for _ in range(2):
            k = rnd.randrange(len(mutated))
            if mutated[k].strip():
                mutated[k] = rnd.choice(["", rnd.choice(words), ";", "(", "}"])
        try:
            check("".join(mutated), filename="m.p4")
        except P4Error as exc:
            assert exc.render().startswith("m.p4:") or ".p4:" in exc.render()


def test_main_that_is_no_package_is_named_without_an_architecture():
    """Which package `main` must instantiate is the architecture's check; the front end
    only asks for some package and says what `main` is instead."""
    src = "#include <core.p4>\ncontrol C() { apply { } }\nC() main;\n"
    e = _err(src, P4TypeError)
    assert (e.file, e.line) == ("t.p4", 3)
    assert e.message == "'main' must be an instance of a package type, not an instance of control 'C'"


def test_any_package_is_a_main_for_the_front_end():
    src = ("#include <core.p4>\nparser Prs(packet_in b);\npackage MyArch(Prs p);\n"
           "parser MyP(packet_in b) { state start { transition accept; } }\nMyArch(MyP()) main;\n")
    main = check(src).main
    assert main is not None and main.package == "MyArch"
    assert [b.param for b in main.blocks] == ["p"] and main.block("p").decl.name == "MyP"
