"""P4Runtime over mutual TLS end to end with real gRPC: certificates from
``python -m controller certs``, TLS per switch in the topology file, the running
controller programs every switch; a client without a certificate and a switch with a
certificate from another CA are refused; a second controller with a lower election
id cannot write and takes over when the primary goes away."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
import yaml
from p4.v1 import p4runtime_pb2 as P
from p4.v1 import p4runtime_pb2_grpc as PG

from controller.p4rt import ConnectError, Phase, SwitchClient, TlsOptions
from controller.runner import Controller, RunConfig
from softswitch.p4runtime import TlsConfig, serve
from softswitch.targets.python.local_device import LocalDevice

ROOT = Path(__file__).resolve().parents[2]


def _wait(cond, timeout_s: float = 20.0) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return bool(cond())


@pytest.fixture
def mtls_bed(tmp_path: Path):  # type: ignore[no-untyped-def]
    """dumbbell's switches as TLS servers that want client certificates from our CA."""
    certs = tmp_path / "certs"
    r = subprocess.run([sys.executable, "-m", "controller", "certs", "--switch", "s1=127.0.0.1",
                        "--switch", "s2=127.0.0.1", "--out", str(certs)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    assert (certs / "s1.key").stat().st_mode & 0o077 == 0
    data = yaml.safe_load((ROOT / "mininet_topos" / "topofiles" / "dumbbell.yaml").read_text())
    handles = {}
    for sw in data["switches"]:
        name = sw["name"]
        tls = TlsConfig.from_files(certs / f"{name}.pem", certs / f"{name}.key", certs / "ca.pem")
        handles[name] = serve(LocalDevice(device_id=sw["device_id"]), "127.0.0.1:0", tls=tls)
        sw["grpc_addr"] = handles[name].address
        sw["tls"] = {"ca": str(certs / "ca.pem"), "server_name": name}
    topo = tmp_path / "dumbbell-mtls.yaml"
    topo.write_text(yaml.safe_dump(data, sort_keys=False))
    try:
        yield topo, certs, handles
    finally:
        for h in handles.values():
            h.stop(grace_s=0)


def _cfg(topo: Path, certs: Path, out: Path, **kw: object) -> RunConfig:
    return RunConfig(topology=str(topo), out_dir=str(out), report_port=0, agent_port=0,
                     status_interval_s=0.2, connect_timeout_s=2.0,
                     tls_cert=str(certs / "controller.pem"), tls_key=str(certs / "controller.key"),
                     **kw)  # type: ignore[arg-type]


def test_controller_over_mutual_tls_and_failover(mtls_bed, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    topo, certs, handles = mtls_bed
    primary: Controller | None = Controller(cfg=_cfg(topo, certs, tmp_path / "a",
                                                     election_id=10)).start()
    standby = None
    try:
        assert all(st.phase is Phase.READY for st in primary.status.values()), primary.status
        s1 = primary.fleet.switches["s1"]
        assert s1.client is not None and s1.client.is_primary
        routes = len(s1.client.read_table_entries())
        assert routes > 0
        # a client without a certificate is refused by the switch
        ca = (certs / "ca.pem").read_bytes()
        bare = SwitchClient(name="s1", address=handles["s1"].address, device_id=1, timeout_s=1,
                            tls=TlsOptions(ca_pem=ca, server_name="s1"))
        with pytest.raises(ConnectError, match="TLS"):
            bare.connect()
        # a second controller with a lower election id: no switch is its to write
        standby = Controller(cfg=_cfg(topo, certs, tmp_path / "b", election_id=5)).start()
        assert all(st.phase is Phase.FAILED for st in standby.status.values())
        assert "election id 5" in standby.status["s1"].error
        ch = grpc.secure_channel(handles["s1"].address, grpc.ssl_channel_credentials(
            ca, (certs / "controller.key").read_bytes(), (certs / "controller.pem").read_bytes()),
            options=[("grpc.ssl_target_name_override", "s1")])
        req = P.WriteRequest(device_id=1)
        req.election_id.low = 5
        with pytest.raises(grpc.RpcError) as ei:
            PG.P4RuntimeStub(ch).Write(req, timeout=5)
        assert ei.value.code() is grpc.StatusCode.PERMISSION_DENIED
        ch.close()
        # the primary goes away: the standby takes every switch over and programs it
        primary.stop()
        primary = None
        assert _wait(lambda: all(st.phase is Phase.READY
                                 for st in standby.status.values())), standby.status  # type: ignore[union-attr]
        t1 = standby.fleet.switches["s1"]
        assert t1.client is not None and t1.client.is_primary and t1.client.election_id == 10
        assert len(t1.client.read_table_entries()) == routes
    finally:
        if primary is not None:
            primary.stop()
        if standby is not None:
            standby.stop()


def test_switch_with_a_certificate_from_another_ca_is_refused(mtls_bed, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    topo, certs, handles = mtls_bed
    rogue = tmp_path / "rogue"
    from common.auth.pki import make_pki
    make_pki(rogue, switches={"s1": ["127.0.0.1"]}, ca_name="another CA")
    addr = handles["s1"].address
    handles["s1"].stop(grace_s=0)
    handles["s1"] = serve(LocalDevice(device_id=1), addr, tls=TlsConfig.from_files(
        rogue / "s1.pem", rogue / "s1.key", certs / "ca.pem"))
    ctl = Controller(cfg=_cfg(topo, certs, tmp_path / "out")).start()
    try:
        assert ctl.status["s2"].phase is Phase.READY
        assert ctl.status["s1"].phase is Phase.FAILED
        assert "TLS: check the CA" in ctl.status["s1"].error
    finally:
        ctl.stop()
