"""The architecture plug-in boundary: the compiler knows no architecture, v1model is a plug-in.

A variant architecture changes behaviour without touching the compiler; an unknown
package is refused naming it and where; v1model's extern table agrees with its .p4.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path
from types import MappingProxyType

import pytest
from ssw_helpers import program

from softswitch.architecture import Architecture, ExternOp, ExternSemantics
from softswitch.errors import CompileError, SoftswitchError

ROOT = Path(__file__).resolve().parents[2]
COMPILER = ROOT / "softswitch" / "backends" / "python"
# the back end's per-architecture lowerings, the one place it may name v1model's externs
ARCH_LOWERINGS = {"v1model.py", "arch_lowering.py"}
FRONTEND = ROOT / "softswitch" / "frontend"
LOWERING = ROOT / "softswitch" / "lowering"
# the run-time objects builder (its per-architecture makers aside)
OBJECTS = [ROOT / "softswitch" / "objects" / n for n in ("build.py", "model.py", "__init__.py")]

DECLS = """
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
struct headers_t { eth_t eth; }
struct meta_t { }
"""
TO_PORT_SEVEN = "extern void to_port_seven(inout standard_metadata_t sm);\n"


def switch(arch: Architecture | None = None, *, decls: str = "", drop: str = "mark_to_drop(sm);"):
    """IPv4 frames are dropped with `drop`, others sent to egress_spec 511."""
    ingress = "apply { if (hdr.eth.type == 0x0800) { " + drop + " } else { sm.egress_spec = 511; } }"
    return program(decls=decls + DECLS, parser="state start { pkt.extract(hdr.eth); transition accept; }",
                   ingress=ingress, deparser="pkt.emit(hdr.eth);", **({"arch": arch} if arch else {}))


def frame(ethertype: int) -> bytes:
    return bytes(6) + bytes([0, 0, 0, 0, 0, 1]) + ethertype.to_bytes(2, "big") + b"payload"


def test_v1model_drops_both_ways_to_511() -> None:
    sw = switch()
    assert sw.process(1, frame(0x0800)) == []   # mark_to_drop
    assert sw.process(1, frame(0x86DD)) == []   # egress_spec = 511 is the drop port


def test_a_variant_drop_port_changes_behaviour_not_the_compiler() -> None:
    from softswitch.v1model import V1Model
    sw = switch(V1Model(drop_port=255))
    assert sw.v1.drop_port == 255
    assert "egress_spec = 255" in sw.program.source   # what mark_to_drop compiled to
    assert sw.process(1, frame(0x0800)) == []                          # mark_to_drop wrote 255
    assert [p for p, _ in sw.process(1, frame(0x86DD))] == [511]        # 511 is a port now
    with pytest.raises(SoftswitchError, match="outside 0..254"):
        sw.process(300, frame(0x86DD))


def test_unknown_package_is_refused_naming_it_and_where() -> None:
    src = """
#include <core.p4>
parser Prs(packet_in b);
package MyArch(Prs p);
parser MyP(packet_in b) { state start { transition accept; } }
MyArch(MyP()) main;
"""
    from softswitch.targets.python.switch import Switch
    with pytest.raises(CompileError) as exc:
        Switch.from_source(src, filename="case.p4")
    msg = str(exc.value)
    assert re.match(r"case\.p4:6:\d+: unsupported: package MyArch, declared at case\.p4:4:\d+: "
                    r"architecture v1model runs V1Switch only", msg), msg


def test_an_extern_the_architecture_lacks_names_itself_and_where() -> None:
    with pytest.raises(CompileError, match=r"test\.p4:\d+:\d+: unsupported: extern function "
                       r"to_port_seven \(not one of architecture v1model\)"):
        switch(decls=TO_PORT_SEVEN, drop="to_port_seven(sm);")


def test_a_target_extern_lowered_from_its_semantics() -> None:
    """A v1model variant with one more extern, described as SET_METADATA: v1model's
    generic lowering writes what the semantics say, the compiler is untouched."""
    from softswitch.backends.python.v1model import PYTHON_CALLS
    from softswitch.v1model import V1Model

    arch = V1Model()
    arch.add_extern(ExternSemantics(name="to_port_seven", op=ExternOp.SET_METADATA,
                                    doc="unicast to port 7", params=("standard_metadata",),
                                    writes=(("egress_spec", 7),)),
                    python_call=PYTHON_CALLS["mark_to_drop"])
    sw = switch(arch, decls=TO_PORT_SEVEN, drop="to_port_seven(sm);")
    assert [p for p, _ in sw.process(1, frame(0x0800))] == [7]


def test_v1switch_refuses_a_program_of_another_architecture() -> None:
    from softswitch.backends.python.program import compile_program
    from softswitch.backends.python.v1model import PYTHON_CALLS
    from softswitch.objects.v1model import V1MODEL_INSTANCES
    from softswitch.targets.python.pipeline import V1Switch
    from softswitch.v1model import V1MODEL

    class Other(Architecture):
        name = "other"
        package = "V1Switch"
        block_params = V1MODEL.block_params

    other = Other(externs=V1MODEL.externs, python_calls=PYTHON_CALLS,
                  python_instances=V1MODEL_INSTANCES)
    compiled = compile_program(switch().program.checked, other)
    with pytest.raises(SoftswitchError, match="compiled for v1model, not other"):
        V1Switch(compiled)


def test_a_lowering_without_semantics_is_refused() -> None:
    with pytest.raises(ValueError, match="lowerings without semantics: \\['x'\\]"):
        Architecture(externs={}, python_calls={"x": lambda b, c: ""}, python_instances={})


def _v1model_p4_externs() -> dict[str, list[str]]:
    """Every extern of our v1model.p4 as the semantics table names it, with the
    parameter names of its longest overload (constructors: the type's name)."""
    from softswitch.frontend import ast as A
    checked = switch().program.checked
    out: dict[str, list[str]] = {}

    def put(name: str, params: list[str]) -> None:
        if len(params) >= len(out.get(name, [])):
            out[name] = params

    for d in checked.program.declarations:
        if "v1model.p4" not in str(d.loc):
            continue
        if isinstance(d, A.ExternFunctionDecl):
            put(d.name, [p.name for p in d.params])
        elif isinstance(d, A.ExternDecl):
            for m in d.methods:
                put(d.name if m.is_constructor else f"{d.name}.{m.name}", [p.name for p in m.params])
    return out


def test_v1model_semantics_cover_its_p4_declarations() -> None:
    """The table a second backend reads is complete and names the arguments as
    v1model.p4 does; every entry has a Python lowering, or for an extern type the maker
    of its run-time objects (Checksum16 is deprecated and refused)."""
    from softswitch.backends.python.arch_lowering import python_call
    from softswitch.objects import instance_maker
    from softswitch.v1model import V1MODEL
    declared = _v1model_p4_externs()
    unsupported = {"Checksum16", "Checksum16.get"}
    assert set(declared) - unsupported == set(V1MODEL.externs)
    for name, params in declared.items():
        if name in unsupported:
            continue
        sem = V1MODEL.externs[name]
        assert list(sem.params) == params, name
        lowered = (instance_maker(V1MODEL, name) if sem.op is ExternOp.INSTANCE
                   else python_call(V1MODEL, name))
        assert lowered is not None, name


def test_mark_to_drop_semantics_carry_the_drop_port() -> None:
    from softswitch.v1model import V1Model
    assert dict(V1Model(drop_port=99).externs["mark_to_drop"].writes) == {"egress_spec": 99, "mcast_grp": 0}


def test_the_compiler_lowering_and_front_end_name_no_architecture() -> None:
    """No string or number of v1model's in the compiler's or the front end's code:
    extern names, the package (nor in a message), its block names, the clone types,
    the drop port."""
    from softswitch.v1model import V1MODEL
    banned_strings = set(V1MODEL.externs) | {V1MODEL.package, "I2E", "E2E", "standard_metadata",
                                             "egress_spec", "counters", "meters", "selector"}
    banned_strings |= {name.split(".")[-1] for name in V1MODEL.externs if "." in name}
    banned_strings.discard("digest")  # also P4Runtime's generic entity: an unnamed digest's name
    banned_parts = (V1MODEL.package, V1MODEL.name)
    found = []
    compiler = [p for p in COMPILER.glob("*.py") if p.name not in ARCH_LOWERINGS]
    for path in sorted([*compiler, *FRONTEND.glob("*.py"), *LOWERING.glob("*.py"), *OBJECTS,
                        ROOT / "softswitch" / "architecture.py"]):
        tree = ast.parse(path.read_text())
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef))
                      and n.body and isinstance(n.body[0], ast.Expr)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Constant) or id(node) in docstrings:
                continue
            text = node.value if isinstance(node.value, str) else None
            if node.value == V1MODEL.drop_port or (text is not None and (
                    text in banned_strings or any(part in text for part in banned_parts))):
                found.append(f"{path.name}:{node.lineno}: {node.value!r}")
    assert not found, found


def test_custom_hashes_are_the_architectures() -> None:
    """The runtime asks the architecture which hashes the control plane may set and
    how to rebind one; v1model's lowering owns the name its code calls a hash by."""
    from softswitch.backends.python.arch_lowering import rebind_hash
    from softswitch.backends.python.v1model import hash_symbol
    from softswitch.errors import RuntimeApiError
    from softswitch.externs.hashes import crc16, make_crc
    from softswitch.v1model import V1Model

    sw = switch(drop="hash(sm.egress_spec, HashAlgorithm.crc16_custom, 9w0, "
                "{ hdr.eth.type }, 10w7);")
    assert hash_symbol("crc16_custom") in sw.program.source
    assert sw.program.arch.custom_hashes == {"crc16_custom": 16, "crc32_custom": 32}
    assert [p for p, _ in sw.process(1, frame(0x0800))] == [crc16(b"\x08\x00") % 7]
    sw.runtime.hash_set_custom("crc16_custom", polynomial=0x1021, initial=0xFFFF,
                               reflect_input=False, reflect_output=False)   # CRC-16/CCITT-FALSE
    ccitt = make_crc(16, 0x1021, 0xFFFF, 0, False, False)
    assert ccitt(b"123456789") == 0x29B1 and ccitt(b"\x08\x00") % 7 != crc16(b"\x08\x00") % 7
    assert [p for p, _ in sw.process(1, frame(0x0800))] == [ccitt(b"\x08\x00") % 7]

    class Fixed(V1Model):
        custom_hashes = MappingProxyType({})

    fixed = switch(Fixed(), drop="hash(sm.egress_spec, HashAlgorithm.crc16_custom, 9w0, "
                   "{ hdr.eth.type }, 10w7);")
    with pytest.raises(RuntimeApiError, match="architecture v1model has no configurable hash"):
        fixed.runtime.hash_set_custom("crc16_custom", polynomial=0x1021)
    with pytest.raises(ValueError, match="architecture v1model: no configurable hash crc16"):
        rebind_hash(sw.program.arch, sw.program.env, "crc16", ccitt)


def test_v1model_port_numbers_load_without_the_compiler() -> None:
    """The controller and the test bed read v1model's drop port without loading the
    compiler; every name the package exports still resolves."""
    import subprocess
    import sys
    code = ("import sys, softswitch.v1model.ports as p; "
            "print(p.DROP_PORT, sorted(m for m in sys.modules if m.startswith('softswitch.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout.split(" ", 1)
    assert out[0] == "511" and ast.literal_eval(out[1]) == ["softswitch.v1model", "softswitch.v1model.ports"]
    import softswitch.v1model as v1
    assert all(getattr(v1, name) is not None for name in v1.__all__)
    assert v1.V1MODEL.drop_port == v1.DROP_PORT
