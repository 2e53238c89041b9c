"""A gang's ElasticQuota named on its PodGroup, and a Volcano `spec.queue` mapped to the
ElasticQuota of its name, on the real control plane.

A control plane of this module's own (`own_cluster`): the operator runs with `--dialect-crds
install` (Volcano's PodGroup CRD) and takes the pods of `schedulerName: volcano` too. Each
namespace holds two quotas, so a pod naming none is charged to none (its namespace's quota is
unclear): what a quota uses below comes from the PodGroup's label (or the queue) alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import (
    EVENTS,
    PODGROUPS,
    VOLCANO_PODGROUPS,
    ApiError,
    KubeClient,
)
from podgroup_operator.devcluster import cluster as devcluster
from podgroup_operator.devcluster.process import OperatorProcess, leading
from tests.integration.test_dialect_podgroups import DIALECT_OPERATOR_ARGS
from tests.integration.test_elastic_quota import create_quota, namespaces, quota_status, read
from tests.kube_helpers import (
    create_group,
    create_pod,
    gang_pods,
    pool,
    refusal,
    running_members,
    running_operator,
)
from tests.waiting import wait_for

GPU = "nvidia.com/gpu"


@pytest.fixture(scope="module")
def group_quota_operator(
    own_cluster: devcluster.ClusterState, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    log = tmp_path_factory.mktemp("group-quotas") / "operator.log"
    with running_operator(own_cluster.kubeconfig, log, DIALECT_OPERATOR_ARGS) as process:
        yield process


@pytest.fixture
async def operator_up(
    own_kube: KubeClient, group_quota_operator: OperatorProcess
) -> OperatorProcess:
    await wait_for(lambda: leading(own_kube, [group_quota_operator]), 45, "the operator to lead")
    return group_quota_operator


async def used_gpus(kube: KubeClient, namespace: str, name: str, amount: str) -> dict[str, Any]:
    status = await quota_status(kube, namespace, name)
    return status if (status.get("used") or {}).get(GPU) == amount else {}


async def labelled_group(kube: KubeClient, namespace: str, name: str, min_member: int) -> None:
    """A PodGroup labelled with quota team-a (its members name none)."""
    group = await create_group(kube, namespace, name, min_member=min_member)
    group["metadata"]["labels"] = {c.LABEL_ELASTIC_QUOTA: "team-a"}
    await kube.replace(PODGROUPS, name, group, namespace)


async def test_a_podgroup_labelled_with_a_quota_is_admitted_against_it(
    own_kube: KubeClient, operator_up: OperatorProcess
) -> None:
    """4 GPUs; quota team-a (max 2) and spare (min 2) in one namespace, whose pods name no
    quota. A gang whose PodGroup is labelled team-a runs and team-a uses its 2 GPUs; a second
    such gang waits with WaitingForQuota naming team-a, though 2 GPUs stand free."""
    kube = own_kube
    async with (
        pool(kube, count=1, cpu="8", gpu=4) as (_, pool_name),
        namespaces(kube, "labelled") as (ns,),
    ):
        await create_quota(kube, ns, "team-a", max={GPU: "2"})
        await create_quota(kube, ns, "spare", min={GPU: "2"})
        await read(kube, (ns, "team-a"), (ns, "spare"))
        await labelled_group(kube, ns, "first", 2)
        await gang_pods(kube, ns, "first", 2, pool_name, group="first", requests={GPU: "1"})

        async def running() -> bool:
            return len(await running_members(kube, ns, "first")) == 2

        await wait_for(running, 45, "the labelled gang to run")
        await wait_for(lambda: used_gpus(kube, ns, "team-a", "2"), 20, "team-a to use 2 GPUs")

        await labelled_group(kube, ns, "second", 1)
        await gang_pods(kube, ns, "second", 1, pool_name, group="second", requests={GPU: "1"})
        cond = await refusal(kube, ns, "second", c.Reason.WAITING_FOR_QUOTA)
        assert cond["message"].startswith(f"quota {ns}/team-a: needs 1 {GPU}; uses 2"), cond
        assert (await quota_status(kube, ns, "spare"))["used"].get(GPU, "0") == "0"


async def test_a_volcano_queue_is_charged_to_the_elastic_quota_of_its_name(
    own_kube: KubeClient, operator_up: OperatorProcess
) -> None:
    """A Volcano PodGroup with `queue: team-a` and its pods as Volcano writes them: its mirror
    is labelled with the quota, the source gets a QueueMapped Event naming ElasticQuota
    team-a, the gang runs and team-a uses its GPUs."""
    kube = own_kube
    async with (
        pool(kube, count=1, cpu="8", gpu=4) as (_, pool_name),
        namespaces(kube, "volcano") as (ns,),
    ):
        await create_quota(kube, ns, "team-a", max={GPU: "4"})
        await create_quota(kube, ns, "spare", min={GPU: "2"})
        await read(kube, (ns, "team-a"), (ns, "spare"))
        await kube.create(
            VOLCANO_PODGROUPS,
            {
                "apiVersion": f"{c.VOLCANO_GROUP}/{c.VOLCANO_VERSION}",
                "kind": c.KIND,
                "metadata": {"name": "job", "namespace": ns},
                "spec": {"minMember": 2, "queue": "team-a"},
            },
            ns,
        )

        async def labelled() -> dict[str, Any] | None:
            try:
                mirror = await kube.get(PODGROUPS, "job", ns)
            except ApiError as exc:
                if exc.not_found:
                    return None
                raise
            labels = mirror["metadata"].get("labels") or {}
            return mirror if labels.get(c.LABEL_ELASTIC_QUOTA) == "team-a" else None

        await wait_for(labelled, 30, "the mirror labelled with quota team-a")
        for i in range(2):
            await create_pod(
                kube,
                ns,
                f"job-worker-{i}",
                annotations={c.ANNOTATION_GROUP_NAME: "job"},
                requests={GPU: "1"},
                scheduler=c.VOLCANO_SCHEDULER_NAME,
                nodeSelector={"pool": pool_name},
            )
        status = await wait_for(
            lambda: used_gpus(kube, ns, "team-a", "2"), 45, "team-a to use the gang's 2 GPUs"
        )
        assert status["used"][GPU] == "2"

        async def mapped() -> list[str]:
            found = await kube.list(EVENTS, ns, field_selector="involvedObject.name=job")
            return [
                e["message"] for e in found["items"] if e["reason"] == c.DialectReason.QUEUE_MAPPED
            ]

        (message,) = await wait_for(mapped, 20, "the QueueMapped Event")
        assert f"charged to ElasticQuota {ns}/team-a" in message, message
