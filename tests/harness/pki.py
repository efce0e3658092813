"""The PKI a throw-away kube-apiserver needs: a CA, a serving certificate and a service-account key pair.

Issuing our own CA (instead of letting the apiserver self-sign under ``--cert-dir``) lets the kubeconfig pin
the exact CA, so clients verify TLS normally. The serving certificate only names loopback (``127.0.0.1``,
``localhost``) because the control plane never listens anywhere else. Keys are EC P-256: fast to generate,
which matters because every test session issues a fresh set.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = dt.timedelta(days=2)


@dataclass(frozen=True)
class PkiFiles:
    """Paths of the PEM files written by :func:`write_pki`."""

    ca_cert: Path
    serving_cert: Path
    serving_key: Path
    sa_public_key: Path
    sa_private_key: Path


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _public_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _make_ca(key: ec.EllipticCurvePrivateKey, now: dt.datetime) -> x509.Certificate:
    name = _name("nvcre-argo test CA")
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )


def _make_serving_cert(
    key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    now: dt.datetime,
) -> x509.Certificate:
    sans: list[x509.GeneralName] = [
        x509.IPAddress(ipaddress.IPv4Address("127.0.0.1")),
        x509.DNSName("localhost"),
    ]
    return (
        x509.CertificateBuilder()
        .subject_name(_name("kube-apiserver"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )


def _write(path: Path, data: bytes, *, private: bool) -> Path:
    path.write_bytes(data)
    path.chmod(0o600 if private else 0o644)
    return path


def write_pki(directory: Path) -> PkiFiles:
    """Issue a fresh CA, serving cert and service-account key pair into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    ca_key, serving_key, sa_key = _new_key(), _new_key(), _new_key()
    ca_cert = _make_ca(ca_key, now)
    serving_cert = _make_serving_cert(serving_key, ca_cert, ca_key, now)
    pem = serialization.Encoding.PEM
    return PkiFiles(
        ca_cert=_write(directory / "ca.crt", ca_cert.public_bytes(pem), private=False),
        serving_cert=_write(directory / "apiserver.crt", serving_cert.public_bytes(pem), private=False),
        serving_key=_write(directory / "apiserver.key", _key_pem(serving_key), private=True),
        sa_public_key=_write(directory / "sa.pub", _public_pem(sa_key), private=False),
        sa_private_key=_write(directory / "sa.key", _key_pem(sa_key), private=True),
    )
