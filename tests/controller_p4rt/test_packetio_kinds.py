"""Against a real server running the softswitch P4Runtime test program: every match
kind (exact, LPM, ternary, range, optional) written, read back and reconciled to a
no-op, and packet-in / packet-out with named metadata."""
from __future__ import annotations

import pytest
from ctl_p4rt_helpers import ROOT, Servers

from controller.p4rt import (
    DesiredState,
    ManagedSwitch,
    SchemaError,
    TableEntry,
    decode_packet_in,
    encode_packet_out,
    format_entry,
    load_pipeline,
)
from tests.helpers.waiting import wait_for

PROGRAM = ROOT / "tests" / "softswitch_p4rt" / "p4" / "p4rt_test.p4"


@pytest.fixture(scope="module")
def test_pipeline():  # type: ignore[no-untyped-def]
    if not PROGRAM.exists():
        pytest.skip(f"{PROGRAM.name} (the softswitch P4Runtime test program) is not in this tree")
    return load_pipeline(target="softswitch", program=PROGRAM)


ENTRIES = [
    TableEntry.make("forward", {"hdr.ethernet.dstAddr": "00:00:00:00:00:aa"}, "to_cpu"),
    TableEntry.make("forward", {"hdr.ethernet.dstAddr": "00:00:00:00:00:bb"}, "set_port", {"port": 2}),
    TableEntry.make("routes", {"hdr.ipv4.dstAddr": "10.1.0.0/16"}, "route", {"port": 3}),
    TableEntry.make("acl", {"hdr.ethernet.etherType": (0x0800, 0xFFFF), "hdr.ipv4.protocol": (6, 17),
                            "hdr.ipv4.srcAddr": "10.0.0.1"}, "drop", priority=5),
    TableEntry.make("acl", {"hdr.ipv4.protocol": "1..1"}, "to_cpu", priority=3),
]


def test_every_match_kind_round_trips(servers: Servers, test_pipeline) -> None:  # type: ignore[no-untyped-def]
    sw = ManagedSwitch(name="t1", address=servers.start(1), device_id=1, pipeline=test_pipeline,
                       desired=DesiredState(entries=list(ENTRIES)))
    sw.connect()
    try:
        first = sw.sync()
        assert first.inserted == len(ENTRIES)
        again = sw.sync()
        assert (again.inserted, again.modified, again.deleted) == (0, 0, 0)
        held = {format_entry(sw.schema, te) for te in sw.client.read_table_entries()}  # type: ignore[union-attr]
        assert ("MyIngress.acl hdr.ethernet.etherType=2048&&&0xffff hdr.ipv4.protocol=6..17 "
                "hdr.ipv4.srcAddr=10.0.0.1 priority=5 -> MyIngress.drop()") in held
        assert "MyIngress.routes hdr.ipv4.dstAddr=10.1.0.0/16 -> MyIngress.route(port=3)" in held
    finally:
        sw.close()


def test_packet_in_and_out(servers: Servers, test_pipeline) -> None:  # type: ignore[no-untyped-def]
    addr = servers.start(1)
    dev = servers.devices[1]
    sw = ManagedSwitch(name="t1", address=addr, device_id=1, pipeline=test_pipeline,
                       desired=DesiredState(entries=list(ENTRIES[:2])))
    sw.connect()
    try:
        sw.sync()
        c, schema = sw.client, sw.schema
        assert c is not None
        frame = bytes.fromhex("0000000000aa" "000000000011" "88b5") + b"hello, controller"
        dev.inject(3, frame)  # type: ignore[attr-defined]
        assert wait_for(lambda: not c.packet_ins.empty())
        pin = decode_packet_in(schema, c.packet_ins.get_nowait())
        assert pin.metadata == {"ingress_port": 3, "_pad": 0} and pin.payload == frame
        c.packet_out(b"\x00" * 12 + b"\x88\xb5out", encode_packet_out(schema, {"egress_port": 2}))
        assert wait_for(lambda: any(p == 2 for p, _ in dev.transmitted))  # type: ignore[attr-defined]
        with pytest.raises(SchemaError, match="packet_out has no metadata 'egress_prt' \\(did you mean 'egress_port'\\?\\)"):
            encode_packet_out(schema, {"egress_prt": 2})
    finally:
        sw.close()
