"""Nothing is kept about groups and pods once they are gone (the in-memory API server).

Why: a busy cluster creates and deletes groups all day. The status reconciler kept every
group's last verdict, quota view and preemption, and the scheduler every refused group's last
message, for as long as the operator ran (one entry per gang of one, too: every plain pod it
placed). The same on the real control plane: tests/integration/test_own_cluster.py.
"""

from __future__ import annotations

import contextlib
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import EVENTS, PODGROUPS, PODS, KubeClient
from podgroup_operator.controllers.runtime import Leading, Runtime
from tests.builders import node, pod, podgroup
from tests.fakes import FakeApiServer
from tests.kept import delete_all, kept
from tests.unit.controllers.test_runtime_unit import leading_over
from tests.waiting import until, wait_for

NS = "churn"


async def create(kube: KubeClient, body: dict[str, Any]) -> dict[str, Any]:
    """Create `body` as a client would: without what the API server assigns."""
    body["metadata"].pop("uid", None)
    body["metadata"].pop("creationTimestamp", None)
    body.pop("status", None)
    kind = PODGROUPS if body["kind"] == c.KIND else PODS
    return await kube.create(kind, body, NS)


def member(name: str, group: str | None, cpu: str, **extra: Any) -> dict[str, Any]:
    return pod(name, NS, group=group, requests={"cpu": cpu}, scheduler=c.SCHEDULER_NAME, **extra)


async def churn(kube: KubeClient, runtime: Runtime, leading: Leading) -> set[str]:
    """Groups placed and refused, a gang of one, a quota reservation, pods warned about; all
    of them deleted once the runtime has them in mind. Returns the pods' UIDs."""
    leading.status.count_delay = 0  # pods of a missing group are warned at once
    for name, cpu in (("fits", "500m"), ("waits", "2")):
        await create(kube, podgroup(name, NS, min_member=2))
        for i in range(2):
            await create(kube, member(f"{name}-{i}", name, cpu))
    await create(kube, member("alone", None, "100m"))
    await create(kube, podgroup("reserved", NS, min_member=1, totalResources={"cpu": "1"}))
    await create(kube, member("orphan", "nobody", "100m"))
    bad = {c.LABEL_LIGHTWEIGHT_NAME: "bad", c.LABEL_LIGHTWEIGHT_MIN_AVAILABLE: "9" * 20}
    await create(kube, member("bad-labels", None, "100m", labels=bad))

    async def warned() -> bool:
        reasons = {e.get("reason") for e in (await kube.list(EVENTS, NS))["items"]}
        return {c.Reason.MISSING_POD_GROUP, c.Reason.INVALID_GANG_LABELS} <= reasons

    await wait_for(warned, 10, "the orphan and the bad labels warned about")
    await until(
        lambda: (
            {(NS, "fits"), (NS, "waits")} <= leading.status.verdicts.keys()
            and (NS, "reserved") in leading.status.quota_views
        ),
        "both gangs decided, and the reservation's view published",
        10,
    )
    uids = await delete_all(kube, NS, [leading, runtime.quota])
    await until(
        lambda: (
            not any(
                (o.get("metadata") or {}).get("namespace") == NS
                for informer in (runtime.informers.pods, runtime.informers.podgroups)
                for o in informer.store.objects()
            )
        ),
        "the informers to see everything gone",
        10,
    )
    return uids


async def test_nothing_is_kept_about_groups_and_pods_once_they_are_gone() -> None:
    api = FakeApiServer()
    api.seed(node("n1", cpu=2))
    async with leading_over(api) as (runtime, leading):
        uids = await churn(runtime.kube, runtime, leading)
        with contextlib.suppress(AssertionError):
            await until(lambda: not kept([leading, runtime.quota], NS, uids), "forgotten", 1)
        assert kept([leading, runtime.quota], NS, uids) == {}
