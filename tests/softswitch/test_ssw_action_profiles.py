"""Indirect tables: action profiles (members) and action selectors (groups hashed by flow)."""
from __future__ import annotations

import pytest
from ssw_helpers import program

from softswitch.errors import RuntimeApiError
from softswitch.errors import RuntimeErrorCode as C
from softswitch.tables import Exact

DECLS = """
header h_t { bit<8> dst; bit<16> flow; bit<8> tag; }
struct headers_t { h_t h; }
struct meta_t { }
"""


def make(impl: str):
    return program(decls=DECLS, parser="state start { pkt.extract(hdr.h); transition accept; }",
                   ingress=f"""
    {impl.split('|')[0]}
    action nhop(bit<9> port, bit<8> tag) {{ sm.egress_spec = port; hdr.h.tag = tag; }}
    action drop() {{ mark_to_drop(sm); }}
    table route {{
        key = {{ hdr.h.dst: exact; hdr.h.flow: selector; }}
        actions = {{ nhop; drop; }}
        default_action = drop();
        implementation = {impl.split('|')[1]};
    }}
    apply {{ route.apply(); }}
    """, deparser="pkt.emit(hdr.h);")


def test_selector_groups_spread_flows_and_keep_each_flow():
    sw = make("action_selector(HashAlgorithm.crc16, 32w64, 32w14) sel;|sel")
    rt = sw.runtime
    for m in range(3):
        rt.action_profile_member_add("Ing.sel", m, "Ing.nhop", [2 + m, 0x10 + m])
    rt.action_profile_group_add("sel", 1, [0, 1, 2])
    rt.table_add_indirect("Ing.route", [Exact(7)], group=1)
    rt.table_add_indirect("Ing.route", [Exact(8)], member=2)
    ports = {}
    for flow in range(300):
        pkt = bytes([7]) + flow.to_bytes(2, "big") + b"\0"
        outs = {sw.process(0, pkt)[0] for _ in range(2)}
        assert len(outs) == 1
        (port, data), = outs
        assert data[3] == 0x10 + port - 2
        ports[flow] = port
    assert set(ports.values()) == {2, 3, 4}
    assert sw.process(0, bytes([8, 0, 1, 0])) == [(4, bytes([8, 0, 1, 0x12]))]
    assert sw.process(0, bytes([9, 0, 1, 0])) == []          # miss: default drop
    outs, ev = sw.process_packet(0, bytes([8, 0, 1, 0]), trace=True)
    tab = next(e for e in ev if e.kind == "table")
    assert tab.detail["entry"] == "[0x8] -> member 2" and tab.detail["action"] == "Ing.nhop"


def test_profile_errors_and_in_use_rules():
    sw = make("|action_profile(32w2)")
    rt = sw.runtime
    prof = "Ing.route_implementation"
    rt.action_profile_member_add(prof, 1, "nhop", [3, 1])
    rt.action_profile_member_add(prof, 2, "drop", [])
    for fn, code in [
        (lambda: rt.action_profile_member_add(prof, 1, "nhop", [3, 1]), C.DUPLICATE_ENTRY),
        (lambda: rt.action_profile_member_add(prof, 3, "nhop", [3, 1]), C.TABLE_FULL),
        (lambda: rt.action_profile_member_modify(prof, 1, "nhop", [512, 1]), C.BAD_ACTION_PARAMS),
        (lambda: rt.action_profile_group_add(prof, 1, [1]), C.UNSUPPORTED),
        (lambda: rt.table_add_indirect("Ing.route", [Exact(1)], member=9), C.NOT_FOUND),
        (lambda: rt.table_add("Ing.route", [Exact(1)], "Ing.nhop", [1, 1]), C.BAD_ACTION),
    ]:
        with pytest.raises(RuntimeApiError) as info:
            fn()
        assert info.value.code is code
    rt.table_add_indirect("Ing.route", [Exact(1)], member=1)
    assert sw.process(0, bytes([1, 0, 0, 0])) == [(3, bytes([1, 0, 0, 1]))]
    with pytest.raises(RuntimeApiError) as info:
        rt.action_profile_member_delete(prof, 1)
    assert info.value.code is C.IN_USE
    rt.table_modify_indirect("Ing.route", [Exact(1)], member=2)
    assert sw.process(0, bytes([1, 0, 0, 0])) == []
    rt.action_profile_member_delete(prof, 1)
