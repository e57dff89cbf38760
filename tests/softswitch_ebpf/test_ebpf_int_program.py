"""How far the INT program (p4/int_rocev2.p4) gets on the eBPF target: clone is the one
construct it still lacks; without its report clone the rest compiles and the kernel's
verifier accepts it (two instances of one control, a header of only a varbit field,
ternary scans, truncate, random, a pipe too large for memset)."""
from __future__ import annotations

from typing import Any

import pytest
from ebpf_helpers import ROOT

from softswitch.backends.ebpf import EbpfUnsupported
from softswitch.backends.ebpf import v1model as V1
from softswitch.backends.ebpf.program import generate_c
from softswitch.compiler.program import compile_program
from softswitch.frontend.load import load_program
from softswitch.v1model import V1MODEL

PROGRAM = ROOT / "p4" / "int_rocev2.p4"


def test_clone_is_the_first_refusal() -> None:
    prog = compile_program(load_program(PROGRAM, include_dirs=(str(ROOT / "p4"),)), V1MODEL)
    with pytest.raises(EbpfUnsupported, match=r"ingress\.p4:272:\d+: unsupported on --target ebpf: "
                                              r"extern clone_preserving_field_list"):
        generate_c(prog.checked, prog.tables, errors=prog.errors, arch=prog.arch)


@pytest.mark.bpf
@pytest.mark.root
def test_without_its_clone_the_int_program_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    from softswitch.api import Switch
    from softswitch.backends.ebpf import blocks
    lower = V1.lower_extern

    def no_clone(gen: Any, call: Any) -> list[str] | None:
        if getattr(call.callee_decl, "name", None) == "clone_preserving_field_list":
            return []
        return lower(gen, call)
    monkeypatch.setattr(blocks.V1, "lower_extern", no_clone)
    with Switch.from_file(PROGRAM, target="ebpf", include_dirs=[str(ROOT / "p4")]) as kern:
        assert "SwitchIngress.int_watchlist" in kern.generated.tables
        kern.process(1, bytes(60))          # one BPF_PROG_TEST_RUN of the loaded program
