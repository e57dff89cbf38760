"""Table entries over P4Runtime: every match kind, modify/delete, default entries, the
spec's validity checks, per-update errors in a batch, and the effect on packets."""
from __future__ import annotations

import grpc
import pytest
from p4.v1 import p4runtime_pb2 as P
from p4rt_helpers import msg, update_codes, write_error

ETH = bytes.fromhex("0000000000aa" "000000000001" "0800")
IPV4 = bytes.fromhex("45000014000100004011" "0000" "0a000001" "0a010203")


def fwd(ids, mac: str, action: str = "", kind: str = "INSERT") -> str:
    act = action or f'action {{ action {{ action_id: {ids.set_port} params {{ param_id: 1 value: "\\x02" }} }} }}'
    return (f'type: {kind} entity {{ table_entry {{ table_id: {ids.forward} '
            f'match {{ field_id: 1 exact {{ value: "{mac}" }} }} {act} }} }}')


def acl(ids, matches: str, priority: int = 10, action: str = "drop", kind: str = "INSERT") -> str:
    return (f'type: {kind} entity {{ table_entry {{ table_id: {ids.acl} {matches} '
            f'action {{ action {{ action_id: {getattr(ids, action)} }} }} priority: {priority} }} }}')


def route(ids, value: str, plen: int, port: str = "\\x03") -> str:
    return (f'type: INSERT entity {{ table_entry {{ table_id: {ids.routes} '
            f'match {{ field_id: 1 lpm {{ value: "{value}" prefix_len: {plen} }} }} '
            f'action {{ action {{ action_id: {ids.route} params {{ param_id: 1 value: "{port}" }} }} }} }} }}')


def test_insert_read_every_match_kind(client, ids):
    client.write(fwd(ids, "\\x00\\x00\\x00\\x00\\x00\\xaa"),
                 route(ids, "\\x0a\\x01\\x00\\x00", 16),
                 acl(ids, 'match { field_id: 1 ternary { value: "\\x08\\x00" mask: "\\xff\\xff" } } '
                          'match { field_id: 2 range { low: "\\x06" high: "\\x11" } } '
                          'match { field_id: 3 optional { value: "\\x0a\\x00\\x00\\x01" } }', 20),
                 acl(ids, "", 1, "to_cpu"))
    got = client.read("table_entry {}")
    assert got == [msg(P.Entity, t) for t in (
        f"""table_entry {{ table_id: {ids.forward} match {{ field_id: 1 exact {{ value: "\\xaa" }} }}
            action {{ action {{ action_id: {ids.set_port} params {{ param_id: 1 value: "\\x02" }} }} }} }}""",
        f"""table_entry {{ table_id: {ids.routes}
            match {{ field_id: 1 lpm {{ value: "\\x0a\\x01\\x00\\x00" prefix_len: 16 }} }}
            action {{ action {{ action_id: {ids.route} params {{ param_id: 1 value: "\\x03" }} }} }} }}""",
        f"""table_entry {{ table_id: {ids.acl}
            match {{ field_id: 1 ternary {{ value: "\\x08\\x00" mask: "\\xff\\xff" }} }}
            match {{ field_id: 2 range {{ low: "\\x06" high: "\\x11" }} }}
            match {{ field_id: 3 optional {{ value: "\\x0a\\x00\\x00\\x01" }} }}
            action {{ action {{ action_id: {ids.drop} }} }} priority: 20 }}""",
        f"""table_entry {{ table_id: {ids.acl} action {{ action {{ action_id: {ids.to_cpu} }} }} priority: 1 }}""",
    )]
    # one table; one entry by its key
    assert len(client.read(f"table_entry {{ table_id: {ids.acl} }}")) == 2
    one = client.read(f'table_entry {{ table_id: {ids.forward} match {{ field_id: 1 exact {{ value: "\\xaa" }} }} }}')
    assert one == got[:1]
    absent = client.read(f'table_entry {{ table_id: {ids.forward} match {{ field_id: 1 exact {{ value: "\\xbb" }} }} }}')
    assert absent == []


def test_entries_steer_packets(client, ids, device):
    client.write(fwd(ids, "\\x00\\x00\\x00\\x00\\x00\\xaa"), route(ids, "\\x0a\\x01\\x00\\x00", 16, "\\x07"))
    # forward sets port 2, then routes (LPM 10.1/16) overrides with port 7
    assert [p for p, _ in device.inject(1, ETH + IPV4)] == [7]
    client.write(acl(ids, 'match { field_id: 2 range { low: "\\x11" high: "\\x11" } }', 5, "drop"))
    assert device.inject(1, ETH + IPV4) == []


def test_modify_delete_and_not_found(client, ids):
    client.write(fwd(ids, "\\xaa"))
    client.write(fwd(ids, "\\xaa", f"action {{ action {{ action_id: {ids.drop} }} }}", "MODIFY"))
    assert client.read(f"table_entry {{ table_id: {ids.forward} }}")[0].table_entry.action == msg(
        P.TableAction, f"action {{ action_id: {ids.drop} }}")
    client.write(fwd(ids, "\\xaa", " ", "DELETE"))
    assert client.read(f"table_entry {{ table_id: {ids.forward} }}") == []
    err = write_error(client, fwd(ids, "\\xaa", "", "MODIFY"), fwd(ids, "\\xaa", " ", "DELETE"))
    assert err.code == grpc.StatusCode.UNKNOWN
    assert update_codes(err) == ["NOT_FOUND", "NOT_FOUND"]
    assert "no entry with key" in err.errors[0].message


def test_batch_continues_on_error_and_keeps_good_updates(client, ids):
    err = write_error(client, fwd(ids, "\\x01"), fwd(ids, "\\x01"), fwd(ids, "\\x02"),
                      fwd(ids, "\\x01\\x00\\x00\\x00\\x00\\x00\\x00"))
    assert update_codes(err) == ["OK", "ALREADY_EXISTS", "OK", "INVALID_ARGUMENT"]
    assert err.errors[3].message == ("table MyIngress.forward: match field hdr.ethernet.dstAddr "
                                     "(exact, bit<48>): value 0x01000000000000 does not fit bit<48>")
    assert len(client.read(f"table_entry {{ table_id: {ids.forward} }}")) == 2


def test_table_full_is_resource_exhausted(client, ids):
    client.write(*(fwd(ids, f"\\x0{i}") for i in range(1, 5)))
    err = write_error(client, fwd(ids, "\\x05"))
    assert update_codes(err) == ["RESOURCE_EXHAUSTED"]
    assert "full (4 entries)" in err.errors[0].message


BAD = [
    # (description, update text builder, expected code, message fragment)
    ("lpm prefix bits", lambda ids: route(ids, "\\x0a\\x01\\x00\\x01", 16), "INVALID_ARGUMENT",
     "bits set beyond prefix length 16"),
    ("lpm prefix 0", lambda ids: route(ids, "\\x00", 0), "INVALID_ARGUMENT", "must be omitted"),
    ("lpm prefix too long", lambda ids: route(ids, "\\x0a", 33), "INVALID_ARGUMENT", "outside 1..32"),
    ("ternary value outside mask", lambda ids: acl(
        ids, 'match { field_id: 1 ternary { value: "\\x08\\x01" mask: "\\xff\\x00" } }'),
     "INVALID_ARGUMENT", "bits outside mask"),
    ("ternary mask 0", lambda ids: acl(ids, 'match { field_id: 1 ternary { value: "\\x00" mask: "\\x00" } }'),
     "INVALID_ARGUMENT", "mask 0"),
    ("range low > high", lambda ids: acl(ids, 'match { field_id: 2 range { low: "\\x09" high: "\\x02" } }'),
     "INVALID_ARGUMENT", "low 0x9 > high 0x2"),
    ("full range", lambda ids: acl(ids, 'match { field_id: 2 range { low: "\\x00" high: "\\xff" } }'),
     "INVALID_ARGUMENT", "full range"),
    ("priority 0 on ternary table", lambda ids: acl(ids, "", 0), "INVALID_ARGUMENT", "need a priority > 0"),
    ("priority on exact table", lambda ids:
     f'type: INSERT entity {{ table_entry {{ table_id: {ids.forward} match {{ field_id: 1 exact {{ value: "\\x01" }} }} '
     f'action {{ action {{ action_id: {ids.drop} }} }} priority: 3 }} }}', "INVALID_ARGUMENT", "priority must be 0"),
    ("exact omitted", lambda ids: f'type: INSERT entity {{ table_entry {{ table_id: {ids.forward} '
     f'action {{ action {{ action_id: {ids.drop} }} }} }} }}', "INVALID_ARGUMENT", "cannot be omitted"),
    ("wrong match kind", lambda ids: f'type: INSERT entity {{ table_entry {{ table_id: {ids.forward} '
     f'match {{ field_id: 1 lpm {{ value: "\\x01" prefix_len: 8 }} }} action {{ action {{ action_id: {ids.drop} }} }} }} }}',
     "INVALID_ARGUMENT", "got a lpm match"),
    ("unknown field", lambda ids: f'type: INSERT entity {{ table_entry {{ table_id: {ids.forward} '
     f'match {{ field_id: 1 exact {{ value: "\\x01" }} }} match {{ field_id: 7 exact {{ value: "\\x01" }} }} '
     f'action {{ action {{ action_id: {ids.drop} }} }} }} }}', "INVALID_ARGUMENT", "no match field with id 7"),
    ("empty bytes", lambda ids: f'type: INSERT entity {{ table_entry {{ table_id: {ids.forward} '
     f'match {{ field_id: 1 exact {{ value: "" }} }} action {{ action {{ action_id: {ids.drop} }} }} }} }}',
     "INVALID_ARGUMENT", "empty byte string"),
    ("unknown table", lambda ids: 'type: INSERT entity { table_entry { table_id: 12345 } }',
     "INVALID_ARGUMENT", "no table with id 12345"),
    ("action of another table", lambda ids: fwd(ids, "\\x01", f"action {{ action {{ action_id: {ids.learn} }} }}"),
     "INVALID_ARGUMENT", "not one of the table's actions"),
    ("missing parameter", lambda ids: fwd(ids, "\\x01", f"action {{ action {{ action_id: {ids.set_port} }} }}"),
     "INVALID_ARGUMENT", "parameter port (id 1) is missing"),
    ("parameter too wide", lambda ids: fwd(
        ids, "\\x01", f'action {{ action {{ action_id: {ids.set_port} params {{ param_id: 1 value: "\\x02\\x00" }} }} }}'),
     "INVALID_ARGUMENT", "does not fit bit<9>"),
    ("no action", lambda ids: fwd(ids, "\\x01", " "), "INVALID_ARGUMENT", "has no action"),
    ("one-shot selector", lambda ids: fwd(ids, "\\x01", "action { action_profile_action_set { } }"),
     "UNIMPLEMENTED", "one-shot"),
    ("idle timeout", lambda ids: fwd(ids, "\\x01")[:-4] + " idle_timeout_ns: 5 } }", "UNIMPLEMENTED",
     "idle timeout"),
    ("no entity", lambda ids: "type: INSERT", "INVALID_ARGUMENT", "no entity"),
    ("negative counter data", lambda ids: fwd(ids, "\\x01")[:-4] + " counter_data { packet_count: -1 } } }",
     "INVALID_ARGUMENT", "negative counter_data"),
    ("counter data without a direct counter", lambda ids: route(ids, "\\x0a\\x00\\x00\\x00", 8)[:-4]
     + " counter_data { packet_count: 1 } } }", "INVALID_ARGUMENT", "no direct counter"),
    ("unspecified type", lambda ids: fwd(ids, "\\x01", "", "UNSPECIFIED"), "INVALID_ARGUMENT", "UNSPECIFIED"),
    ("unknown action profile", lambda ids: "type: INSERT entity { action_profile_member { action_profile_id: 1 } }",
     "INVALID_ARGUMENT", "no action profile with id 1"),
    ("member missing parameter", lambda ids: (
        f"type: INSERT entity {{ action_profile_member {{ action_profile_id: {ids.ecmp_implementation} "
        f"member_id: 5 action {{ action_id: {ids.set_port} }} }} }}"),
     "INVALID_ARGUMENT", "member 5: action MyIngress.set_port: parameter port (id 1) is missing"),
    ("extern entry", lambda ids: "type: INSERT entity { extern_entry { extern_type_id: 1 } }",
     "UNIMPLEMENTED", "extern_entry"),
]


@pytest.mark.parametrize("name,build,code,text", BAD, ids=[b[0] for b in BAD])
def test_invalid_entries_change_nothing(client, ids, name, build, code, text):
    err = write_error(client, build(ids))
    assert update_codes(err) == [code], err.errors
    assert text in err.errors[0].message, err.errors[0].message
    assert client.read("table_entry {}") == []


def test_default_entry(client, ids, device):
    q = f"table_entry {{ table_id: {ids.forward} is_default_action: true }}"
    assert client.read(q) == [msg(P.Entity, f"""table_entry {{ table_id: {ids.forward}
        action {{ action {{ action_id: {ids.NoAction} }} }} is_default_action: true }}""")]
    client.write(f"""type: MODIFY entity {{ table_entry {{ table_id: {ids.forward} is_default_action: true
        action {{ action {{ action_id: {ids.set_port} params {{ param_id: 1 value: "\\x09" }} }} }} }} }}""")
    assert client.read(q)[0].table_entry.action.action.action_id == ids.set_port
    assert [p for p, _ in device.inject(1, ETH)] == [9]
    # wildcard reads do not list default entries
    assert client.read(f"table_entry {{ table_id: {ids.forward} }}") == []
    # MODIFY without an action restores the program's default
    client.write(f"type: MODIFY entity {{ table_entry {{ table_id: {ids.forward} is_default_action: true }} }}")
    assert client.read(q)[0].table_entry.action.action.action_id == ids.NoAction
    err = write_error(client, f"""type: INSERT entity {{ table_entry {{ table_id: {ids.forward}
        is_default_action: true action {{ action {{ action_id: {ids.drop} }} }} }} }}""",
                      f"""type: MODIFY entity {{ table_entry {{ table_id: {ids.learning}
        is_default_action: true action {{ action {{ action_id: {ids.NoAction} }} }} }} }}""")
    assert update_codes(err) == ["INVALID_ARGUMENT", "PERMISSION_DENIED"]
    assert "default action is const" in err.errors[1].message


def test_atomicity_other_than_continue_is_unimplemented(client, ids):
    with pytest.raises(Exception) as ei:
        client.write(fwd(ids, "\\x01"), atomicity=P.WriteRequest.ROLLBACK_ON_ERROR)
    assert ei.value.code == grpc.StatusCode.UNIMPLEMENTED
    assert "ROLLBACK_ON_ERROR" in ei.value.details


def test_entry_metadata_round_trips(client, ids):
    up = fwd(ids, "\\x01")[:-4] + ' controller_metadata: 42 metadata: "note" } }'
    client.write(up)
    e = client.read(f"table_entry {{ table_id: {ids.forward} }}")[0].table_entry
    assert (e.controller_metadata, e.metadata) == (42, b"note")


def _member(ids, mid: int, port: str, kind: str = "INSERT") -> str:
    return (f'type: {kind} entity {{ action_profile_member {{ action_profile_id: {ids.ecmp_implementation} '
            f'member_id: {mid} action {{ action_id: {ids.set_port} params {{ param_id: 1 value: "{port}" }} }} }} }}')


def _ecmp_entry(ids, dst: str, target: str, kind: str = "INSERT") -> str:
    return (f'type: {kind} entity {{ table_entry {{ table_id: {ids.ecmp} '
            f'match {{ field_id: 1 exact {{ value: "{dst}" }} }} action {{ {target} }} }} }}')


def test_action_selector_members_groups_and_indirect_entries(client, ids, device, p4info, program_source):
    from p4.v1 import p4runtime_pb2 as P4RT

    client.write(_member(ids, 1, "\\x05"), _member(ids, 2, "\\x06"), _member(ids, 3, "\\x07"),
                 f"""type: INSERT entity {{ action_profile_group {{ action_profile_id: {ids.ecmp_implementation}
                     group_id: 10 members {{ member_id: 1 weight: 1 }} members {{ member_id: 2 weight: 1 }}
                     max_size: 4 }} }}""",
                 _ecmp_entry(ids, "\\x0a\\x01\\x02\\x03", "action_profile_group_id: 10"),
                 _ecmp_entry(ids, "\\x0a\\x01\\x02\\x04", "action_profile_member_id: 3"))
    ports = set()
    for src in range(64):
        frame = ETH + IPV4[:12] + bytes([10, 9, 0, src]) + IPV4[16:]
        ports.add(device.inject(1, frame)[0][0])
    assert ports == {5, 6}
    dst4 = ETH + IPV4[:16] + bytes([10, 1, 2, 4])
    assert [p for p, _ in device.inject(1, dst4)] == [7]
    assert client.read(f"table_entry {{ table_id: {ids.ecmp} }}") == [msg(P.Entity, t) for t in (
        (f'table_entry {{ table_id: {ids.ecmp} match {{ field_id: 1 exact {{ value: "\\x0a\\x01\\x02\\x03" }} }} '
        f'action {{ action_profile_group_id: 10 }} }}'),
        (f'table_entry {{ table_id: {ids.ecmp} match {{ field_id: 1 exact {{ value: "\\x0a\\x01\\x02\\x04" }} }} '
        f'action {{ action_profile_member_id: 3 }} }}'))]
    assert client.read("action_profile_group {}") == [msg(P.Entity, f"""action_profile_group {{
        action_profile_id: {ids.ecmp_implementation} group_id: 10 members {{ member_id: 1 weight: 1 }}
        members {{ member_id: 2 weight: 1 }} max_size: 4 }}""")]
    assert [e.action_profile_member.member_id for e in client.read("action_profile_member {}")] == [1, 2, 3]
    # members in use cannot go; a group can only name existing members; a direct action is refused
    err = write_error(client, _member(ids, 1, "", "DELETE"),
                      f"""type: MODIFY entity {{ action_profile_group {{ action_profile_id: {ids.ecmp_implementation}
                          group_id: 10 members {{ member_id: 9 }} }} }}""",
                      _ecmp_entry(ids, "\\x0a\\x01\\x02\\x05", f"action {{ action_id: {ids.drop} }}"),
                      _ecmp_entry(ids, "\\x0a\\x01\\x02\\x05", "action_profile_member_id: 77"),
                      fwd(ids, "\\x01", "action { action_profile_member_id: 1 }"))
    assert update_codes(err) == ["FAILED_PRECONDITION", "NOT_FOUND", "INVALID_ARGUMENT", "NOT_FOUND",
                                 "INVALID_ARGUMENT"]
    # reconcile keeps profiles and indirect entries
    client.set_pipeline(p4info, program_source, action=P4RT.SetForwardingPipelineConfigRequest.RECONCILE_AND_COMMIT)
    assert [p for p, _ in device.inject(1, dst4)] == [7]
    client.write(_ecmp_entry(ids, "\\x0a\\x01\\x02\\x04", "action_profile_member_id: 2", "MODIFY"))
    assert [p for p, _ in device.inject(1, dst4)] == [6]


def test_unknown_atomicity_value(client, ids):
    with pytest.raises(Exception) as ei:
        client.write(fwd(ids, "\\x01"), atomicity=7)
    assert ei.value.code == grpc.StatusCode.UNIMPLEMENTED and "atomicity 7" in ei.value.details
