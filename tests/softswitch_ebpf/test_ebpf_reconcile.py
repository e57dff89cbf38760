"""RECONCILE_AND_COMMIT on an eBPF device keeps what the kernel counted and stored:
indexed counters and registers (read from the old program's maps, written into the
new one's), direct counters and meter configurations, through the real P4Runtime
server."""
from __future__ import annotations

import pytest
from ebpf_helpers import ROOT

from softswitch.externs.stateful import MeterConfig
from softswitch.tables import Exact

pytestmark = [pytest.mark.bpf, pytest.mark.root]
ACL = ROOT / "tests" / "softswitch_ebpf" / "acl.p4"
METERS = ROOT / "tests" / "softswitch_ebpf" / "meters.p4"


def _udp(dport: int) -> bytes:
    ip = bytes([0x45, 0, 0, 28, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2])
    return bytes(12) + b"\x08\x00" + ip + (1234).to_bytes(2, "big") + dport.to_bytes(2, "big") + bytes(4)


def _serve(program, device_id: int):  # type: ignore[no-untyped-def]
    from p4.v1 import p4runtime_pb2 as P

    from controller.p4rt.client import SwitchClient
    from softswitch.frontend.load import load_program
    from softswitch.p4info import build_p4info
    from softswitch.p4runtime.server import serve
    from softswitch.targets.ebpf.daemon import EbpfDevice
    info = build_p4info(load_program(program))
    device = EbpfDevice(device_id=device_id, cpu_port=64, name=f"reconcile{device_id}")
    server = serve(device, "127.0.0.1:0")
    client = SwitchClient(name="r", address=server.address, device_id=device_id)
    client.connect()
    client.set_pipeline(info, program.read_bytes())

    def reconcile() -> None:
        old = device.pipeline.switch
        client.set_pipeline(info, program.read_bytes(),
                            action=P.SetForwardingPipelineConfigRequest.RECONCILE_AND_COMMIT)
        assert device.pipeline.switch is not old and device.pipeline.switch.target == "ebpf"
        old.close()

    def stop() -> None:
        client.close()
        server.stop()
        if device.pipeline is not None:
            device.pipeline.switch.close()
    return device, reconcile, stop


def test_counters_and_registers_the_kernel_wrote_survive_a_reconcile() -> None:
    device, reconcile, stop = _serve(ACL, 11)
    try:
        sw = device.pipeline.switch
        for dport in (80, 443, 8080):
            sw.process(1, _udp(dport))
        sw.process(2, _udp(53))
        rt = sw.runtime
        before = ([rt.counter_read("I.port_count", i) for i in range(8)],
                  [rt.register_read("I.last_dport", i) for i in range(8)])
        assert before[0][6] == (3, 3 * 42) and before[1][1:3] == [8080, 53]
        reconcile()
        rt = device.pipeline.switch.runtime
        after = ([rt.counter_read("I.port_count", i) for i in range(8)],
                 [rt.register_read("I.last_dport", i) for i in range(8)])
        assert after == before
        device.pipeline.switch.process(1, _udp(22))    # the new program goes on from there
        assert rt.counter_read("I.port_count", 6) == (4, 4 * 42)
        assert rt.register_read("I.last_dport", 1) == 22
    finally:
        stop()


def test_direct_and_indexed_meter_state_survives_a_reconcile() -> None:
    device, reconcile, stop = _serve(METERS, 12)
    try:
        rt = device.pipeline.switch.runtime
        rt.meter_set("I.pkts", 1, MeterConfig(cir=0, cburst=1, pir=0, pburst=2))
        rt.table_add("I.classify", [Exact(5)], "I.forward", [2])
        rt.direct_meter_set("I.classify", [Exact(5)], MeterConfig(cir=0, cburst=0, pir=0, pburst=0))
        frame = bytes(12) + b"\x88\xb5" + bytes([1, 5, 9, 9, 9, 0, 9]) + bytes(20)
        device.pipeline.switch.process(1, frame)
        for _ in range(2):
            device.pipeline.switch.process(1, frame)
        reconcile()           # configurations kept; the buckets start full again
        rt = device.pipeline.switch.runtime
        assert rt.meter_get("I.pkts", 1) == MeterConfig(cir=0, cburst=1, pir=0, pburst=2)
        (port, out), = device.pipeline.switch.process(1, frame)
        assert (port, out[16], out[18]) == (2, 0, 2)     # pkts GREEN again; direct RED (burst 0)
    finally:
        stop()
