"""deploy/overlays/self-managed on a real apiserver: the operator keeps its webhook certificate.

`run --webhooks cluster --webhook-certs self-managed` (what the overlay adds) is started here
against the dev cluster in the session operator's place, as the non-admin identity
`podgroup-operator` bound to exactly the roles the rendered overlay grants (so the Secret and
caBundle writes are proven to need nothing more). At start-up it must make the Secret, serve the
certificate it holds, and write the Secret's CA into the caBundle of the installed webhook
configurations; restarted with a certificate that is due, it must rotate the serving certificate
and keep the CA (so caBundle stays valid).

The configurations installed here are the base's (they call a Service no pod backs), so PodGroup
writes are refused meanwhile; `webhook_configurations_restored` puts the session's back.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import socket
import ssl
from pathlib import Path

import pytest
from cryptography import x509

from podgroup_operator.adapters.kube import ApiError, KubeClient
from podgroup_operator.adapters.webhook_configs import CONFIGURATION_KINDS, kind_of
from podgroup_operator.adapters.webhook_tls import SECRETS, bundle_from_secret, secret_for
from podgroup_operator.devcluster.process import OperatorProcess
from podgroup_operator.manifests import (
    CONFIG_NAMES,
    OPERATOR_NAMESPACE,
    WEBHOOK_SERVICE,
    cluster_webhooks,
)
from podgroup_operator.settings import OperatorSettings
from podgroup_operator.tls import SERVING_VALIDITY, TlsBundle, plan_webhook_tls, service_hosts
from tests.conftest import ClusterUnderTest
from tests.deploy_helpers import (
    DEPLOY,
    ensure_operator_namespace,
    render,
    roles_bound_to_user,
    webhook_configurations_restored,
)

SECRET = OperatorSettings().webhook_secret_name
SELF_MANAGED = DEPLOY / "overlays" / "self-managed"
USER = "podgroup-operator"
"""The dev cluster's non-admin identity, standing in for the install's ServiceAccount."""
HOSTS = service_hosts(WEBHOOK_SERVICE, OPERATOR_NAMESPACE)


def _served_certificate(port: int, ca: bytes) -> bytes:
    """The certificate the server on `port` presents, verified against `ca` for the Service's
    DNS name, as the apiserver verifies it."""
    context = ssl.create_default_context(cadata=ca.decode())
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname=HOSTS[2]) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return ssl.DER_cert_to_PEM_cert(der).encode()


async def _stored(kube: KubeClient) -> TlsBundle:
    bundle = bundle_from_secret(await kube.get(SECRETS, SECRET, OPERATOR_NAMESPACE))
    assert bundle is not None, "the Secret misses a key"
    return bundle


async def _ca_bundles(kube: KubeClient) -> set[str]:
    found = set()
    for kind in CONFIGURATION_KINDS:
        for name in CONFIG_NAMES:
            for hook in (await kube.get(kind, name))["webhooks"]:
                found.add(hook["clientConfig"].get("caBundle", ""))
    return found


def _same_certificate(a: bytes, b: bytes) -> bool:
    return x509.load_pem_x509_certificate(a) == x509.load_pem_x509_certificate(b)


async def test_the_operator_makes_serves_trusts_and_rotates_its_certificate(
    kube: KubeClient, cluster: ClusterUnderTest, operator: OperatorProcess, tmp_path: Path
) -> None:
    if cluster.state is None:
        pytest.fail("needs the dev cluster's static identities (PODGROUP_TEST_KUBECONFIG set)")
    await ensure_operator_namespace(kube)
    try:
        await kube.delete(SECRETS, SECRET, OPERATOR_NAMESPACE)
    except ApiError as exc:
        if not exc.not_found:
            raise
    cert_dir = tmp_path / "tls"
    replica = OperatorProcess(
        cluster.state.kubeconfig_for(USER),
        tmp_path / "op.log",
        [
            *("--webhooks", "cluster", "--webhook-certs", "self-managed"),
            *("--cluster-cert-dir", str(cert_dir)),
            *("--leader-elect-namespace", OPERATOR_NAMESPACE),
        ],
    )
    operator.stop()  # one leader at a time; restarted below
    try:
        async with roles_bound_to_user(kube, render(SELF_MANAGED), USER):
            await _makes_serves_trusts_and_rotates(kube, replica, cert_dir)
    finally:
        replica.stop()
        operator.start()
        await asyncio.to_thread(operator.wait_ready)
    log = replica.log_path.read_text()
    assert f'User "{USER}" cannot' not in log, replica.log_tail()


async def _makes_serves_trusts_and_rotates(
    kube: KubeClient, replica: OperatorProcess, cert_dir: Path
) -> None:
    async with webhook_configurations_restored(kube):
        for body in cluster_webhooks():  # as `kubectl apply -k deploy/...` installs them
            await kube.apply_json(kind_of(body), body)
        try:
            # First start: no Secret yet, so it is made; served; trusted by both configurations.
            replica.start()
            await asyncio.to_thread(replica.wait_ready)
            first = await _stored(kube)
            assert (cert_dir / "tls.crt").read_bytes() == first.cert
            served = await asyncio.to_thread(
                _served_certificate, replica.webhook_port, first.ca_bundle
            )
            assert _same_certificate(served, first.cert)
            assert await _ca_bundles(kube) == {base64.b64encode(first.ca_bundle).decode()}

            # Restart with a serving certificate that is due (made 300 of 365 days ago under
            # the same CA; the extra name only makes the plan replace the current one): rotated
            # at start-up, the CA and so caBundle unchanged.
            replica.stop()
            made_long_ago = dt.datetime.now(dt.UTC) - SERVING_VALIDITY * (300 / 365)
            due = plan_webhook_tls(first, [*HOSTS, "old.example"], made_long_ago)
            assert due is not None and due.ca_bundle == first.ca_bundle
            secret = await kube.get(SECRETS, SECRET, OPERATOR_NAMESPACE)
            body = secret_for(due, OPERATOR_NAMESPACE, SECRET)
            body["metadata"]["resourceVersion"] = secret["metadata"]["resourceVersion"]
            await kube.replace(SECRETS, SECRET, body, OPERATOR_NAMESPACE)

            replica.start()
            await asyncio.to_thread(replica.wait_ready)
            rotated = await _stored(kube)
            assert rotated.cert not in (first.cert, due.cert)
            assert rotated.ca_bundle == first.ca_bundle
            expiry = x509.load_pem_x509_certificate(rotated.cert).not_valid_after_utc
            assert expiry - dt.datetime.now(dt.UTC) > SERVING_VALIDITY * 0.9
            served = await asyncio.to_thread(
                _served_certificate, replica.webhook_port, first.ca_bundle
            )
            assert _same_certificate(served, rotated.cert)
            assert await _ca_bundles(kube) == {base64.b64encode(first.ca_bundle).decode()}
        finally:
            replica.stop()
            await kube.delete(SECRETS, SECRET, OPERATOR_NAMESPACE)
