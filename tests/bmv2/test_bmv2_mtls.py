"""BMv2 simple_switch_grpc serving P4Runtime over mutual TLS with the arguments the test
bed's Bmv2Switch gives it (``mininet_topos.switches.bmv2_tls_args``): the controller's
client with a certificate of the test bed's CA becomes primary; a client without a
certificate and one with a certificate of another CA are refused."""
from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest
from bmv2_helpers import require_tools

from common.auth.pki import make_pki
from common.processes import stop_process
from controller.p4rt import ConnectError, SwitchClient, TlsOptions
from controller.topology.model import SwitchTls
from mininet_topos.switches import bmv2_tls_args, wait_for_grpc

pytestmark = pytest.mark.bmv2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_bmv2_over_mutual_tls(tmp_path: Path) -> None:
    require_tools()
    certs, other = tmp_path / "certs", tmp_path / "other"
    make_pki(certs, switches={"s1": ["127.0.0.1"]})
    make_pki(other, switches={"s1": ["127.0.0.1"]}, ca_name="another CA")
    tls = SwitchTls(ca=str(certs / "ca.pem"), cert=str(certs / "s1.pem"),
                    key=str(certs / "s1.key"), server_name="s1")
    addr = f"127.0.0.1:{_free_port()}"
    argv = ["simple_switch_grpc", "--device-id", "1", "--log-level", "warn",
            "--thrift-port", str(_free_port()),
            "--notifications-addr", f"ipc://{tmp_path / 's1.notify.ipc'}", "--no-p4",
            "--", "--grpc-server-addr", addr, "--cpu-port", "510", *bmv2_tls_args(tls)]
    log = tmp_path / "s1.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for_grpc(addr, timeout_s=30, proc=proc, what="BMv2 s1", log=log, tls=True)
        ca = (certs / "ca.pem").read_bytes()
        good = TlsOptions.from_files(str(certs / "ca.pem"), str(certs / "controller.pem"),
                                     str(certs / "controller.key"), server_name="s1")
        with SwitchClient(name="s1", address=addr, device_id=1, timeout_s=10, tls=good) as c:
            c.connect()
            assert c.is_primary
        bare = SwitchClient(name="s1", address=addr, device_id=1, timeout_s=2,
                            tls=TlsOptions(ca_pem=ca, server_name="s1"))
        with pytest.raises(ConnectError, match="TLS"):
            bare.connect()
        stranger = SwitchClient(name="s1", address=addr, device_id=1, timeout_s=2,
                                tls=TlsOptions.from_files(
                                    str(certs / "ca.pem"), str(other / "controller.pem"),
                                    str(other / "controller.key"), server_name="s1"))
        with pytest.raises(ConnectError, match="TLS"):
            stranger.connect()
    finally:
        stop_process(proc)
    assert bmv2_tls_args(None) == [] and bmv2_tls_args(SwitchTls(ca=tls.ca)) == []
