"""SetForwardingPipelineConfig / GetForwardingPipelineConfig over a real gRPC server."""
from __future__ import annotations

import io
import tarfile
import zipfile

import grpc
import pytest
from p4.v1 import p4runtime_pb2 as P
from p4rt_helpers import DEVICE_ID, Action, msg

EXTRA_HEADER = b"""
#define CPU_PORT 510
"""


def _rpc_error(call, *args):  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as ei:
        call(*args)
    return ei.value


def test_capabilities(make_client):
    c = make_client(election_id=None)
    assert c.stub.Capabilities(P.CapabilitiesRequest()) == msg(
        P.CapabilitiesResponse, 'p4runtime_api_version: "1.4.1"')


def test_no_pipeline_is_failed_precondition(make_client, ids):
    c = make_client(election_id=1)
    e = _rpc_error(c.stub.GetForwardingPipelineConfig, P.GetForwardingPipelineConfigRequest(device_id=DEVICE_ID))
    assert e.code() == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.RpcError) as ei:
        c.read("table_entry {}")
    assert ei.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    req = P.WriteRequest(device_id=DEVICE_ID)
    req.election_id.low = 1
    req.updates.append(msg(P.Update, f"type: INSERT entity {{ counter_entry {{ counter_id: {ids.port_counter} }} }}"))
    e = _rpc_error(c.stub.Write, req)
    assert e.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "no forwarding pipeline" in e.details()


def test_push_and_get_every_response_type(make_client, p4info, program_source, device):
    c = make_client(election_id=1)
    c.set_pipeline(p4info, program_source, cookie=77)
    assert device.pipeline is not None and device.pipeline.cookie == 77
    get = c.stub.GetForwardingPipelineConfig
    rt = P.GetForwardingPipelineConfigRequest
    full = get(rt(device_id=DEVICE_ID, response_type=rt.ALL)).config
    assert full.p4info == p4info and full.p4_device_config == program_source
    assert full.cookie == msg(P.ForwardingPipelineConfig.Cookie, "cookie: 77")
    cookie = get(rt(device_id=DEVICE_ID, response_type=rt.COOKIE_ONLY)).config
    assert cookie == msg(P.ForwardingPipelineConfig, "cookie { cookie: 77 }")
    info = get(rt(device_id=DEVICE_ID, response_type=rt.P4INFO_AND_COOKIE)).config
    assert info.p4info == p4info and not info.p4_device_config
    dev = get(rt(device_id=DEVICE_ID, response_type=rt.DEVICE_CONFIG_AND_COOKIE)).config
    assert dev.p4_device_config == program_source and not dev.HasField("p4info")


def test_verify_changes_nothing_and_save_then_commit(make_client, p4info, program_source, device):
    c = make_client(election_id=1)
    c.set_pipeline(p4info, program_source, action=Action.VERIFY)
    assert device.pipeline is None
    c.set_pipeline(p4info, program_source, action=Action.VERIFY_AND_SAVE)
    assert device.pipeline is None
    c.set_pipeline(p4info, b"", action=Action.COMMIT)
    assert device.pipeline is not None
    e = _rpc_error(c.set_pipeline, p4info, b"", Action.COMMIT)
    assert e.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_reconcile_keeps_entries_and_counters(client, p4info, program_source, device, ids):
    client.write(f"""type: INSERT entity {{ table_entry {{ table_id: {ids.forward}
        match {{ field_id: 1 exact {{ value: "\\x00\\xaa" }} }}
        action {{ action {{ action_id: {ids.set_port} params {{ param_id: 1 value: "\\x02" }} }} }} }} }}""",
                 f"""type: MODIFY entity {{ counter_entry {{ counter_id: {ids.port_counter}
        index {{ index: 3 }} data {{ packet_count: 9 byte_count: 900 }} }} }}""")
    old = device.pipeline
    client.set_pipeline(p4info, program_source, action=Action.RECONCILE_AND_COMMIT)
    assert device.pipeline is not old
    got = client.read(f"table_entry {{ table_id: {ids.forward} }}",
                      f"counter_entry {{ counter_id: {ids.port_counter} index {{ index: 3 }} }}")
    assert got == [msg(P.Entity, f"""table_entry {{ table_id: {ids.forward}
        match {{ field_id: 1 exact {{ value: "\\xaa" }} }}
        action {{ action {{ action_id: {ids.set_port} params {{ param_id: 1 value: "\\x02" }} }} }} }}"""),
                   msg(P.Entity, f"""counter_entry {{ counter_id: {ids.port_counter} index {{ index: 3 }}
        data {{ packet_count: 9 byte_count: 900 }} }}""")]
    # a plain commit starts empty
    client.set_pipeline(p4info, program_source)
    assert client.read(f"table_entry {{ table_id: {ids.forward} }}") == []


def _archive(kind: str, files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    if kind == "zip":
        with zipfile.ZipFile(buf, "w") as zf:
            for n, data in files.items():
                zf.writestr(n, data)
    else:
        with tarfile.open(fileobj=buf, mode="w:gz") as tf:
            for n, data in files.items():
                ti = tarfile.TarInfo(n)
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


@pytest.mark.parametrize("kind", ["tar", "zip"])
@pytest.mark.parametrize("main_marker", [True, False])
def test_archive_with_includes(make_client, p4info, program_source, device, kind, main_marker):
    main = program_source.replace(b"#define CPU_PORT 510", b'#include "defs/cpu.p4"')
    files = {"prog/switch.p4": main, "prog/defs/cpu.p4": EXTRA_HEADER,
             "prog/notes.p4": b"// not the main file\n"}
    if main_marker:
        files["MAIN"] = b"prog/switch.p4\n"
    c = make_client(election_id=1)
    c.set_pipeline(p4info, _archive(kind, files))
    assert device.pipeline is not None
    assert device.pipeline.switch.program.tables["MyIngress.forward"].size == 4


def test_archive_without_main_file(make_client, p4info, program_source):
    c = make_client(election_id=1)
    blob = _archive("zip", {"a.p4": program_source, "b.p4": program_source})
    e = _rpc_error(c.set_pipeline, p4info, blob)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "cannot tell the main file" in e.details() and "a.p4" in e.details()


def test_archive_member_escaping(make_client, p4info, program_source):
    c = make_client(election_id=1)
    e = _rpc_error(c.set_pipeline, p4info, _archive("tar", {"../evil.p4": program_source}))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "escapes" in e.details()


def test_p4info_mismatch_names_first_difference(make_client, p4info, program_source, ids, device):
    c = make_client(election_id=1)
    bad = type(p4info)()
    bad.CopyFrom(p4info)
    bad.tables[0].preamble.id += 1
    e = _rpc_error(c.set_pipeline, bad, program_source)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.details() == (f"P4Info does not match the P4 program: table 'MyIngress.forward' has id "
                           f"{ids.forward:#x} in the program; the P4Info gives it id {ids.forward + 1:#x}")
    bad.CopyFrom(p4info)
    bad.actions[1].params.add(id=9, name="extra", bitwidth=8)
    e = _rpc_error(c.set_pipeline, bad, program_source)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "parameters differ" in e.details()
    assert device.pipeline is None


def test_bad_configs(make_client, p4info, program_source, device):
    c = make_client(election_id=1)
    cases = {
        b"": (grpc.StatusCode.INVALID_ARGUMENT, "p4_device_config is empty"),
        b'{"program": "x.p4", "__meta__": {}}': (grpc.StatusCode.UNIMPLEMENTED, "BMv2 JSON"),
        b"\xff\xfe\x00garbage": (grpc.StatusCode.INVALID_ARGUMENT, "not UTF-8"),
        program_source.replace(b"table acl", b"table acl table"): (grpc.StatusCode.INVALID_ARGUMENT,
                                                                   "does not compile"),
    }
    for blob, (code, text) in cases.items():
        e = _rpc_error(c.set_pipeline, p4info, blob)
        assert e.code() == code and text in e.details(), (blob[:30], e.details())
    e = _rpc_error(c.set_pipeline, type(p4info)(), program_source)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "p4info is missing" in e.details()
    e = _rpc_error(c.set_pipeline, p4info, program_source, Action.UNSPECIFIED)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert device.pipeline is None
    # the server is still fine after all that
    c.set_pipeline(p4info, program_source)
    assert device.pipeline is not None


def test_wrong_device_id_and_roles(make_client, p4info, program_source):
    c = make_client(election_id=1)
    c.set_pipeline(p4info, program_source)
    e = _rpc_error(c.stub.GetForwardingPipelineConfig, P.GetForwardingPipelineConfigRequest(device_id=7))
    assert e.code() == grpc.StatusCode.NOT_FOUND and "device id 7" in e.details()
    # writes for another device: PERMISSION_DENIED, as PI answers (nobody is its primary)
    req = P.WriteRequest(device_id=7)
    req.election_id.low = 1
    e = _rpc_error(c.stub.Write, req)
    assert e.code() == grpc.StatusCode.PERMISSION_DENIED and "device id 7" in e.details()
    sreq = P.SetForwardingPipelineConfigRequest(device_id=7, action=Action.VERIFY_AND_COMMIT)
    sreq.election_id.low = 1
    e = _rpc_error(c.stub.SetForwardingPipelineConfig, sreq)
    assert e.code() == grpc.StatusCode.PERMISSION_DENIED and "device id 7" in e.details()
    req = P.WriteRequest(device_id=DEVICE_ID, role="sdn")
    req.election_id.low = 1
    e = _rpc_error(c.stub.Write, req)
    assert e.code() == grpc.StatusCode.UNIMPLEMENTED and "roles" in e.details()


def test_reconcile_that_cannot_keep_state_changes_nothing(client, program_source, device, ids):
    from softswitch.p4info import build_p4info
    from softswitch.targets.python.switch import Switch

    for mac in ("\\x01", "\\x02"):
        client.write(f"""type: INSERT entity {{ table_entry {{ table_id: {ids.forward}
            match {{ field_id: 1 exact {{ value: "{mac}" }} }} action {{ action {{ action_id: {ids.drop} }} }} }} }}""")
    smaller = program_source.replace(b"size = 4;", b"size = 1;")
    info = build_p4info(Switch.from_source(smaller.decode()).program.checked)
    old = device.pipeline
    e = _rpc_error(client.set_pipeline, info, smaller, Action.RECONCILE_AND_COMMIT)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "reconcile: cannot keep state" in e.details() and "full" in e.details()
    assert device.pipeline is old
    assert len(client.read(f"table_entry {{ table_id: {ids.forward} }}")) == 2
    # without reconcile the smaller program is accepted
    client.set_pipeline(info, smaller)
    assert device.pipeline.switch.program.tables["MyIngress.forward"].size == 1


def test_unix_socket_address(tmp_path, p4info, program_source):
    from p4rt_helpers import Client

    from softswitch.p4runtime import serve
    from softswitch.targets.python.local_device import LocalDevice

    dev = LocalDevice(device_id=DEVICE_ID)
    with serve(dev, f"unix:{tmp_path}/p4rt.sock") as h:
        assert h.port is None and h.address == f"unix:{tmp_path}/p4rt.sock"
        c = Client(h.address, election_id=1)
        try:
            c.set_pipeline(p4info, program_source)
        finally:
            c.close()
    assert dev.pipeline is not None


def test_address_in_use_is_a_clear_error(server):
    from softswitch.p4runtime import P4RuntimeError, serve
    from softswitch.targets.python.local_device import LocalDevice

    with pytest.raises(P4RuntimeError) as ei:
        serve(LocalDevice(), server.address)
    assert ei.value.code == grpc.StatusCode.UNAVAILABLE and server.address in ei.value.message
