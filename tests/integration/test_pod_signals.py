"""What the gang scheduler tells the pods, and terminating members, on the real control plane.

`kubectl describe pod` of a waiting member must show what kube-scheduler's would: the condition
`PodScheduled=False` with reason `Unschedulable` (cluster-autoscaler scales up for it; a gang
short of members says `WaitingForGang` instead, as nodes would not help) and
`FailedScheduling` Events; a bound member a `Scheduled` Event. A Running gang whose member is
being deleted stays Running until the pod is gone.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any, cast

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import EVENTS, PODS, ApiError, KubeClient, Request
from podgroup_operator.adapters.slim import SharedValues, slim_pod
from podgroup_operator.controllers.podsignals import PodSignals
from podgroup_operator.devcluster.process import OperatorProcess
from tests.clock import Clock
from tests.kube_helpers import (
    HOLD,
    create_bound,
    create_group,
    create_pod,
    gang_pods,
    group_status,
    kubectl_ok,
    pool,
    wait_group,
)
from tests.waiting import wait_for


def pod_condition(pod: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next(
        (x for x in (pod.get("status") or {}).get("conditions") or [] if x["type"] == kind), None
    )


async def pod_events(kube: KubeClient, namespace: str, reason: str) -> list[dict[str, Any]]:
    events = (await kube.list(EVENTS, namespace))["items"]
    return [e for e in events if e["reason"] == reason and e["involvedObject"]["kind"] == "Pod"]


async def test_describe_pod_of_a_waiting_member_shows_the_condition_and_the_events(
    kube: KubeClient, operator: OperatorProcess, namespace: str, kubeconfig: Path
) -> None:
    async with pool(kube, count=1, cpu="3", memory="16Gi") as (sim, name):
        (node,) = sim.node_names
        blocker = await create_bound(kube, namespace, "blocker", node, requests={"cpu": "2"})
        await create_group(kube, namespace, "wait", min_member=3)
        members = await gang_pods(kube, namespace, "wait", 3, name, group="wait")

        async def marked() -> dict[str, str] | None:
            """Every member's PodScheduled message, once all carry the gang's message."""
            cond = next(
                (
                    x
                    for x in (await group_status(kube, namespace, "wait")).get("conditions", [])
                    if x["type"] == c.ConditionType.UNSCHEDULABLE
                ),
                None,
            )
            if cond is None or cond["reason"] != c.Reason.NOT_ENOUGH_RESOURCES:
                return None
            found = {}
            for member in members:
                current = await kube.get(PODS, member["metadata"]["name"], namespace)
                scheduled = pod_condition(current, c.PodConditionType.POD_SCHEDULED)
                if scheduled is None or scheduled["message"] != cond["message"]:
                    return None
                assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable")
                found[current["metadata"]["name"]] = scheduled["message"]
            return found

        await wait_for(marked, 30, "every waiting member marked PodScheduled=False")

        async def warned() -> list[dict[str, Any]] | None:
            events = await pod_events(kube, namespace, c.PodReason.FAILED_SCHEDULING)
            names = {e["involvedObject"]["name"] for e in events}
            return events if names == {m["metadata"]["name"] for m in members} else None

        events = await wait_for(warned, 30, "FailedScheduling on every waiting member")
        assert {e["type"] for e in events} == {c.EventType.WARNING}
        described = kubectl_ok(kubeconfig, "describe", "pod", "wait-0", "-n", namespace)
        assert re.search(r"PodScheduled\s+False", described), described
        assert re.search(r"Warning\s+FailedScheduling\s+.*podgroup-scheduler", described), described
        assert "Insufficient cpu" in described, described

        # Room comes back: every member is bound, and says so as kube-scheduler's pods do.
        await kube.delete(PODS, "blocker", namespace, uid=blocker["metadata"]["uid"])

        async def scheduled() -> list[dict[str, Any]] | None:
            events = await pod_events(kube, namespace, c.PodReason.SCHEDULED)
            return events if len(events) == 3 else None

        events = await wait_for(scheduled, 30, "a Scheduled Event on every member")
        assert sorted(e["message"] for e in events) == [
            f"Successfully assigned {namespace}/wait-{i} to {node}" for i in range(3)
        ]
        described = kubectl_ok(kubeconfig, "describe", "pod", "wait-1", "-n", namespace)
        assert re.search(r"Normal\s+Scheduled\s+.*Successfully assigned", described), described


async def test_members_of_a_gang_short_of_members_wait_for_the_gang_not_for_nodes(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    """2 of minMember 3 exist on a node with room for all: their PodScheduled reason is
    WaitingForGang, never Unschedulable (cluster-autoscaler would add nodes for them alone);
    the third member places the gang whole."""
    async with pool(kube, count=1, cpu="8", memory="16Gi") as (_, name):
        await create_group(kube, namespace, "short", min_member=3)
        await gang_pods(kube, namespace, "short", 2, name, group="short")

        async def marked() -> list[str] | None:
            reasons = []
            for member in ("short-0", "short-1"):
                scheduled = pod_condition(
                    await kube.get(PODS, member, namespace), c.PodConditionType.POD_SCHEDULED
                )
                if scheduled is None:
                    return None
                reasons.append(scheduled["reason"])
            return reasons

        reasons = await wait_for(marked, 30, "both members' PodScheduled written")
        assert reasons == [c.PodReason.WAITING_FOR_GANG] * 2

        async def says_why() -> bool:
            status = await group_status(kube, namespace, "short")
            return any(
                x["type"] == c.ConditionType.UNSCHEDULABLE
                and x["reason"] == c.Reason.NOT_ENOUGH_TASKS
                for x in status.get("conditions", [])
            )

        await wait_for(says_why, 30, "the PodGroup to say it is short of members")

        await create_pod(
            kube,
            namespace,
            "short-2",
            group="short",
            requests={"cpu": "1"},
            scheduler=c.SCHEDULER_NAME,
            nodeSelector={"pool": name},
        )
        await wait_group(kube, namespace, "short", 30, scheduled=3)


async def test_a_running_gang_stays_running_until_its_terminating_member_is_gone(
    kube: KubeClient, operator: OperatorProcess, namespace: str, kubeconfig: Path
) -> None:
    async with pool(kube, count=1, cpu="4", memory="16Gi") as (_, name):
        await create_group(kube, namespace, "term", min_member=2)
        members = await gang_pods(kube, namespace, "term", 2, name, group="term")
        await wait_group(kube, namespace, "term", phase=c.Phase.RUNNING, running=2)
        doomed = members[1]
        await kube.patch(PODS, "term-1", {"metadata": {"finalizers": [HOLD]}}, namespace)
        try:
            await kube.delete(
                PODS, "term-1", namespace, uid=doomed["metadata"]["uid"], grace_period_seconds=30
            )
            # The status that counts the terminating member was computed from the deletion.
            status = await wait_group(kube, namespace, "term", terminating=1)
            assert (status["phase"], status["running"]) == (c.Phase.RUNNING, 2), status
            wide = kubectl_ok(kubeconfig, "get", "podgroups", "term", "-n", namespace, "-o", "wide")
            header, row = wide.splitlines()[:2]
            # Columns are aligned to the header; empty ones (Reserved) print nothing.
            column = header.index("TERMINATING")
            assert row[column:].split()[0] == "1", wide

            # The sim kubelet finishes its half (a delete with grace 0); the finalizer holds the
            # pod; the gang is still Running.
            async def kubelet_done() -> bool:
                pod = await kube.get(PODS, "term-1", namespace)
                return pod["metadata"].get("deletionGracePeriodSeconds") == 0

            await wait_for(kubelet_done, 30, "the sim kubelet's final delete")
            status = await group_status(kube, namespace, "term")
            assert (status["phase"], status["terminating"]) == (c.Phase.RUNNING, 1), status
        finally:
            await _release(kube, namespace, "term-1")

        status = await wait_group(kube, namespace, "term", phase=c.Phase.UNKNOWN)
        assert (status["running"], status["terminating"]) == (1, 0), status
        unschedulable = next(
            x for x in status["conditions"] if x["type"] == c.ConditionType.UNSCHEDULABLE
        )
        assert unschedulable["reason"] == c.Reason.POD_DELETED, unschedulable


async def _release(kube: KubeClient, namespace: str, name: str) -> None:
    try:
        await kube.patch(PODS, name, {"metadata": {"finalizers": None}}, namespace)
    except ApiError as exc:
        if not exc.not_found:
            raise


async def test_an_unchanged_refusal_counts_up_the_pods_event_as_kube_schedulers_does(
    kube: KubeClient, namespace: str, kubeconfig: Path
) -> None:
    """The scheduler's pod signals against the API server itself, on a clock of the test's (a
    repeat comes a minute after the first refusal): one Event per pod, counted up, so that a
    gang of 2,000 members waiting an hour leaves 2,000 Events in etcd, not 120,000."""
    clock = Clock(dt.datetime.now(dt.UTC))
    signals = PodSignals(kube, clock=clock)
    members = [await create_pod(kube, namespace, f"m-{i}") for i in range(2)]
    gang = (namespace, "waiting")
    try:
        signals.refused(gang, members, "needs 2 x {cpu: 64}")
        await signals.idle()
        clock.advance(60)
        signals.refused(gang, members, "needs 2 x {cpu: 64}")
        await signals.idle()
    finally:
        await signals.stop()
    assert signals.failures == 0
    events = await pod_events(kube, namespace, c.PodReason.FAILED_SCHEDULING)
    assert sorted((e["involvedObject"]["name"], e["count"]) for e in events) == [
        ("m-0", 2),
        ("m-1", 2),
    ]
    described = kubectl_ok(kubeconfig, "describe", "pod", "m-0", "-n", namespace)
    # "nobody": the scheduler the pods name (the session's operator must leave them alone).
    assert re.search(r"FailedScheduling\s+\S+ \(x2 over \S+\)\s+nobody\s+needs 2", described), (
        described
    )


class Recording:
    """The real API server's transport, with every request's method and path noted."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.sent: list[tuple[str, str]] = []

    async def send(self, request: Request) -> tuple[int, Any]:
        self.sent.append((request.method, request.path))
        return cast(tuple[int, Any], await self.inner.send(request))

    def stream(self, request: Request) -> Any:
        return self.inner.stream(request)

    async def close(self) -> None:
        """The inner transport is the session's."""


async def test_a_new_leader_leaves_the_condition_the_last_one_wrote_on_each_waiting_pod(
    kube: KubeClient, namespace: str
) -> None:
    """A restart (or a change of leader) with 2,000 waiting pods wrote the same condition on
    all 2,000 again. The new leader's signals read the pods as its informer keeps them."""
    members = [await create_pod(kube, namespace, f"m-{i}") for i in range(2)]
    gang, message = (namespace, "waiting"), "needs 2 x {cpu: 64}"
    last = PodSignals(kube, clock=Clock(dt.datetime.now(dt.UTC)))
    last.refused(gang, members, message)
    await last.idle()
    await last.stop()
    stored = [
        slim_pod(await kube.get(PODS, m["metadata"]["name"], namespace), SharedValues())
        for m in members
    ]

    recording = Recording(kube.transport)
    new = PodSignals(KubeClient(recording), clock=Clock(dt.datetime.now(dt.UTC)))
    new.refused(gang, stored, message)
    await new.idle()
    assert [path for method, path in recording.sent if method == "PATCH"] == []
    new.refused(gang, stored, "needs 2 x {cpu: 65}")  # news: written
    await new.idle()
    await new.stop()
    patches = [path for method, path in recording.sent if method == "PATCH"]
    assert sorted(patches) == [
        PODS.path(namespace, "m-0", "status"),
        PODS.path(namespace, "m-1", "status"),
    ]
    assert new.failures == 0
