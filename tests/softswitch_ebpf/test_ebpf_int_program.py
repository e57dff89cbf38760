"""The INT program (p4/int_rocev2.p4) on the eBPF target: it compiles, the kernel's
verifier accepts it (two instances of one control, a header of only a varbit field,
ternary scans, truncate, random, a pipe too large for memset, the report clone) and
it runs a packet. Its STF tests: test_ebpf_clone.py; outputs against the Python
target: test_ebpf_int_differential.py."""
from __future__ import annotations

import pytest
from ebpf_helpers import ROOT

PROGRAM = ROOT / "p4" / "int_rocev2.p4"


@pytest.mark.bpf
@pytest.mark.root
def test_the_int_program_loads_and_runs() -> None:
    from softswitch.targets.python.switch import Switch
    with Switch.from_file(PROGRAM, target="ebpf", include_dirs=[str(ROOT / "p4")]) as kern:
        assert "SwitchIngress.int_watchlist" in kern.generated.tables
        assert "clone_request(ctx, P, r, 1)" in kern.generated.source
        kern.process(1, bytes(60))          # one BPF_PROG_TEST_RUN of the loaded program


def test_the_int_program_is_refused_on_the_xdp_hook() -> None:
    """Its Telemetry Reports are clones, which XDP cannot make: refused where it clones."""
    from softswitch.backends.ebpf import EbpfUnsupported
    from softswitch.backends.ebpf.program import generate_c
    from softswitch.frontend.load import load_program
    from softswitch.lowering import lower_program
    from softswitch.v1model import V1MODEL
    checked = load_program(PROGRAM, include_dirs=(str(ROOT / "p4"),))
    with pytest.raises(EbpfUnsupported, match=r"ingress\.p4:\d+:\d+: unsupported on --target ebpf: "
                                              r"clone_preserving_field_list: clones .* with --hook xdp"):
        generate_c(lower_program(checked, V1MODEL), hook="xdp")
