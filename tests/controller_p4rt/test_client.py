"""The client against real gRPC servers (softswitch's P4Runtime server, LocalDevice):
several switches at once, reconciliation, restart of a switch, arbitration, error
wrapping, counters/registers/digests."""
from __future__ import annotations

import struct
import threading

import pytest
from ctl_p4rt_helpers import Servers
from p4.v1 import p4runtime_pb2 as P

from controller.p4rt import (
    ArbitrationError,
    Backoff,
    CloneSession,
    ConnectError,
    DesiredState,
    Fleet,
    ManagedSwitch,
    Phase,
    PipelineConfig,
    PipelineError,
    Progress,
    Schema,
    SwitchClient,
    TableEntry,
    WriteError,
    describe_update,
    entry_to_proto,
    format_entry,
    load_pipeline,
)
from tests.helpers.waiting import wait_for

LPM = "SwitchIngress.ipv4_lpm"
FWD = "SwitchIngress.ipv4_forward"


def route(prefix: str, port: int) -> TableEntry:
    return TableEntry.make(LPM, {"dst_addr": prefix}, FWD,
                           {"port": port, "src_mac": "02:00:00:00:00:01", "dst_mac": "00:00:0a:00:01:01"})


def desired(node_id: int, n_routes: int = 3) -> DesiredState:
    return DesiredState(entries=[
        TableEntry.make("switch_config", action="set_switch_config", params={"node_id": node_id},
                        is_default=True),
        *[route(f"10.0.{i}.0/24", i) for i in range(1, n_routes + 1)],
        TableEntry.make("int_watchlist", {"dst_port": (4791, 0xFFFF)}, "int_source",
                        {"instruction_bitmap": 0x9400, "ds_instruction": 0xE000, "max_hops": 8}, priority=10),
    ], clone_sessions=[CloneSession(session_id=500, replicas=((5, 1),))])


def held(sw: ManagedSwitch) -> set[str]:
    assert sw.client is not None
    schema = sw.schema
    return {format_entry(schema, te) for te in sw.client.read_table_entries()}


def test_fleet_programs_several_switches(servers: Servers, pipeline: PipelineConfig) -> None:
    sws = [ManagedSwitch(name=f"s{i}", address=servers.start(i), device_id=i, pipeline=pipeline,
                         desired=desired(i, n_routes=i + 1)) for i in (1, 2, 3)]
    events: list[Progress] = []
    lock = threading.Lock()

    def note(p: Progress) -> None:
        with lock:
            events.append(p)

    with Fleet(sws) as fleet:
        result = fleet.bring_up(note)
        assert result.ok, result.failures
        for i, sw in enumerate(sws, start=1):
            rep = result.reports[sw.name]
            assert rep.pipeline_pushed and rep.inserted == (i + 1) + 1 + 1  # routes, watchlist, clone
            assert len(held(sw)) == i + 2
            default = sw.client.read_default_entry(sw.schema.table("switch_config").id)  # type: ignore[union-attr]
            assert format_entry(sw.schema, default).endswith(f"set_switch_config(node_id={i})")
            assert len(sw.client.read_clone_sessions()) == 1  # type: ignore[union-attr]
        for sw in sws:
            phases = [e.phase for e in events if e.switch == sw.name]
            assert phases == [Phase.CONNECTING, Phase.SYNCING, Phase.READY]
        # a second sync writes nothing, the pipeline is kept
        again = fleet.sync_all()
        assert all(not r.pipeline_pushed and r.inserted == r.modified == r.deleted == 0
                   for r in again.reports.values())


def test_reconcile_removes_stale_and_fixes_changed(servers: Servers, pipeline: PipelineConfig,
                                                   schema: Schema) -> None:
    sw = ManagedSwitch(name="s1", address=servers.start(1), device_id=1, pipeline=pipeline, desired=desired(1))
    sw.connect()
    try:
        sw.sync()
        stale = entry_to_proto(schema, route("10.9.9.0/24", 9))
        changed = entry_to_proto(schema, route("10.0.1.0/24", 7))
        sw.client.write([P.Update(type=P.Update.INSERT, entity=P.Entity(table_entry=stale)),  # type: ignore[union-attr]
                         P.Update(type=P.Update.MODIFY, entity=P.Entity(table_entry=changed))])
        rep = sw.sync()
        assert (rep.inserted, rep.modified, rep.deleted) == (0, 1, 1)
        assert held(sw) == {format_entry(schema, entry_to_proto(schema, e))
                            for e in desired(1).entries if not e.is_default}
    finally:
        sw.close()


def test_restarted_switch_gets_its_state_back(servers: Servers, pipeline: PipelineConfig) -> None:
    restored = threading.Event()
    sw = ManagedSwitch(name="s1", address=servers.start(1), device_id=1, pipeline=pipeline, desired=desired(1),
                       backoff=Backoff(first_s=0.05, max_s=0.2),
                       on_synced=lambda s, r: restored.set() if s.syncs >= 2 else None)
    sw.connect()
    try:
        sw.sync()
        before = held(sw)
        servers.restart(1)   # a new, empty device on the same address
        assert restored.wait(15), sw.client.stats.stream_errors  # type: ignore[union-attr]
        assert sw.last_sync is not None and sw.last_sync.pipeline_pushed
        assert sw.client.stats.disconnects >= 1 and sw.client.is_primary  # type: ignore[union-attr]
        assert held(sw) == before
    finally:
        sw.close()


def test_arbitration_between_two_controllers(servers: Servers, pipeline: PipelineConfig, schema: Schema) -> None:
    addr = servers.start(1)
    low = SwitchClient(name="s1", address=addr, device_id=1, election_id=1)
    high = SwitchClient(name="s1", address=addr, device_id=1, election_id=10)
    again = SwitchClient(name="s1", address=addr, device_id=1, election_id=5, timeout_s=2)
    try:
        low.connect()
        assert low.is_primary
        low.set_pipeline(pipeline.p4info, pipeline.device_config)
        high.connect()
        assert high.is_primary
        assert wait_for(lambda: not low.is_primary)
        upd = P.Update(type=P.Update.INSERT, entity=P.Entity(table_entry=entry_to_proto(schema, route("10.0.1.0/24", 1))))
        with pytest.raises((ArbitrationError, WriteError), match="s1"):
            low.write([upd])
        with pytest.raises(ArbitrationError, match="not primary with election id 5; the primary holds election id 10"):
            again.connect()
        high.write([upd])    # the primary writes; the backup still reads
        assert len(low.read_table_entries()) == 1
        high.close()         # the primary leaves: nobody is primary ...
        assert wait_for(lambda: low.role_state == "no-primary")
        late = SwitchClient(name="s1", address=addr, device_id=1, election_id=3)
        late.connect()       # ... so a client connecting now claims the highest id seen
        assert late.is_primary and late.election_id == 10
        assert wait_for(lambda: low.role_state == "backup")  # told asynchronously
        late.close()
    finally:
        for c in (low, high, again):
            c.close()


def test_write_errors_name_each_refused_update(servers: Servers, pipeline: PipelineConfig, schema: Schema) -> None:
    c = SwitchClient(name="leaf7", address=servers.start(1), device_id=1)
    try:
        c.connect()
        c.set_pipeline(pipeline.p4info, pipeline.device_config)
        good = entry_to_proto(schema, route("10.0.1.0/24", 1))
        other = entry_to_proto(schema, route("10.0.2.0/24", 2))
        ins = [P.Update(type=P.Update.INSERT, entity=P.Entity(table_entry=te)) for te in (good, good, other)]
        with pytest.raises(WriteError) as ei:
            c.write(ins, describe=lambda u: describe_update(schema, u))
        err = ei.value
        assert err.switch == "leaf7" and [f.index for f in err.failures] == [1]
        assert err.failures[0].code == "ALREADY_EXISTS"
        msg = str(err)
        assert msg.startswith("switch leaf7: write refused: 1 of 3 update(s) failed\n  update #1 INSERT")
        assert ("update #1 INSERT SwitchIngress.ipv4_lpm dst_addr=10.0.1.0/24 -> SwitchIngress.ipv4_forward("
                "port=1, src_mac=02:00:00:00:00:01, dst_mac=00:00:0a:00:01:01): ALREADY_EXISTS") in msg
        assert len(c.read_table_entries()) == 2   # the good ones went in
    finally:
        c.close()


def test_pipeline_rejected_and_unreachable(servers: Servers, pipeline: PipelineConfig, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from ctl_p4rt_helpers import ROOT
    other = load_pipeline(target="softswitch", program=ROOT / "p4" / "examples" / "ipv4_forward.p4") \
        if (ROOT / "p4" / "examples" / "ipv4_forward.p4").exists() else None
    if other is None:
        pytest.skip("no second example program to mismatch with")
    c = SwitchClient(name="s1", address=servers.start(1), device_id=1)
    try:
        c.connect()
        with pytest.raises(PipelineError, match="switch s1: pipeline rejected: INVALID_ARGUMENT"):
            c.set_pipeline(other.p4info, pipeline.device_config)   # P4Info of another program
        bad = tmp_path / "bad.p4"
        bad.write_text("this is not P4\n")
        from controller.p4rt.pipeline import softswitch_device_config
        with pytest.raises(PipelineError, match="does not compile"):
            c.set_pipeline(pipeline.p4info, softswitch_device_config(bad))
    finally:
        c.close()
    addr = servers.start(2)
    servers.stop(2)
    dead = SwitchClient(name="s2", address=addr, device_id=2, timeout_s=0.3)
    with pytest.raises(ConnectError, match=f"switch s2: unreachable at {addr} \\(no gRPC connection within 0.3 s\\)"):
        dead.connect()


def test_wrong_device_id_is_a_clear_error(servers: Servers) -> None:
    c = SwitchClient(name="s1", address=servers.start(1), device_id=99, timeout_s=2)
    with pytest.raises(ConnectError, match="switch s1 at .*stream refused"):
        c.connect()


def _frame_with_link_seq(seq: int) -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    inner = bytes(IP(src="10.0.2.1", dst="10.0.1.1", ttl=64) / UDP(sport=1234, dport=5000) / (b"x" * 20))
    eth = bytes(Ether(dst="02:00:00:00:00:01", src="02:00:00:00:00:02", type=0x88B5))[:14]
    return eth + struct.pack("!IH", seq, 0x0800) + inner


def test_registers_counters_and_loss_digests(servers: Servers, pipeline: PipelineConfig, schema: Schema) -> None:
    addr = servers.start(1)
    dev = servers.devices[1]
    sw = ManagedSwitch(name="s1", address=addr, device_id=1, pipeline=pipeline, desired=desired(1))
    sw.connect()
    try:
        sw.sync()
        c = sw.client
        assert c is not None
        c.enable_digest(schema.digest("link_loss_digest_t").id)
        c.enable_digest(schema.digest("link_loss_digest_t").id)  # again: modify, no error
        for seq in (0, 1, 5):   # packets 2, 3, 4 lost on the link into port 5
            dev.inject(5, _frame_with_link_seq(seq))  # type: ignore[attr-defined]
        lost = c.read_register(schema.register("SwitchIngress.link_lost_packets").id)
        assert lost[5] == 3 and lost.get(4, 0) == 0
        rx = c.read_counter(schema.counter("SwitchIngress.ingress_port_counter").id, 5)
        assert rx[5][0] == 3
        assert wait_for(lambda: not c.digests.empty())
        d = c.digests.get_nowait()
        vals = [int.from_bytes(m.bitstring, "big") for m in d.data[0].struct.members]  # type: ignore[attr-defined]
        assert vals == [5, 2, 5]
        reg = schema.register("SwitchIngress.link_rx_expected")
        c.write_register(reg.id, 5, 0, 32)
        assert c.read_register(reg.id, 5) == {5: 0}
    finally:
        sw.close()


def _pki(d) -> None:  # type: ignore[no-untyped-def]
    """A throwaway CA, a server certificate for 'localhost' and a client certificate."""
    import subprocess

    def ossl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)
    ossl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=tct-ca",
         "-keyout", str(d / "ca.key"), "-out", str(d / "ca.pem"))
    (d / "ext.cnf").write_text("subjectAltName=DNS:localhost\n")
    for who in ("server", "client"):
        ossl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={who}",
             "-keyout", str(d / f"{who}.key"), "-out", str(d / f"{who}.csr"))
        ossl("x509", "-req", "-in", str(d / f"{who}.csr"), "-CA", str(d / "ca.pem"), "-CAkey", str(d / "ca.key"),
             "-CAcreateserial", "-days", "1", "-extfile", str(d / "ext.cnf"), "-out", str(d / f"{who}.pem"))


def test_tls_with_client_certificates(pipeline: PipelineConfig, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import shutil

    from controller.p4rt import TlsOptions
    from softswitch.p4runtime import TlsConfig, serve
    from softswitch.targets.python.local_device import LocalDevice
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (needed to make test certificates)")
    _pki(tmp_path)
    handle = serve(LocalDevice(device_id=1), "127.0.0.1:0", tls=TlsConfig.from_files(
        tmp_path / "server.pem", tmp_path / "server.key", tmp_path / "ca.pem"))
    try:
        tls = TlsOptions.from_files(str(tmp_path / "ca.pem"), str(tmp_path / "client.pem"),
                                    str(tmp_path / "client.key"), server_name="localhost")
        sw = ManagedSwitch(name="s1", address=handle.address, device_id=1, pipeline=pipeline,
                           desired=desired(1), tls=tls)
        sw.connect()
        try:
            assert sw.sync().inserted == 5
        finally:
            sw.close()
        no_cert = SwitchClient(name="s1", address=handle.address, device_id=1, timeout_s=1,
                               tls=TlsOptions(ca_pem=tls.ca_pem, server_name="localhost"))
        with pytest.raises(ConnectError, match="unreachable at .* \\(TLS: check the CA"):
            no_cert.connect()
        plain = SwitchClient(name="s1", address=handle.address, device_id=1, timeout_s=1)
        with pytest.raises(ConnectError, match="answers with TLS, and no certificates"):
            plain.connect()   # says what is wrong, not only that nothing answered
        with pytest.raises(ConnectError, match="give both the client certificate and its key"):
            TlsOptions.from_files(str(tmp_path / "ca.pem"), str(tmp_path / "client.pem"))
    finally:
        handle.stop()
