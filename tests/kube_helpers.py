"""Helpers for tests on the real control plane: create pods, bind them, wait for phases."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from podgroup_operator.adapters.kube import PODS, ApiError, KubeClient
from tests.builders import pod as pod_body
from tests.waiting import wait_for


def unique_prefix() -> str:
    return f"sim-{uuid.uuid4().hex[:6]}"


async def create_pod(
    kube: KubeClient, namespace: str, name: str, *, scheduler: str | None = "nobody", **kwargs: Any
) -> dict[str, Any]:
    """Create a pod (builders.pod shape, minus server-owned fields); retry while the fresh
    namespace's default ServiceAccount does not exist yet (admission refuses until then)."""
    body = pod_body(name, namespace, scheduler=scheduler, **kwargs)
    for field in ("uid", "creationTimestamp"):
        body["metadata"].pop(field)
    body.pop("status")
    for container in body["spec"]["containers"]:
        requests = container.get("resources", {}).get("requests", {})
        # Extended resources cannot be overcommitted: the apiserver wants limits == requests.
        extended = {k: v for k, v in requests.items() if "/" in k}
        if extended:
            container["resources"]["limits"] = extended
    # By default no scheduler claims the pod (tests bind by hand); None leaves the field unset.
    deadline = time.monotonic() + 15
    while True:
        try:
            return await kube.create(PODS, body, namespace)
        except ApiError as exc:
            if "serviceaccount" not in exc.message.replace(" ", "").lower():
                raise
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def create_bound(
    kube: KubeClient, namespace: str, name: str, node: str, **kwargs: Any
) -> dict[str, Any]:
    created = await create_pod(kube, namespace, name, **kwargs)
    await kube.bind(namespace, name, node, created["metadata"]["uid"])
    return created


async def pod_in_phase(kube: KubeClient, namespace: str, name: str, phase: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        current = await kube.get(PODS, name, namespace)
        return current if current.get("status", {}).get("phase") == phase else None

    return await wait_for(probe, 20, f"{namespace}/{name} to be {phase}")


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    matches = [cond for cond in obj["status"].get("conditions", []) if cond["type"] == kind]
    assert matches, f"no {kind} condition in {obj['status']}"
    return matches[0]
