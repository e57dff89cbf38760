"""The kernel program is generated from the lowered form: instance names, tables and
default actions as the Python target and P4Info have them."""
from __future__ import annotations

import pytest
from ebpf_helpers import ROOT

from softswitch.tables import Exact
from softswitch.targets.python.switch import Switch

pytestmark = [pytest.mark.bpf, pytest.mark.root]
PROGRAMS = ROOT / "tests" / "softswitch_p4info" / "programs"

NO_DEFAULT = """
#include "common.p4"
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action set(bit<8> v) { hdr.a.v = v; }
    table t { key = { hdr.a.v: exact; } actions = { set; } }
    apply { sm.egress_spec = 1; t.apply(); }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
"""


def test_direct_invocations_in_two_instances_have_their_own_tables_in_the_kernel() -> None:
    py = Switch.from_file(PROGRAMS / "instance_names.p4", include_dirs=[str(ROOT / "p4")])
    with Switch.from_file(PROGRAMS / "instance_names.p4", include_dirs=[str(ROOT / "p4")],
                          target="ebpf") as kern:
        assert set(kern.generated.tables) == set(py.program.tables) == {"Ing.top", "Ing.o1.Inner.t",
                                                                           "Ing.o2.Inner.t"}
        for sw in (py, kern):
            sw.runtime.table_add("Ing.o1.Inner.t", [Exact(5)], "Ing.o1.Inner.add", [1])
            sw.runtime.table_add("Ing.o2.Inner.t", [Exact(6)], "Ing.o2.Inner.add", [10])
        for data in (bytes([5]) + bytes(59), bytes([6]) + bytes(59), bytes([7]) + bytes(59)):
            assert kern.process(0, data) == py.process(0, data)
        assert py.process(0, bytes([5]) + bytes(59))[0][1][0] == 16


def test_a_table_naming_no_default_action_misses_into_no_action() -> None:
    """NoAction is the default the language gives such a table (it was refused)."""
    py = Switch.from_source(NO_DEFAULT, filename=str(PROGRAMS / "no_default.p4"), include_dirs=[str(ROOT / "p4")])
    with Switch.from_source(NO_DEFAULT, filename=str(PROGRAMS / "no_default.p4"),
                            include_dirs=[str(ROOT / "p4")], target="ebpf") as kern:
        for sw in (py, kern):
            sw.runtime.table_add("Ing.t", [Exact(3)], "Ing.set", [9])
        for first in (3, 4):
            data = bytes([first]) + bytes(59)
            assert kern.process(0, data) == py.process(0, data)
        assert py.process(0, bytes([4]) + bytes(59)) == [(1, bytes([4]) + bytes(59))]
        assert py.process(0, bytes([3]) + bytes(59)) == [(1, bytes([9]) + bytes(59))]
