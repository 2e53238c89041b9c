"""Gangs written in other schedulers' dialects run as one gang on the real control plane.

Koordinator's primary key (the label `pod-group.scheduling.sigs.k8s.io: NAME`, without `/name`)
and Kueue's plain-pod groups (label `kueue.x-k8s.io/pod-group-name` and annotation
`kueue.x-k8s.io/pod-group-total-count`) make members; each gang is placed whole or not at all.
Kueue's admission gate (`spec.schedulingGates`) cannot be shown here: the dev cluster's API
server (v1.20) drops the field, so the gates are tested on the scheduler with the in-memory API
server (tests/unit/controllers/test_scheduling_gates_unit.py).
"""

from __future__ import annotations

from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import EVENTS, PODGROUPS, PODS, ApiError, KubeClient
from tests.kube_helpers import (
    create_bound,
    create_group,
    gang_pods,
    group_status,
    pool,
    wait_group,
)
from tests.waiting import wait_for

KUEUE_QUEUE_NAME = "kueue.x-k8s.io/queue-name"
"""The label Kueue reads to queue a pod; written as Kueue's docs write plain-pod groups."""


async def pods_of(kube: KubeClient, namespace: str, selector: str) -> list[dict[str, Any]]:
    return list((await kube.list(PODS, namespace, label_selector=selector))["items"])


def bound(pods: list[dict[str, Any]]) -> list[str]:
    return sorted(p["metadata"]["name"] for p in pods if p["spec"].get("nodeName"))


async def unschedulable(kube: KubeClient, namespace: str, group: str) -> dict[str, Any] | None:
    conditions = (await group_status(kube, namespace, group)).get("conditions") or []
    return next((x for x in conditions if x["type"] == c.ConditionType.UNSCHEDULABLE), None)


async def test_a_koordinator_labelled_gang_is_bound_whole_or_not_at_all(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    """Pods labelled `pod-group.scheduling.sigs.k8s.io: train` were once scheduled one by one,
    splitting the gang. Three members of 1 cpu where 2 fit: none is bound (the PodGroup says
    NotEnoughResources, counting all three as members); with room for 3, all three are."""
    async with pool(kube, count=1, cpu="4", memory="16Gi") as (sim, name):
        await create_bound(kube, namespace, "blocker", sim.node_names[0], requests={"cpu": "2"})
        await create_group(kube, namespace, "train", min_member=3)
        labels = {c.LABEL_KOORD_POD_GROUP: "train"}
        await gang_pods(kube, namespace, "train", 3, name, labels=labels)
        selector = f"{c.LABEL_KOORD_POD_GROUP}=train"

        async def refused() -> dict[str, Any] | None:
            cond = await unschedulable(kube, namespace, "train")
            return cond if cond and cond["reason"] == c.Reason.NOT_ENOUGH_RESOURCES else None

        cond = await wait_for(refused, 20, "the Koordinator gang refused while 2 of 3 fit")
        assert "minMember 3" in cond["message"], cond
        assert bound(await pods_of(kube, namespace, selector)) == []

        await kube.delete(PODS, "blocker", namespace)
        await wait_group(kube, namespace, "train", timeout=30, phase=c.Phase.RUNNING, running=3)
        assert bound(await pods_of(kube, namespace, selector)) == ["train-0", "train-1", "train-2"]


async def test_a_kueue_plain_pod_group_runs_as_one_gang_of_its_total_count(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    """A Kueue group of 3 (no gates: the dev cluster's API server drops them): the operator
    makes PodGroup `kq` with minMember 3; two pods alone are not bound (NotEnoughTasks), and
    the third lets all three be placed together."""
    async with pool(kube, count=1, cpu="8", memory="16Gi") as (_, name):
        labels = {c.LABEL_KUEUE_POD_GROUP_NAME: "kq", KUEUE_QUEUE_NAME: "user-queue"}
        annotations = {c.ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT: "3"}
        selector = f"{c.LABEL_KUEUE_POD_GROUP_NAME}=kq"
        await gang_pods(kube, namespace, "kq", 2, name, labels=labels, annotations=annotations)

        async def made() -> dict[str, Any] | None:
            try:
                return await kube.get(PODGROUPS, "kq", namespace)
            except ApiError as exc:
                if exc.not_found:
                    return None
                raise

        group = await wait_for(made, 15, "a PodGroup for the Kueue pod group")
        assert group["spec"]["minMember"] == 3
        assert group["metadata"]["labels"][c.LABEL_MANAGED_BY] == c.OPERATOR_NAME

        async def short() -> dict[str, Any] | None:
            cond = await unschedulable(kube, namespace, "kq")
            return cond if cond and cond["reason"] == c.Reason.NOT_ENOUGH_TASKS else None

        cond = await wait_for(short, 20, "the Kueue group waiting for its third pod")
        assert "2 member pods can run, fewer than minMember 3" in cond["message"], cond
        assert bound(await pods_of(kube, namespace, selector)) == []

        await gang_pods(kube, namespace, "kq-last", 1, name, labels=labels, annotations=annotations)
        await wait_group(kube, namespace, "kq", timeout=30, phase=c.Phase.RUNNING, running=3)
        assert bound(await pods_of(kube, namespace, selector)) == ["kq-0", "kq-1", "kq-last-0"]


async def test_a_pod_claimed_by_two_dialects_is_warned_naming_both_and_the_first_key_wins(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    """Koordinator's label names PodGroup `koord`, Kueue's label names group `kq`: the pod is
    counted in `koord` (a key naming a PodGroup outranks a gang declared on pods), no PodGroup
    is made for `kq`, and one Warning names both keys and both groups."""
    async with pool(kube, count=1, cpu="8", memory="16Gi") as (_, name):
        await create_group(kube, namespace, "koord", min_member=1)
        labels = {c.LABEL_KOORD_POD_GROUP: "koord", c.LABEL_KUEUE_POD_GROUP_NAME: "kq"}
        annotations = {c.ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT: "1"}
        await gang_pods(kube, namespace, "both", 1, name, labels=labels, annotations=annotations)
        await wait_group(kube, namespace, "koord", timeout=30, phase=c.Phase.RUNNING, running=1)

        async def warnings() -> list[dict[str, Any]]:
            found = await kube.list(EVENTS, namespace, field_selector="involvedObject.name=both-0")
            return [e for e in found["items"] if e["reason"] == c.Reason.CONFLICTING_MEMBERSHIP]

        (warning,) = await wait_for(warnings, 15, "a ConflictingMembership warning on the pod")
        assert warning["type"] == c.EventType.WARNING
        for part in ("'koord'", "'kq'", c.LABEL_KOORD_POD_GROUP, c.LABEL_KUEUE_POD_GROUP_NAME):
            assert part in warning["message"], warning["message"]
        names = [g["metadata"]["name"] for g in (await kube.list(PODGROUPS, namespace))["items"]]
        assert names == ["koord"]
