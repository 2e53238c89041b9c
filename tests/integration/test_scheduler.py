"""The bundled gang scheduler on the real control plane, with the operator running.

Each test brings its own sim node pool, labelled with a unique `pool` value, and its pods select
that pool; so tests share one control plane without sharing capacity.
"""

from __future__ import annotations

import asyncio
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import EVENTS, NAMESPACES, PODGROUPS, PODS, Kind, KubeClient
from podgroup_operator.controllers.scheduler import (
    DECIDE_IN_THREAD_COST_US,
    DECIDE_IN_THREAD_MEMBERS,
)
from podgroup_operator.devcluster import keys as sim_keys
from podgroup_operator.devcluster.process import OperatorProcess
from podgroup_operator.scheduling.gang import POD_TERM_COST
from tests.builders import replicaset
from tests.kube_helpers import (
    create_bound,
    create_group,
    create_pod,
    gang_pods,
    group_status,
    pool,
    sample,
    scheduling_attempts,
    scrape,
    wait_group,
    wait_scheduling_attempts,
)
from tests.waiting import until, wait_for

REPLICASETS = Kind("apps", "v1", "replicasets")


async def pods_of(
    kube: KubeClient, namespace: str, selector: str | None = None
) -> list[dict[str, Any]]:
    return list((await kube.list(PODS, namespace, label_selector=selector))["items"])


def bound(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in pods if p["spec"].get("nodeName")]


def condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((x for x in status.get("conditions", []) if x["type"] == kind), None)


async def test_two_gangs_that_cannot_both_fit_never_both_partly_placed(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    # 2 nodes x 4 cpu = room for one gang of 6 x 1 cpu? No: 8 cpu total, each gang needs 6.
    async with pool(kube, count=2, cpu="4", memory="16Gi") as (_, name):
        await create_group(kube, namespace, "a", min_member=6)
        await create_group(kube, namespace, "b", min_member=6)
        await asyncio.gather(
            gang_pods(kube, namespace, "a", 6, name, group="a"),
            gang_pods(kube, namespace, "b", 6, name, group="b"),
        )

        async def one_gang_whole() -> bool:
            placed = bound(await pods_of(kube, namespace))
            return len(placed) == 6

        await wait_for(one_gang_whole, 20, "one whole gang placed")
        # The loser is decided again in later cycles: a wrong scheduler would place some of it.
        refused = await scheduling_attempts(operator, "refused")
        await wait_scheduling_attempts(operator, "refused", since=refused, more=2)
        placed = bound(await pods_of(kube, namespace))
        groups = {p["metadata"]["labels"][c.LABEL_POD_GROUP] for p in placed}
        assert len(placed) == 6 and len(groups) == 1, [p["metadata"]["name"] for p in placed]
        loser = ({"a", "b"} - groups).pop()

        async def explained() -> dict[str, Any] | None:
            cond = condition(await group_status(kube, namespace, loser), "Unschedulable")
            return cond if cond and cond["reason"] == c.Reason.NOT_ENOUGH_RESOURCES else None

        cond = await wait_for(explained, 10, f"{loser} to explain why it waits")
        assert "cpu" in cond["message"], cond


async def test_replicaset_of_six_with_room_for_three_runs_exactly_three(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    async with pool(kube, count=1, cpu="3", memory="16Gi") as (_, name):
        await create_group(kube, namespace, "rs", min_member=3)
        template = {
            "metadata": {"labels": {"app": "rs", c.LABEL_POD_GROUP: "rs"}},
            "spec": {
                "schedulerName": c.SCHEDULER_NAME,
                "nodeSelector": {"pool": name},
                "containers": [
                    {"name": "w", "image": "x", "resources": {"requests": {"cpu": "1"}}}
                ],
            },
        }
        await kube.create(REPLICASETS, replicaset("rs", 6, template), namespace)

        async def running() -> dict[str, Any] | None:
            status = await group_status(kube, namespace, "rs")
            return status if status.get("phase") == c.Phase.RUNNING else None

        status = await wait_for(running, 30, "the ReplicaSet's gang to run")
        # The three extra members are tried one by one and refused: no room is made up.
        refused = await scheduling_attempts(operator, "refused")
        await wait_scheduling_attempts(operator, "refused", since=refused, more=2)
        pods = await pods_of(kube, namespace, "app=rs")
        assert len(pods) == 6
        assert len(bound(pods)) == 3 and status["running"] == 3


async def test_gpu_gang_lands_on_gpu_nodes(kube: KubeClient, operator: Any, namespace: str) -> None:
    async with pool(kube, count=2, cpu="16", memory="64Gi", gpu=4) as (_, name):
        await create_group(kube, namespace, "gpu", min_member=2)
        gpu = {"cpu": "2", "nvidia.com/gpu": "4"}
        await gang_pods(kube, namespace, "g", 2, name, group="gpu", requests=gpu)

        async def both_bound() -> list[dict[str, Any]]:
            placed = bound(await pods_of(kube, namespace))
            return placed if len(placed) == 2 else []

        placed = await wait_for(both_bound, 20, "the GPU gang to be bound")
        assert len({p["spec"]["nodeName"] for p in placed}) == 2  # 4 GPUs each: one per node

        # A third 4-GPU gang member set cannot fit: refused with a GPU shortfall.
        await create_group(kube, namespace, "gpu2", min_member=1)
        await gang_pods(kube, namespace, "h", 1, name, group="gpu2", requests=gpu)

        async def gpu_short() -> str | None:
            # The scheduler's refusal, not the lifecycle's NotEnoughTasks from before the pod came.
            cond = condition(await group_status(kube, namespace, "gpu2"), "Unschedulable")
            return (
                cond["message"]
                if cond and cond["reason"] == c.Reason.NOT_ENOUGH_RESOURCES
                else None
            )

        message = await wait_for(gpu_short, 15, "gpu2 to be refused")
        assert "nvidia.com/gpu" in message, message


async def test_taints_and_selectors(kube: KubeClient, operator: Any, namespace: str) -> None:
    taint = {"key": "dedicated", "value": "train", "effect": "NoSchedule"}
    async with pool(kube, count=1, cpu="8", memory="16Gi", taints=[taint]) as (_, name):
        await create_group(kube, namespace, "intolerant", min_member=1)
        await gang_pods(kube, namespace, "i", 1, name, group="intolerant")
        await create_group(kube, namespace, "tolerant", min_member=1)
        toleration = [
            {"key": "dedicated", "operator": "Equal", "value": "train", "effect": "NoSchedule"}
        ]
        await gang_pods(kube, namespace, "t", 1, name, group="tolerant", tolerations=toleration)

        async def tolerant_bound() -> bool:
            return bool((await kube.get(PODS, "t-0", namespace))["spec"].get("nodeName"))

        await wait_for(tolerant_bound, 20, "the tolerating pod to be bound")

        async def taint_explained() -> str | None:
            cond = condition(await group_status(kube, namespace, "intolerant"), "Unschedulable")
            return cond["message"] if cond and cond["status"] == "True" else None

        message = await wait_for(taint_explained, 15, "the intolerant gang to be refused")
        assert "taint" in message, message
        assert not (await kube.get(PODS, "i-0", namespace))["spec"].get("nodeName")


async def test_gang_whose_podgroup_comes_after_its_pods(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    async with pool(kube, count=1, cpu="8", memory="16Gi") as (_, name):
        await gang_pods(kube, namespace, "late", 2, name, group="late")
        # A gang made after them is placed: the scheduler has seen the late pods by then.
        await create_group(kube, namespace, "probe", min_member=1)
        await gang_pods(kube, namespace, "probe", 1, name, group="probe")

        async def probe_bound() -> bool:
            return bool((await kube.get(PODS, "probe-0", namespace))["spec"].get("nodeName"))

        await wait_for(probe_bound, 20, "a later gang to be placed")
        late = await pods_of(kube, namespace, f"{c.LABEL_POD_GROUP}=late")
        assert not bound(late), "pods without a PodGroup must wait"
        await create_group(kube, namespace, "late", min_member=2)

        async def both_bound() -> bool:
            late = await pods_of(kube, namespace, f"{c.LABEL_POD_GROUP}=late")
            return len(bound(late)) == 2

        await wait_for(both_bound, 20, "the gang to be placed once its PodGroup exists")


async def test_a_gang_migrated_from_scheduler_plugins_with_its_status_runs(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    """A group whose status scheduler-plugins wrote (its `Scheduling` phase), and with a value
    another writer left that this operator cannot read: both were once read as an invalid
    PodGroup, its status left alone and its gang never scheduled."""
    async with pool(kube, count=1, cpu="8", memory="16Gi") as (_, name):
        await create_group(kube, namespace, "moved", min_member=2)
        left = {"phase": "Scheduling", "occupiedBy": f"{namespace}/job", "scheduled": 1}
        left["reservation"] = {"reserved": {"cpu": "1e30"}}
        await kube.patch_status(PODGROUPS, "moved", namespace, left)
        await gang_pods(kube, namespace, "moved", 2, name, group="moved")
        status = await wait_group(kube, namespace, "moved", phase=c.Phase.RUNNING, running=2)
        assert status["occupiedBy"] == f"{namespace}/job"
        assert "reservation" not in status

        async def said() -> list[dict[str, Any]]:
            events = (await kube.list(EVENTS, namespace))["items"]
            return [e for e in events if e["reason"] == c.Reason.STATUS_REWRITTEN]

        (event,) = await wait_for(said, 10, "a Warning naming the fields rewritten")
        assert event["involvedObject"]["name"] == "moved"
        assert "status.phase: must be one of" in event["message"]
        assert "not 'Scheduling'" in event["message"]
        assert "status.reservation.reserved.cpu: '1e30' is too large" in event["message"]


async def test_gang_group_across_two_namespaces(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    other = f"{namespace}-b"
    await kube.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}}
    )
    try:
        async with pool(kube, count=1, cpu="4", memory="16Gi") as (_, name):
            gang = [f"{namespace}/left", f"{other}/right"]
            await create_group(kube, namespace, "left", min_member=2, gangGroup=gang)
            await create_group(kube, other, "right", min_member=2, gangGroup=gang)
            # right needs 3 cpu: together 2 + 3 > 4, so neither may bind.
            await gang_pods(kube, namespace, "l", 2, name, group="left")
            await gang_pods(kube, other, "r", 2, name, group="right", requests={"cpu": "1500m"})

            async def refused_whole() -> bool:
                cond = condition(await group_status(kube, other, "right"), "Unschedulable")
                return bool(cond and cond["reason"] == c.Reason.NOT_ENOUGH_RESOURCES)

            # Decided with every member present, and decided again since: still nothing bound.
            await wait_for(refused_whole, 20, "the gang group to be refused for resources")
            refused = await scheduling_attempts(operator, "refused")
            await wait_scheduling_attempts(operator, "refused", since=refused, more=2)
            assert not bound(await pods_of(kube, namespace)) and not bound(
                await pods_of(kube, other)
            )
            # Shrink right's demand (recreate smaller pods): now both fit, and both bind.
            for pod in await pods_of(kube, other):
                await kube.delete(PODS, pod["metadata"]["name"], other, uid=pod["metadata"]["uid"])
            await gang_pods(kube, other, "s", 2, name, group="right", requests={"cpu": "1"})

            async def all_bound() -> bool:
                left = bound(await pods_of(kube, namespace))
                right = bound(await pods_of(kube, other))
                return len(left) == 2 and len(right) == 2

            await wait_for(all_bound, 20, "the gang group to be placed together")
    finally:
        await kube.delete(NAMESPACES, other)


async def test_gang_group_lists_that_disagree_start_together_as_the_lists_joined_say(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    """zz lists [zz, xx]; xx lists [xx, ww]; ww comes later. Decided by one list alone, zz
    (or xx) was placed without what the other's list waits for."""
    async with pool(kube, count=1, cpu="4", memory="16Gi") as (_, name):
        await create_group(
            kube, namespace, "zz", min_member=1, gangGroup=[f"{namespace}/zz", f"{namespace}/xx"]
        )
        await create_group(
            kube, namespace, "xx", min_member=1, gangGroup=[f"{namespace}/xx", f"{namespace}/ww"]
        )
        await gang_pods(kube, namespace, "z", 1, name, group="zz")
        await gang_pods(kube, namespace, "x", 1, name, group="xx")

        async def waits_for_ww() -> bool:
            cond = condition(await group_status(kube, namespace, "zz"), "Unschedulable")
            return bool(cond and f"{namespace}/ww has 0 member pod(s)" in cond["message"])

        await wait_for(waits_for_ww, 20, "zz to wait for ww, which xx's list names")
        assert not bound(await pods_of(kube, namespace))
        await create_group(
            kube, namespace, "ww", min_member=1, gangGroup=[f"{namespace}/xx", f"{namespace}/ww"]
        )
        await gang_pods(kube, namespace, "w", 1, name, group="ww")

        async def all_bound() -> bool:
            return len(bound(await pods_of(kube, namespace))) == 3

        await wait_for(all_bound, 30, "the three to be placed once ww's pod exists")


async def test_lightweight_gang_from_labels_alone(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    async with pool(kube, count=1, cpu="8", memory="16Gi") as (_, name):
        labels = {c.LABEL_LIGHTWEIGHT_NAME: "light", c.LABEL_LIGHTWEIGHT_MIN_AVAILABLE: "3"}
        await gang_pods(kube, namespace, "lw", 3, name, labels=labels)

        async def created() -> dict[str, Any] | None:
            items = (await kube.list(PODGROUPS, namespace))["items"]
            return next((g for g in items if g["metadata"]["name"] == "light"), None)

        group = await wait_for(created, 15, "a PodGroup for the lightweight gang")
        assert group["spec"]["minMember"] == 3
        assert group["metadata"]["labels"][c.LABEL_MANAGED_BY] == c.OPERATOR_NAME

        async def running() -> bool:
            return (await group_status(kube, namespace, "light")).get("phase") == c.Phase.RUNNING

        await wait_for(running, 20, "the lightweight gang to run")
        for pod in await pods_of(kube, namespace):
            await kube.delete(PODS, pod["metadata"]["name"], namespace, uid=pod["metadata"]["uid"])

        async def removed() -> bool:
            return await created() is None

        await wait_for(removed, 20, "the operator-made PodGroup to go with its pods")


async def test_webhook_routes_members_only_in_opted_in_namespaces(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    opted = f"{namespace}-in"
    await kube.create(
        NAMESPACES,
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": opted,
                "labels": {c.NAMESPACE_LABEL_GANG_SCHEDULING: c.OPT_IN_VALUE},
            },
        },
    )
    try:
        member = await create_pod(kube, opted, "member", group="g", scheduler=None)
        annotated = await create_pod(kube, opted, "annotated", group_annotation="g", scheduler=None)
        loner = await create_pod(kube, opted, "loner", scheduler=None)
        custom = await create_pod(kube, opted, "custom", group="g", scheduler="my-scheduler")
        outside = await create_pod(kube, namespace, "outside", group="g", scheduler=None)
        assert member["spec"]["schedulerName"] == c.SCHEDULER_NAME
        assert annotated["spec"]["schedulerName"] == c.SCHEDULER_NAME
        assert loner["spec"]["schedulerName"] == c.DEFAULT_SCHEDULER_NAME
        assert custom["spec"]["schedulerName"] == "my-scheduler"
        assert outside["spec"]["schedulerName"] == c.DEFAULT_SCHEDULER_NAME
    finally:
        await kube.delete(NAMESPACES, opted)


async def test_timeout_and_scheduled_conditions(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    async with pool(kube, count=1, cpu="2", memory="16Gi") as (_, name):
        await create_group(kube, namespace, "never", min_member=3, scheduleTimeoutSeconds=2)
        await gang_pods(kube, namespace, "n", 3, name, group="never")

        async def timed_out() -> dict[str, Any] | None:
            cond = condition(await group_status(kube, namespace, "never"), "Unschedulable")
            return cond if cond and cond["reason"] == c.Reason.SCHEDULE_TIMEOUT else None

        cond = await wait_for(timed_out, 20, "ScheduleTimeout after scheduleTimeoutSeconds")
        assert cond["status"] == "True" and "cpu" in cond["message"], cond
        assert not bound(await pods_of(kube, namespace))

        await create_group(kube, namespace, "fits", min_member=2)
        await gang_pods(kube, namespace, "f", 2, name, group="fits")

        async def scheduled() -> dict[str, Any] | None:
            cond = condition(await group_status(kube, namespace, "fits"), "Scheduled")
            return cond if cond and cond["status"] == "True" else None

        cond = await wait_for(scheduled, 20, "the Scheduled condition of the placed gang")
        assert cond["reason"] == c.Reason.GANG_SCHEDULED
        assert (await group_status(kube, namespace, "fits"))["scheduled"] == 2


async def test_a_placed_gang_slower_to_start_than_the_count_delay_is_first_written_running(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    """Its members start 4 s after their binds, past the 2 s count delay: the first status
    waits for them, one write (`Running`) instead of `Pending` and then `Running`."""
    async with pool(kube, count=1, cpu="4", memory="16Gi") as (_, name):
        slow = {sim_keys.SIM_ANNOTATION_START_DELAY: "4"}
        # Pods first: a group seen with one member of two is refused ("short 1 pod"), and a
        # refusal is written at once.
        await gang_pods(kube, namespace, "s", 2, name, group="slow", annotations=slow)
        await create_group(kube, namespace, "slow", min_member=2)

        async def narrated() -> list[str] | None:
            events = await kube.list(
                EVENTS, namespace, field_selector="involvedObject.kind=PodGroup"
            )
            changes = [
                e["message"].split(":")[0]
                for e in events["items"]
                if e["reason"] == c.Reason.PHASE_CHANGED
            ]
            return changes if "new -> Running" in changes else None

        # A `Pending` write would have come about 2 s before `Running`, its Event with it.
        assert await wait_for(narrated, 30, "the gang's new -> Running Event") == ["new -> Running"]
        status = await group_status(kube, namespace, "slow")
        assert (status["phase"], status["running"]) == (c.Phase.RUNNING, 2)


async def test_a_pending_gang_placed_later_writes_no_count_while_its_members_start(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    """A group already written `Pending` (it waited for its pods), then placed: its members
    start 1 s and 5 s after their binds. The first start is count-only progress, and it waits
    with the binds for the gang's start (domain/status_hold.py, `change_hold`): no status says
    `Pending` with one member running; `Running` carries the counts."""
    async with pool(kube, count=1, cpu="4", memory="16Gi") as (_, name):
        await create_group(kube, namespace, "held", min_member=2)
        await wait_group(kube, namespace, "held", phase=c.Phase.PENDING)
        version = (await kube.get(PODGROUPS, "held", namespace))["metadata"]["resourceVersion"]
        seen: list[dict[str, Any]] = []

        async def record() -> None:
            async for _, body in kube.watch(
                PODGROUPS, namespace, resource_version=version, timeout_seconds=60
            ):
                seen.append(dict(body.get("status") or {}))

        watching = asyncio.create_task(record())
        try:
            await asyncio.gather(
                *(
                    create_pod(
                        kube,
                        namespace,
                        f"held-{index}",
                        group="held",
                        requests={"cpu": "1"},
                        scheduler=c.SCHEDULER_NAME,
                        nodeSelector={"pool": name},
                        annotations={sim_keys.SIM_ANNOTATION_START_DELAY: delay},
                    )
                    for index, delay in enumerate(("1", "5"))
                )
            )
            await until(
                lambda: any(x.get("phase") == c.Phase.RUNNING for x in seen),
                "the watch to bring the group's Running status",
                timeout=30,
            )
        finally:
            watching.cancel()
            await asyncio.gather(watching, return_exceptions=True)
    pending = [
        (x.get("scheduled", 0), x.get("running", 0))
        for x in seen
        if x.get("phase") == c.Phase.PENDING
    ]
    assert all(running == 0 for _, running in pending), pending
    running = next(x for x in seen if x.get("phase") == c.Phase.RUNNING)
    assert (running["scheduled"], running["running"]) == (2, 2)


async def test_kubectl_podgroup_plugin_explains_waiting_gangs(
    kube: KubeClient, kubeconfig: Any, operator: Any, namespace: str
) -> None:
    """`kubectl podgroup -n NS` lists the namespace's gangs with the reason each waits (like
    kubectl, the NAMESPACE column only comes with -A)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    await create_group(kube, namespace, "lonely", min_member=2)

    async def waiting() -> bool:
        cond = condition(await group_status(kube, namespace, "lonely"), "Unschedulable")
        return bool(cond and cond["reason"] == c.Reason.NOT_ENOUGH_TASKS)

    await wait_for(waiting, 10, "the gang to wait for its members")
    plugin = Path(sys.executable).with_name("kubectl-podgroup")
    result = await asyncio.to_thread(
        subprocess.run,
        [str(plugin), "-n", namespace],
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        capture_output=True,
        text=True,
        check=True,
    )
    header, *rows = result.stdout.splitlines()
    assert header.split()[:2] == ["NAME", "PHASE"] and "WAITING FOR" in header
    assert len(rows) == 1 and "lonely" in rows[0], result.stdout
    assert f"{c.Reason.NOT_ENOUGH_TASKS}: " in rows[0], result.stdout


async def test_nonstrict_gang_holds_capacity_until_its_timeout(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    """NonStrict keeps what fitted (never bound) so others cannot take it; the timeout frees it."""
    async with pool(kube, count=1, cpu="4", memory="16Gi") as (_, name):
        await create_group(
            kube, namespace, "greedy", min_member=3, mode="NonStrict", scheduleTimeoutSeconds=6
        )
        await gang_pods(kube, namespace, "g", 3, name, group="greedy", requests={"cpu": "2"})

        async def refused() -> bool:
            cond = condition(await group_status(kube, namespace, "greedy"), "Unschedulable")
            return bool(cond and cond["reason"] == c.Reason.NOT_ENOUGH_RESOURCES)

        await wait_for(refused, 15, "the NonStrict gang to be refused")
        await create_group(kube, namespace, "small", min_member=1)
        await gang_pods(kube, namespace, "s", 1, name, group="small", requests={"cpu": "2"})

        async def small_refused() -> bool:
            cond = condition(await group_status(kube, namespace, "small"), "Unschedulable")
            return bool(cond and cond["reason"] == c.Reason.NOT_ENOUGH_RESOURCES)

        # Decided while greedy holds the room (before greedy's timeout): refused, not placed.
        await wait_for(small_refused, 15, "the small gang to be refused while greedy holds")
        small = await kube.get(PODS, "s-0", namespace)
        assert not small["spec"].get("nodeName"), "the held capacity must not be given away"

        async def small_bound() -> bool:
            return bool((await kube.get(PODS, "s-0", namespace))["spec"].get("nodeName"))

        await wait_for(small_bound, 20, "the small gang to be placed once greedy times out")

        async def timed_out() -> bool:
            cond = condition(await group_status(kube, namespace, "greedy"), "Unschedulable")
            return bool(cond and cond["reason"] == c.Reason.SCHEDULE_TIMEOUT)

        # The verdict reaches the status a moment after the bind it allowed.
        await wait_for(timed_out, 10, "greedy to report ScheduleTimeout")
        assert not bound(await pods_of(kube, namespace, f"{c.LABEL_POD_GROUP}=greedy"))


async def test_a_member_asking_for_more_than_can_be_counted_is_refused_saying_so(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    """A pod stored asking for 9Ei of memory saturates the scheduler's milli-units; its gang's
    refusal once read `memory: 9223372036854775807m`, a number no one asked for."""
    async with pool(kube, count=1, cpu="4", memory="16Gi") as (_, name):
        await create_group(kube, namespace, "greedy", min_member=1)
        await gang_pods(
            kube, namespace, "greedy", 1, name, group="greedy", requests={"memory": "9Ei"}
        )

        async def refused() -> dict[str, Any] | None:
            status = await group_status(kube, namespace, "greedy")
            found = [x for x in status.get("conditions", []) if x["type"] == "Unschedulable"]
            cond = found[0] if found else None
            return cond if cond and cond["reason"] == c.Reason.NOT_ENOUGH_RESOURCES else None

        cond = await wait_for(refused, 30, "the gang to be refused for its memory")
        assert "memory: more than 9223372036854775 (too large)" in cond["message"], cond
        assert "9223372036854775807m" not in cond["message"]


THREAD_DECISIONS = "podgroup_scheduling_thread_decisions_total"
HOSTNAME = "kubernetes.io/hostname"


async def test_a_large_gang_is_decided_in_the_worker_thread_and_runs_whole(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    """A gang of DECIDE_IN_THREAD_MEMBERS or more is decided off the event loop (scheduler.py);
    its placement is booked and bound as any other's."""
    size = DECIDE_IN_THREAD_MEMBERS + 16
    before = sample(await scrape(operator), THREAD_DECISIONS)
    async with pool(kube, count=2, cpu="8", memory="16Gi") as (_, name):
        await create_group(kube, namespace, "big", min_member=size)
        await gang_pods(kube, namespace, "big", size, name, group="big", requests={"cpu": "100m"})

        async def running() -> dict[str, Any] | None:
            status = await group_status(kube, namespace, "big")
            return status if status.get("phase") == c.Phase.RUNNING else None

        status = await wait_for(running, 60, "the large gang to run")
        assert status["running"] == size
        assert len(bound(await pods_of(kube, namespace))) == size
        assert sample(await scrape(operator), THREAD_DECISIONS) >= before + 1


FILLERS = 40


async def test_a_gang_of_one_with_costly_pod_terms_is_decided_in_the_worker_thread(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    """One member whose pod terms times the cluster's placed pods reach
    DECIDE_IN_THREAD_COST_US (gang.POD_TERM_COST each) is decided off the event loop too:
    hundreds of pod-affinity terms once held it for seconds, past the leader's renew deadline.
    The test places its own pods, so the terms it needs do not depend on what others left."""
    terms = int(DECIDE_IN_THREAD_COST_US / POD_TERM_COST) // FILLERS + 1
    # Anti-affinity to a label no pod has: satisfied anywhere, yet every term is walked.
    term = {"labelSelector": {"matchLabels": {"nobody": "here"}}, "topologyKey": HOSTNAME}
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term] * terms}}
    before = sample(await scrape(operator), THREAD_DECISIONS)
    async with pool(kube, count=1, cpu="8", memory="16Gi") as (sim, name):
        node = sim.node_names[0]
        await asyncio.gather(
            *(
                create_bound(kube, namespace, f"filler-{i}", node, requests={"cpu": "10m"})
                for i in range(FILLERS)
            )
        )
        await create_group(kube, namespace, "costly", min_member=1)
        await gang_pods(kube, namespace, "costly", 1, name, group="costly", affinity=anti)
        await wait_group(kube, namespace, "costly", timeout=60, phase=c.Phase.RUNNING)
        assert sample(await scrape(operator), THREAD_DECISIONS) >= before + 1


async def test_a_partly_bound_gang_gets_the_room_its_rest_needs_before_an_older_peer(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    """Two of `part`'s four members are bound already, as after an operator killed in the
    middle of a gang's binds. When room for two pods frees up, `a-rival` (a gang of two, older,
    and first by name) would take it if decided by age, and `part` would hold half the node for
    nothing. Decided first, `part` runs whole and the rival waits."""
    async with pool(kube, count=1, cpu="4", memory="16Gi") as (sim, name):
        node = sim.node_names[0]
        await create_bound(kube, namespace, "blocker", node, requests={"cpu": "2"})
        await asyncio.gather(
            *(
                create_bound(
                    kube,
                    namespace,
                    f"part-{i}",
                    node,
                    group="part",
                    requests={"cpu": "1"},
                    scheduler=c.SCHEDULER_NAME,
                )
                for i in range(2)
            )
        )

        async def refused(group: str) -> dict[str, Any] | None:
            cond = condition(await group_status(kube, namespace, group), "Unschedulable")
            return cond if cond and cond["reason"] == c.Reason.NOT_ENOUGH_RESOURCES else None

        await create_group(kube, namespace, "a-rival", min_member=2)
        await gang_pods(kube, namespace, "a-rival", 2, name, group="a-rival")
        await wait_for(lambda: refused("a-rival"), 20, "a-rival refused while the node is full")
        await create_group(kube, namespace, "part", min_member=4)
        await gang_pods(kube, namespace, "part-rest", 2, name, group="part")
        await wait_for(lambda: refused("part"), 20, "part refused while the node is full")

        await kube.delete(PODS, "blocker", namespace)
        await wait_group(kube, namespace, "part", timeout=30, phase=c.Phase.RUNNING, running=4)
        rival = await pods_of(kube, namespace, f"{c.LABEL_POD_GROUP}=a-rival")
        assert len(rival) == 2 and not bound(rival), rival


async def test_preferred_pod_affinity_and_anti_affinity_lead_where_packing_would_not(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    """Two nodes, one per zone; zone a's is fuller, so packing alone would put everything
    there. `near` prefers the zone of a db pod (in zone b): both its members go to zone b.
    `apart` prefers its members on different hosts: one per node."""
    tag = namespace
    zone = "topology.kubernetes.io/zone"
    async with (
        pool(kube, count=1, cpu="4", memory="16Gi", labels={"shared": tag, zone: "a"}) as (a, _),
        pool(kube, count=1, cpu="4", memory="16Gi", labels={"shared": tag, zone: "b"}) as (b, _),
    ):
        node_a, node_b = a.node_names[0], b.node_names[0]
        await create_bound(kube, namespace, "filler", node_a, requests={"cpu": "2"})
        await create_bound(
            kube, namespace, "db", node_b, requests={"cpu": "100m"}, labels={"app": "db"}
        )

        def prefer(kind: str, app: str, key: str) -> dict[str, Any]:
            term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}
            preferred = [{"weight": 100, "podAffinityTerm": term}]
            return {kind: {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}

        for name, affinity in (
            ("near", prefer("podAffinity", "db", zone)),
            ("apart", prefer("podAntiAffinity", "apart", "kubernetes.io/hostname")),
        ):
            await create_group(kube, namespace, name, min_member=2)
            await asyncio.gather(
                *(
                    create_pod(
                        kube,
                        namespace,
                        f"{name}-{i}",
                        group=name,
                        labels={"app": name},
                        requests={"cpu": "500m"},
                        scheduler=c.SCHEDULER_NAME,
                        nodeSelector={"shared": tag},
                        affinity=affinity,
                    )
                    for i in range(2)
                )
            )
            await wait_group(kube, namespace, name, timeout=30, phase=c.Phase.RUNNING)
        near = bound(await pods_of(kube, namespace, "app=near"))
        assert [p["spec"]["nodeName"] for p in near] == [node_b, node_b], near
        apart = bound(await pods_of(kube, namespace, "app=apart"))
        assert sorted(p["spec"]["nodeName"] for p in apart) == sorted([node_a, node_b]), apart
