"""Packet-in and packet-out between the controller and real BMv2: the CPU port (510)
carries them over the P4Runtime StreamChannel, with the program's @controller_header
metadata by name.  The data ports are pcap files (``--use-files``), so no root is
needed: a frame for the controller goes into port 3, the packet-out leaves port 2."""
from __future__ import annotations

import queue
from pathlib import Path

import pytest
from bmv2_helpers import ROOT, Bmv2Process, require_tools
from bmv2_stf import PcapFilePorts

pytestmark = [pytest.mark.bmv2]

PROGRAM = ROOT / "tests" / "bmv2" / "p4" / "packet_io.p4"


def test_packet_in_and_out_through_the_cpu_port(tmp_path: Path) -> None:
    require_tools()
    from controller.p4rt import (
        DesiredState,
        ManagedSwitch,
        TableEntry,
        decode_packet_in,
        encode_packet_out,
        load_pipeline,
    )

    pipeline = load_pipeline(target="bmv2", program=PROGRAM)
    ports = PcapFilePorts(tmp_path, [2, 3], {3: 1})
    bmv2 = Bmv2Process("s1", None, 1, ports.interfaces(), tmp_path, use_files=True)
    to_cpu = TableEntry.make("forward", {"hdr.ethernet.dstAddr": "00:00:00:00:00:aa"}, "to_cpu")
    sw = None
    try:
        bmv2.start()
        sw = ManagedSwitch(name="s1", address=bmv2.grpc_addr, device_id=1, pipeline=pipeline,
                           desired=DesiredState(entries=[to_cpu]))
        sw.connect()
        assert sw.sync().inserted == 1
        c, schema = sw.client, sw.schema
        assert c is not None
        frame = bytes.fromhex("0000000000aa" "000000000011" "88b5") + b"hello, controller"
        ports.send(3, frame)
        pin = decode_packet_in(schema, c.packet_ins.get(timeout=10))
        assert pin.metadata == {"ingress_port": 3, "_pad": 0} and pin.payload == frame
        out = bytes.fromhex("0000000000bb" "000000000022" "88b5") + b"from the controller"
        c.packet_out(out, encode_packet_out(schema, {"egress_port": 2}))
        got = ports.received()
        assert got[2] == [out] and got[3] == []
        with pytest.raises(queue.Empty):
            c.packet_ins.get_nowait()
    finally:
        if sw is not None:
            sw.close()
        bmv2.stop()
        ports.close()
