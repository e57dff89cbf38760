"""The lowered form names and describes what p4c's P4Info describes, as p4c does (the
golden files p4c wrote, ``tests/softswitch_p4info/golden``), and both back ends and the
runtime use exactly its names."""
from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2 as P4I

from softswitch.backends.ebpf import EbpfUnsupported
from softswitch.backends.ebpf.program import generate_c
from softswitch.backends.python.program import compile_program
from softswitch.frontend import load_program
from softswitch.lowering import LoweredProgram, lower_program
from softswitch.p4info import build_p4info
from softswitch.tables import Exact, Ternary
from softswitch.targets.python.switch import Switch
from softswitch.v1model import V1MODEL

ROOT = Path(__file__).resolve().parents[2]
P4INFO_TESTS = ROOT / "tests" / "softswitch_p4info"
PROGRAMS = [ROOT / "p4" / "int_rocev2.p4", *sorted((ROOT / "p4" / "examples").glob("*.p4")),
            *sorted(p for p in (P4INFO_TESTS / "programs").glob("*.p4") if p.name != "common.p4")]
# constructs the eBPF target refuses: an action's inout parameter, constructor arguments
EBPF_REFUSES = {"action_uses", "sub_controls"}
_MATCH = {P4I.MatchField.EXACT: "exact", P4I.MatchField.LPM: "lpm", P4I.MatchField.TERNARY: "ternary",
          P4I.MatchField.RANGE: "range", P4I.MatchField.OPTIONAL: "optional"}


def _golden(program: Path) -> P4I.P4Info:
    text = (P4INFO_TESTS / "golden" / f"{program.stem}.p4info.txtpb").read_text()
    return text_format.Parse(text, P4I.P4Info())


def _lowered(program: Path) -> LoweredProgram:
    return lower_program(load_program(program, include_dirs=(str(ROOT / "p4"),)), V1MODEL)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.stem)
def test_tables_are_p4cs(program: Path) -> None:
    """Every table p4c describes is lowered under its name, with its keys (name, match
    kind, width), its actions, its default action and its size."""
    golden, lowered = _golden(program), _lowered(program)
    tables = lowered.tables()
    actions = {a.preamble.id: a.preamble.name for a in golden.actions}
    for want in golden.tables:
        name = want.preamble.name
        assert name in tables, f"{program.stem}: table {name} not lowered ({sorted(tables)})"
        got = tables[name]
        assert [(k.name, k.match_kind, k.width) for k in got.keys] == \
               [(f.name, _MATCH[f.match_type], f.bitwidth) for f in want.match_fields], name
        listed = [actions[r.id] for r in want.action_refs]
        have = [a.name for a in got.actions]
        if got.default is not None and got.default.implicit and got.default.name not in have:
            have.append(got.default.name)  # p4c lists it as @defaultonly
        assert have == listed, name
        assert got.default is not None and actions[want.initial_default_action.action_id] == got.default.name
        assert got.size == want.size


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.stem)
def test_extern_instances_and_value_sets_are_p4cs(program: Path) -> None:
    golden, lowered = _golden(program), _lowered(program)
    externs = lowered.externs()
    for kind in ("counters", "direct_counters", "meters", "direct_meters", "registers", "action_profiles"):
        for want in getattr(golden, kind):
            got = externs.get(want.preamble.name)
            assert got is not None, f"{program.stem}: {kind} {want.preamble.name} not lowered"
            if kind in ("counters", "meters", "registers"):
                assert got.const_arg(0) == want.size
    value_sets = {v.name for b in lowered.instances() for v in b.value_sets}
    assert {v.preamble.name for v in golden.value_sets} <= value_sets


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.stem)
def test_both_back_ends_and_p4info_use_the_lowered_names(program: Path) -> None:
    """The Python back end's run-time objects, the eBPF back end's maps (where it takes
    the program) and P4Info are named by the lowering, nothing else."""
    checked = load_program(program, include_dirs=(str(ROOT / "p4"),))
    lowered = lower_program(checked, V1MODEL)
    compiled = compile_program(checked, V1MODEL, lowered)
    assert set(compiled.tables) == set(lowered.tables())
    runtime_externs = {**compiled.registers, **compiled.counters, **compiled.meters, **compiled.direct_counters,
                       **compiled.direct_meters, **compiled.action_profiles}
    assert set(runtime_externs) <= set(lowered.externs())
    info = build_p4info(checked, lowered)
    assert {t.preamble.name for t in info.tables} <= set(lowered.tables())
    try:
        generated = generate_c(lowered)
    except EbpfUnsupported:
        assert program.stem in EBPF_REFUSES
        return
    assert set(generated.tables) == set(lowered.tables())
    assert set(generated.externs) <= set(lowered.externs())


def test_the_lowered_form_of_ipv4_forward() -> None:
    """What BACKEND.md shows: the instances, a table, the extern instances (the package
    instance ``main`` is none) and the parser's selects."""
    lowered = _lowered(ROOT / "p4" / "examples" / "ipv4_forward.p4")
    assert [b.name for b in lowered.instances()] == ["MyParser", "MyVerifyChecksum", "MyIngress", "MyEgress",
                                                      "MyComputeChecksum", "MyDeparser"]
    t = lowered.tables()["MyIngress.ipv4_lpm"]
    assert [(k.name, k.match_kind, k.width) for k in t.keys] == [("hdr.ipv4.dstAddr", "lpm", 32)]
    assert [a.name for a in t.actions] == ["MyIngress.ipv4_forward", "MyIngress.drop", "NoAction"]
    assert t.default is not None and t.default.name == "MyIngress.drop" and t.size == 1024
    assert sorted(lowered.externs()) == ["MyIngress.lpm_hits"]
    assert [(s.name, [([m.kind for m in c.matches], c.next_state.name) for c in s.cases])
            for s in lowered.blocks["p"].states] == [("start", [(["value"], "parse_ipv4"), (["default"], "accept")]),
                                                     ("parse_ipv4", [])]


def test_instance_tree_of_sub_controls() -> None:
    """Constructor-argument controls are named after the parameter inside their
    instance; direct invocations after their type inside the invoking instance."""
    lowered = _lowered(P4INFO_TESTS / "programs" / "sub_controls.p4")
    ing = lowered.blocks["ig"]
    assert ing.name == "Ing"
    assert [b.name for b in ing.walk()] == ["Ing", "Ing.inner", "Ing.outer", "Ing.outer.i", "Ing.Inner"]
    outer = next(b for b in ing.instances if b.name == "Ing.outer")
    assert outer.ctor_args["i"].name == "Ing.outer.i"
    assert [t.name for t in ing.tables] == ["Ing.ot"]
    ot = ing.tables[0]
    assert ot.default is not None and (ot.default.name, ot.default.args, ot.default.implicit) == ("Ing.first", (3,), False)


def test_const_entries_are_lowered_with_their_priorities() -> None:
    """Keysets become the runtime's match values; p4c's smallest-@priority-wins order
    becomes P4Runtime's largest-wins scale."""
    src = (ROOT / "tests" / "softswitch_p4info" / "programs" / "common.p4").read_text()
    src += """
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action set(bit<8> v) { meta.m8 = v; }
    table t {
        key = { hdr.a.v: ternary; hdr.b.v: exact; }
        actions = { set; }
        const entries = { (0x10 &&& 0xF0, 1): set(7); (_, 2): set(9); }
        default_action = set(0);
    }
    apply { t.apply(); }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
"""
    from softswitch.frontend.load import load_source
    lowered = lower_program(load_source(src, filename="entries.p4", include_dirs=(str(ROOT / "p4"),)), V1MODEL)
    t = lowered.tables()["Ing.t"]
    assert t.needs_priority and t.entries_const
    got = [(e.key, e.action, e.args, e.priority) for e in t.entries()]
    base = 1 << 30
    assert got == [([Ternary(0x10, 0xF0), Exact(1)], "Ing.set", [7], base - 1),
                   ([Ternary(0, 0), Exact(2)], "Ing.set", [9], base - 2)]


def test_each_instance_of_a_control_has_its_own_direct_invocation() -> None:
    """``Inner.apply()`` inside ``Outer``, instantiated twice: two anonymous instances,
    each with its own table (as p4c names them in P4Info), and an entry in one does
    not change the other."""
    program = P4INFO_TESTS / "programs" / "instance_names.p4"
    sw = Switch.from_file(program, include_dirs=[str(ROOT / "p4")])
    assert set(sw.program.tables) == {"Ing.top", "Ing.o1.Inner.t", "Ing.o2.Inner.t"}
    sw.runtime.table_add("Ing.o1.Inner.t", [Exact(5)], "Ing.o1.Inner.add", [1])
    outs = sw.process(0, bytes([5]))
    # o1 adds 1 (5 -> 6); o2's table has no entry for 6: NoAction
    assert outs == [(1, bytes([6]))]
    sw.runtime.table_add("Ing.o2.Inner.t", [Exact(6)], "Ing.o2.Inner.add", [10])
    assert sw.process(0, bytes([5])) == [(1, bytes([16]))]


def test_a_block_of_main_is_named_after_its_type() -> None:
    """``@name`` on a control type does not rename the block of main (p4c keeps the
    type's name): the runtime and P4Info agree."""
    program = P4INFO_TESTS / "programs" / "instance_names.p4"
    lowered = _lowered(program)
    assert lowered.blocks["ig"].name == "Ing"
    info = build_p4info(lowered.checked, lowered)
    assert "Ing.top" in {t.preamble.name for t in info.tables}


SELECTS = """
#include "common.p4"
struct pair_t { bit<8> a; bit<16> b; }
parser P2(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    value_set<pair_t>(4) pairs;
    state start {
        pkt.extract(hdr.a);
        pkt.extract(hdr.b);
        transition select(hdr.a.v, hdr.b.v) {
            (1, 2): two; (3, _): one; pairs: accept; (0x10 &&& 0xf0, 5 .. 9): accept; default: reject;
        }
    }
    state two { transition select(hdr.a.v, hdr.b.v) { _: reject; } }
    state one { }
}
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
V1Switch(P2(), VC(), Ing(), Eg(), CC(), D()) main;
"""


def test_parser_selects_have_one_match_per_key() -> None:
    """A keyset written once for several keys is unfolded (``default``/``_``), a value
    set over all keys stays one match of the whole case; a state without transition
    goes to reject (neither a next state nor a select)."""
    from softswitch.frontend.load import load_source
    checked = load_source(SELECTS, filename=str(P4INFO_TESTS / "programs" / "selects.p4"),
                          include_dirs=(str(ROOT / "p4"),))
    lowered = lower_program(checked, V1MODEL)
    parser = lowered.blocks["p"]
    assert [v.name for v in parser.value_sets] == ["P2.pairs"] and parser.value_sets[0].width == 24
    got = {st.name: [([m.kind for m in c.matches], c.value_set is not None, c.next_state.name) for c in st.cases]
           for st in parser.states}
    assert got == {
        "start": [(["value", "value"], False, "two"), (["value", "default"], False, "one"), ([], True, "accept"),
                  (["mask", "range"], False, "accept"), (["default", "default"], False, "reject")],
        "two": [(["default", "default"], False, "reject")],
        "one": []}
    one = next(st for st in parser.states if st.name == "one")
    assert not one.is_select and one.next_state is None
