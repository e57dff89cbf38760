"""StreamChannel: arbitration among several clients, packet-out/packet-in, digests."""
from __future__ import annotations

import queue
import time
from collections.abc import Callable

import grpc
import pytest
from p4.v1 import p4runtime_pb2 as P
from p4.v1.p4data_pb2 import P4Data
from p4rt_helpers import DEVICE_ID, WriteError, msg

ETH = bytes.fromhex("0000000000aa" "000000000001" "0800") + bytes(20)


def arb(election_id: int, code: str, message: str) -> P.MasterArbitrationUpdate:
    codes = {"OK": 0, "ALREADY_EXISTS": 6, "NOT_FOUND": 5}
    return msg(P.MasterArbitrationUpdate, f"""device_id: {DEVICE_ID} election_id {{ low: {election_id} }}
        status {{ code: {codes[code]} message: "{message}" }}""")


PRIMARY = "is primary"
BACKUP = "is backup; a primary is connected"
NO_PRIMARY = "is backup; there is no primary"


def no_more(q: queue.Queue, timeout: float = 0.2) -> bool:
    try:
        q.get(timeout=timeout)
    except queue.Empty:
        return True
    return False


def wait_for(cond: Callable[[], object], timeout_s: float = 5) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.01)
    return False


def test_arbitration_among_three_clients(make_client, p4info, program_source):
    a = make_client(election_id=None)
    a.open_stream()
    assert a.arbitrate(10) == arb(10, "OK", PRIMARY)
    b = make_client(election_id=None)
    b.open_stream()
    assert b.arbitrate(5) == arb(10, "ALREADY_EXISTS", BACKUP)
    assert no_more(a.arbitrations)  # the primary did not change: only b is told
    a.set_pipeline(p4info, program_source)
    with pytest.raises(grpc.RpcError) as ei:
        b.set_pipeline(p4info, program_source)
    assert ei.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(WriteError) as we:
        b.write("type: MODIFY entity { digest_entry {} }")
    assert we.value.code == grpc.StatusCode.PERMISSION_DENIED
    assert "election id 5 is not the primary's (10)" in we.value.details
    # a third client takes over: everybody hears about it
    c = make_client(election_id=None)
    c.open_stream()
    assert c.arbitrate(20) == arb(20, "OK", PRIMARY)
    assert a.arbitrations.get(timeout=5) == arb(20, "ALREADY_EXISTS", BACKUP)
    assert b.arbitrations.get(timeout=5) == arb(20, "ALREADY_EXISTS", BACKUP)
    with pytest.raises(WriteError) as we:
        a.write("type: MODIFY entity { digest_entry {} }")
    assert we.value.code == grpc.StatusCode.PERMISSION_DENIED
    # reads need no mastership
    assert b.read("digest_entry {}") == []
    # the primary leaves: the backups are told there is no primary
    c.close()
    assert a.arbitrations.get(timeout=5) == arb(20, "NOT_FOUND", NO_PRIMARY)
    assert b.arbitrations.get(timeout=5) == arb(20, "NOT_FOUND", NO_PRIMARY)
    # a backup claims the highest election id and becomes primary
    assert a.arbitrate(20) == arb(20, "OK", PRIMARY)
    assert b.arbitrations.get(timeout=5) == arb(20, "ALREADY_EXISTS", BACKUP)
    a.write(f"type: INSERT entity {{ digest_entry {{ digest_id: {p4info.digests[0].preamble.id} "
            f"config {{ max_list_size: 1 }} }} }}")


def test_first_client_is_primary(make_client):
    a = make_client(election_id=None)
    a.open_stream()
    assert a.arbitrate(1) == arb(1, "OK", PRIMARY)


def test_duplicate_election_id_and_wrong_device_end_the_stream(make_client):
    make_client(election_id=3)
    b = make_client(election_id=None)
    b.open_stream()
    b.arbitrate(3, wait=False)
    assert b.stream_ended()
    assert b.stream_status.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "already used" in b.stream_status.details()
    c = make_client(election_id=None)
    c.open_stream()
    c.arbitrate(4, device_id=99, wait=False)
    assert c.stream_ended()
    assert c.stream_status.code() == grpc.StatusCode.NOT_FOUND


def test_write_without_any_stream_is_denied(make_client):
    c = make_client(election_id=None)
    c.election_id = 1
    with pytest.raises(WriteError) as we:
        c.write("type: MODIFY entity { digest_entry {} }")
    assert we.value.code == grpc.StatusCode.PERMISSION_DENIED
    assert "no primary client" in we.value.details


def test_packet_in_and_out_round_trip(client, make_client, ids, device):
    backup = make_client(election_id=None)
    backup.open_stream()
    backup.arbitrate(0)
    client.write(f"""type: INSERT entity {{ table_entry {{ table_id: {ids.forward}
        match {{ field_id: 1 exact {{ value: "\\xaa" }} }} action {{ action {{ action_id: {ids.to_cpu} }} }} }} }}""")
    assert device.inject(7, ETH) == []
    pin = client.packets.get(timeout=5)
    assert pin == msg(P.PacketIn, f"""payload: {repr_bytes(ETH)} metadata {{ metadata_id: 1 value: "\\x07" }}
        metadata {{ metadata_id: 2 value: "\\x00" }}""")
    assert no_more(backup.packets)  # packet-ins go to the primary only
    out = P.StreamMessageRequest()
    out.packet.payload = pin.payload
    out.packet.metadata.add(metadata_id=1, value=b"\x01\x02")  # egress port 258
    client.send(out)
    assert wait_for(lambda: device.transmitted)
    assert list(device.transmitted) == [(258, ETH)]
    # a backup's packet-out is refused with a StreamError
    backup.send(out)
    err = backup.errors.get(timeout=5)
    assert err.canonical_code == grpc.StatusCode.PERMISSION_DENIED.value[0]
    assert err.packet_out.packet_out == out.packet
    # bad metadata
    bad = P.StreamMessageRequest()
    bad.packet.payload = b"x"
    bad.packet.metadata.add(metadata_id=9, value=b"\x01")
    client.send(bad)
    err = client.errors.get(timeout=5)
    assert err.canonical_code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert "no packet_out metadata with id 9" in err.message
    bad.packet.metadata[0].metadata_id = 1
    bad.packet.metadata[0].value = b"\x02\x00"
    client.send(bad)
    err = client.errors.get(timeout=5)
    assert "does not fit bit<9>" in err.message
    assert len(device.transmitted) == 1


def repr_bytes(data: bytes) -> str:
    return '"' + "".join(f"\\x{b:02x}" for b in data) + '"'


def test_digests_batched_acked_and_deduplicated(client, ids, device):
    frames = [bytes.fromhex("0000000000bb" f"0000000000{i:02x}" "0800") for i in (1, 2, 3)]
    device.inject(4, frames[0])  # not configured yet: dropped
    client.write(f"""type: INSERT entity {{ digest_entry {{ digest_id: {ids.learn_t}
        config {{ max_timeout_ns: 0 max_list_size: 1 ack_timeout_ns: 10000000000 }} }} }}""")
    assert no_more(client.digests)
    device.inject(4, frames[0])
    dl = client.digests.get(timeout=5)
    assert dl.digest_id == ids.learn_t and dl.list_id == 1 and dl.timestamp > 0
    assert list(dl.data) == [msg(P4Data, 'struct { members { bitstring: "\\x01" } members { bitstring: "\\x04" } }')]
    # the same data again, not acked yet: not repeated
    device.inject(4, frames[0])
    assert no_more(client.digests)
    ack = P.StreamMessageRequest()
    ack.digest_ack.digest_id, ack.digest_ack.list_id = ids.learn_t, 1
    client.send(ack)
    assert wait_for(lambda: _acked(client, ids.learn_t, device, frames[0]))
    # batching: lists of up to 2, sent after max_timeout
    client.write(f"""type: MODIFY entity {{ digest_entry {{ digest_id: {ids.learn_t}
        config {{ max_timeout_ns: 1000000000 max_list_size: 2 }} }} }}""")
    for f in frames:
        device.inject(6, f)
    first = client.digests.get(timeout=5)
    second = client.digests.get(timeout=5)
    assert [len(first.data), len(second.data)] == [2, 1]


def _acked(client, digest_id: int, device, frame: bytes) -> bool:  # type: ignore[no-untyped-def]
    """After the ack reached the server, the same digest is sent again (as list 2)."""
    device.inject(4, frame)
    try:
        return client.digests.get(timeout=0.1).list_id == 2
    except queue.Empty:
        return False


def test_digest_resent_after_ack_timeout(client, ids, device):
    client.write(f"""type: INSERT entity {{ digest_entry {{ digest_id: {ids.learn_t}
        config {{ max_timeout_ns: 0 max_list_size: 1 ack_timeout_ns: 1000000000 }} }} }}""")
    frame = bytes.fromhex("0000000000bb" "000000000007" "0800")
    device.inject(4, frame)
    assert client.digests.get(timeout=5).list_id == 1
    device.inject(4, frame)  # within ack_timeout: suppressed
    assert no_more(client.digests)
    time.sleep(1.1)
    device.inject(4, frame)  # the unacked list timed out: sent again
    assert client.digests.get(timeout=5).list_id == 2


def test_unsupported_stream_message_gets_a_stream_error(client):
    m = P.StreamMessageRequest()
    m.other.type_url = "type.googleapis.com/example.Unknown"
    client.send(m)
    err = client.errors.get(timeout=5)
    assert err.canonical_code == grpc.StatusCode.UNIMPLEMENTED.value[0] and "other" in err.message
    # the stream is still up: packet-out works afterwards
    assert client.arbitrate(1) == arb(1, "OK", PRIMARY)
