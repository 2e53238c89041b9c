"""Certificates made with `cryptography`: a private CA and serving certificates signed by it.

Users: the dev cluster (kube-apiserver's serving certificate, the service-account key pair), the
operator's admission webhooks on the dev cluster (files in a directory), and, in a cluster
installed with deploy/overlays/self-managed, the webhook certificate the operator keeps in a
Secret (`plan_webhook_tls` decides when to make or rotate it; adapters/webhook_tls.py stores it).
Kopf can self-sign webhook certificates, but only through oscrypto, which fails on OpenSSL 3; so
we make them here and pass certfile/pkeyfile/cafile.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import ipaddress
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = dt.timedelta(days=365)

CA_VALIDITY = dt.timedelta(days=3650)
"""A self-managed webhook CA lives long: every change of it is a caBundle write, and replicas
still serving a certificate of the previous CA depend on the bundle trusting both meanwhile."""
SERVING_VALIDITY = dt.timedelta(days=365)
RENEW_WHEN_REMAINING = 1 / 3
"""Renew a certificate once less than this share of its validity remains: months of slack for
replicas that loaded the previous one to restart before it expires."""


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


def _new_ca(
    now: dt.datetime, validity: dt.timedelta = _VALIDITY
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("podgroup-operator-ca"))
        .issuer_name(_name("podgroup-operator-ca"))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + validity)
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
    return cert, key


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """Hold `directory`'s lock file while its CA and certificates are read or made.

    Two replicas on one machine (the dev cluster's failover bench, `bench scale --failover`)
    start at once and share the directory; unlocked, one's key could meet the other's
    certificate, and Kopf's webhook server refuses the pair (`KEY_VALUES_MISMATCH`).
    """
    with open(directory / ".lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _load_or_make_ca(
    directory: Path, now: dt.datetime
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    ca_cert, ca_key = directory / "ca.crt", directory / "ca.key"
    if ca_cert.exists() and ca_key.exists():
        cert = x509.load_pem_x509_certificate(ca_cert.read_bytes())
        key = serialization.load_pem_private_key(ca_key.read_bytes(), password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        return cert, key
    cert, key = _new_ca(now)
    _write_key(key, ca_key)
    ca_cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert, key


def ensure_ca(directory: Path, now: dt.datetime | None = None) -> Path:
    """The directory's CA certificate (made on first use), the one `make_serving_cert` signs with.

    Lets a caller learn what the apiserver must trust before the server's certificate exists,
    e.g. `podgroup-operator webhooks install --cert-dir` ahead of the operator's first start.
    """
    directory.mkdir(parents=True, exist_ok=True)
    with _locked(directory):
        _load_or_make_ca(directory, now or dt.datetime.now(dt.UTC))
    return directory / "ca.crt"


def _new_serving(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    name: str,
    hosts: Iterable[str],
    now: dt.datetime,
    validity: dt.timedelta = _VALIDITY,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
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
        .not_valid_after(now + validity)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def make_serving_cert(
    directory: Path, name: str, hosts: Iterable[str], now: dt.datetime | None = None
) -> CertFiles:
    """A serving certificate for `hosts` (DNS names or IPs), signed by the directory's CA.

    The CA is created on first use and reused, so a client that trusts it keeps trusting
    certificates made later in the same directory. Processes sharing the directory take turns
    (`_locked`); each should give a `name` of its own, since a server that reads its files while
    another process rewrites them may load one's key with the other's certificate.
    """
    directory.mkdir(parents=True, exist_ok=True)
    now = now or dt.datetime.now(dt.UTC)
    with _locked(directory):
        ca_cert, ca_key = _load_or_make_ca(directory, now)
        cert, key = _new_serving(ca_cert, ca_key, name, hosts, now)
        files = CertFiles(
            directory / f"{name}.crt", directory / f"{name}.key", directory / "ca.crt"
        )
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


# --- A webhook certificate kept in a Secret (deploy/overlays/self-managed) -----------------------
@dataclass(frozen=True)
class TlsBundle:
    """PEM text of a serving certificate, its key, the CA that signed it and the CA's key.

    `ca_bundle` is what clients trust (a webhook configuration's caBundle, the Secret's
    ca.crt): the signing CA first, then the previous CA while it is still valid, so replicas that
    still serve a certificate of the previous CA keep being trusted across a CA rotation.
    """

    ca_bundle: bytes
    ca_key: bytes
    cert: bytes
    key: bytes

    @property
    def ca_cert(self) -> bytes:
        """The signing CA alone (the first certificate of the bundle)."""
        return _pem(x509.load_pem_x509_certificates(self.ca_bundle)[0])


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def service_hosts(service: str, namespace: str) -> list[str]:
    """The DNS names the apiserver may use for a webhook Service (it calls `<svc>.<ns>.svc`)."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def due_for_renewal(cert: x509.Certificate, now: dt.datetime) -> bool:
    """True when less than RENEW_WHEN_REMAINING of the certificate's validity is left (or none)."""
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return end - now < (end - start) * RENEW_WHEN_REMAINING


def _covers(cert: x509.Certificate, hosts: Sequence[str]) -> bool:
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    return set(hosts) <= set(names.get_values_for_type(x509.DNSName))


def _signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def plan_webhook_tls(
    current: TlsBundle | None, hosts: Sequence[str], now: dt.datetime
) -> TlsBundle | None:
    """The bundle to store, or None when `current` is good as it is.

    Good means: it parses, its CA and serving certificate each have more than a third of their
    validity left, the serving certificate names every host and was signed by the CA. Otherwise
    the CA is kept when it is still good (so caBundle does not change) and only the serving
    certificate is made anew; a CA that is due is replaced, keeping the old one in the bundle
    while it is valid.
    """
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None = None
    previous: list[x509.Certificate] = []
    if current is not None:
        try:
            bundle = x509.load_pem_x509_certificates(current.ca_bundle)
            ca_key = serialization.load_pem_private_key(current.ca_key, password=None)
            cert = x509.load_pem_x509_certificate(current.cert)
            serialization.load_pem_private_key(current.key, password=None)
        except ValueError:
            bundle = []
        if bundle and isinstance(ca_key, ec.EllipticCurvePrivateKey):
            if not due_for_renewal(bundle[0], now):
                ca, previous = (bundle[0], ca_key), bundle[1:]
                if (
                    not due_for_renewal(cert, now)
                    and _covers(cert, hosts)
                    and _signed_by(cert, bundle[0])
                ):
                    return None
            else:
                previous = bundle
    if ca is None:
        ca = _new_ca(now, CA_VALIDITY)
    trusted = [ca[0], *(p for p in previous if p.not_valid_after_utc > now)]
    serving_cert, serving_key = _new_serving(ca[0], ca[1], hosts[0], hosts, now, SERVING_VALIDITY)
    return TlsBundle(
        ca_bundle=b"".join(_pem(c) for c in trusted),
        ca_key=_key_pem(ca[1]),
        cert=_pem(serving_cert),
        key=_key_pem(serving_key),
    )
