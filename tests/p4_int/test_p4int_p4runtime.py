"""The control-plane contract of p4/README.md over P4Runtime, with bare p4runtime
protobufs against a softswitch daemon: the program goes in as a source archive, then
table entries (LPM, ternary with priority, keyless default actions), a clone session,
a digest subscription, register and counter reads. Packets come in as PacketOut on
the CPU port, which the program routes like any other port."""
from __future__ import annotations

import io
import queue
import socket
import tarfile
import threading
import time
from collections.abc import Iterator

import grpc
import pytest
from p4.config.v1 import p4info_pb2 as P4I
from p4.v1 import p4runtime_pb2 as P
from p4.v1 import p4runtime_pb2_grpc as PG

from tests.helpers.p4int import PROGRAM, roce_frame, with_link_seq

DEVICE_ID = 0


def source_archive() -> bytes:
    """p4/int_rocev2.p4 and p4/include/ as a tar.gz device config (MAIN names the program)."""
    buf = io.BytesIO()
    p4dir = PROGRAM.parent
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        tf.add(PROGRAM, arcname=PROGRAM.name)
        for f in sorted((p4dir / "include").glob("*.p4")):
            tf.add(f, arcname=f"include/{f.name}")
        main = PROGRAM.name.encode()
        info = tarfile.TarInfo("MAIN")
        info.size = len(main)
        tf.addfile(info, io.BytesIO(main))
    return buf.getvalue()


def bits(value: int, width: int) -> bytes:
    """P4Runtime canonical bytestring (no leading zero bytes, at least one byte)."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big") if value else b"\0"


class Names:
    """name -> id and parameter/field ids from the P4Info."""

    def __init__(self, info: P4I.P4Info) -> None:
        self.info = info
        self.tables = {t.preamble.name: t for t in info.tables}
        self.actions = {a.preamble.name: a for a in info.actions}
        self.registers = {r.preamble.name: r for r in info.registers}
        self.counters = {c.preamble.name: c for c in info.counters}
        self.digests = {d.preamble.name: d for d in info.digests}

    def entry(self, table: str, action: str, params: dict[str, int], *,
              match: dict[str, P.FieldMatch] | None = None, priority: int = 0,
              default: bool = False) -> P.Update:
        t = self.tables[table]
        a = self.actions[action]
        u = P.Update(type=P.Update.MODIFY if default else P.Update.INSERT)
        te = u.entity.table_entry
        te.table_id = t.preamble.id
        te.is_default_action = default
        te.priority = priority
        fields = {f.name: f.id for f in t.match_fields}
        for name, fm in (match or {}).items():
            fm.field_id = fields[name]
            te.match.append(fm)
        te.action.action.action_id = a.preamble.id
        for p in a.params:
            te.action.action.params.add(param_id=p.id, value=bits(params[p.name], p.bitwidth))
        return u


class Client:
    """Primary P4Runtime client: one stream (arbitration, digests), unary Write/Read."""

    def __init__(self, address: str) -> None:
        self.channel = grpc.insecure_channel(address)
        self.stub = PG.P4RuntimeStub(self.channel)
        self.requests: queue.Queue[P.StreamMessageRequest | None] = queue.Queue()
        self.responses: queue.Queue[P.StreamMessageResponse] = queue.Queue()
        arb = P.StreamMessageRequest()
        arb.arbitration.device_id = DEVICE_ID
        arb.arbitration.election_id.low = 1
        self.requests.put(arb)
        self.stream = self.stub.StreamChannel(self._requests())
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        first = self.responses.get(timeout=10)
        assert first.arbitration.status.code == 0, first

    def _requests(self) -> Iterator[P.StreamMessageRequest]:
        while (r := self.requests.get()) is not None:
            yield r

    def _read(self) -> None:
        try:
            for resp in self.stream:
                self.responses.put(resp)
        except grpc.RpcError:
            pass

    def set_pipeline(self, info: P4I.P4Info, config: bytes) -> None:
        req = P.SetForwardingPipelineConfigRequest(
            device_id=DEVICE_ID, action=P.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        req.election_id.low = 1
        req.config.p4info.CopyFrom(info)
        req.config.p4_device_config = config
        self.stub.SetForwardingPipelineConfig(req, timeout=60)

    def write(self, updates: list[P.Update]) -> None:
        req = P.WriteRequest(device_id=DEVICE_ID, updates=updates)
        req.election_id.low = 1
        self.stub.Write(req, timeout=10)

    def read(self, entity: P.Entity) -> list[P.Entity]:
        out = []
        for resp in self.stub.Read(P.ReadRequest(device_id=DEVICE_ID, entities=[entity]),
                                   timeout=10):
            out.extend(resp.entities)
        return out

    def packet_out(self, payload: bytes) -> None:
        r = P.StreamMessageRequest()
        r.packet.payload = payload
        self.requests.put(r)

    def close(self) -> None:
        self.requests.put(None)
        self.channel.close()


@pytest.fixture()
def p4rt() -> Iterator[tuple[Client, Names]]:
    from softswitch.p4info import build_p4info
    from softswitch.switchd import SwitchOptions
    from softswitch.targets.python.daemon import Switchd
    from softswitch.targets.python.switch import Switch
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sd = Switchd(SwitchOptions(program=None, interfaces={},
                               grpc_server_addr=f"127.0.0.1:{port}", name="p4int"))
    sd.start()
    client = None
    try:
        client = Client(f"127.0.0.1:{port}")
        info = build_p4info(Switch.from_file(PROGRAM).program.checked)
        client.set_pipeline(info, source_archive())
        yield client, Names(info)
    finally:
        if client is not None:
            client.close()
        sd.close()


def test_contract_over_p4runtime(p4rt):
    client, n = p4rt
    ternary = P.FieldMatch()
    ternary.ternary.value = bits(4791, 16)
    ternary.ternary.mask = bits(0xFFFF, 16)
    lpm = P.FieldMatch()
    lpm.lpm.value = bytes([10, 0, 2, 0])
    lpm.lpm.prefix_len = 24
    exact = P.FieldMatch()
    exact.exact.value = bits(2, 9)
    client.write([
        n.entry("SwitchIngress.ipv4_lpm", "SwitchIngress.ipv4_forward",
                {"port": 2, "src_mac": 0x02AA00000001, "dst_mac": 0x020000000201},
                match={"dst_addr": lpm}),
        n.entry("SwitchIngress.int_watchlist", "SwitchIngress.int_source",
                {"instruction_bitmap": 0x9400, "ds_instruction": 0xE000, "max_hops": 8},
                match={"dst_port": ternary}, priority=10),
        n.entry("SwitchIngress.int_sink", "SwitchIngress.sink_host", {}, match={"egress_port": exact}),
        n.entry("SwitchEgress.switch_config", "SwitchEgress.set_switch_config",
                {"node_id": 7}, default=True),
        n.entry("SwitchEgress.report_config", "SwitchEgress.set_report_config",
                {"switch_mac": 1, "collector_mac": 2, "switch_ip": 3, "collector_ip": 4,
                 "collector_port": 32766, "payload_bytes": 12, "hw_id": 1}, default=True),
    ])
    clone = P.Update(type=P.Update.INSERT)
    cs = clone.entity.packet_replication_engine_entry.clone_session_entry
    cs.session_id = 500
    cs.replicas.add(egress_port=3, instance=0)
    client.write([clone])
    digest = P.Update(type=P.Update.INSERT)
    digest.entity.digest_entry.digest_id = n.digests["link_loss_digest_t"].preamble.id
    digest.entity.digest_entry.config.max_list_size = 1
    client.write([digest])

    # Read back: two entries, the keyless defaults, the clone session.
    e = P.Entity()
    e.table_entry.SetInParent()
    assert len(client.read(e)) == 3
    e = P.Entity()
    e.table_entry.table_id = n.tables["SwitchEgress.switch_config"].preamble.id
    e.table_entry.is_default_action = True
    (d,) = client.read(e)
    assert d.table_entry.action.action.params[0].value == bits(7, 32)

    # A frame on the CPU port that skips link sequence numbers 0..4: one loss event.
    client.packet_out(with_link_seq(roce_frame(), 5))
    got = None
    deadline = time.monotonic() + 10
    while got is None and time.monotonic() < deadline:
        resp = client.responses.get(timeout=10)
        if resp.HasField("digest"):
            got = resp.digest
    assert got is not None and got.digest_id == n.digests["link_loss_digest_t"].preamble.id
    (member,) = got.data
    port, expected, received = (int.from_bytes(m.bitstring, "big") for m in member.struct.members)
    assert (expected, received) == (0, 5)

    def register(name: str, index: int) -> int:
        e = P.Entity()
        e.register_entry.register_id = n.registers[name].preamble.id
        e.register_entry.index.index = index
        (r,) = client.read(e)
        return int.from_bytes(r.register_entry.data.bitstring, "big")

    def counter(name: str, index: int) -> int:
        e = P.Entity()
        e.counter_entry.counter_id = n.counters[name].preamble.id
        e.counter_entry.index.index = index
        (c,) = client.read(e)
        return c.counter_entry.data.packet_count

    assert register("SwitchIngress.link_lost_packets", port) == 5
    assert register("SwitchIngress.link_loss_events", port) == 1
    assert register("SwitchIngress.link_rx_expected", port) == 6
    assert counter("int_events", 1) == 1           # source insert
    assert counter("int_events", 2) == 1           # transit push
    assert counter("SwitchIngress.ingress_port_counter", port) == 1
