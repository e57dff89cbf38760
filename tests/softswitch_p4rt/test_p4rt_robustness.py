"""Bad requests never change state and never kill the server: hundreds of mutated updates
(valid ones with random bytes flipped, cut or inserted), then undecodable requests."""
from __future__ import annotations

import random

import grpc
import pytest
from google.protobuf.message import DecodeError
from p4.v1 import p4runtime_pb2 as P
from p4rt_helpers import WriteError, msg


def templates(ids) -> list[P.Update]:  # type: ignore[no-untyped-def]
    texts = [
        f"""type: INSERT entity {{ table_entry {{ table_id: {ids.forward} match {{ field_id: 1 exact {{ value: "\\xaa" }} }}
            action {{ action {{ action_id: {ids.set_port} params {{ param_id: 1 value: "\\x02" }} }} }} }} }}""",
        f"""type: INSERT entity {{ table_entry {{ table_id: {ids.routes}
            match {{ field_id: 1 lpm {{ value: "\\x0a\\x01\\x00\\x00" prefix_len: 16 }} }}
            action {{ action {{ action_id: {ids.route} params {{ param_id: 1 value: "\\x03" }} }} }}
            meter_config {{ cir: 1 cburst: 2 pir: 3 pburst: 4 }} }} }}""",
        f"""type: INSERT entity {{ table_entry {{ table_id: {ids.acl}
            match {{ field_id: 1 ternary {{ value: "\\x08\\x00" mask: "\\xff\\xff" }} }}
            match {{ field_id: 2 range {{ low: "\\x06" high: "\\x11" }} }}
            match {{ field_id: 3 optional {{ value: "\\x0a\\x00\\x00\\x01" }} }}
            action {{ action {{ action_id: {ids.drop} }} }} priority: 20 }} }}""",
        f"""type: MODIFY entity {{ table_entry {{ table_id: {ids.forward} is_default_action: true
            action {{ action {{ action_id: {ids.set_port} params {{ param_id: 1 value: "\\x09" }} }} }} }} }}""",
        f"""type: MODIFY entity {{ counter_entry {{ counter_id: {ids.port_counter} index {{ index: 3 }}
            data {{ packet_count: 9 byte_count: 900 }} }} }}""",
        f"""type: MODIFY entity {{ meter_entry {{ meter_id: {ids.port_meter} index {{ index: 4 }}
            config {{ cir: 1000 cburst: 100 pir: 2000 pburst: 200 }} }} }}""",
        f"""type: MODIFY entity {{ register_entry {{ register_id: {ids.last_len} index {{ index: 1 }}
            data {{ bitstring: "\\x01\\x00" }} }} }}""",
        """type: INSERT entity { packet_replication_engine_entry { multicast_group_entry {
            multicast_group_id: 5 replicas { egress_port: 1 instance: 1 } } } }""",
        """type: INSERT entity { packet_replication_engine_entry { clone_session_entry {
            session_id: 9 replicas { egress_port: 8 } packet_length_bytes: 10 } } }""",
        f"""type: INSERT entity {{ action_profile_member {{ action_profile_id: {ids.ecmp_implementation}
            member_id: 1 action {{ action_id: {ids.set_port} params {{ param_id: 1 value: "\\x05" }} }} }} }}""",
        f"""type: INSERT entity {{ action_profile_group {{ action_profile_id: {ids.ecmp_implementation}
            group_id: 10 members {{ member_id: 1 weight: 1 }} max_size: 4 }} }}""",
        f"""type: INSERT entity {{ table_entry {{ table_id: {ids.ecmp}
            match {{ field_id: 1 exact {{ value: "\\x0a\\x01\\x02\\x03" }} }} action {{ action_profile_group_id: 10 }} }} }}""",
        f"""type: MODIFY entity {{ value_set_entry {{ value_set_id: {ids.ipv4_types}
            members {{ match {{ field_id: 1 exact {{ value: "\\x88\\xb5" }} }} }} }} }}""",
        f"""type: INSERT entity {{ digest_entry {{ digest_id: {ids.learn_t}
            config {{ max_timeout_ns: 0 max_list_size: 1 ack_timeout_ns: 1000 }} }} }}""",
    ]
    return [msg(P.Update, t) for t in texts]


def snapshot(client) -> list[P.Entity]:  # type: ignore[no-untyped-def]
    return client.read("table_entry {}", "counter_entry {}", "meter_entry {}", "register_entry {}",
                       "direct_meter_entry { table_entry {} }",
                       "packet_replication_engine_entry { multicast_group_entry {} }",
                       "packet_replication_engine_entry { clone_session_entry {} }", "digest_entry {}",
                       "action_profile_member {}", "action_profile_group {}", "value_set_entry {}",
                       *(f"table_entry {{ table_id: {t} is_default_action: true }}" for t in (
                           client.table_ids)))


def mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.random()
        pos = rng.randrange(len(b)) if b else 0
        if op < 0.5 and b:
            b[pos] = rng.randrange(256)
        elif op < 0.7:
            b.insert(pos, rng.randrange(256))
        elif op < 0.85 and b:
            del b[pos]
        else:
            del b[rng.randrange(len(b) + 1):]
    return bytes(b)


def _set_fields(m, out: list) -> None:  # type: ignore[no-untyped-def]
    for fd, value in m.ListFields():
        if fd.label == fd.LABEL_REPEATED:
            out.append((m, fd, None))
            if fd.type == fd.TYPE_MESSAGE:
                for sub in value:
                    _set_fields(sub, out)
        elif fd.type == fd.TYPE_MESSAGE:
            out.append((m, fd, None))
            _set_fields(value, out)
        else:
            out.append((m, fd, value))


def mutate_fields(rng: random.Random, upd: P.Update) -> P.Update:
    """Change one field of `upd` to an odd value (0, -1, huge, random bytes, cleared)."""
    out = P.Update()
    out.CopyFrom(upd)
    fields: list = []
    _set_fields(out, fields)
    m, fd, value = rng.choice(fields)
    if value is None or rng.random() < 0.15:
        m.ClearField(fd.name)
    elif fd.type == fd.TYPE_BYTES:
        setattr(m, fd.name, bytes(rng.randrange(256) for _ in range(rng.choice((0, 1, 2, 5, 9)))))
    elif fd.type == fd.TYPE_BOOL:
        setattr(m, fd.name, not value)
    elif fd.type == fd.TYPE_ENUM:
        setattr(m, fd.name, rng.randrange(6))
    else:
        signed = fd.type in (fd.TYPE_INT32, fd.TYPE_INT64, fd.TYPE_SINT32, fd.TYPE_SINT64)
        big = (1 << 31) - 1 if fd.type in (fd.TYPE_INT32, fd.TYPE_UINT32, fd.TYPE_SINT32) else (1 << 63) - 1
        choices = [0, 1, value + 1, max(value - 1, 0), big, rng.randrange(big)] + ([-1, -big] if signed else [])
        setattr(m, fd.name, rng.choice(choices))
    return out


def test_mutated_updates_change_nothing_when_refused(client, ids, p4info):
    client.table_ids = [t.preamble.id for t in p4info.tables]
    rng = random.Random(1234)
    seeds = [t.SerializeToString() for t in templates(ids)]
    refused = accepted = 0
    for i in range(500):
        if i % 4 == 0:
            try:
                upd = P.Update.FromString(mutate(rng, rng.choice(seeds)))
            except DecodeError:  # not a protobuf any more: nothing to send
                continue
        else:
            upd = mutate_fields(rng, P.Update.FromString(rng.choice(seeds)))
        before = snapshot(client)
        try:
            client.write(upd)
            accepted += 1
        except WriteError as exc:
            refused += 1
            assert exc.errors and exc.errors[0].canonical_code != grpc.StatusCode.INTERNAL.value[0], exc.errors
            assert snapshot(client) == before, upd
    assert refused > 100 and accepted > 10, (refused, accepted)
    # still serving, still correct
    client.write(f"""type: INSERT entity {{ table_entry {{ table_id: {ids.routes}
        match {{ field_id: 1 lpm {{ value: "\\xc0\\xa8\\x63\\x00" prefix_len: 24 }} }}
        action {{ action {{ action_id: {ids.drop} }} }} }} }}""")
    assert client.stub.Capabilities(P.CapabilitiesRequest()).p4runtime_api_version == "1.4.1"


def test_undecodable_requests(client, server):
    ch = grpc.insecure_channel(server.address)
    try:
        raw = ch.unary_unary("/p4.v1.P4Runtime/Write", request_serializer=None, response_deserializer=None)
        for garbage in (b"\xff\xff\xff", b"\x22\x05\x0a\x03\xff\xff", bytes(range(40))):
            try:
                raw(garbage, timeout=5)
            except grpc.RpcError as exc:
                assert exc.code() != grpc.StatusCode.OK
    finally:
        ch.close()
    assert client.stub.Capabilities(P.CapabilitiesRequest()).p4runtime_api_version == "1.4.1"


def test_mutated_reads_fail_cleanly(client, ids):
    client.write(*templates(ids))
    rng = random.Random(99)
    queries = [msg(P.Entity, t).SerializeToString() for t in (
        (f'table_entry {{ table_id: {ids.acl} match {{ field_id: 2 range {{ low: "\\x06" high: "\\x11" }} }} '
        f'priority: 20 counter_data {{}} }}'),
        f"counter_entry {{ counter_id: {ids.port_counter} index {{ index: 3 }} }}",
        f"meter_entry {{ meter_id: {ids.port_meter} index {{ index: 4 }} }}",
        f"register_entry {{ register_id: {ids.last_len} index {{ index: 1 }} }}",
        f"direct_counter_entry {{ table_entry {{ table_id: {ids.forward} }} }}",
        f"direct_meter_entry {{ table_entry {{ table_id: {ids.routes} }} }}",
        "packet_replication_engine_entry { clone_session_entry { session_id: 9 } }",
        f"digest_entry {{ digest_id: {ids.learn_t} }}")]
    bad_codes = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}
    for _ in range(300):
        wrapped = P.Update(entity=P.Entity.FromString(rng.choice(queries)))
        q = mutate_fields(rng, wrapped).entity
        try:
            client.read(q)
        except grpc.RpcError as exc:
            assert exc.code() not in bad_codes, (q, exc.details())
    assert client.stub.Capabilities(P.CapabilitiesRequest()).p4runtime_api_version == "1.4.1"


def test_writes_and_reads_while_packets_flow(client, ids, device):
    """The device lock serialises the data path with the control plane: no torn state."""
    import threading

    stop = threading.Event()
    failures: list[BaseException] = []
    sent = [0]

    def traffic() -> None:
        frame = bytes.fromhex("0000000000aa" "000000000001" "0800") + bytes(20)
        try:
            while not stop.is_set():
                device.inject(1, frame)
                sent[0] += 1
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failures.append(exc)

    t = threading.Thread(target=traffic)
    t.start()
    try:
        for i in range(60):
            kind = "INSERT" if i % 2 == 0 else "DELETE"
            client.write(f"""type: {kind} entity {{ table_entry {{ table_id: {ids.forward}
                match {{ field_id: 1 exact {{ value: "\\xaa" }} }}
                action {{ action {{ action_id: {ids.set_port} params {{ param_id: 1 value: "\\x02" }} }} }} }} }}""")
            client.read(f"counter_entry {{ counter_id: {ids.port_counter} index {{ index: 1 }} }}")
    finally:
        stop.set()
        t.join(timeout=10)
    assert not failures and sent[0] > 0
    count = client.read(f"counter_entry {{ counter_id: {ids.port_counter} index {{ index: 1 }} }}")[0]
    assert count.counter_entry.data.packet_count == sent[0]


def test_random_packet_outs_never_break_the_stream(client, device):
    rng = random.Random(7)
    sent = 0
    for _ in range(200):
        m = P.StreamMessageRequest()
        m.packet.payload = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40)))
        for _ in range(rng.randrange(0, 3)):
            m.packet.metadata.add(metadata_id=rng.choice((0, 1, 2, 3, 2**32 - 1)),
                                  value=bytes(rng.randrange(256) for _ in range(rng.randrange(0, 3))))
        client.send(m)
        sent += 1
    # the stream still answers, in order, after all of them
    assert client.arbitrate(1).status.code == 0
    errors = client.errors.qsize()
    assert errors + len(device.transmitted) <= sent and errors > 0
    assert client.stub.Capabilities(P.CapabilitiesRequest()).p4runtime_api_version == "1.4.1"


def test_a_bug_answers_internal_and_the_server_keeps_serving(client, ids, monkeypatch):
    from softswitch.p4runtime import table_entries

    def broken(*_args, **_kw):  # type: ignore[no-untyped-def]
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(table_entries, "read_table_entries", broken)
    with pytest.raises(grpc.RpcError) as ei:
        client.read("table_entry {}")
    assert ei.value.code() == grpc.StatusCode.INTERNAL and "simulated bug" in ei.value.details()
    monkeypatch.setattr(table_entries, "write_table_entry", broken)
    with pytest.raises(WriteError) as we:
        client.write(f"type: INSERT entity {{ table_entry {{ table_id: {ids.forward} }} }}")
    assert we.value.errors[0].canonical_code == grpc.StatusCode.INTERNAL.value[0]
    monkeypatch.undo()
    assert client.read("table_entry {}") == []
