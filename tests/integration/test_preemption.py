"""Gang preemption on the real control plane: who is evicted, that the preemptor then runs,
and what is refused (equal priority, `preemptionPolicy: Never`).

Priorities come from PriorityClasses (scheduling.k8s.io/v1), so the apiserver's Priority
admission sets `spec.priority` and `spec.preemptionPolicy` on the pods as it would for any
workload. Sim nodes delete terminating pods, so evicted pods go away as on a kubelet.
"""

from __future__ import annotations

from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import (
    EVENTS,
    PDBS_V1BETA1,
    PODS,
    KubeClient,
)
from podgroup_operator.devcluster.process import OperatorProcess
from tests.conftest import PriorityClassFactory
from tests.kube_helpers import (
    create_group,
    create_pod,
    gang_pods,
    group_status,
    pool,
    refusal,
    sample,
    scheduling_attempts,
    scrape,
    wait_scheduling_attempts,
)
from tests.waiting import wait_for

PREEMPTIONS = "podgroup_preemptions_total"


async def pods_by_group(kube: KubeClient, namespace: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for pod in (await kube.list(PODS, namespace))["items"]:
        group = pod["metadata"]["labels"].get(c.LABEL_POD_GROUP, "")
        out.setdefault(group, []).append(pod)
    return out


async def running_gang(
    kube: KubeClient,
    namespace: str,
    name: str,
    pool_name: str,
    klass: str,
    count: int = 2,
    policy: dict[str, Any] | None = None,
    **pod_args: Any,
) -> list[dict[str, Any]]:
    spec = {} if policy is None else {"policy": policy}
    await create_group(kube, namespace, name, min_member=count, **spec)
    created = await gang_pods(
        kube, namespace, name, count, pool_name, group=name, priorityClassName=klass, **pod_args
    )

    async def running() -> bool:
        return (await group_status(kube, namespace, name)).get("phase") == c.Phase.RUNNING

    await wait_for(running, 30, f"gang {name} to run")
    return created


async def events(kube: KubeClient, namespace: str, involved: str, reason: str) -> list[JSON]:
    items = (await kube.list(EVENTS, namespace))["items"]
    return [
        e
        for e in items
        if e["involvedObject"].get("name") == involved and e.get("reason") == reason
    ]


JSON = dict[str, Any]


async def test_a_higher_priority_gang_preempts_exactly_the_lowest_whole_gang_and_runs(
    kube: KubeClient,
    operator: OperatorProcess,
    namespace: str,
    priority_class: PriorityClassFactory,
) -> None:
    low, mid, high = [await priority_class(v) for v in (100, 200, 1000)]
    async with pool(kube, count=2, cpu="2", memory="8Gi") as (_, name):
        # Two nodes of 2 cpu, full: "low" and "mid" run 2 x 1 cpu pods each.
        low_pods = await running_gang(kube, namespace, "low", name, low)
        mid_pods = await running_gang(kube, namespace, "mid", name, mid)
        evicted = sample(await scrape(operator), PREEMPTIONS)
        await create_group(kube, namespace, "high", min_member=2)
        await gang_pods(kube, namespace, "high", 2, name, group="high", priorityClassName=high)

        async def high_running() -> bool:
            return (await group_status(kube, namespace, "high")).get("phase") == c.Phase.RUNNING

        await wait_for(high_running, 60, "the high-priority gang to run")
        pods = await pods_by_group(kube, namespace)
        # The lowest-priority gang went whole; the other one is untouched.
        assert "low" not in pods, [p["metadata"]["name"] for p in pods.get("low", [])]
        assert sorted(p["metadata"]["uid"] for p in pods["mid"]) == sorted(
            p["metadata"]["uid"] for p in mid_pods
        )
        assert all(p["spec"].get("nodeName") for p in pods["high"])
        # Events on both sides name the other.
        (preempting,) = await events(kube, namespace, "high", c.Reason.PREEMPTING)
        assert "low" in preempting["message"], preempting
        (preempted,) = await events(kube, namespace, "low", c.Reason.PREEMPTED)
        assert f"{namespace}/high" in preempted["message"], preempted
        for pod in low_pods:
            (on_pod,) = await events(kube, namespace, pod["metadata"]["name"], c.Reason.PREEMPTED)
            assert f"{namespace}/high" in on_pod["message"]
        # Each deleted pod is counted (other tests may preempt at the same time: at least ours).
        assert sample(await scrape(operator), PREEMPTIONS) >= evicted + len(low_pods)


async def test_equal_priority_never_preempts(
    kube: KubeClient,
    operator: OperatorProcess,
    namespace: str,
    priority_class: PriorityClassFactory,
) -> None:
    same = await priority_class(500)
    async with pool(kube, count=1, cpu="2", memory="8Gi") as (_, name):
        first = await running_gang(kube, namespace, "first", name, same)
        refused = await scheduling_attempts(operator, "refused")
        await create_group(kube, namespace, "second", min_member=2)
        await gang_pods(kube, namespace, "second", 2, name, group="second", priorityClassName=same)
        await wait_scheduling_attempts(operator, "refused", since=refused, more=3)

        pods = await pods_by_group(kube, namespace)
        assert sorted(p["metadata"]["uid"] for p in pods["first"]) == sorted(
            p["metadata"]["uid"] for p in first
        )
        assert not any(p["metadata"].get("deletionTimestamp") for p in pods["first"])
        assert not any(p["spec"].get("nodeName") for p in pods["second"])
        assert await events(kube, namespace, "second", c.Reason.PREEMPTING) == []


async def test_preemption_policy_never_is_honoured(
    kube: KubeClient,
    operator: OperatorProcess,
    namespace: str,
    priority_class: PriorityClassFactory,
) -> None:
    low = await priority_class(100)
    polite = await priority_class(1000, never=True)
    async with pool(kube, count=1, cpu="2", memory="8Gi") as (_, name):
        victim = await running_gang(kube, namespace, "low", name, low)
        refused = await scheduling_attempts(operator, "refused")
        await create_group(kube, namespace, "polite", min_member=2)
        await gang_pods(
            kube, namespace, "polite", 2, name, group="polite", priorityClassName=polite
        )
        await wait_scheduling_attempts(operator, "refused", since=refused, more=3)

        pods = await pods_by_group(kube, namespace)
        assert sorted(p["metadata"]["uid"] for p in pods["low"]) == sorted(
            p["metadata"]["uid"] for p in victim
        )
        assert not any(p["metadata"].get("deletionTimestamp") for p in pods["low"])
        assert all(p["spec"].get("preemptionPolicy") == "Never" for p in pods["polite"])
        status = await group_status(kube, namespace, "polite")
        (unschedulable,) = [
            x for x in status.get("conditions", []) if x["type"] == c.ConditionType.UNSCHEDULABLE
        ]
        assert "preemptionPolicy is Never" in unschedulable["message"], unschedulable


async def test_a_pdb_protected_gang_is_chosen_last(
    kube: KubeClient,
    operator: OperatorProcess,
    namespace: str,
    priority_class: PriorityClassFactory,
) -> None:
    low = await priority_class(100)
    high = await priority_class(1000)
    async with pool(kube, count=2, cpu="2", memory="8Gi") as (_, name):
        # "guarded" (one 2-cpu pod) would be the cheaper victim (fewer pods per member freed),
        # but a PodDisruptionBudget allows no disruption of it: "plain" goes instead.
        guarded = await running_gang(
            kube, namespace, "guarded", name, low, count=1, requests={"cpu": "2"}
        )
        await kube.create(
            PDBS_V1BETA1,
            {
                "apiVersion": "policy/v1beta1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "guard"},
                "spec": {
                    "minAvailable": 1,
                    "selector": {"matchLabels": {c.LABEL_POD_GROUP: "guarded"}},
                },
            },
            namespace,
        )

        async def budget_computed() -> bool:
            status = (await kube.get(PDBS_V1BETA1, "guard", namespace)).get("status") or {}
            return status.get("expectedPods") == 1 and status.get("disruptionsAllowed") == 0

        await wait_for(budget_computed, 30, "the disruption controller to compute the budget")
        plain = await running_gang(kube, namespace, "plain", name, low)
        await create_group(kube, namespace, "high", min_member=2)
        await gang_pods(kube, namespace, "high", 2, name, group="high", priorityClassName=high)

        async def high_running() -> bool:
            return (await group_status(kube, namespace, "high")).get("phase") == c.Phase.RUNNING

        await wait_for(high_running, 60, "the high-priority gang to run")
        pods = await pods_by_group(kube, namespace)
        assert [p["metadata"]["uid"] for p in pods["guarded"]] == [
            p["metadata"]["uid"] for p in guarded
        ]
        assert "plain" not in pods, [p["metadata"]["name"] for p in pods.get("plain", [])]
        assert plain


async def test_the_victim_group_says_who_preempted_it_and_is_not_charged_a_restart(
    kube: KubeClient,
    operator: OperatorProcess,
    namespace: str,
    priority_class: PriorityClassFactory,
) -> None:
    low = await priority_class(100)
    high = await priority_class(1000)
    policy = {"action": "RestartGang", "maxRestarts": 1, "backoffSeconds": 30}
    async with pool(kube, count=1, cpu="2", memory="8Gi") as (_, name):
        victims = await running_gang(kube, namespace, "low", name, low, policy=policy)
        await create_group(kube, namespace, "high", min_member=2)
        await gang_pods(kube, namespace, "high", 2, name, group="high", priorityClassName=high)

        async def restarted_uncharged() -> JSON | None:
            status = await group_status(kube, namespace, "low")
            types = {x["type"] for x in status.get("conditions", [])}
            restarted = status.get("lastRestartTime")
            return status if restarted and c.ConditionType.PREEMPTED in types else None

        # A charged restart would wait out the 30 s backoff first; this one is at once.
        status = await wait_for(restarted_uncharged, 20, "the preempted gang to be restarted")
        assert status.get("restarts", 0) == 0, status
        (preempted,) = [
            x for x in status.get("conditions", []) if x["type"] == c.ConditionType.PREEMPTED
        ]
        assert preempted["status"] == c.ConditionStatus.TRUE
        assert f"preempted by {namespace}/high" in preempted["message"], preempted

        async def high_running() -> bool:
            return (await group_status(kube, namespace, "high")).get("phase") == c.Phase.RUNNING

        await wait_for(high_running, 60, "the high-priority gang to run")
        # The bare members were recreated by the restart and wait: the room is the preemptor's.
        pods = await pods_by_group(kube, namespace)
        old = {p["metadata"]["uid"] for p in victims}
        assert not old & {p["metadata"]["uid"] for p in pods.get("low", [])}
        assert not any(p["spec"].get("nodeName") for p in pods.get("low", []))


async def test_room_another_scheduler_nominated_its_pod_to_is_left_to_it_by_gangs_not_above_it(
    kube: KubeClient,
    operator: OperatorProcess,
    namespace: str,
    priority_class: PriorityClassFactory,
) -> None:
    """kube-scheduler's preemption names a node for its pod (`status.nominatedNodeName`) and
    waits for the victims to go; its filters keep that room for the pod from pods of no higher
    priority. Ours do too: a gang of the same priority waits, a higher one takes the room, and
    once the nomination is withdrawn the first gang is placed."""
    mid, high = await priority_class(100), await priority_class(1000)
    async with pool(kube, count=1, cpu="8") as (sim, pool_name):
        node = sim.node_names[0]
        await create_pod(
            kube,
            namespace,
            "theirs",
            requests={"cpu": "6"},
            scheduler=c.DEFAULT_SCHEDULER_NAME + "-elsewhere",
            priorityClassName=mid,
        )
        await kube.patch_status(PODS, "theirs", namespace, {"nominatedNodeName": node})

        async def gang_of_one(name: str, klass: str) -> None:
            await create_group(kube, namespace, name, min_member=1)
            await gang_pods(
                kube,
                namespace,
                name,
                1,
                pool_name,
                group=name,
                requests={"cpu": "4"},
                priorityClassName=klass,
            )

        await gang_of_one("low", mid)
        assert "Insufficient cpu" in (await refusal(kube, namespace, "low"))["message"]
        await gang_of_one("high", high)

        async def node_of(name: str) -> str | None:
            return (await kube.get(PODS, name, namespace))["spec"].get("nodeName")

        assert await wait_for(lambda: node_of("high-0"), 30, "the higher gang bound") == node
        assert not await node_of("low-0")
        await kube.patch_status(PODS, "theirs", namespace, {"nominatedNodeName": None})
        assert await wait_for(lambda: node_of("low-0"), 30, "the first gang bound") == node
