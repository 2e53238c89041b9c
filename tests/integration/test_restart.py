"""Whole-gang restarts on the real control plane: ReplicaSet, Job and bare-pod gangs.

A member "crashes" the way a kubelet reports it: its status turns Failed with a terminated
container (exit code 137). The operator must then delete every member, let owners (or itself,
for bare pods) recreate them, and the gang scheduler must place the new incarnation as a whole.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import EVENTS, PODS, Kind, KubeClient
from podgroup_operator.devcluster import keys as sim_keys
from tests.builders import replicaset
from tests.kube_helpers import (
    crash,
    create_bound,
    create_group,
    gang_pods,
    group_status,
    pool,
    running_members,
    wait_group,
)
from tests.waiting import wait_for

REPLICASETS = Kind("apps", "v1", "replicasets")
JOBS = Kind("batch", "v1", "jobs")


async def make_group(
    kube: KubeClient, namespace: str, name: str, min_member: int, **policy: Any
) -> None:
    """A gang with a RestartGang policy; keyword arguments are policy fields."""
    await create_group(
        kube, namespace, name, min_member=min_member, policy={"action": "RestartGang", **policy}
    )


def template(name: str, pool_name: str) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": name, c.LABEL_POD_GROUP: name}},
        "spec": {
            "schedulerName": c.SCHEDULER_NAME,
            "nodeSelector": {"pool": pool_name},
            "restartPolicy": "Never",
            "containers": [{"name": "w", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
        },
    }


async def restarted_and_running(
    kube: KubeClient, namespace: str, name: str, old_uids: set[str]
) -> None:
    await wait_group(kube, namespace, name, restarts=1, phase=c.Phase.RUNNING, running=4)

    async def fresh_members() -> bool:
        members = await running_members(kube, namespace, name)
        return len(members) == 4 and not ({p["metadata"]["uid"] for p in members} & old_uids)

    await wait_for(fresh_members, 30, "a whole new incarnation of 4 running members")


async def test_replicaset_gang_restarts_whole(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    async with pool(kube, count=2, cpu="4", memory="16Gi") as (_, pool_name):
        await make_group(kube, namespace, "rs", 4, backoffSeconds=1)
        rs_template = template("rs", pool_name)
        rs_template["spec"]["restartPolicy"] = "Always"  # ReplicaSets allow nothing else
        await kube.create(REPLICASETS, replicaset("rs", 4, rs_template), namespace)
        await wait_group(kube, namespace, "rs", phase=c.Phase.RUNNING, running=4)
        members = await running_members(kube, namespace, "rs")
        await crash(kube, namespace, members[0])
        await restarted_and_running(kube, namespace, "rs", {p["metadata"]["uid"] for p in members})


async def test_job_gang_restarts_whole(kube: KubeClient, operator: Any, namespace: str) -> None:
    async with pool(kube, count=2, cpu="4", memory="16Gi") as (_, pool_name):
        await make_group(kube, namespace, "job", 4, backoffSeconds=1)
        await kube.create(
            JOBS,
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "job"},
                "spec": {
                    "parallelism": 4,
                    "completions": 4,
                    "backoffLimit": 20,
                    "template": template("job", pool_name),
                },
            },
            namespace,
        )
        await wait_group(kube, namespace, "job", phase=c.Phase.RUNNING, running=4)
        members = await running_members(kube, namespace, "job")
        await crash(kube, namespace, members[1])
        await restarted_and_running(kube, namespace, "job", {p["metadata"]["uid"] for p in members})


async def test_bare_pod_gang_restarts_whole_then_fails_at_the_limit(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    async with pool(kube, count=2, cpu="4", memory="16Gi") as (_, pool_name):
        await make_group(kube, namespace, "bare", 4, backoffSeconds=0, maxRestarts=1)
        await gang_pods(kube, namespace, "bare", 4, pool_name, group="bare")
        await wait_group(kube, namespace, "bare", phase=c.Phase.RUNNING, running=4)
        members = await running_members(kube, namespace, "bare")
        names = sorted(p["metadata"]["name"] for p in members)
        await crash(kube, namespace, members[2])
        await restarted_and_running(
            kube, namespace, "bare", {p["metadata"]["uid"] for p in members}
        )
        again = await running_members(kube, namespace, "bare")
        assert (
            sorted(p["metadata"]["name"] for p in again) == names
        )  # recreated from their own spec

        await crash(kube, namespace, again[0])
        final = await wait_group(kube, namespace, "bare", phase=c.Phase.FAILED)
        reasons = {x["reason"] for x in final.get("conditions", [])}
        assert c.Reason.RESTART_LIMIT_EXCEEDED in reasons, final
        assert final["restarts"] == 1


async def test_backoff_is_honoured_across_an_operator_restart(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    async with pool(kube, count=2, cpu="4", memory="16Gi") as (_, pool_name):
        await make_group(kube, namespace, "slow", 4, backoffSeconds=8)
        await gang_pods(kube, namespace, "slow", 4, pool_name, group="slow")
        await wait_group(kube, namespace, "slow", phase=c.Phase.RUNNING, running=4)
        members = await running_members(kube, namespace, "slow")
        await crash(kube, namespace, members[0])
        failed = await wait_for(
            lambda: _failure_recorded(kube, namespace), 15, "the failure to be recorded"
        )
        operator.stop()
        operator.start()
        await asyncio.to_thread(operator.wait_ready)
        final = await wait_group(kube, namespace, "slow", timeout=60, restarts=1)
        restarted = dt.datetime.fromisoformat(final["lastRestartTime"].replace("Z", "+00:00"))
        assert (restarted - failed).total_seconds() >= 8, (failed, restarted)


async def _failure_recorded(kube: KubeClient, namespace: str) -> dt.datetime | None:
    current = await group_status(kube, namespace, "slow")
    if current.get("phase") in (c.Phase.UNKNOWN, c.Phase.PENDING) and current.get(
        "lastFailureTime"
    ):
        return dt.datetime.fromisoformat(current["lastFailureTime"].replace("Z", "+00:00"))
    return None


async def test_a_bare_gang_too_large_to_record_plainly_restarts_from_its_packed_bodies(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    """Eight bare members of 200 KB each: written plainly their bodies (1.6 MB) were more than
    etcd takes in one status, so the restart was refused on every attempt and the gang stayed
    broken. Packed, they restart whole, annotations and all."""
    note = "the same long note in every member; " * 5_600  # about 200 KB
    async with pool(kube, count=2, cpu="4", memory="16Gi") as (_, pool_name):
        await make_group(kube, namespace, "big", 8, backoffSeconds=0, maxRestarts=1)
        await gang_pods(
            kube,
            namespace,
            "big",
            8,
            pool_name,
            group="big",
            requests={"cpu": "500m"},
            annotations={"example.com/note": note},
        )
        await wait_group(kube, namespace, "big", phase=c.Phase.RUNNING, running=8)
        members = await running_members(kube, namespace, "big")
        old = {p["metadata"]["uid"] for p in members}
        await crash(kube, namespace, members[3])
        await wait_group(kube, namespace, "big", timeout=60, restarts=1, phase=c.Phase.RUNNING)

        async def fresh() -> list[dict[str, Any]] | None:
            again = await running_members(kube, namespace, "big")
            uids = {p["metadata"]["uid"] for p in again}
            return again if len(again) == 8 and not uids & old else None

        again = await wait_for(fresh, 30, "a whole new incarnation of 8 running members")
        assert sorted(p["metadata"]["name"] for p in again) == sorted(
            p["metadata"]["name"] for p in members
        )
        assert all(p["metadata"]["annotations"]["example.com/note"] == note for p in again)
        status = await group_status(kube, namespace, "big")
        assert "restartPodsPacked" not in status and "restartPods" not in status


async def test_a_gang_broken_before_it_ran_whole_is_restarted_then_failed_freeing_its_nodes(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    """One member fails as soon as it starts, before its peers run (a bad flag, a kubelet
    rejection): the gang is never whole, and its three peers run on, waiting for it. Such a gang
    was never restarted (the policy waited for a whole gang to break) and held its nodes for
    ever. Now the policy restarts it, and at the limit fails it, deleting the members that run:
    the next gang gets the room."""
    slow = {sim_keys.SIM_ANNOTATION_START_DELAY: "3"}
    async with pool(kube, count=1, cpu="4", memory="16Gi") as (_, pool_name):
        await make_group(kube, namespace, "early", 4, backoffSeconds=0, maxRestarts=1)
        fails = {sim_keys.SIM_ANNOTATION_FAIL_AFTER: "0"}
        await asyncio.gather(
            gang_pods(kube, namespace, "early", 3, pool_name, group="early", annotations=slow),
            gang_pods(kube, namespace, "early-bad", 1, pool_name, group="early", annotations=fails),
        )
        final = await wait_group(kube, namespace, "early", timeout=60, phase=c.Phase.FAILED)
        assert final["restarts"] == 1, final
        reasons = {x["reason"] for x in final.get("conditions", [])}
        assert c.Reason.RESTART_LIMIT_EXCEEDED in reasons, final
        events = (await kube.list(EVENTS, namespace))["items"]
        restarted = [e for e in events if e.get("reason") == c.Reason.GANG_RESTARTED]
        assert restarted and "early-bad-0 failed" in restarted[0]["message"], restarted

        await make_group(kube, namespace, "next", 4)
        await gang_pods(kube, namespace, "next", 4, pool_name, group="next")
        await wait_group(kube, namespace, "next", timeout=60, phase=c.Phase.RUNNING, running=4)


async def test_a_strict_gang_held_partly_bound_past_its_timeout_is_restarted_freeing_its_nodes(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    """Two of `held`'s three members were bound by someone else, and its third cannot join them
    (the node has 4 cpu; the three need 5). What the two hold kept `next` (3 cpu) out for ever:
    the policy only acted on failures. Past its schedule timeout the gang is restarted, which
    frees the node: `next` runs, and `held`'s new incarnation waits with nothing bound."""
    async with pool(kube, count=1, cpu="4", memory="16Gi") as (sim, pool_name):
        node = sim.node_names[0]
        selector = {"pool": pool_name}
        policy = {"action": "RestartGang", "maxRestarts": 1, "backoffSeconds": 0}
        await create_group(
            kube, namespace, "held", min_member=3, scheduleTimeoutSeconds=3, policy=policy
        )
        bound = await asyncio.gather(
            *(
                create_bound(
                    kube,
                    namespace,
                    f"held-{i}",
                    node,
                    group="held",
                    requests={"cpu": "1"},
                    scheduler=c.SCHEDULER_NAME,
                    nodeSelector=selector,
                )
                for i in range(2)
            )
        )
        await gang_pods(
            kube, namespace, "held-big", 1, pool_name, group="held", requests={"cpu": "3"}
        )
        await create_group(kube, namespace, "next", min_member=2)
        await gang_pods(
            kube, namespace, "next", 2, pool_name, group="next", requests={"cpu": "1500m"}
        )

        await wait_group(kube, namespace, "next", timeout=60, phase=c.Phase.RUNNING, running=2)
        held = await group_status(kube, namespace, "held")
        assert held["restarts"] == 1 and held["phase"] == c.Phase.PENDING, held
        pods = (await kube.list(PODS, namespace, label_selector=f"{c.LABEL_POD_GROUP}=held"))[
            "items"
        ]
        old = {p["metadata"]["uid"] for p in bound}
        assert not old & {p["metadata"]["uid"] for p in pods}, pods  # recreated, bare
        assert not [p for p in pods if p["spec"].get("nodeName")], pods
        events = (await kube.list(EVENTS, namespace))["items"]
        (restarted,) = [e for e in events if e.get("reason") == c.Reason.GANG_RESTARTED]
        assert (
            "schedule timeout while 2 of minMember 3 members hold nodes" in restarted["message"]
        ), restarted
