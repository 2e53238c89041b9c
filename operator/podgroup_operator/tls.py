"""Certificates made with `cryptography`: a private CA and serving certificates signed by it.

Two users: the dev cluster (kube-apiserver's serving certificate, the service-account key pair)
and the operator's admission webhooks. Kopf can self-sign webhook certificates, but only through
oscrypto, which fails on OpenSSL 3; so we make them here and pass certfile/pkeyfile/cafile.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = dt.timedelta(days=365)


@dataclass(frozen=True)
class CertFiles:
    """Paths of a PEM certificate, its key, and the CA that signed it."""

    certfile: Path
    pkeyfile: Path
    cafile: Path


def _write_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _load_or_make_ca(
    directory: Path, now: dt.datetime
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    ca_cert, ca_key = directory / "ca.crt", directory / "ca.key"
    if ca_cert.exists() and ca_key.exists():
        cert = x509.load_pem_x509_certificate(ca_cert.read_bytes())
        key = serialization.load_pem_private_key(ca_key.read_bytes(), password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        return cert, key
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("podgroup-operator-ca"))
        .issuer_name(_name("podgroup-operator-ca"))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
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
        .sign(key, hashes.SHA256())
    )
    _write_key(key, ca_key)
    ca_cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert, key


def make_serving_cert(
    directory: Path, name: str, hosts: Iterable[str], now: dt.datetime | None = None
) -> CertFiles:
    """A serving certificate for `hosts` (DNS names or IPs), signed by the directory's CA.

    The CA is created on first use and reused, so a client that trusts it keeps trusting
    certificates made later in the same directory.
    """
    directory.mkdir(parents=True, exist_ok=True)
    now = now or dt.datetime.now(dt.UTC)
    ca_cert, ca_key = _load_or_make_ca(directory, now)
    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    files = CertFiles(directory / f"{name}.crt", directory / f"{name}.key", directory / "ca.crt")
    _write_key(key, files.pkeyfile)
    files.certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return files


def make_rsa_key_pair(private_path: Path, public_path: Path) -> None:
    """An RSA key pair, as kube-apiserver wants for signing service-account tokens."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_key(key, private_path)
    public_path.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
