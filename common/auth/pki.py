"""A small PKI for P4Runtime over mutual TLS: one CA, a server certificate per switch,
a client certificate for the controller (the ``cryptography`` package, ECDSA P-256).

``make_pki(out_dir, switches=[...])`` writes ``ca.pem``/``ca.key``, ``NAME.pem``/
``NAME.key`` per switch (valid for the names and addresses given, e.g. the switch's
name, ``localhost`` and the gRPC address) and ``controller.pem``/``controller.key``;
private keys are mode 0600.  ``python -m controller certs`` is its command line.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Issued", "Pki", "make_pki"]


@dataclass(slots=True, frozen=True)
class Issued:
    """Paths of one certificate and its private key."""

    cert: Path
    key: Path


@dataclass(slots=True, frozen=True)
class Pki:
    ca: Issued
    switches: dict[str, Issued]
    controller: Issued


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write(path: Path, data: bytes, private: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as fh:
        if private:
            os.fchmod(fh.fileno(), 0o600)
        fh.write(data)


def _save(out: Path, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> Issued:
    issued = Issued(out / f"{stem}.pem", out / f"{stem}.key")
    _write(issued.key, key.private_bytes(serialization.Encoding.PEM,
                                         serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()), True)
    _write(issued.cert, cert.public_bytes(serialization.Encoding.PEM), False)
    return issued


def _san(names: Iterable[str]) -> x509.SubjectAlternativeName:
    out: list[x509.GeneralName] = []
    for n in dict.fromkeys(names):
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(n)))
        except ValueError:
            out.append(x509.DNSName(n))
    return x509.SubjectAlternativeName(out)


def _builder(subject: str, issuer: x509.Name, key: ec.EllipticCurvePrivateKey,
             days: int) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(issuer)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days)))


def make_pki(out_dir: str | os.PathLike[str], *, switches: Mapping[str, Iterable[str]],
             controller: str = "controller", ca_name: str = "rocev2-int test bed CA",
             days: int = 30) -> Pki:
    """Write a CA, one server certificate per switch (``switches``: name -> the names
    and addresses it answers to) and a client certificate for the controller."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (_builder(ca_name, _name(ca_name), ca_key, days)
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                            key_encipherment=False, data_encipherment=False,
                                            key_agreement=False, key_cert_sign=True,
                                            crl_sign=True, encipher_only=False,
                                            decipher_only=False), critical=True)
               .sign(ca_key, hashes.SHA256()))
    ca = _save(out, "ca", ca_cert, ca_key)

    def leaf(cn: str, usage: x509.ObjectIdentifier, names: Iterable[str]) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        b = (_builder(cn, ca_cert.subject, key, days)
             .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
             .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
             .add_extension(_san([cn, *names]), critical=False))
        return _save(out, cn, b.sign(ca_key, hashes.SHA256()), key)

    issued = {name: leaf(name, ExtendedKeyUsageOID.SERVER_AUTH, names)
              for name, names in switches.items()}
    return Pki(ca=ca, switches=issued,
               controller=leaf(controller, ExtendedKeyUsageOID.CLIENT_AUTH, ()))
