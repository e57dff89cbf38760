"""The switch process serves P4Runtime over TLS (BMv2's --grpc-server-ssl options):
a client with a certificate from the given CA gets in, one without is refused."""
from __future__ import annotations

import subprocess
from pathlib import Path

import grpc
import pytest
from p4.v1 import p4runtime_pb2 as P
from p4.v1 import p4runtime_pb2_grpc as PG
from switchd_helpers import chain

pytestmark = [pytest.mark.root]


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def _pki(d: Path) -> None:
    """A throwaway CA, a server certificate for 'localhost' and a client certificate."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=tsd-ca",
             "-keyout", str(d / "ca.key"), "-out", str(d / "ca.pem"))
    for who in ("server", "client"):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={who}",
                 "-addext", "subjectAltName=DNS:localhost",
                 "-keyout", str(d / f"{who}.key"), "-out", str(d / f"{who}.csr"))
        (d / "ext.cnf").write_text("subjectAltName=DNS:localhost\n")
        _openssl("x509", "-req", "-in", str(d / f"{who}.csr"), "-CA", str(d / "ca.pem"),
                 "-CAkey", str(d / "ca.key"), "-CAcreateserial", "-days", "1",
                 "-extfile", str(d / "ext.cnf"), "-out", str(d / f"{who}.pem"))


def _capabilities(addr: str, creds: grpc.ChannelCredentials) -> str:
    opts = [("grpc.ssl_target_name_override", "localhost")]
    with grpc.secure_channel(addr, creds, options=opts) as ch:
        return PG.P4RuntimeStub(ch).Capabilities(P.CapabilitiesRequest(), timeout=5).p4runtime_api_version


def test_tls_with_client_certificates(tmp_path) -> None:
    _pki(tmp_path)
    with chain(tmp_path, 1) as c:
        s = c.switches[0]
        s.start(None, "--grpc-server-ssl", "--grpc-server-cert", str(tmp_path / "server.pem"),
                "--grpc-server-key", str(tmp_path / "server.key"),
                "--grpc-server-cacert", str(tmp_path / "ca.pem"))
        ca = (tmp_path / "ca.pem").read_bytes()
        good = grpc.ssl_channel_credentials(ca, (tmp_path / "client.key").read_bytes(),
                                            (tmp_path / "client.pem").read_bytes())
        assert _capabilities(s.grpc_addr, good)
        with pytest.raises(grpc.RpcError) as exc:
            _capabilities(s.grpc_addr, grpc.ssl_channel_credentials(ca))
        assert exc.value.code() == grpc.StatusCode.UNAVAILABLE
        s.proc.terminate()
        assert s.proc.wait(10) == 0
