"""The PodGroup lifecycle on the real control plane: sim nodes run the pods, the operator
(as a child process, like users run it) writes the status.

Pods are bound through the Binding subresource by the test itself (no scheduler is involved
here), so these tests prove the status controller alone.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import EVENTS, PODGROUPS, PODS, KubeClient
from podgroup_operator.devcluster import keys as sim_keys
from podgroup_operator.devcluster.simnodes import SimCluster
from tests.kube_helpers import (
    create_bound,
    create_group,
    create_pod,
    group_status,
    kubectl_ok,
    sim_nodes,
    wait_group,
)
from tests.waiting import wait_for


@pytest.fixture(scope="module")
async def sim(kube: KubeClient) -> AsyncIterator[SimCluster]:
    async with sim_nodes(kube, count=3, cpu="8", memory="32Gi", pods=50) as cluster:
        yield cluster


def unschedulable(status: dict[str, Any]) -> dict[str, Any]:
    found = [x for x in status.get("conditions", []) if x["type"] == c.ConditionType.UNSCHEDULABLE]
    assert found, status
    return found[0]


async def run_members(
    kube: KubeClient, namespace: str, sim: SimCluster, names: list[str], **pod_args: Any
) -> None:
    nodes = sim.node_names
    await asyncio.gather(
        *(
            create_bound(
                kube, namespace, name, nodes[i % len(nodes)], requests={"cpu": "1"}, **pod_args
            )
            for i, name in enumerate(names)
        )
    )


async def test_gang_lifecycle_pending_running_unknown_pending(
    kube: KubeClient, operator: Any, sim: SimCluster, namespace: str
) -> None:
    await create_group(kube, namespace, "train", min_member=3)
    await run_members(kube, namespace, sim, ["w0"], group="train")
    # w1 runs for a while, then its container fails, as a crashing worker would.
    await run_members(
        kube,
        namespace,
        sim,
        ["w1"],
        group="train",
        annotations={sim_keys.SIM_ANNOTATION_FAIL_AFTER: "5"},
    )
    status = await wait_group(kube, namespace, "train", phase=c.Phase.PENDING, running=2)
    assert unschedulable(status)["reason"] == c.Reason.NOT_ENOUGH_TASKS
    assert unschedulable(status)["status"] == c.ConditionStatus.TRUE

    await run_members(kube, namespace, sim, ["w2"], group="train")
    status = await wait_group(kube, namespace, "train", phase=c.Phase.RUNNING, running=3)
    assert unschedulable(status)["status"] == c.ConditionStatus.FALSE
    assert status.get("runningTime")

    # w1 fails: the gang breaks while the others still run.
    status = await wait_group(kube, namespace, "train", phase=c.Phase.UNKNOWN, timeout=20)
    assert unschedulable(status)["reason"] == c.Reason.POD_FAILED
    assert status["failed"] >= 1

    # All members gone: back to Pending.
    for pod in (await kube.list(PODS, namespace))["items"]:
        await kube.delete(PODS, pod["metadata"]["name"], namespace, uid=pod["metadata"]["uid"])
    status = await wait_group(kube, namespace, "train", phase=c.Phase.PENDING, running=0, failed=0)
    assert unschedulable(status)["reason"] == c.Reason.NOT_ENOUGH_TASKS

    expected = ["new -> Pending", "Pending -> Running", "Running -> Unknown", "Unknown -> Pending"]

    async def transitions() -> list[str] | None:
        """The PhaseChanged Events so far, once every expected one is there (each is posted in
        the background after its status write)."""
        events = (await kube.list(EVENTS, namespace, field_selector="involvedObject.name=train"))[
            "items"
        ]
        told = [e["message"].split(":")[0] for e in events if e["reason"] == c.Reason.PHASE_CHANGED]
        return told if set(expected) <= set(told) else None

    await wait_for(transitions, 10, f"the PhaseChanged Events {expected}")


async def test_a_group_whose_pods_carry_a_near_miss_label_says_which_label_makes_a_member(
    kube: KubeClient, operator: Any, sim: SimCluster, namespace: str
) -> None:
    """`scheduling.k8s.io/group-name: train` as a label (Volcano's key is an annotation)
    makes no member: the group once waited with "0 member pods can run" and nothing more."""
    await create_group(kube, namespace, "train", min_member=2)
    await run_members(kube, namespace, sim, ["w0", "w1"], labels={c.ANNOTATION_GROUP_NAME: "train"})

    async def explained() -> dict[str, Any] | None:
        status = await group_status(kube, namespace, "train")
        found = [
            x for x in status.get("conditions", []) if x["type"] == c.ConditionType.UNSCHEDULABLE
        ]
        return found[0] if found and "a pod is a member" in found[0]["message"] else None

    condition = await wait_for(explained, 30, "the group to say how a pod becomes a member")
    assert condition["reason"] == c.Reason.NOT_ENOUGH_TASKS
    assert f"{c.LABEL_POD_GROUP}=train" in condition["message"]
    assert (await group_status(kube, namespace, "train"))["phase"] == c.Phase.PENDING


async def test_deleted_member_makes_the_gang_unknown_with_pod_deleted(
    kube: KubeClient, operator: Any, sim: SimCluster, namespace: str
) -> None:
    await create_group(kube, namespace, "del", min_member=3)
    await run_members(kube, namespace, sim, ["d0", "d1", "d2"], group="del")
    await wait_group(kube, namespace, "del", phase=c.Phase.RUNNING, running=3)
    victim = await kube.get(PODS, "d0", namespace)
    await kube.delete(PODS, "d0", namespace, uid=victim["metadata"]["uid"])
    status = await wait_group(kube, namespace, "del", phase=c.Phase.UNKNOWN)
    assert unschedulable(status)["reason"] == c.Reason.POD_DELETED


async def test_finished_gang_latches(
    kube: KubeClient, operator: Any, sim: SimCluster, namespace: str
) -> None:
    await create_group(kube, namespace, "job", min_member=2)
    done = {sim_keys.SIM_ANNOTATION_SUCCEED_AFTER: "0.3"}
    await run_members(kube, namespace, sim, ["j0", "j1"], group="job", annotations=done)
    status = await wait_group(kube, namespace, "job", phase=c.Phase.FINISHED, succeeded=2)
    assert status.get("completionTime")

    # New pods with the same label do not bring a finished group back to life.
    await run_members(kube, namespace, sim, ["j2", "j3"], group="job")
    status = await wait_group(kube, namespace, "job", running=2)
    assert status["phase"] == c.Phase.FINISHED


async def test_annotation_membership_counts_like_the_label(
    kube: KubeClient, operator: Any, sim: SimCluster, namespace: str
) -> None:
    await create_group(kube, namespace, "volcano", min_member=2)
    await run_members(kube, namespace, sim, ["v0", "v1"], group_annotation="volcano")
    await wait_group(kube, namespace, "volcano", phase=c.Phase.RUNNING, running=2)


async def test_pods_in_another_namespace_are_not_counted(
    kube: KubeClient, operator: Any, sim: SimCluster, namespace: str
) -> None:
    other = f"{namespace}-other"
    await kube.create(
        __import__("podgroup_operator.adapters.kube", fromlist=["NAMESPACES"]).NAMESPACES,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}},
    )
    try:
        await create_group(kube, namespace, "local", min_member=3)
        await run_members(kube, other, sim, ["x0", "x1", "x2"], group="local")
        await run_members(kube, namespace, sim, ["l0"], group="local")
        status = await wait_group(kube, namespace, "local", running=1)
        assert status["phase"] == c.Phase.PENDING
        await wait_for(lambda: _all_running(kube, other), 15, "the foreign pods to run")
        # A member that runs later is counted in a status computed after the foreign pods ran
        # (one ordered pod watch): had they been counted, the group would be Running now.
        await run_members(kube, namespace, sim, ["l1"], group="local")
        status = await wait_group(kube, namespace, "local", running=2)
        assert status["phase"] == c.Phase.PENDING
    finally:
        from podgroup_operator.adapters.kube import NAMESPACES

        await kube.delete(NAMESPACES, other)


async def _all_running(kube: KubeClient, namespace: str) -> bool:
    pods = (await kube.list(PODS, namespace))["items"]
    return bool(pods) and all(p.get("status", {}).get("phase") == c.PodPhase.RUNNING for p in pods)


async def test_missing_podgroup_warns_each_pod_once(
    kube: KubeClient, operator: Any, sim: SimCluster, namespace: str
) -> None:
    await create_pod(kube, namespace, "orphan", group="nowhere")

    async def warnings() -> list[dict[str, Any]]:
        events = (await kube.list(EVENTS, namespace, field_selector="involvedObject.name=orphan"))[
            "items"
        ]
        return [e for e in events if e["reason"] == c.Reason.MISSING_POD_GROUP]

    found = await wait_for(warnings, 10, "a MissingPodGroup warning on the pod")
    assert found[0]["type"] == c.EventType.WARNING and "nowhere" in found[0]["message"]
    await kube.patch(PODS, "orphan", {"metadata": {"labels": {"touch": "1"}}}, namespace)
    # A second pod of the same missing group, made after the touch, is warned about once the
    # operator has handled the touch (one ordered pod watch, one group).
    await create_pod(kube, namespace, "later", group="nowhere")

    async def later_warned() -> bool:
        events = await kube.list(EVENTS, namespace, field_selector="involvedObject.name=later")
        return any(e["reason"] == c.Reason.MISSING_POD_GROUP for e in events["items"])

    await wait_for(later_warned, 10, "a warning on the later pod")
    assert len(await warnings()) == 1
    # A name no PodGroup can have is said to be one ("create it" could not help).
    await create_pod(kube, namespace, "misnamed", group_annotation="Train_1")

    async def misnamed() -> list[dict[str, Any]]:
        events = await kube.list(EVENTS, namespace, field_selector="involvedObject.name=misnamed")
        return [e for e in events["items"] if e["reason"] == c.Reason.MISSING_POD_GROUP]

    (warning,) = await wait_for(misnamed, 10, "a warning on the misnamed pod")
    assert "'Train_1' is not a valid PodGroup name" in warning["message"], warning
    pod = await kube.get(PODS, "orphan", namespace)
    assert not any(
        k.startswith("kopf.zalando.org") for k in pod["metadata"].get("annotations") or {}
    )
    assert not pod["metadata"].get("finalizers")


async def test_deleting_a_podgroup_leaves_its_pods(
    kube: KubeClient, operator: Any, sim: SimCluster, namespace: str
) -> None:
    await create_group(kube, namespace, "keep", min_member=1)
    await run_members(kube, namespace, sim, ["k0"], group="keep")
    await wait_group(kube, namespace, "keep", phase=c.Phase.RUNNING)
    await kube.delete(PODGROUPS, "keep", namespace)
    # The operator sees a namesake only after the deletion (one ordered PodGroup watch): its
    # status proves the deletion was handled. Nothing ties the pod to the group for the
    # garbage collector either.
    await create_group(kube, namespace, "keep", min_member=1)
    await wait_group(kube, namespace, "keep", phase=c.Phase.RUNNING)
    pod = await kube.get(PODS, "k0", namespace)
    assert pod["status"]["phase"] == c.PodPhase.RUNNING and not pod["metadata"].get(
        "deletionTimestamp"
    )
    assert not pod["metadata"].get("ownerReferences")


async def test_status_writes_per_transition(
    kube: KubeClient, operator: Any, sim: SimCluster, namespace: str
) -> None:
    """Count PodGroup writes from a watch: one per real change, none when nothing changed."""
    group = await create_group(kube, namespace, "count", min_member=3)
    writes: list[dict[str, Any]] = []

    async def watch() -> None:
        async for kind, obj in kube.watch(
            PODGROUPS,
            namespace,
            resource_version=group["metadata"]["resourceVersion"],
            field_selector="metadata.name=count",
        ):
            if kind == "MODIFIED":
                writes.append(obj.get("status") or {})

    async def seen(**expected: Any) -> None:
        """Wait until the watch itself delivered a write with these fields: a GET can show a
        write the watch has not delivered yet, which would then be counted in the wrong step."""

        async def delivered() -> bool:
            return any(all(w.get(k) == v for k, v in expected.items()) for w in writes)

        await wait_for(delivered, 30, f"a watched status write with {expected}")

    watcher = asyncio.create_task(watch())
    try:
        await seen(phase=c.Phase.PENDING)
        pending_writes = len(writes)
        await run_members(kube, namespace, sim, ["c0", "c1", "c2"], group="count")
        await seen(phase=c.Phase.RUNNING, running=3)
        to_running = len(writes) - pending_writes
        # An unrelated change to a member must not cause a write. The barrier: a spec change
        # made after it, whose observedGeneration the next write reports.
        await kube.patch(PODS, "c0", {"metadata": {"labels": {"unrelated": "yes"}}}, namespace)
        spec = {"spec": {"scheduleTimeoutSeconds": 61}}
        generation = (await kube.patch(PODGROUPS, "count", spec, namespace))["metadata"][
            "generation"
        ]

        async def reported() -> bool:
            return any(w.get("observedGeneration") == generation for w in writes)

        await wait_for(reported, 30, "a status write reporting the new generation")
        # Since the unrelated change: the spec change's own event and the write reporting it.
        after_noop = len(writes) - pending_writes - to_running - 2
    finally:
        watcher.cancel()
    report = {
        "new->Pending": pending_writes,
        "Pending->Running (3 pods)": to_running,
        "no-op": after_noop,
    }
    print("status writes per transition:", json.dumps(report))
    assert pending_writes == 1
    assert after_noop == 0
    # Counters move as each pod is created, bound and started: at most one write per member
    # event (3 pods x 3), fewer when a burst coalesces.
    assert 1 <= to_running <= 9, writes


def test_kubectl_get_podgroups_shows_the_columns(
    kubeconfig: Path, operator: Any, crds: None
) -> None:
    narrow = kubectl_ok(kubeconfig, "get", "podgroups", "-A")
    wide = kubectl_ok(kubeconfig, "get", "pg", "-A", "-o", "wide")
    for column in ("PHASE", "MINMEMBER", "RUNNING", "SUCCEEDED", "FAILED", "AGE"):
        assert column in narrow.splitlines()[0], narrow
    for column in ("SCHEDULED", "RESTARTS", "RESERVED", "REASON"):
        assert column in wide.splitlines()[0], wide
        assert column not in narrow.splitlines()[0]


async def test_conflicting_membership_keys_warn_once_and_the_label_wins(
    kube: KubeClient, operator: Any, sim: SimCluster, namespace: str
) -> None:
    await create_group(kube, namespace, "by-label", min_member=1)
    await create_group(kube, namespace, "by-annotation", min_member=1)
    await run_members(
        kube, namespace, sim, ["both"], group="by-label", group_annotation="by-annotation"
    )
    await wait_group(kube, namespace, "by-label", running=1, phase=c.Phase.RUNNING)
    assert (await group_status(kube, namespace, "by-annotation")).get("running", 0) == 0

    async def warnings() -> list[dict[str, Any]]:
        events = (await kube.list(EVENTS, namespace, field_selector="involvedObject.name=both"))[
            "items"
        ]
        return [e for e in events if e["reason"] == c.Reason.CONFLICTING_MEMBERSHIP]

    found = await wait_for(warnings, 10, "a ConflictingMembership warning on the pod")
    assert len(found) == 1 and "by-annotation" in found[0]["message"], found


async def test_a_status_another_controller_keeps_rewriting_is_contested_once_and_named(
    kube: KubeClient, operator: Any, namespace: str, kubeconfig: Path
) -> None:
    """A scheduler-plugins controller left running beside the operator writes its own phase
    back after each of ours: the two once wrote 944 times each in 30 s, with two Events a
    round. The operator names the other writer once and writes less and less often; once the
    other stops, its status stands."""
    await create_group(kube, namespace, "fought", min_member=2)
    await wait_group(kube, namespace, "fought", phase=c.Phase.PENDING)
    other = KubeClient(kube.transport, field_manager="old-coscheduling-controller")

    async def contested() -> list[dict[str, Any]]:
        events = (await kube.list(EVENTS, namespace))["items"]
        return [e for e in events if e["reason"] == c.Reason.STATUS_CONTESTED]

    async def fight() -> None:
        while True:
            if (await group_status(kube, namespace, "fought")).get("phase") != "Scheduling":
                await other.patch_status(PODGROUPS, "fought", namespace, {"phase": "Scheduling"})
            await asyncio.sleep(0.05)

    fighter = asyncio.create_task(fight())
    try:
        (warning,) = await wait_for(contested, 60, "a Warning naming the other writer")
    finally:
        fighter.cancel()
        await asyncio.gather(fighter, return_exceptions=True)
    assert warning["type"] == c.EventType.WARNING
    assert warning["message"].startswith("status.phase changed by old-coscheduling-controller")
    await wait_group(kube, namespace, "fought", timeout=30, phase=c.Phase.PENDING)
    described = kubectl_ok(kubeconfig, "describe", "podgroup", "fought", "-n", namespace)
    assert "StatusContested" in described, described
