"""TLS on the P4Runtime server: a throwaway CA signs the server and one client; a client
without a certificate, or with one from another CA, is refused."""
from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from p4.v1 import p4runtime_pb2 as P
from p4.v1 import p4runtime_pb2_grpc as PG

from softswitch.p4runtime import TlsConfig, serve
from softswitch.switchd import SwitchdError, SwitchOptions
from softswitch.switchd.serve import serve_options, stop_server
from softswitch.targets.python.local_device import LocalDevice


@dataclass
class Pem:
    cert: bytes
    key: bytes


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def make_ca(cn: str) -> tuple[Pem, x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(cn))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return Pem(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)), cert, key


def make_leaf(cn: str, ca_cert: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, *, server: bool) -> Pem:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    b = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(ca_cert.subject)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(minutes=5))
         .not_valid_after(now + datetime.timedelta(days=1))
         .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
         .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server
                                               else ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
    if server:
        b = b.add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                         x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                            critical=False)
    cert = b.sign(ca_key, hashes.SHA256())
    return Pem(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


@pytest.fixture(scope="module")
def pki() -> dict[str, Pem]:
    ca, ca_cert, ca_key = make_ca("p4rt test CA")
    _rogue, rogue_cert, rogue_key = make_ca("rogue CA")
    return {"ca": ca, "server": make_leaf("localhost", ca_cert, ca_key, server=True),
            "client": make_leaf("controller", ca_cert, ca_key, server=False),
            "rogue_client": make_leaf("intruder", rogue_cert, rogue_key, server=False)}


def _capabilities(address: str, creds: grpc.ChannelCredentials | None) -> str:
    ch = grpc.secure_channel(address, creds) if creds else grpc.insecure_channel(address)
    try:
        return PG.P4RuntimeStub(ch).Capabilities(P.CapabilitiesRequest(), timeout=5).p4runtime_api_version
    finally:
        ch.close()


def test_server_tls_without_client_auth(pki, tmp_path: Path):
    (tmp_path / "server.crt").write_bytes(pki["server"].cert)
    (tmp_path / "server.key").write_bytes(pki["server"].key)
    tls = TlsConfig.from_files(tmp_path / "server.crt", tmp_path / "server.key")
    with serve(LocalDevice(), "127.0.0.1:0", tls=tls) as h:
        assert _capabilities(h.address, grpc.ssl_channel_credentials(pki["ca"].cert)) == "1.4.1"
        with pytest.raises(grpc.RpcError):  # plaintext client against a TLS server
            _capabilities(h.address, None)


def test_client_certificates_are_verified(pki):
    tls = TlsConfig(cert=pki["server"].cert, key=pki["server"].key, ca=pki["ca"].cert)
    with serve(LocalDevice(), "127.0.0.1:0", tls=tls) as h:
        good = grpc.ssl_channel_credentials(pki["ca"].cert, pki["client"].key, pki["client"].cert)
        assert _capabilities(h.address, good) == "1.4.1"
        with pytest.raises(grpc.RpcError) as ei:
            _capabilities(h.address, grpc.ssl_channel_credentials(pki["ca"].cert))
        assert ei.value.code() == grpc.StatusCode.UNAVAILABLE
        rogue = grpc.ssl_channel_credentials(pki["ca"].cert, pki["rogue_client"].key, pki["rogue_client"].cert)
        with pytest.raises(grpc.RpcError) as ei:
            _capabilities(h.address, rogue)
        assert ei.value.code() == grpc.StatusCode.UNAVAILABLE
        # and the server goes on serving the right client
        assert _capabilities(h.address, good) == "1.4.1"


def test_switch_options_start_a_tls_server(pki, tmp_path: Path, caplog):
    """What both targets' daemons start from --grpc-server-addr and --tls-*: client
    certificates verified against --tls-ca; `stop_server` stops it, and logs (not
    raises) a failing stop, since a daemon's close goes on regardless."""
    for name, pem in (("server", pki["server"]), ("ca", pki["ca"])):
        (tmp_path / f"{name}.crt").write_bytes(pem.cert)
        (tmp_path / f"{name}.key").write_bytes(pem.key)
    opts = SwitchOptions(grpc_server_addr="127.0.0.1:0", tls_cert=str(tmp_path / "server.crt"),
                         tls_key=str(tmp_path / "server.key"), tls_ca=str(tmp_path / "ca.crt"))
    server = serve_options(LocalDevice(), opts)
    try:
        good = grpc.ssl_channel_credentials(pki["ca"].cert, pki["client"].key, pki["client"].cert)
        assert _capabilities(server.address, good) == "1.4.1"
        with pytest.raises(grpc.RpcError):   # no client certificate
            _capabilities(server.address, grpc.ssl_channel_credentials(pki["ca"].cert))
    finally:
        stop_server(server)
    with pytest.raises(grpc.RpcError):
        _capabilities(server.address, good)
    stop_server(None)

    class Broken:
        def stop(self, grace_s: float) -> None:
            raise RuntimeError("already gone")
    stop_server(Broken())
    assert "stopping the P4Runtime server: already gone" in caplog.text
    with pytest.raises(SwitchdError, match="--grpc-server-addr"):
        serve_options(LocalDevice(), SwitchOptions(grpc_server_addr=None))
