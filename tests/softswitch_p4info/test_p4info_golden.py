"""softswitch's P4Info equals p4c's, entity for entity: for every program in p4/ and
for small programs of the rules p4c follows for actions that are not table actions
(golden files written by p4c, see golden/README.md).  Where p4c is installed, it
writes them afresh and softswitch's must equal those too."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from p4.config.v1 import p4info_pb2 as P4I
from p4info_compare import differences, read_p4info

from softswitch.frontend import load_program
from softswitch.p4info import build_p4info

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden"
P4DIR = HERE.parent.parent / "p4"
PROGRAMS = [P4DIR / "int_rocev2.p4", *sorted((P4DIR / "examples").glob("*.p4")),
            *sorted(p for p in (HERE / "programs").glob("*.p4") if p.name != "common.p4")]


def _ids(p: Path) -> str:
    return p.stem


def _assert_same(want: P4I.P4Info, got: P4I.P4Info, what: str) -> None:
    diff = differences(want, got)
    assert not diff, f"{what}:\n  " + "\n  ".join(diff)
    assert want == got, f"{what}: the messages differ in a way the entity comparison misses"


def test_every_program_has_a_golden_file():
    assert sorted(p.stem for p in PROGRAMS) == sorted(g.name.split(".")[0] for g in GOLDEN.glob("*.txtpb"))


@pytest.mark.parametrize("program", PROGRAMS, ids=_ids)
def test_p4info_equals_p4cs(program: Path):
    want = read_p4info(GOLDEN / f"{program.stem}.p4info.txtpb")
    _assert_same(want, build_p4info(load_program(program)), f"softswitch vs p4c's {program.stem}.p4info.txtpb")


def test_action_rules():
    """The rules the golden files pin down, spelled out (action_uses.p4)."""
    info = build_p4info(load_program(HERE / "programs" / "action_uses.p4"))
    params = {a.preamble.name: [p.name for p in a.params] for a in info.actions}
    assert params == {
        "NoAction": [], "Ing.caller": ["r"], "Ing.table_and_apply": ["p"], "Ing.table_and_action": ["q"],
        "Ing.from_apply": [], "Ing.from_both": [], "Ing.directional": [], "Ing.chain_top": [],
        "Ing.renamed": [], "Ing.in_switch": ["s"], "Ing.other": [], "Ing.via_hidden_table": ["h"]}
    assert [d.preamble.name for d in info.digests] == ["learn16_t"]
    assert "Ing.hidden_table" not in [t.preamble.name for t in info.tables]
    no_default = next(t for t in info.tables if t.preamble.name == "Ing.no_default")
    noaction = next(a.preamble.id for a in info.actions if a.preamble.name == "NoAction")
    assert no_default.action_refs[-1].id == noaction
    assert no_default.action_refs[-1].scope == P4I.ActionRef.DEFAULT_ONLY
    assert no_default.initial_default_action.action_id == noaction


def test_differences_are_named_by_entity():
    want = read_p4info(GOLDEN / "firewall.p4info.txtpb")
    got = P4I.P4Info()
    got.CopyFrom(want)
    action = next(a for a in got.actions if a.preamble.name == "MyIngress.hash_positions")
    action.params.add(id=1, name="a", bitwidth=32)
    del got.tables[0]
    diff = differences(want, got)
    assert any(d.startswith("actions 'MyIngress.hash_positions': params: expected [], got [id: 1")
               for d in diff), diff
    assert f"tables {want.tables[0].preamble.name!r}: missing" in diff


@pytest.mark.bmv2
@pytest.mark.parametrize("program", PROGRAMS, ids=_ids)
def test_p4info_equals_fresh_p4c(program: Path, tmp_path: Path):
    """p4c writes the P4Info again: softswitch's equals it, and so does the golden file
    (else the program changed and its golden file needs refreshing)."""
    p4c = shutil.which("p4c-bm2-ss")
    if p4c is None:
        pytest.skip("needs p4c-bm2-ss (p4c's BMv2 back end) on PATH")
    out = tmp_path / f"{program.stem}.p4info.txtpb"
    r = subprocess.run([p4c, "--arch", "v1model", "-I", str(P4DIR), "-o", str(tmp_path / "prog.json"),
                        "--p4runtime-files", str(out), str(program)],
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, f"p4c rejected {program.name}: {r.stderr[-2000:]}"
    fresh = read_p4info(out)
    _assert_same(fresh, build_p4info(load_program(program)), f"softswitch vs p4c on {program.name}")
    _assert_same(fresh, read_p4info(GOLDEN / out.name),
                 f"golden/{out.name} is stale: refresh it from p4c (see golden/README.md)")
