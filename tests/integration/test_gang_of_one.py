"""A pod outside any gang is a gang of one, judged by its own pod's priority, on the real
control plane with the operator and its webhooks running.

Priorities come from PriorityClasses, so the apiserver's Priority admission sets
`spec.priority` on the pods as it would for any workload.
"""

from __future__ import annotations

from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import PODS, KubeClient
from podgroup_operator.devcluster.process import OperatorProcess
from tests.conftest import PriorityClassFactory
from tests.kube_helpers import create_group, create_pod, group_status, pool, wait_group
from tests.waiting import wait_for

JSON = dict[str, Any]


async def lone_pod(
    kube: KubeClient, namespace: str, name: str, pool_name: str, **args: Any
) -> JSON:
    return await create_pod(
        kube,
        namespace,
        name,
        scheduler=c.SCHEDULER_NAME,
        nodeSelector={"pool": pool_name},
        **args,
    )


async def member(kube: KubeClient, namespace: str, name: str, pool_name: str, **args: Any) -> JSON:
    return await lone_pod(kube, namespace, name, pool_name, group="pg", **args)


def node_of(pod: JSON) -> str | None:
    return (pod.get("spec") or {}).get("nodeName")


async def test_lone_pods_of_higher_priority_preempt_a_gang_whole(
    kube: KubeClient,
    operator: OperatorProcess,
    namespace: str,
    priority_class: PriorityClassFactory,
) -> None:
    """The issue's first scenario: one node of 300 memory; a gang of 3 x 50 at priority 100
    and three lone pods of 100 at priority 1000, created interleaved. Evicting the gang makes
    room for the two lone pods left waiting; the gang goes whole and is told by whom."""
    low, high = await priority_class(100), await priority_class(1000)
    gang_args = {"requests": {"cpu": "100m", "memory": "50Mi"}, "priorityClassName": low}
    lone_args = {"requests": {"cpu": "100m", "memory": "100Mi"}, "priorityClassName": high}
    async with pool(kube, count=1, cpu="8", memory="300Mi") as (_, name):
        await create_group(kube, namespace, "pg", min_member=3)
        await member(kube, namespace, "pg-0", name, **gang_args)
        await lone_pod(kube, namespace, "server-0", name, **lone_args)
        await member(kube, namespace, "pg-1", name, **gang_args)
        await member(kube, namespace, "pg-2", name, **gang_args)
        gang = await wait_group(kube, namespace, "pg", phase=c.Phase.RUNNING)
        assert gang  # 250 of 300 taken: the gang and the first lone pod
        await lone_pod(kube, namespace, "server-1", name, **lone_args)
        await lone_pod(kube, namespace, "server-2", name, **lone_args)

        async def servers_bound() -> list[JSON] | None:
            pods = [await kube.get(PODS, f"server-{i}", namespace) for i in range(3)]
            return pods if all(node_of(p) for p in pods) else None

        servers = await wait_for(servers_bound, 60, "the three priority-1000 pods bound")
        assert all(p["spec"]["priority"] == 1000 for p in servers)

        async def preempted() -> JSON | None:
            status = await group_status(kube, namespace, "pg")
            conditions = status.get("conditions") or []
            return next((x for x in conditions if x["type"] == c.ConditionType.PREEMPTED), None)

        condition = await wait_for(preempted, 30, "the gang's Preempted condition")
        assert condition["status"] == c.ConditionStatus.TRUE
        message = condition["message"]
        assert any(f"preempted by {namespace}/pod:server-{i}" in message for i in (1, 2)), message
        # Whole: none of the gang's pods is left bound.
        left = (await kube.list(PODS, namespace, label_selector=f"{c.LABEL_POD_GROUP}=pg"))["items"]
        assert [
            p["metadata"]["name"] for p in left if not p["metadata"].get("deletionTimestamp")
        ] == []


async def test_a_lone_pod_of_lower_priority_never_preempts_a_gang(
    kube: KubeClient,
    operator: OperatorProcess,
    namespace: str,
    priority_class: PriorityClassFactory,
) -> None:
    """The reverse: the lone pod says why it waits (its PodScheduled condition), and the gang
    keeps every pod it had."""
    low, mid = await priority_class(10), await priority_class(100)
    async with pool(kube, count=1, cpu="8", memory="300Mi") as (_, name):
        await create_group(kube, namespace, "pg", min_member=3)
        members = [
            await member(
                kube,
                namespace,
                f"pg-{i}",
                name,
                requests={"cpu": "100m", "memory": "100Mi"},
                priorityClassName=mid,
            )
            for i in range(3)
        ]
        await wait_group(kube, namespace, "pg", phase=c.Phase.RUNNING)
        await lone_pod(
            kube,
            namespace,
            "batch",
            name,
            requests={"cpu": "100m", "memory": "100Mi"},
            priorityClassName=low,
        )

        async def refused() -> JSON | None:
            pod = await kube.get(PODS, "batch", namespace)
            cond = next(
                (
                    x
                    for x in (pod.get("status") or {}).get("conditions") or []
                    if x["type"] == c.PodConditionType.POD_SCHEDULED
                ),
                None,
            )
            return cond if cond and "no preemption" in cond.get("message", "") else None

        condition = await wait_for(refused, 30, "the lone pod's PodScheduled condition")
        assert condition["status"] == "False"
        assert "evicting every gang of priority below 10" in condition["message"], condition
        pods = (await kube.list(PODS, namespace, label_selector=f"{c.LABEL_POD_GROUP}=pg"))["items"]
        assert sorted(p["metadata"]["uid"] for p in pods) == sorted(
            p["metadata"]["uid"] for p in members
        )
        assert not any(p["metadata"].get("deletionTimestamp") for p in pods)
        assert not node_of(await kube.get(PODS, "batch", namespace))
