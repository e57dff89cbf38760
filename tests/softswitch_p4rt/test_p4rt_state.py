"""Counters, direct counters, meters, direct meters, registers, PRE entries and digest
configuration over P4Runtime, with wildcard reads."""
from __future__ import annotations

import grpc
import pytest
from p4.v1 import p4runtime_pb2 as P
from p4rt_helpers import msg, update_codes, write_error

ETH = bytes.fromhex("0000000000aa" "000000000001" "0800")
IPV4 = bytes.fromhex("45000014000100004011" "0000" "0a000001" "0a010203")


def test_counters_count_and_read_with_wildcards(client, ids, device):
    for _ in range(3):
        device.inject(2, ETH)
    got = client.read(f"counter_entry {{ counter_id: {ids.port_counter} index {{ index: 2 }} }}")
    assert got == [msg(P.Entity, f"""counter_entry {{ counter_id: {ids.port_counter} index {{ index: 2 }}
        data {{ packet_count: 3 byte_count: 42 }} }}""")]
    every = client.read(f"counter_entry {{ counter_id: {ids.port_counter} }}")
    assert [e.counter_entry.index.index for e in every] == list(range(64))
    assert len(client.read("counter_entry {}")) == 64  # counter id 0: every counter
    client.write(f"""type: MODIFY entity {{ counter_entry {{ counter_id: {ids.port_counter}
        index {{ index: 2 }} data {{ packet_count: 100 byte_count: 5 }} }} }}""")
    assert client.read(f"counter_entry {{ counter_id: {ids.port_counter} index {{ index: 2 }} }}")[0] \
        .counter_entry.data == msg(P.CounterData, "packet_count: 100 byte_count: 5")


@pytest.mark.parametrize("update,code,text", [
    ("type: INSERT entity { counter_entry { counter_id: %(c)d index { index: 1 } } }", "INVALID_ARGUMENT",
     "only MODIFY"),
    ("type: MODIFY entity { counter_entry { counter_id: %(c)d index { index: 64 } } }", "INVALID_ARGUMENT",
     "index 64 outside 0..63"),
    ("type: MODIFY entity { counter_entry { counter_id: %(c)d } }", "UNIMPLEMENTED", "every index"),
    ("type: MODIFY entity { counter_entry { counter_id: 99 index { index: 1 } } }", "INVALID_ARGUMENT",
     "no counter with id 99"),
    (("type: MODIFY entity { meter_entry { meter_id: %(m)d index { index: 1 } "
     "config { cir: 10 cburst: 1 pir: 5 pburst: 1 } } }"), "INVALID_ARGUMENT", "pir >= cir"),
    (("type: MODIFY entity { register_entry { register_id: %(r)d index { index: 0 } "
     "data { bitstring: \"\\x01\\x00\\x00\\x00\\x00\" } } }"), "INVALID_ARGUMENT", "does not fit bit<32>"),
    ("type: MODIFY entity { register_entry { register_id: %(r)d index { index: 0 } data { bool: true } } }",
     "INVALID_ARGUMENT", "expected a bitstring"),
])
def test_bad_stateful_writes(client, ids, update, code, text):
    u = update % {"c": ids.port_counter, "m": ids.port_meter, "r": ids.last_len}
    err = write_error(client, u)
    assert update_codes(err) == [code]
    assert text in err.errors[0].message, err.errors[0].message


def test_direct_counter(client, ids, device):
    client.write(f"""type: INSERT entity {{ table_entry {{ table_id: {ids.forward}
        match {{ field_id: 1 exact {{ value: "\\xaa" }} }} action {{ action {{ action_id: {ids.set_port}
        params {{ param_id: 1 value: "\\x02" }} }} }} }} }}""")
    device.inject(1, ETH)
    device.inject(1, ETH)
    key = f'table_entry {{ table_id: {ids.forward} match {{ field_id: 1 exact {{ value: "\\xaa" }} }} }}'
    got = client.read(f"direct_counter_entry {{ {key} }}")
    assert got == [msg(P.Entity, f"""direct_counter_entry {{ table_entry {{ table_id: {ids.forward}
        match {{ field_id: 1 exact {{ value: "\\xaa" }} }} action {{ action {{ action_id: {ids.set_port}
        params {{ param_id: 1 value: "\\x02" }} }} }} }} data {{ packet_count: 2 byte_count: 28 }} }}""")]
    assert client.read("direct_counter_entry { table_entry {} }") == got  # every table
    # counter_data requested in a table read
    te = client.read(f"table_entry {{ table_id: {ids.forward} counter_data {{}} }}")[0].table_entry
    assert te.counter_data == msg(P.CounterData, "packet_count: 2 byte_count: 28")
    client.write(f"type: MODIFY entity {{ direct_counter_entry {{ {key} data {{ packet_count: 7 }} }} }}")
    assert client.read(f"direct_counter_entry {{ {key} }}")[0].direct_counter_entry.data == msg(
        P.CounterData, "packet_count: 7")
    err = write_error(client, f"""type: MODIFY entity {{ direct_counter_entry {{ table_entry {{
        table_id: {ids.forward} match {{ field_id: 1 exact {{ value: "\\xbb" }} }} }} }} }}""",
                      f"type: MODIFY entity {{ direct_counter_entry {{ table_entry {{ table_id: {ids.acl} }} }} }}")
    assert update_codes(err) == ["NOT_FOUND", "INVALID_ARGUMENT"]


def test_meters_and_direct_meters(client, ids, device):
    cfg = "config { cir: 1000 cburst: 100 pir: 2000 pburst: 200 }"
    client.write(f"type: MODIFY entity {{ meter_entry {{ meter_id: {ids.port_meter} index {{ index: 4 }} {cfg} }} }}")
    got = client.read(f"meter_entry {{ meter_id: {ids.port_meter} }}")
    assert len(got) == 16
    assert got[4] == msg(P.Entity, f"meter_entry {{ meter_id: {ids.port_meter} index {{ index: 4 }} {cfg} }}")
    assert got[3] == msg(P.Entity, f"meter_entry {{ meter_id: {ids.port_meter} index {{ index: 3 }} }}")
    # no config resets the cell to "unconfigured"
    client.write(f"type: MODIFY entity {{ meter_entry {{ meter_id: {ids.port_meter} index {{ index: 4 }} }} }}")
    assert not client.read(f"meter_entry {{ meter_id: {ids.port_meter} index {{ index: 4 }} }}")[0] \
        .meter_entry.HasField("config")
    # direct meter: given at insert, read back, modified
    client.write(f"""type: INSERT entity {{ table_entry {{ table_id: {ids.routes}
        match {{ field_id: 1 lpm {{ value: "\\x0a\\x01\\x00\\x00" prefix_len: 16 }} }}
        action {{ action {{ action_id: {ids.route} params {{ param_id: 1 value: "\\x03" }} }} }}
        meter_config {{ cir: 1 cburst: 2 pir: 3 pburst: 4 }} }} }}""")
    key = (f'table_entry {{ table_id: {ids.routes} '
           f'match {{ field_id: 1 lpm {{ value: "\\x0a\\x01\\x00\\x00" prefix_len: 16 }} }} }}')
    dm = client.read(f"direct_meter_entry {{ {key} }}")[0].direct_meter_entry
    assert dm.config == msg(P.MeterConfig, "cir: 1 cburst: 2 pir: 3 pburst: 4")
    client.write(f"type: MODIFY entity {{ direct_meter_entry {{ {key} {cfg} }} }}")
    dm = client.read(f"direct_meter_entry {{ table_entry {{ table_id: {ids.routes} }} }}")[0].direct_meter_entry
    assert dm.config == msg(P.MeterConfig, "cir: 1000 cburst: 100 pir: 2000 pburst: 200")
    assert [p for p, _ in device.inject(1, ETH + IPV4)] == [3]


def test_registers(client, ids, device):
    device.inject(5, ETH)
    got = client.read(f"register_entry {{ register_id: {ids.last_len} index {{ index: 5 }} }}")
    assert got == [msg(P.Entity, f"""register_entry {{ register_id: {ids.last_len} index {{ index: 5 }}
        data {{ bitstring: "\\x0e" }} }}""")]
    client.write(f"""type: MODIFY entity {{ register_entry {{ register_id: {ids.last_len} index {{ index: 1 }}
        data {{ bitstring: "\\x00\\x00\\x01\\x00" }} }} }}""")
    every = client.read("register_entry {}")
    assert [e.register_entry.data.bitstring for e in every] == [b"\x00", b"\x01\x00", b"\x00", b"\x00",
                                                                b"\x00", b"\x0e", b"\x00", b"\x00"]


def test_multicast_groups_and_clone_sessions(client, ids, device):
    group = "multicast_group_entry { multicast_group_id: 5 replicas { egress_port: 1 instance: 1 } " \
            "replicas { egress_port: 2 instance: 1 } }"
    client.write(f"type: INSERT entity {{ packet_replication_engine_entry {{ {group} }} }}")
    assert client.read("packet_replication_engine_entry { multicast_group_entry {} }") == [
        msg(P.Entity, f"packet_replication_engine_entry {{ {group} }}")]
    client.write(f"""type: INSERT entity {{ table_entry {{ table_id: {ids.forward}
        match {{ field_id: 1 exact {{ value: "\\xaa" }} }} action {{ action {{ action_id: {ids.flood}
        params {{ param_id: 1 value: "\\x05" }} }} }} }} }}""")
    assert sorted(p for p, _ in device.inject(3, ETH)) == [1, 2]
    client.write("type: MODIFY entity { packet_replication_engine_entry { multicast_group_entry { "
                 "multicast_group_id: 5 replicas { port: \"\\x04\" } } } }")
    assert [p for p, _ in device.inject(3, ETH)] == [4]
    session = "clone_session_entry { session_id: 9 replicas { egress_port: 8 } packet_length_bytes: 10 }"
    client.write(f"type: INSERT entity {{ packet_replication_engine_entry {{ {session} }} }}")
    client.write(f"""type: MODIFY entity {{ table_entry {{ table_id: {ids.forward}
        match {{ field_id: 1 exact {{ value: "\\xaa" }} }} action {{ action {{ action_id: {ids.mirror}
        params {{ param_id: 1 value: "\\x09" }} params {{ param_id: 2 value: "\\x02" }} }} }} }} }}""")
    outs = sorted(device.inject(3, ETH))
    assert outs == [(2, ETH), (8, ETH[:10])]
    assert client.read("packet_replication_engine_entry { clone_session_entry { session_id: 9 } }") == [
        msg(P.Entity, f"packet_replication_engine_entry {{ {session} }}")]
    err = write_error(client,
                      f"type: INSERT entity {{ packet_replication_engine_entry {{ {group} }} }}",
                      f"type: INSERT entity {{ packet_replication_engine_entry {{ {session} }} }}",
                      "type: MODIFY entity { packet_replication_engine_entry { clone_session_entry { "
                      "session_id: 3 } } }",
                      "type: DELETE entity { packet_replication_engine_entry { multicast_group_entry { "
                      "multicast_group_id: 6 } } }",
                      "type: INSERT entity { packet_replication_engine_entry { multicast_group_entry { "
                      "multicast_group_id: 0 } } }")
    assert update_codes(err) == ["ALREADY_EXISTS", "ALREADY_EXISTS", "NOT_FOUND", "NOT_FOUND", "INVALID_ARGUMENT"]
    client.write("type: DELETE entity { packet_replication_engine_entry { multicast_group_entry { "
                 "multicast_group_id: 5 } } }",
                 "type: DELETE entity { packet_replication_engine_entry { clone_session_entry { session_id: 9 } } }")
    assert client.read("packet_replication_engine_entry { multicast_group_entry {} }",
                       "packet_replication_engine_entry { clone_session_entry {} }") == []


def test_digest_config_entries(client, ids):
    conf = "config { max_timeout_ns: 0 max_list_size: 1 ack_timeout_ns: 1000000000 }"
    client.write(f"type: INSERT entity {{ digest_entry {{ digest_id: {ids.learn_t} {conf} }} }}")
    assert client.read("digest_entry {}") == [msg(P.Entity, f"digest_entry {{ digest_id: {ids.learn_t} {conf} }}")]
    err = write_error(client, f"type: INSERT entity {{ digest_entry {{ digest_id: {ids.learn_t} {conf} }} }}",
                      "type: INSERT entity { digest_entry { digest_id: 4 } }",
                      f"type: MODIFY entity {{ digest_entry {{ digest_id: {ids.learn_t} }} }}")
    assert update_codes(err) == ["ALREADY_EXISTS", "INVALID_ARGUMENT", "INVALID_ARGUMENT"]
    client.write(f"type: DELETE entity {{ digest_entry {{ digest_id: {ids.learn_t} }} }}")
    assert client.read("digest_entry {}") == []
    err = write_error(client, f"type: DELETE entity {{ digest_entry {{ digest_id: {ids.learn_t} }} }}")
    assert update_codes(err) == ["NOT_FOUND"]


def test_read_errors(client, ids):
    with pytest.raises(grpc.RpcError) as ei:
        client.read(f"counter_entry {{ counter_id: {ids.port_counter} index {{ index: 99 }} }}")
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as ei:
        client.read("extern_entry {}")
    assert ei.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_value_set(client, ids, device, p4info, program_source):
    vs_id = p4info.value_sets[0].preamble.id
    frame = ETH[:12] + b"\x88\xb5" + IPV4
    client.write(f"""type: INSERT entity {{ table_entry {{ table_id: {ids.routes}
        match {{ field_id: 1 lpm {{ value: "\\x0a\\x01\\x00\\x00" prefix_len: 16 }} }}
        action {{ action {{ action_id: {ids.route} params {{ param_id: 1 value: "\\x03" }} }} }} }} }}""")
    assert [p for p, _ in device.inject(1, frame)] == [0]  # 0x88b5 is not parsed as IPv4: no route
    members = 'members { match { field_id: 1 exact { value: "\\x88\\xb5" } } } ' \
              'members { match { field_id: 1 exact { value: "\\x86\\xdd" } } }'
    client.write(f"type: MODIFY entity {{ value_set_entry {{ value_set_id: {vs_id} {members} }} }}")
    assert [p for p, _ in device.inject(1, frame)] == [3]
    assert client.read("value_set_entry {}") == [
        msg(P.Entity, f"value_set_entry {{ value_set_id: {vs_id} {members} }}")]
    too_many = " ".join(f'members {{ match {{ field_id: 1 exact {{ value: "\\x{i:02x}" }} }} }}' for i in range(5))
    err = write_error(client, f"type: MODIFY entity {{ value_set_entry {{ value_set_id: {vs_id} {too_many} }} }}",
                      f"type: INSERT entity {{ value_set_entry {{ value_set_id: {vs_id} }} }}",
                      f"""type: MODIFY entity {{ value_set_entry {{ value_set_id: {vs_id}
                          members {{ match {{ field_id: 1 exact {{ value: "\\x01\\x00\\x00" }} }} }} }} }}""")
    assert update_codes(err) == ["RESOURCE_EXHAUSTED", "INVALID_ARGUMENT", "INVALID_ARGUMENT"]
    assert len(client.read("value_set_entry {}")[0].value_set_entry.members) == 2
    client.set_pipeline(p4info, program_source, action=P.SetForwardingPipelineConfigRequest.RECONCILE_AND_COMMIT)
    assert [p for p, _ in device.inject(1, frame)] == [3]
    client.write(f"type: MODIFY entity {{ value_set_entry {{ value_set_id: {vs_id} }} }}")
    assert [p for p, _ in device.inject(1, frame)] == [0]
