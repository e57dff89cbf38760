"""The v1model conformance vectors (verified on BMv2) and the project's example programs,
each run through the STF runner as `python -m softswitch stf` runs them."""
from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent.parent / "p4" / "examples"


def run_stf(p4: Path, stf: Path, *, strict: bool = False):
    """``strict``: packets on ports the test does not name fail it too (our own
    examples are written that way; the BMv2 vectors follow p4c's runner)."""
    from softswitch.stf import StfRunner, parse_stf
    from softswitch.targets.python.switch import Switch
    sw = Switch.from_file(p4)
    return StfRunner(sw, strict=strict).run(parse_stf(stf.read_text(), str(stf)), str(stf))


@pytest.mark.parametrize("name", ["h2_stack", "h4_parser", "h5_externs", "h7_recirc"])
def test_conformance_vector(name):
    res = run_stf(HERE / f"{name}.p4", HERE / f"{name}.stf")
    assert res.ok, "\n".join(res.failures)
    assert res.packets_checked > 0


@pytest.mark.parametrize("stf", sorted(EXAMPLES.glob("*.stf")), ids=lambda p: p.stem)
def test_example_program(stf):
    res = run_stf(stf.with_suffix(".p4"), stf, strict=True)
    assert res.ok, "\n".join(res.failures)
