"""One builder of the run-time objects (``softswitch.objects``) for both targets.

The Python target's compiled program and the eBPF target's switch get their tables
(keys, actions, defaults, const entries), registers, counters, meters, direct
resources, action profiles, digests, value sets and P4Info from `build_objects` on the
lowered form; these tests hold the two to the same objects for every program of the
project, and keep the eBPF target and the builder off the Python back end.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from softswitch.backends.ebpf.program import generate_c
from softswitch.backends.python.program import compile_program
from softswitch.errors import CompileError
from softswitch.frontend import load_program, load_source
from softswitch.lowering import lower_program
from softswitch.objects import RuntimeObjects, build_objects, program_objects
from softswitch.p4info import build_p4info, format_p4info
from softswitch.v1model import V1MODEL

ROOT = Path(__file__).resolve().parents[2]
SOFTSWITCH = ROOT / "softswitch"
# every program under p4/ and tests/ (an include file alone has no main package)
PROGRAMS = sorted(p for p in [*ROOT.glob("p4/**/*.p4"), *ROOT.glob("tests/**/*.p4")]
                  if "main;" in p.read_text() and "/include/" not in p.as_posix())


def _describe(o: RuntimeObjects) -> dict[str, Any]:
    """Everything the control plane sees of the objects, as plain values."""
    def attrs(obj: Any, *names: str) -> tuple[Any, ...]:
        return tuple(repr(getattr(obj, n, None)) for n in names)
    return {
        "tables": {n: (t.name, [(k.name, k.match_kind, k.width) for k in t.keys],
                       [(a.name, a.params, a.default_only, a.table_only) for a in t.actions.values()],
                       t.default.action, list(t.default.args), t.default_const, t.size,
                       t.has_direct_counter, t.has_direct_meter, t.entries_const,
                       getattr(t.profile, "name", None),
                       [(repr(e.key), e.action, list(e.args), e.priority) for e in t.entries()])
                   for n, t in o.tables.items()},
        "registers": {n: attrs(r, "size", "width", "signed") for n, r in o.registers.items()},
        "counters": {n: attrs(c, "size", "counter_type") for n, c in o.counters.items()},
        "meters": {n: attrs(m, "size", "meter_type") for n, m in o.meters.items()},
        "direct_counters": {n: (attrs(c, "counter_type"), getattr(c.table, "name", None)) for n, c in o.direct_counters.items()},
        "direct_meters": {n: (attrs(m, "meter_type"), getattr(m.table, "name", None)) for n, m in o.direct_meters.items()},
        "digests": {n: list(d.field_names) for n, d in o.digests.items()},
        "value_sets": {n: attrs(v, "size", "width") for n, v in o.value_sets.items()},
        "action_profiles": {n: (attrs(p, "size", "algorithm", "output_width", "selector_widths"),
                                sorted(p.actions)) for n, p in o.action_profiles.items()},
        "actions": o.actions,
        "p4info": format_p4info(o.p4info()),
    }


def _checked(path: Path) -> Any:
    return load_program(path, include_dirs=(str(ROOT / "p4"),))


def test_every_program_is_covered() -> None:
    names = {p.name for p in PROGRAMS}
    assert {"int_rocev2.p4", "ipv4_forward.p4", "p4rt_test.p4", "selector.p4", "value_sets.p4",
            "meters.p4", "instance_names.p4"} <= names


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: str(p.relative_to(ROOT)))
def test_both_targets_have_the_same_objects_and_p4info(path: Path) -> None:
    """The Python target's compiled program and the eBPF target's objects describe the
    same control plane, with the P4Info p4c's rules give the lowered form."""
    checked = _checked(path)
    try:
        compiled = compile_program(checked, V1MODEL)
    except CompileError as exc:     # a program a test holds to a refusal: refused alike
        with pytest.raises(CompileError) as refused:
            program_objects(checked)
        assert str(refused.value) == str(exc)
        return
    ebpf = program_objects(checked)
    assert _describe(compiled) == _describe(ebpf)
    assert format_p4info(ebpf.p4info()) == format_p4info(build_p4info(checked, ebpf.lowered))


def test_the_python_back_end_binds_its_code_to_the_objects_it_is_given() -> None:
    """No second copy: the compiled program's objects are the builder's, their actions
    now carrying the generated functions."""
    checked = _checked(ROOT / "p4" / "int_rocev2.p4")
    lowered = lower_program(checked, V1MODEL)
    objects = build_objects(lowered)
    compiled = compile_program(checked, V1MODEL, lowered, objects)
    for kind in ("tables", "registers", "counters", "meters", "digests", "value_sets", "action_profiles"):
        assert getattr(compiled, kind) is getattr(objects, kind), kind
    assert all(a.fn is not None for t in compiled.tables.values() for a in t.actions.values())
    # the eBPF generator reads the same lowered form and objects: its tables are theirs
    generated = generate_c(lowered, profiles=objects.action_profiles)
    assert set(generated.tables) <= set(objects.tables)
    assert set(generated.externs) == {*objects.registers, *objects.counters, *objects.meters}
    assert set(generated.digests) == set(objects.digests)


DIGESTS = """
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
struct headers_t { eth_t eth; }
struct meta_t { }
struct learn_t { bit<48> src; bit<9> port; }
counter(8, CounterType.packets) used_at_top;
counter(8, CounterType.packets) never_used;
parser P(packet_in pkt, out headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t m) { apply { } }
control Ing(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    action learn() { digest<learn_t>(1, { hdr.eth.src, sm.ingress_port }); used_at_top.count(0); }
    apply { learn(); }
}
control Eg(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
"""


def test_digests_and_top_level_instances_come_from_the_program() -> None:
    objects = build_objects(lower_program(load_source(DIGESTS, filename="digests.p4"), V1MODEL))
    assert {n: d.field_names for n, d in objects.digests.items()} == {"learn_t": ["src", "port"]}
    assert set(objects.counters) == {"used_at_top"}      # an unused top-level instance has none


def test_an_extern_type_the_architecture_lacks_is_refused_naming_it() -> None:
    src = DIGESTS.replace("counter(8, CounterType.packets) never_used;",
                          "extern Widget { Widget(); }\nWidget() w;").replace(
        "used_at_top.count(0); }", "used_at_top.count(0); }\n    Widget() local_w;")
    lowered = lower_program(load_source(src, filename="widget.p4"), V1MODEL)
    with pytest.raises(CompileError, match=r"widget\.p4:\d+:\d+: unsupported: extern Widget "
                                           r"\(local_w\) is not one of architecture v1model"):
        build_objects(lowered)


def _imports(folder: Path) -> set[str]:
    out: set[str] = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                out.add(node.module)
            elif isinstance(node, ast.Import):
                out.update(a.name for a in node.names)
    return out


@pytest.mark.parametrize("folder", ["targets/ebpf", "backends/ebpf", "objects"])
def test_no_target_builds_through_the_python_back_end(folder: str) -> None:
    """The eBPF target and back end, and the builder, import nothing of the Python back
    end or the Python target."""
    bad = sorted(m for m in _imports(SOFTSWITCH / folder)
                 if m.startswith(("softswitch.backends.python", "softswitch.targets.python")))
    assert not bad, bad
