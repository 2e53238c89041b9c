"""The webhook certificate an operator installed with deploy/overlays/self-managed keeps itself.

Without cert-manager somebody must make the serving certificate and put its CA into the webhook
configurations' caBundle. Here every replica, at start-up, calls `ensure_webhook_certificate`:

1. read the Secret; `tls.plan_webhook_tls` says whether it is good or what to store instead
   (made when absent, rotated when less than a third of its validity remains);
2. store it with a precondition (create, or update at the read resourceVersion): when replicas
   race, one write wins, the others get 409, read again and use the winner's certificate;
3. write the certificate files Kopf's webhook server loads, and set caBundle on the
   configurations, only where it differs.

The Secret holds the CA's key too (`ca.key`): a replica that rotates the serving certificate
signs it with the same CA, so caBundle, and the replicas still serving the previous certificate,
stay valid. The Secret is readable only by the operator's ServiceAccount (a Role with
`resourceNames`).
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable, Sequence
from pathlib import Path

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import JSON, ApiError, Kind, KubeClient
from podgroup_operator.adapters.webhook_configs import set_ca_bundle
from podgroup_operator.tls import CertFiles, TlsBundle, plan_webhook_tls, service_hosts

SECRETS = Kind("", "v1", "secrets")

SECRET_KEYS = {"ca_bundle": "ca.crt", "ca_key": "ca.key", "cert": "tls.crt", "key": "tls.key"}
"""Secret data keys: those of a `kubernetes.io/tls` Secret as cert-manager writes it, plus
`ca.key`, so the same Deployment mounts either."""

_RACE_RETRIES = 5


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def bundle_from_secret(secret: JSON | None) -> TlsBundle | None:
    """The bundle a Secret holds, or None when it is absent or misses a key (then remade)."""
    if secret is None:
        return None
    data = secret.get("data") or {}
    if not all(data.get(key) for key in SECRET_KEYS.values()):
        return None
    try:
        decoded = {
            field: base64.b64decode(data[key], validate=True) for field, key in SECRET_KEYS.items()
        }
    except ValueError:
        return None
    return TlsBundle(**decoded)


def secret_for(bundle: TlsBundle, namespace: str, name: str) -> JSON:
    """The Secret body holding `bundle` (type kubernetes.io/tls, labelled as ours)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {c.LABEL_MANAGED_BY: c.OPERATOR_NAME},
        },
        "data": {
            key: base64.b64encode(getattr(bundle, field)).decode()
            for field, key in SECRET_KEYS.items()
        },
    }


def write_cert_files(bundle: TlsBundle, directory: Path) -> CertFiles:
    """tls.crt, tls.key (mode 0600) and ca.crt in `directory`, for Kopf's WebhookServer.

    Only files whose content differs are written, each through a rename, because Kopf restarts
    its server whenever the files change: an unchanged bundle must not restart it, and a reader
    must never see a half-written file.
    """
    directory.mkdir(parents=True, exist_ok=True)
    files = CertFiles(directory / "tls.crt", directory / "tls.key", directory / "ca.crt")
    for path, content in (
        (files.pkeyfile, bundle.key),
        (files.certfile, bundle.cert),
        (files.cafile, bundle.ca_bundle),
    ):
        if path.exists() and path.read_bytes() == content:
            continue
        staged = path.with_name(f".{path.name}.new")
        staged.touch(mode=0o600, exist_ok=True)
        staged.chmod(0o600)
        staged.write_bytes(content)
        staged.replace(path)
    return files


async def _read_secret(kube: KubeClient, namespace: str, name: str) -> JSON | None:
    try:
        return await kube.get(SECRETS, name, namespace)
    except ApiError as exc:
        if exc.not_found:
            return None
        raise


async def stored_bundle(
    kube: KubeClient,
    namespace: str,
    secret_name: str,
    hosts: Sequence[str],
    clock: Callable[[], dt.datetime] = _utcnow,
) -> TlsBundle:
    """The Secret's bundle, made or rotated first when `plan_webhook_tls` says so.

    Each write carries a precondition (create fails on an existing Secret, update on a changed
    resourceVersion); the loser of a race reads the winner's Secret and plans again, which then
    finds it good. Bounded, so a Secret someone keeps breaking is an error, not a loop.
    """
    for _ in range(_RACE_RETRIES):
        secret = await _read_secret(kube, namespace, secret_name)
        current = bundle_from_secret(secret)
        planned = plan_webhook_tls(current, hosts, clock())
        if planned is None:
            assert current is not None
            return current
        body = secret_for(planned, namespace, secret_name)
        try:
            if secret is None:
                await kube.create(SECRETS, body, namespace)
            else:
                body["metadata"]["resourceVersion"] = secret["metadata"]["resourceVersion"]
                await kube.replace(SECRETS, secret_name, body, namespace)
        except ApiError as exc:
            if exc.conflict:  # AlreadyExists and Conflict are both 409: another replica won
                continue
            raise
        return planned
    raise RuntimeError(
        f"Secret {namespace}/{secret_name}: no stable webhook certificate after "
        f"{_RACE_RETRIES} attempts; something else keeps rewriting it"
    )


async def ensure_webhook_certificate(
    kube: KubeClient,
    namespace: str,
    secret_name: str,
    service_name: str,
    config_names: Sequence[str],
    *,
    cert_dir: Path,
    clock: Callable[[], dt.datetime] = _utcnow,
) -> CertFiles:
    """Make or rotate the webhook certificate in its Secret, write its files, trust its CA.

    For `<service_name>.<namespace>.svc` (the name the apiserver calls). Returns the files for
    `kopf.WebhookServer(certfile=..., pkeyfile=..., cafile=...)`. caBundle is set on the
    validating and mutating configurations named in `config_names` that exist.
    """
    bundle = await stored_bundle(
        kube, namespace, secret_name, service_hosts(service_name, namespace), clock
    )
    files = write_cert_files(bundle, cert_dir)
    await set_ca_bundle(kube, config_names, bundle.ca_bundle)
    return files
