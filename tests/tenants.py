"""Tenants of the real control plane, each acting with its own identity.

A tenant is a ServiceAccount of one namespace, bound to the built-in `edit` ClusterRole (what a
multi-tenant cluster gives a team in its namespace), with optional extra rules on our PodGroups.
Its client carries a token the API server issued for that ServiceAccount (TokenRequest), so
every request is authorised as the tenant, exactly as a team's `kubectl` would be.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import yaml

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import ApiError, Kind, KubeClient

SERVICE_ACCOUNTS = Kind("", "v1", "serviceaccounts")
ROLES = Kind("rbac.authorization.k8s.io", "v1", "roles")
ROLE_BINDINGS = Kind("rbac.authorization.k8s.io", "v1", "rolebindings")

PODGROUP_WRITER = [
    {
        "apiGroups": [c.GROUP],
        "resources": [c.PLURAL],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    }
]
"""What a cluster adds to `edit` so that a team may write its own PodGroups (never status)."""

STATUS_WRITER = [
    {
        "apiGroups": [c.GROUP],
        "resources": [f"{c.PLURAL}/status"],
        "verbs": ["get", "update", "patch"],
    }
]
"""What some clusters grant as well: writing a PodGroup's status (`edit` does not)."""


async def _create(kube: KubeClient, kind: Kind, body: dict[str, Any], namespace: str) -> None:
    try:
        await kube.create(kind, body, namespace=namespace)
    except ApiError as exc:
        if not exc.already_exists:
            raise


@asynccontextmanager
async def tenant(
    kube: KubeClient,
    kubeconfig: Path,
    namespace: str,
    workdir: Path,
    *,
    name: str = "tenant",
    rules: list[dict[str, Any]] | None = None,
) -> AsyncIterator[KubeClient]:
    """A client acting as ServiceAccount `namespace/name`: `edit` in `namespace`, plus `rules`
    there (for example PODGROUP_WRITER). `kube` is the admin client that sets the tenant up."""
    await _create(kube, SERVICE_ACCOUNTS, {"metadata": {"name": name}}, namespace)
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    await _create(
        kube,
        ROLE_BINDINGS,
        {
            "metadata": {"name": f"{name}-edit"},
            "roleRef": {"apiGroup": ROLES.group, "kind": "ClusterRole", "name": "edit"},
            "subjects": subject,
        },
        namespace,
    )
    if rules:
        await _create(
            kube, ROLES, {"metadata": {"name": f"{name}-extra"}, "rules": rules}, namespace
        )
        await _create(
            kube,
            ROLE_BINDINGS,
            {
                "metadata": {"name": f"{name}-extra"},
                "roleRef": {"apiGroup": ROLES.group, "kind": "Role", "name": f"{name}-extra"},
                "subjects": subject,
            },
            namespace,
        )
    token = await kube.create(
        Kind("", "v1", f"serviceaccounts/{name}/token"),
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        namespace=namespace,
    )
    admin = yaml.safe_load(kubeconfig.read_text())
    cluster = admin["clusters"][0]["cluster"]
    path = workdir / f"tenant-{namespace}-{name}.kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "dev", "cluster": cluster}],
                "users": [{"name": name, "user": {"token": token["status"]["token"]}}],
                "contexts": [{"name": name, "context": {"cluster": "dev", "user": name}}],
                "current-context": name,
            }
        )
    )
    client = KubeClient.from_kubeconfig(str(path))
    try:
        yield client
    finally:
        await client.close()
