"""P4Info schema lookups ("did you mean"), entries <-> protobufs, and reconciliation plans."""
from __future__ import annotations

import pytest
from p4.v1 import p4runtime_pb2 as P

from controller.p4rt import (
    CloneSession,
    CodecError,
    Schema,
    SchemaError,
    TableEntry,
    entry_from_proto,
    entry_to_proto,
    format_entry,
    plan_clone_sessions,
    plan_default_entries,
    plan_table_entries,
)
from controller.p4rt.entries import clone_session_to_proto

LPM = "SwitchIngress.ipv4_lpm"
FWD = "SwitchIngress.ipv4_forward"


def route(prefix: str, port: int) -> TableEntry:
    return TableEntry.make(LPM, {"dst_addr": prefix}, FWD,
                           {"port": port, "src_mac": "02:00:00:00:00:01", "dst_mac": "00:00:0a:00:01:01"})


def test_lookup_by_name_alias_and_id(schema: Schema) -> None:
    t = schema.table(LPM)
    assert schema.table("ipv4_lpm") is t
    assert schema.by_id(t.id) is t
    assert t.field("dst_addr").bitwidth == 32
    assert schema.register("link_lost_packets").name == "SwitchIngress.link_lost_packets"
    assert schema.digest("link_loss_digest_t").id


@pytest.mark.parametrize("call,message", [
    (lambda s: s.table("SwitchIngress.ipv4_lmp"), "no table 'SwitchIngress.ipv4_lmp' \\(did you mean 'SwitchIngress.ipv4_lpm'\\?\\)"),
    (lambda s: s.action("ipv4_forwrd"), "did you mean 'ipv4_forward'"),
    (lambda s: s.table(LPM).field("dst_adr"), "no match field 'dst_adr' \\(did you mean 'dst_addr'\\?\\)"),
    (lambda s: s.action(FWD).param("prot"), "no parameter 'prot' \\(did you mean 'port'\\?\\)"),
    (lambda s: s.counter("no_such_thing"), "P4Info has no counter 'no_such_thing'"),
    (lambda s: s.by_id(1), "no object with id 1"),
])
def test_unknown_names_suggest(schema: Schema, call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SchemaError, match=message):
        call(schema)


def test_entry_round_trip_and_format(schema: Schema) -> None:
    e = route("10.0.1.0/24", 3)
    te = entry_to_proto(schema, e)
    back = entry_from_proto(schema, te)
    assert back.table == LPM and back.action == FWD
    assert dict(back.match) == {"dst_addr": (0x0A000100, 24)}
    assert dict(back.params)["port"] == 3
    assert format_entry(schema, te) == (
        "SwitchIngress.ipv4_lpm dst_addr=10.0.1.0/24 -> SwitchIngress.ipv4_forward("
        "port=3, src_mac=02:00:00:00:00:01, dst_mac=00:00:0a:00:01:01)")


@pytest.mark.parametrize("entry,error,message", [
    (TableEntry.make(LPM, {"dst_addr": "10.0.0.0/8"}, FWD, {"port": 1, "src_mac": 0}), CodecError,
     "misses parameter\\(s\\) \\['dst_mac'\\]"),
    (TableEntry.make(LPM, {"dst_addr": "10.0.0.0/8"}, "SwitchIngress.arp_reply", {"mac": 1}), SchemaError,
     "action 'SwitchIngress.arp_reply' is not one of its actions"),
    (TableEntry.make("int_watchlist", {"dst_port": 4791}, "int_source",
                     {"instruction_bitmap": 1, "ds_instruction": 0, "max_hops": 8}), CodecError,
     "needs a priority > 0"),
    (TableEntry.make(LPM, {"dst_addr": "10.0.0.0/8"}, FWD, {"port": 600, "src_mac": 0, "dst_mac": 0}),
     CodecError, "parameter 'port'.*does not fit bit<9>"),
    (TableEntry.make(LPM, {"dst_addr": "10.0.0.0/8"}), CodecError, "has no action"),
])
def test_bad_entries_name_the_problem(schema: Schema, entry: TableEntry, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        entry_to_proto(schema, entry)


def test_plan_is_minimal_and_idempotent(schema: Schema) -> None:
    have = [entry_to_proto(schema, e) for e in (route("10.0.1.0/24", 1), route("10.0.2.0/24", 2),
                                                route("10.0.9.0/24", 9))]
    want = [entry_to_proto(schema, e) for e in (route("10.0.1.0/24", 1), route("10.0.2.0/24", 5),
                                                route("10.0.3.0/24", 3))]
    plan = plan_table_entries(want, have)
    assert [u.type for u in plan.updates] == [P.Update.DELETE, P.Update.MODIFY, P.Update.INSERT]
    assert format_entry(schema, plan.deletes[0].entity.table_entry) == "SwitchIngress.ipv4_lpm dst_addr=10.0.9.0/24"
    assert plan.modifies[0].entity.table_entry == want[1]
    assert plan.inserts[0].entity.table_entry == want[2]
    assert len(plan_table_entries(want, want)) == 0
    # non-canonical (padded) parameter bytes read back from a switch compare equal
    padded = P.TableEntry()
    padded.CopyFrom(want[0])
    padded.action.action.params[0].value = b"\x00\x01"
    assert len(plan_table_entries(want[:1], [padded])) == 0
    # unmanaged tables are left alone
    assert len(plan_table_entries([], have, managed_tables={12345})) == 0


def test_plan_defaults_and_clone_sessions(schema: Schema) -> None:
    d = entry_to_proto(schema, TableEntry.make("switch_config", action="set_switch_config",
                                               params={"node_id": 4}, is_default=True))
    cur = P.TableEntry()
    cur.CopyFrom(d)
    assert len(plan_default_entries([d], {d.table_id: cur})) == 0
    cur.action.action.params[0].value = b"\x00"
    assert len(plan_default_entries([d], {d.table_id: cur})) == 1
    a = clone_session_to_proto(CloneSession(session_id=500, replicas=((3, 1),)))
    b = clone_session_to_proto(CloneSession(session_id=500, replicas=((4, 1),)))
    old = clone_session_to_proto(CloneSession(session_id=7, replicas=((1, 1),)))
    plan = plan_clone_sessions([a], [b, old])
    assert len(plan.modifies) == 1 and len(plan.deletes) == 1 and not plan.inserts
    assert len(plan_clone_sessions([a], [a])) == 0
