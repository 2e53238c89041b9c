"""The self-managed webhook certificate: made once, shared by racing replicas, rotated in time.

`plan_webhook_tls` decides on its inputs alone (time passed in); `ensure_webhook_certificate`
runs against the in-memory API server, as every replica of deploy/overlays/self-managed does at
start-up.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import multiprocessing
import ssl
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from podgroup_operator.adapters.kube import (
    MUTATING_WEBHOOKS,
    VALIDATING_WEBHOOKS,
    KubeClient,
    Request,
)
from podgroup_operator.adapters.webhook_tls import (
    SECRETS,
    bundle_from_secret,
    ensure_webhook_certificate,
    secret_for,
)
from podgroup_operator.manifests import CONFIG_NAMES, cluster_webhooks
from podgroup_operator.tls import (
    CA_VALIDITY,
    SERVING_VALIDITY,
    TlsBundle,
    make_serving_cert,
    plan_webhook_tls,
    service_hosts,
)
from tests.fakes import FakeApiServer
from tests.waiting import wait_for

T0 = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
NS = "podgroup-operator"
SECRET = "podgroup-operator-webhook-tls"
SERVICE = "podgroup-operator-webhook"
HOSTS = service_hosts(SERVICE, NS)


def certs(pem: bytes) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(pem)


def fresh(now: dt.datetime = T0) -> TlsBundle:
    bundle = plan_webhook_tls(None, HOSTS, now)
    assert bundle is not None
    return bundle


# --- the decision --------------------------------------------------------------------------------


def test_a_fresh_bundle_serves_the_service_names_and_is_signed_by_its_ca(tmp_path: Path) -> None:
    bundle = fresh()
    (ca,) = certs(bundle.ca_bundle)
    (cert,) = certs(bundle.cert)
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "podgroup-operator-webhook.podgroup-operator.svc" in names.get_values_for_type(
        x509.DNSName
    )
    assert cert.not_valid_after_utc - cert.not_valid_before_utc >= SERVING_VALIDITY
    assert ca.not_valid_after_utc - ca.not_valid_before_utc >= CA_VALIDITY
    # A TLS stack accepts the pair as a server identity (key matches the certificate).
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    (tmp_path / "c").write_bytes(bundle.cert)
    (tmp_path / "k").write_bytes(bundle.key)
    context.load_cert_chain(tmp_path / "c", tmp_path / "k")


def test_a_good_bundle_is_kept_until_a_third_of_its_validity_remains() -> None:
    bundle = fresh()
    assert plan_webhook_tls(bundle, HOSTS, T0 + SERVING_VALIDITY * 0.6) is None
    renewed = plan_webhook_tls(bundle, HOSTS, T0 + SERVING_VALIDITY * 0.7)
    assert renewed is not None
    assert renewed.cert != bundle.cert
    # The CA is still good: kept, so caBundle does not change.
    assert renewed.ca_bundle == bundle.ca_bundle
    assert renewed.ca_key == bundle.ca_key


def test_a_certificate_for_other_names_is_remade_with_the_same_ca() -> None:
    bundle = fresh()
    other_hosts = service_hosts("renamed-webhook", NS)
    remade = plan_webhook_tls(bundle, other_hosts, T0)
    assert remade is not None
    assert remade.ca_bundle == bundle.ca_bundle
    (cert,) = certs(remade.cert)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(other_hosts) <= set(names.get_values_for_type(x509.DNSName))


def test_a_due_ca_is_replaced_and_the_old_one_stays_trusted_while_valid() -> None:
    bundle = fresh()
    later = T0 + CA_VALIDITY * 0.7
    rotated = plan_webhook_tls(bundle, HOSTS, later)
    assert rotated is not None
    new_ca, old_ca = certs(rotated.ca_bundle)
    assert old_ca == certs(bundle.ca_bundle)[0]
    assert new_ca != old_ca
    (cert,) = certs(rotated.cert)
    cert.verify_directly_issued_by(new_ca)
    # Once the old CA has expired it leaves the bundle at the next rotation.
    much_later = T0 + CA_VALIDITY + dt.timedelta(days=1) + SERVING_VALIDITY
    again = plan_webhook_tls(rotated, HOSTS, much_later)
    assert again is not None
    assert old_ca not in certs(again.ca_bundle)


@pytest.mark.parametrize("broken", ["ca_bundle", "ca_key", "cert", "key"])
def test_a_bundle_that_does_not_parse_is_remade(broken: str) -> None:
    bundle = fresh()
    damaged = TlsBundle(**{**bundle.__dict__, broken: b"not PEM"})
    assert plan_webhook_tls(damaged, HOSTS, T0) is not None


def test_a_certificate_not_signed_by_the_stored_ca_is_remade() -> None:
    one, other = fresh(), fresh()
    mixed = TlsBundle(ca_bundle=one.ca_bundle, ca_key=one.ca_key, cert=other.cert, key=other.key)
    remade = plan_webhook_tls(mixed, HOSTS, T0)
    assert remade is not None
    certs(remade.cert)[0].verify_directly_issued_by(certs(one.ca_bundle)[0])


def test_the_secret_round_trips_and_an_incomplete_one_reads_as_absent() -> None:
    bundle = fresh()
    secret = secret_for(bundle, NS, SECRET)
    assert secret["type"] == "kubernetes.io/tls"
    assert set(secret["data"]) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    assert bundle_from_secret(secret) == bundle
    del secret["data"]["ca.key"]
    assert bundle_from_secret(secret) is None
    assert bundle_from_secret(None) is None


# --- ensure_webhook_certificate against the fake API server --------------------------------------


@pytest.fixture
def fake() -> FakeApiServer:
    server = FakeApiServer(clock=lambda: T0)
    server.seed(*cluster_webhooks())
    return server


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> dt.datetime:
        return self.now


def ca_bundles(fake: FakeApiServer) -> set[str]:
    found = set()
    for kind in (VALIDATING_WEBHOOKS, MUTATING_WEBHOOKS):
        for name in CONFIG_NAMES:
            body = fake.get_object(kind, name)
            assert body is not None
            found |= {hook["clientConfig"].get("caBundle", "") for hook in body["webhooks"]}
    return found


async def ensure(fake: FakeApiServer, cert_dir: Path, clock: Clock) -> Path:
    files = await ensure_webhook_certificate(
        KubeClient(fake), NS, SECRET, SERVICE, CONFIG_NAMES, cert_dir=cert_dir, clock=clock
    )
    return files.certfile


async def test_first_start_makes_the_secret_writes_the_files_and_sets_every_ca_bundle(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    files = await ensure_webhook_certificate(
        KubeClient(fake), NS, SECRET, SERVICE, CONFIG_NAMES, cert_dir=tmp_path, clock=Clock()
    )
    stored = bundle_from_secret(fake.get_object(SECRETS, SECRET, NS))
    assert stored is not None
    assert files.certfile.read_bytes() == stored.cert
    assert files.pkeyfile.read_bytes() == stored.key
    assert files.pkeyfile.stat().st_mode & 0o077 == 0
    assert files.cafile.read_bytes() == stored.ca_bundle
    assert ca_bundles(fake) == {base64.b64encode(stored.ca_bundle).decode()}


async def test_a_restart_with_a_good_secret_writes_nothing(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    clock = Clock()
    first = await ensure(fake, tmp_path / "a", clock)
    fake.clear_requests()
    clock.now = T0 + dt.timedelta(days=30)
    second = await ensure(fake, tmp_path / "b", clock)
    assert fake.writes == []
    assert first.read_bytes() == second.read_bytes()


async def test_replicas_starting_together_end_up_serving_one_certificate(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    clock = Clock()
    served = await asyncio.gather(*(ensure(fake, tmp_path / str(i), clock) for i in range(3)))
    assert len({path.read_bytes() for path in served}) == 1
    assert fake.count("POST", "/secrets") >= 1
    stored = bundle_from_secret(fake.get_object(SECRETS, SECRET, NS))
    assert stored is not None
    assert served[0].read_bytes() == stored.cert


async def test_rotation_when_a_third_remains_keeps_the_ca_bundle(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    clock = Clock()
    first = (await ensure(fake, tmp_path / "a", clock)).read_bytes()
    bundles_before = ca_bundles(fake)
    clock.now = T0 + SERVING_VALIDITY * 0.7
    fake.clear_requests()
    second = (await ensure(fake, tmp_path / "b", clock)).read_bytes()
    assert second != first
    assert ca_bundles(fake) == bundles_before
    # One precondition write of the Secret, no write of the webhook configurations.
    assert fake.writes == [("PUT", f"/api/v1/namespaces/{NS}/secrets/{SECRET}")]


async def test_a_replica_that_lost_the_rotation_race_serves_the_winners_certificate(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    clock = Clock()
    await ensure(fake, tmp_path / "a", clock)
    clock.now = T0 + SERVING_VALIDITY * 0.7
    release = fake.hold("PUT", f"/secrets/{SECRET}")
    first = asyncio.create_task(ensure(fake, tmp_path / "b", clock))
    second = asyncio.create_task(ensure(fake, tmp_path / "c", clock))
    # Both read the same resourceVersion and send their PUT before either is applied.
    while sum(1 for m, p in fake.requests if m == "PUT" and p.endswith(SECRET)) < 2:
        await asyncio.sleep(0)
    release.set()
    served = await asyncio.gather(first, second)
    assert served[0].read_bytes() == served[1].read_bytes()


async def test_configurations_that_do_not_exist_are_left_alone(tmp_path: Path) -> None:
    fake = FakeApiServer(clock=lambda: T0)
    await ensure(fake, tmp_path, Clock())
    assert fake.get_object(VALIDATING_WEBHOOKS, CONFIG_NAMES[0]) is None
    assert fake.get_object(SECRETS, SECRET, NS) is not None


async def test_the_running_operator_rechecks_its_secret_and_survives_a_failed_check(
    tmp_path: Path,
) -> None:
    """The periodic check of a self-managed operator: a Secret deleted (or rotated by another
    replica) is found on the next check and the files follow; a check that fails is retried."""
    from podgroup_operator.handlers.startup import _rotate_periodically
    from podgroup_operator.settings import OperatorSettings

    settings = OperatorSettings(
        webhook_cert_check_seconds=0.01, cluster_cert_dir=tmp_path, service_namespace=NS
    )

    class FirstCallFails(FakeApiServer):
        """The fake, but the first request meets a reset connection."""

        calls = 0

        async def send(self, request: Request) -> tuple[int, Any]:
            self.calls += 1
            if self.calls == 1:
                raise OSError("connection reset")
            return await super().send(request)

    flaky = FirstCallFails(clock=lambda: T0)
    flaky.seed(*cluster_webhooks())
    task = asyncio.create_task(_rotate_periodically(KubeClient(flaky), settings))
    try:

        async def files_match_the_secret() -> bool:
            stored = bundle_from_secret(flaky.get_object(SECRETS, SECRET, NS))
            cert = tmp_path / "tls.crt"
            return stored is not None and cert.exists() and cert.read_bytes() == stored.cert

        await wait_for(files_match_the_secret, 5, "the Secret made and its files written")
        assert flaky.calls > 1
    finally:
        task.cancel()


def _make_many(directory: str, name: str, count: int) -> None:
    """A child process's share of the race below."""
    for _ in range(count):
        make_serving_cert(Path(directory), name, ["127.0.0.1", "localhost"])


def test_processes_sharing_a_cert_directory_make_one_ca_and_consistent_pairs(
    tmp_path: Path,
) -> None:
    """Two replicas on one machine start at once and make their webhook certificates in one
    directory (`bench scale --failover`): four processes race here, from an empty directory,
    each rewriting its own pair. Afterwards there is one CA, every pair loads (its key is its
    certificate's), and every certificate is signed by that CA. Unlocked, a replica died in
    Kopf's webhook server on KEY_VALUES_MISMATCH."""
    context = multiprocessing.get_context("fork")
    workers = [
        context.Process(target=_make_many, args=(str(tmp_path), f"webhook-{i}", 15))
        for i in range(4)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    ca = x509.load_pem_x509_certificate((tmp_path / "ca.crt").read_bytes())
    ca_key = ca.public_key()
    assert isinstance(ca_key, ec.EllipticCurvePublicKey)
    for i in range(4):
        certfile, keyfile = tmp_path / f"webhook-{i}.crt", tmp_path / f"webhook-{i}.key"
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(certfile, keyfile)
        cert = x509.load_pem_x509_certificate(certfile.read_bytes())
        assert cert.signature_hash_algorithm is not None
        ca_key.verify(
            cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm)
        )
