"""What the cluster benchmarks (`bench e2e`, `bench scale`) do before they measure.

Both start from a bare control plane: the project's CRDs must be installed, and a namespace is
only usable once the controller-manager has created its default ServiceAccount (the apiserver
refuses pods until then). A control plane that has just started also answers 5xx now and then;
those mean "not yet", not failure.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from podgroup_operator.adapters.kube import CRDS, NAMESPACES, ApiError, Kind, KubeClient
from podgroup_operator.api.crd import CRD_MANIFESTS

SERVICE_ACCOUNTS = Kind("", "v1", "serviceaccounts")


async def install_crd(kube: KubeClient) -> None:
    """The PodGroup and Topology CRDs as this package renders them (the checked-in files are the
    same, by test)."""
    for manifest in CRD_MANIFESTS.values():
        await kube.apply_json(CRDS, manifest())


async def until(
    check: Callable[[], Awaitable[bool]], failure: str, timeout: float, interval: float
) -> None:
    """Call `check` every `interval` seconds until it says True; TimeoutError(`failure`) after
    `timeout`. A 5xx answer counts as "not yet"; any other API error is raised."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if await check():
                return
        except ApiError as exc:
            if exc.status < 500:
                raise
        await asyncio.sleep(interval)
    raise TimeoutError(failure)


async def create_namespace(
    kube: KubeClient, name: str, timeout: float = 30, interval: float = 0.1
) -> None:
    """Create the namespace and wait until pods can be created in it (its default
    ServiceAccount exists)."""
    await kube.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )

    async def has_default_account() -> bool:
        accounts = (await kube.list(SERVICE_ACCOUNTS, name))["items"]
        return any(account["metadata"]["name"] == "default" for account in accounts)

    await until(has_default_account, f"no default ServiceAccount in {name}", timeout, interval)
