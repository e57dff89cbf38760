"""inout/out header and struct arguments are copies, also when the callee can reach
the argument's variable another way (p4c's gauntlet_indirect_hdr_assign_1-bmv2 is one
such program): the program and its STF pass on softswitch; the bmv2 tier
(tests/bmv2/test_bmv2_stf.py) runs the same STF on BMv2, where p4c and BMv2 are
installed."""
from __future__ import annotations

from ssw_helpers import P4DIR, load, run_stf

PROGRAM = P4DIR / "inout_copy_out.p4"
STF = PROGRAM.with_suffix(".stf")


def test_inout_copies_on_softswitch():
    run_stf(load(PROGRAM), STF.read_text())


def test_copies_only_where_the_callee_reaches_the_variable():
    """Arguments the callee reaches only through its parameter stay passed as the
    object itself (no copy on the hot path), e.g. a sub-control's headers."""
    from softswitch.backends.python.aliasing import aliased_object_args
    from softswitch.frontend import ast as A
    from softswitch.frontend import load_program
    from softswitch.frontend.text import expr_text

    prog = load_program(PROGRAM)
    copied = sorted(expr_text(n) for n in A.iter_nodes(prog.program)
                    if isinstance(n, A.MethodCallExpression) and aliased_object_args(n))
    assert copied == ["call_writer(hdr.r)", "touch_first(hdr.r, hdr.r)", "write_both(hdr)",
                      "write_enclosing(hdr)", "write_first(hdr.r, hdr.r)", "write_then_exit(hdr.r)"]
    rocev2 = load_program(P4DIR.parents[2] / "p4" / "int_rocev2.p4")
    assert not [n for n in A.iter_nodes(rocev2.program)
                if isinstance(n, A.MethodCallExpression) and aliased_object_args(n)]
