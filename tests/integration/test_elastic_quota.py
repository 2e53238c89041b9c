"""ElasticQuota on the real control plane: gangs admitted whole against a tree of quotas.

Each test makes its own sim GPU nodes and quotas in namespaces of its own; the quota tree is the
whole cluster's, so every test deletes its quotas (with their namespaces) before the next. The
operator runs with the ElasticQuota CRD installed before it starts (crds/ holds it once the
API side lands; until then a minimal CRD is applied here), on a control plane of this module's
own (it is killed in the last test).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import (
    ELASTIC_QUOTAS,
    KOORD_ELASTIC_QUOTAS,
    NAMESPACES,
    PODGROUPS,
    PODS,
    ApiError,
    KubeClient,
)
from podgroup_operator.devcluster import cluster as devcluster
from podgroup_operator.devcluster.process import OperatorProcess, leading
from tests.crd_schema import project_crds
from tests.kube_helpers import (
    apply_crd,
    create_group,
    gang_pods,
    group_status,
    pool,
    refusal,
    running_members,
)
from tests.waiting import wait_for

GPU = "nvidia.com/gpu"

_ANY_OBJECT = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
MINIMAL_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": c.ELASTIC_QUOTA_CRD_NAME},
    "spec": {
        "group": c.GROUP,
        "names": {
            "kind": c.ELASTIC_QUOTA_KIND,
            "listKind": f"{c.ELASTIC_QUOTA_KIND}List",
            "plural": c.ELASTIC_QUOTA_PLURAL,
            "singular": c.ELASTIC_QUOTA_SINGULAR,
            "shortNames": list(c.ELASTIC_QUOTA_SHORT_NAMES),
        },
        "scope": "Namespaced",
        "versions": [
            {
                "name": c.VERSION,
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                            "status": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                        },
                    }
                },
                "subresources": {"status": {}},
            }
        ],
    },
}
"""Used only while crds/ has no ElasticQuota CRD (the API side generates the real one)."""
KOORD_CRD: dict[str, Any] = {
    **MINIMAL_CRD,
    "metadata": {
        "name": f"{c.ELASTIC_QUOTA_PLURAL}.{c.KOORD_QUOTA_GROUP}",
        # A *.k8s.io group is protected: its CRDs say whether the API was approved.
        "annotations": {"api-approved.kubernetes.io": "unapproved, experimental-only"},
    },
    "spec": {**MINIMAL_CRD["spec"], "group": c.KOORD_QUOTA_GROUP},
}
"""Koordinator's ElasticQuota CRD as a cluster running Koordinator serves it (its schema
reduced to what this test needs)."""


@pytest.fixture(scope="module")
def quota_operator(
    own_cluster: devcluster.ClusterState, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    """The operator on this module's control plane, started once the ElasticQuota CRD is in."""
    log = tmp_path_factory.mktemp("quota-operator") / "operator.log"
    process = OperatorProcess(own_cluster.kubeconfig, log, ["--webhooks", "off"])
    yield process
    process.stop()
    print(f"\noperator log: {log}")


@pytest.fixture
async def operator_up(own_kube: KubeClient, quota_operator: OperatorProcess) -> OperatorProcess:
    """The module's operator, leading (started at the first test, after the CRD is applied)."""
    if quota_operator.process is None or quota_operator.process.poll() is not None:
        names = {crd["metadata"]["name"] for crd in project_crds()}
        if c.ELASTIC_QUOTA_CRD_NAME not in names:
            await apply_crd(own_kube, MINIMAL_CRD)
        await apply_crd(own_kube, KOORD_CRD)
        quota_operator.start()
        quota_operator.wait_ready()
    await wait_for(lambda: leading(own_kube, [quota_operator]), 45, "the operator to lead")
    return quota_operator


@contextlib.asynccontextmanager
async def namespaces(kube: KubeClient, *names: str) -> AsyncIterator[list[str]]:
    """Namespaces `<name>-<unique>`, deleted afterwards with their quotas and pods."""
    suffix = uuid.uuid4().hex[:5]
    made = [f"{name}-{suffix}" for name in names]
    for name in made:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        await kube.create(NAMESPACES, body)
    try:
        yield made
    finally:
        for name in made:
            with contextlib.suppress(ApiError):
                await kube.delete(NAMESPACES, name)
        for name in made:
            # Until its quotas are gone they stay in the tree, and the next test's numbers
            # would be off.
            await wait_for(lambda n=name: _no_quotas(kube, n), 60, f"the quotas of {name} gone")


async def _no_quotas(kube: KubeClient, namespace: str) -> bool:
    for kind in (ELASTIC_QUOTAS, KOORD_ELASTIC_QUOTAS):
        try:
            if (await kube.list(kind, namespace))["items"]:
                return False
        except ApiError as exc:
            if not exc.not_found:
                raise
    return True


async def create_quota(kube: KubeClient, namespace: str, name: str, **spec: Any) -> dict[str, Any]:
    body = {
        "apiVersion": c.API_VERSION,
        "kind": c.ELASTIC_QUOTA_KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    return dict(await kube.create(ELASTIC_QUOTAS, body, namespace))


async def read(kube: KubeClient, *quotas: tuple[str, str]) -> None:
    """Wait until the operator has read these quotas into its tree: each has a status it wrote
    (a gang created earlier would be decided without them)."""
    for namespace, name in quotas:

        async def written(namespace: str = namespace, name: str = name) -> bool:
            return "used" in await quota_status(kube, namespace, name)

        await wait_for(written, 20, f"the operator to write the status of {namespace}/{name}")


async def quota_status(kube: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    return dict((await kube.get(ELASTIC_QUOTAS, name, namespace)).get("status") or {})


async def gpu_gang(
    kube: KubeClient,
    namespace: str,
    name: str,
    count: int,
    pool_name: str,
    gpus: int = 1,
    **kw: Any,
) -> None:
    await create_group(kube, namespace, name, minMember=count)
    await gang_pods(kube, namespace, name, count, pool_name, group=name, requests={GPU: "1"}, **kw)


async def all_running(kube: KubeClient, namespace: str, group: str, count: int) -> bool:
    return len(await running_members(kube, namespace, group)) == count


def pod_scheduled(pod: dict[str, Any]) -> dict[str, Any]:
    return next(
        (
            x
            for x in (pod.get("status") or {}).get("conditions") or ()
            if x["type"] == "PodScheduled"
        ),
        {},
    )


async def test_a_quota_borrows_idle_gpus_and_a_gang_past_its_max_waits_for_quota_not_nodes(
    own_kube: KubeClient, operator_up: OperatorProcess, tmp_path: Path
) -> None:
    """8 GPUs; A min 2 max 5, B min 6. A's 4-GPU gang borrows 2 of B's idle min and runs; A's
    next 2-GPU gang would pass A's max: it waits with reason WaitingForQuota (the PodGroup's
    condition and each member's PodScheduled), its message naming the quota's numbers and its
    position, never Unschedulable; the status of A says what it uses and borrows, B's what it
    lends. B's own 4-GPU gang is then placed within B's min."""
    kube = own_kube
    async with (
        pool(kube, count=2, cpu="8", gpu=4) as (_, pool_name),
        namespaces(kube, "team-a", "team-b") as (a, b),
    ):
        await create_quota(kube, a, "a", min={GPU: "2"}, max={GPU: "5"})
        await create_quota(kube, b, "b", min={GPU: "6"})
        await read(kube, (a, "a"), (b, "b"))
        await gpu_gang(kube, a, "first", 4, pool_name)
        await wait_for(lambda: all_running(kube, a, "first", 4), 45, "A's first gang to run")

        async def borrowing() -> dict[str, Any]:
            status = await quota_status(kube, a, "a")
            return status if status.get("borrowed", {}).get(GPU) == "2" else {}

        status = await wait_for(borrowing, 20, "A's status to say it borrows 2 GPUs")
        assert status["used"][GPU] == "4"
        lent = await wait_for(
            lambda: _lends(kube, b, "b", "2"), 20, "B's status to say it lends 2 GPUs"
        )
        assert lent["used"].get(GPU) == "0"

        await gpu_gang(kube, a, "second", 2, pool_name)
        cond = await refusal(kube, a, "second", c.Reason.WAITING_FOR_QUOTA)
        assert cond["message"].startswith(f"quota {a}/a: needs 2 {GPU}; uses 4 of min 2, max 5")
        assert f"position 1 of 1 in quota {a}/a" in cond["message"]
        pods = (await kube.list(PODS, a, label_selector=f"{c.LABEL_POD_GROUP}=second"))["items"]
        assert len(pods) == 2

        async def quota_reasons() -> list[str]:
            listed = await kube.list(PODS, a, label_selector=f"{c.LABEL_POD_GROUP}=second")
            reasons = [pod_scheduled(p).get("reason", "") for p in listed["items"]]
            return reasons if all(reasons) else []

        reasons = await wait_for(quota_reasons, 20, "the waiting members' PodScheduled reason")
        assert reasons == [c.PodReason.WAITING_FOR_QUOTA] * 2
        # The members say the quota's numbers, never the place in its queue, which moves with
        # every gang admitted or arriving (each move would patch every member).
        listed = await kube.list(PODS, a, label_selector=f"{c.LABEL_POD_GROUP}=second")
        for pod in listed["items"]:
            said = pod_scheduled(pod)["message"]
            assert said.startswith(f"quota {a}/a: needs 2 {GPU}") and "position" not in said
        assert not [p for p in pods if (p.get("spec") or {}).get("nodeName")]

        await gpu_gang(kube, b, "own", 2, pool_name)
        await wait_for(lambda: all_running(kube, b, "own", 2), 45, "B's gang to run in its min")
        waiting = await group_status(kube, a, "second")
        assert waiting.get("phase") != c.Phase.RUNNING


async def _lends(kube: KubeClient, namespace: str, name: str, amount: str) -> dict[str, Any]:
    status = await quota_status(kube, namespace, name)
    return status if status.get("lent", {}).get(GPU) == amount else {}


async def test_a_guarantee_is_never_lent_and_a_tree_holds_every_max_on_the_path(
    own_kube: KubeClient, operator_up: OperatorProcess
) -> None:
    """8 GPUs. Roots: org (min 4, max 4), b (min 4, guarantee 3, idle), c (min 0). Under org:
    mid (min 3, max 4), under mid: team (min 2): three levels. Team's 5-GPU gang waits naming
    its ancestor org at its max; its 4-GPU gang runs. c may borrow only the 1 GPU of b's min
    beyond b's guarantee, though 3 GPUs stand free: its 2-GPU gang waits saying so, its 1-GPU
    gang runs."""
    kube = own_kube
    async with (
        pool(kube, count=2, cpu="8", gpu=4) as (_, pool_name),
        namespaces(kube, "org", "mid", "team", "other", "third") as (org, mid, team, other, third),
    ):
        await create_quota(kube, org, "org", min={GPU: "4"}, max={GPU: "4"})
        await create_quota(kube, mid, "mid", min={GPU: "3"}, max={GPU: "4"}, parent=f"{org}/org")
        await create_quota(kube, team, "team", min={GPU: "2"}, parent=f"{mid}/mid")
        await create_quota(kube, other, "b", min={GPU: "4"}, guarantee={GPU: "3"})
        await create_quota(kube, third, "c", min={GPU: "0"})
        await read(kube, (org, "org"), (mid, "mid"), (team, "team"), (other, "b"), (third, "c"))
        await gpu_gang(kube, team, "big", 5, pool_name)
        cond = await refusal(kube, team, "big", c.Reason.WAITING_FOR_QUOTA)
        assert cond["message"].startswith(f"quota {team}/team: needs 5 {GPU}; uses 0 of min 2")
        assert "is at its max" in cond["message"], cond["message"]
        await gpu_gang(kube, team, "fits", 4, pool_name)
        await wait_for(lambda: all_running(kube, team, "fits", 4), 45, "the 4-GPU gang to run")

        await gpu_gang(kube, third, "two", 2, pool_name)
        cond = await refusal(kube, third, "two", c.Reason.WAITING_FOR_QUOTA)
        assert cond["message"].startswith(
            f"quota {third}/c: needs 2 {GPU}; uses 0 of min 0, no max; 1 borrowable from {other}/b"
        ), cond["message"]
        await gpu_gang(kube, third, "one", 1, pool_name)
        await wait_for(lambda: all_running(kube, third, "one", 1), 45, "the 1-GPU gang to borrow")
        status = await wait_for(
            lambda: _lends(kube, other, "b", "1"), 20, "b's status to say it lends 1 GPU"
        )
        assert status["used"].get(GPU) == "0"


async def test_strict_fifo_blocks_its_own_quota_only(
    own_kube: KubeClient, operator_up: OperatorProcess
) -> None:
    """A (StrictFIFO, min 2 max 2): its head asks 3 GPUs and waits for quota; the 1-GPU gang
    behind it waits behind the head although it would fit; B's 4-GPU gang, borrowing beyond
    B's min 2, runs meanwhile."""
    kube = own_kube
    async with (
        pool(kube, count=2, cpu="8", gpu=4) as (_, pool_name),
        namespaces(kube, "fifo", "borrower") as (a, b),
    ):
        await create_quota(
            kube, a, "a", min={GPU: "2"}, max={GPU: "2"}, queueingStrategy="StrictFIFO"
        )
        await create_quota(kube, b, "b", min={GPU: "2"})
        await read(kube, (a, "a"), (b, "b"))
        await gpu_gang(kube, a, "head", 3, pool_name)
        await refusal(kube, a, "head", c.Reason.WAITING_FOR_QUOTA)
        # Creation times have whole seconds: the gang behind must be younger, not a namesake's
        # age (equal times go by name).
        head = await kube.get(PODGROUPS, "head", a)
        born = dt.datetime.fromisoformat(
            head["metadata"]["creationTimestamp"].replace("Z", "+00:00")
        )

        async def a_second_later() -> bool:
            return dt.datetime.now(dt.UTC) >= born + dt.timedelta(seconds=1)

        await wait_for(a_second_later, 5, "a second after the head's creation")
        await gpu_gang(kube, a, "behind", 1, pool_name)
        cond = await refusal(kube, a, "behind", c.Reason.WAITING_FOR_QUOTA)
        assert f"StrictFIFO: waiting behind its head {a}/head" in cond["message"], cond
        assert "position 2 of 2" in cond["message"]
        await gpu_gang(kube, b, "borrows", 4, pool_name)
        await wait_for(lambda: all_running(kube, b, "borrows", 4), 45, "B's borrower to run")
        assert not await running_members(kube, a, "behind")


async def names_of(kube: KubeClient, namespace: str, group: str) -> set[str]:
    listed = await kube.list(PODS, namespace, label_selector=f"{c.LABEL_POD_GROUP}={group}")
    return {p["metadata"]["name"] for p in listed["items"]}


async def test_scheduler_plugins_683_b_gets_its_one_gpu_back(
    own_kube: KubeClient, operator_up: OperatorProcess
) -> None:
    """scheduler-plugins #683: 5 GPUs, A min 4 max 5, B min 1 max 5. A runs a 4-GPU gang and a
    1-GPU gang (it borrowed 1 of B's min); B's 1-GPU gang reclaims exactly A's 1-GPU gang,
    whole, and runs; A's 4-GPU gang is untouched."""
    kube = own_kube
    async with (
        pool(kube, count=1, cpu="8", gpu=5) as (_, pool_name),
        namespaces(kube, "team-a", "team-b") as (a, b),
    ):
        await create_quota(kube, a, "a", min={GPU: "4"}, max={GPU: "5"})
        await create_quota(kube, b, "b", min={GPU: "1"}, max={GPU: "5"})
        await read(kube, (a, "a"), (b, "b"))
        await gpu_gang(kube, a, "a4", 4, pool_name)
        await wait_for(lambda: all_running(kube, a, "a4", 4), 45, "A's 4-GPU gang to run")
        kept = await names_of(kube, a, "a4")
        await gpu_gang(kube, a, "a1", 1, pool_name)
        await wait_for(lambda: all_running(kube, a, "a1", 1), 45, "A's 1-GPU gang to borrow")

        await gpu_gang(kube, b, "b1", 1, pool_name)
        await wait_for(lambda: all_running(kube, b, "b1", 1), 45, "B's gang to get its GPU back")
        assert not await running_members(kube, a, "a1")
        assert await names_of(kube, a, "a4") == kept
        assert await all_running(kube, a, "a4", 4)
        status = await wait_for(
            lambda: _used(kube, b, "b", "1"), 20, "B's status to say it uses its 1 GPU"
        )
        assert status.get("borrowed", {}).get(GPU) == "0"


async def _used(kube: KubeClient, namespace: str, name: str, amount: str) -> dict[str, Any]:
    status = await quota_status(kube, namespace, name)
    return status if status.get("used", {}).get(GPU) == amount else {}


async def test_a_young_gang_is_not_reclaimed_until_its_min_run_seconds(
    own_kube: KubeClient, operator_up: OperatorProcess
) -> None:
    """As #683's case, with A's minRunSeconds 15: B's gang first waits, its condition saying
    the gang that could give is too young; once A's 1-GPU gang has run 15 s it is reclaimed."""
    kube = own_kube
    async with (
        pool(kube, count=1, cpu="8", gpu=5) as (_, pool_name),
        namespaces(kube, "team-a", "team-b") as (a, b),
    ):
        await create_quota(kube, a, "a", min={GPU: "4"}, max={GPU: "5"}, minRunSeconds=15)
        await create_quota(kube, b, "b", min={GPU: "1"}, max={GPU: "5"})
        await read(kube, (a, "a"), (b, "b"))
        await gpu_gang(kube, a, "a4", 4, pool_name)
        await wait_for(lambda: all_running(kube, a, "a4", 4), 45, "A's 4-GPU gang to run")
        await gpu_gang(kube, a, "a1", 1, pool_name)
        await wait_for(lambda: all_running(kube, a, "a1", 1), 45, "A's 1-GPU gang to borrow")
        [borrower] = await running_members(kube, a, "a1")
        started = dt.datetime.fromisoformat(borrower["status"]["startTime"].replace("Z", "+00:00"))

        await gpu_gang(kube, b, "b1", 1, pool_name)

        async def spared() -> str:
            conditions = (await group_status(kube, b, "b1")).get("conditions") or []
            cond = next((x for x in conditions if x["type"] == "Unschedulable"), {})
            message = str(cond.get("message", ""))
            return message if "younger than their quota's minRunSeconds" in message else ""

        message = await wait_for(spared, 20, "B's gang to wait, A's young gang spared")
        assert message.startswith(f"quota {b}/b: needs 1 {GPU}"), message
        await wait_for(lambda: all_running(kube, b, "b1", 1), 45, "B's gang once A's has run 15s")
        assert dt.datetime.now(dt.UTC) >= started + dt.timedelta(seconds=15)
        assert not await running_members(kube, a, "a1")
        assert await all_running(kube, a, "a4", 4)


async def test_reclaim_takes_one_sub_group_of_a_gang_repaired_by_sub_group(
    own_kube: KubeClient, operator_up: OperatorProcess
) -> None:
    """5 GPUs. A (min 2) runs a gang of three 1-GPU sub-groups (minSubGroup 2, repaired by
    sub-group): it borrowed 1. B (min 3) asks 3: 2 are free, and reclaim takes exactly one
    sub-group of A's gang; A's other two sub-groups keep running."""
    kube = own_kube
    async with (
        pool(kube, count=1, cpu="8", gpu=5) as (_, pool_name),
        namespaces(kube, "team-a", "team-b") as (a, b),
    ):
        await create_quota(kube, a, "a", min={GPU: "2"})
        await create_quota(kube, b, "b", min={GPU: "3"})
        await read(kube, (a, "a"), (b, "b"))
        for i in range(3):
            await gang_pods(
                kube,
                a,
                f"split-s{i}",
                1,
                pool_name,
                group="split",
                requests={GPU: "1"},
                labels={c.LABEL_SUB_GROUP: f"s{i}"},
            )
        await create_group(
            kube,
            a,
            "split",
            minMember=2,
            minSubGroup=2,
            subGroups=[{"name": f"s{i}", "minMember": 1} for i in range(3)],
            policy={"action": "RestartGang", "scope": "SubGroup", "backoffSeconds": 600},
        )
        await wait_for(lambda: all_running(kube, a, "split", 3), 45, "A's gang to run")
        await gpu_gang(kube, b, "b3", 3, pool_name)
        await wait_for(lambda: all_running(kube, b, "b3", 3), 45, "B's gang to reclaim")
        left = await running_members(kube, a, "split")
        assert len(left) == 2, [p["metadata"]["name"] for p in left]


async def test_a_koordinator_quota_tree_is_obeyed_unchanged(
    own_kube: KubeClient, operator_up: OperatorProcess
) -> None:
    """Koordinator's objects as written for Koordinator (its group, its labels): a parent with
    `is-parent`, a child naming it by label, a pod naming the child by Koordinator's pod label
    from another namespace. The child's max binds its 3-GPU gang; a 2-GPU one runs, and the
    child's status (in Koordinator's group) counts it."""
    kube = own_kube
    koord = KOORD_ELASTIC_QUOTAS
    async with (
        pool(kube, count=1, cpu="8", gpu=4) as (_, pool_name),
        namespaces(kube, "koord-root", "koord-team", "workloads") as (root_ns, team_ns, work),
    ):
        suffix = work.rsplit("-", 1)[1]
        parent, child = f"org-{suffix}", f"team-{suffix}"
        prefix = c.KOORD_QUOTA_PREFIX
        await kube.create(
            koord,
            {
                "apiVersion": f"{c.KOORD_QUOTA_GROUP}/v1alpha1",
                "kind": c.ELASTIC_QUOTA_KIND,
                "metadata": {
                    "name": parent,
                    "namespace": root_ns,
                    "labels": {f"{prefix}/is-parent": "true"},
                },
                "spec": {"min": {GPU: "4"}, "max": {GPU: "4"}},
            },
            root_ns,
        )
        await kube.create(
            koord,
            {
                "apiVersion": f"{c.KOORD_QUOTA_GROUP}/v1alpha1",
                "kind": c.ELASTIC_QUOTA_KIND,
                "metadata": {
                    "name": child,
                    "namespace": team_ns,
                    "labels": {f"{prefix}/parent": parent, f"{prefix}/is-parent": "false"},
                },
                "spec": {"min": {GPU: "1"}, "max": {GPU: "2"}},
            },
            team_ns,
        )

        async def child_read() -> bool:
            body = await kube.get(koord, child, team_ns)
            return "used" in (body.get("status") or {})

        await wait_for(child_read, 20, "the operator to write the child's status")
        label = {c.LABEL_KOORD_QUOTA_NAME: child}
        await gpu_gang(kube, work, "three", 3, pool_name, labels=label)
        cond = await refusal(kube, work, "three", c.Reason.WAITING_FOR_QUOTA)
        assert cond["message"].startswith(
            f"quota {team_ns}/{child}: needs 3 {GPU}; uses 0 of min 1, max 2"
        ), cond["message"]
        await gpu_gang(kube, work, "two", 2, pool_name, labels=label)
        await wait_for(lambda: all_running(kube, work, "two", 2), 45, "the 2-GPU gang to run")

        async def counted() -> bool:
            body = await kube.get(koord, child, team_ns)
            return (body.get("status") or {}).get("used", {}).get(GPU) == "2"

        await wait_for(counted, 20, "the child's status to count its 2 GPUs")


HOLD = "example.com/hold"
"""A test finalizer keeping a victim Terminating while the operator is killed."""
NEW_LEADERS_WORD = "no reclaim: taking back any gang"
"""What the new leader's refusal of B's gang says, the victim still Terminating; the earlier
leader's said it was taking the victim back."""


async def test_the_operator_killed_mid_reclaim_evicts_nothing_twice_and_leaks_nothing(
    own_kube: KubeClient, operator_up: OperatorProcess
) -> None:
    """#683's case, A's 1-GPU borrower kept Terminating by a finalizer: the operator is killed
    once it has evicted it, before B's gang is placed. The new operator finds the victim
    Terminating and takes nothing else (A's 4-GPU gang keeps running; B's pod and B's PodGroup
    condition, the earlier leader's refusal until then, say no gang may be taken back); once
    the victim is gone B's gang runs, and both quotas' status count exactly their running pods."""
    kube = own_kube
    async with (
        pool(kube, count=1, cpu="8", gpu=5) as (_, pool_name),
        namespaces(kube, "team-a", "team-b") as (a, b),
    ):
        await create_quota(kube, a, "a", min={GPU: "4"}, max={GPU: "5"})
        await create_quota(kube, b, "b", min={GPU: "1"}, max={GPU: "5"})
        await read(kube, (a, "a"), (b, "b"))
        await gpu_gang(kube, a, "a4", 4, pool_name)
        await wait_for(lambda: all_running(kube, a, "a4", 4), 45, "A's 4-GPU gang to run")
        kept = await names_of(kube, a, "a4")
        await gpu_gang(kube, a, "a1", 1, pool_name)
        await wait_for(lambda: all_running(kube, a, "a1", 1), 45, "A's 1-GPU gang to borrow")
        await kube.patch(PODS, "a1-0", {"metadata": {"finalizers": [HOLD]}}, a)
        try:
            await gpu_gang(kube, b, "b1", 1, pool_name)

            async def evicted() -> bool:
                pod = await kube.get(PODS, "a1-0", a)
                return bool(pod["metadata"].get("deletionTimestamp"))

            await wait_for(evicted, 30, "A's borrower to be evicted")
            earlier = await refusal(kube, b, "b1", c.Reason.WAITING_FOR_QUOTA)
            assert NEW_LEADERS_WORD not in earlier["message"]
            operator_up.stop(kill=True)
            operator_up.start()
            operator_up.wait_ready()
            await wait_for(lambda: leading(kube, [operator_up]), 45, "the new operator to lead")

            async def decided_again() -> str:
                cond = pod_scheduled(await kube.get(PODS, "b1-0", b))
                message = str(cond.get("message", ""))
                return message if NEW_LEADERS_WORD in message else ""

            await wait_for(decided_again, 30, "the new operator to decide B's gang")

            async def said_again() -> dict[str, Any] | None:
                conditions = (await group_status(kube, b, "b1")).get("conditions") or []
                cond = next((x for x in conditions if x["type"] == "Unschedulable"), None)
                return cond if cond and NEW_LEADERS_WORD in cond["message"] else None

            # Its verdict changed the message only: held at most COUNT_DELAY_SECONDS.
            cond = await wait_for(said_again, 10, "B's PodGroup to say the new leader's verdict")
            assert (cond["status"], cond["reason"]) == ("True", c.Reason.WAITING_FOR_QUOTA)
            assert await names_of(kube, a, "a4") == kept
            assert await all_running(kube, a, "a4", 4)
        finally:
            await kube.patch(PODS, "a1-0", {"metadata": {"finalizers": None}}, a)
        await wait_for(
            lambda: all_running(kube, b, "b1", 1), 45, "B's gang once the victim is gone"
        )
        assert await names_of(kube, a, "a4") == kept
        await wait_for(lambda: _used(kube, a, "a", "4"), 20, "A's status to count its 4 GPUs")
        await wait_for(lambda: _used(kube, b, "b", "1"), 20, "B's status to count its 1 GPU")


async def test_a_gang_refused_for_room_reclaims_what_others_borrowed(
    own_kube: KubeClient, operator_up: OperatorProcess
) -> None:
    """5 GPUs, one held by a pod no quota governs. A (min 2) runs a 2-GPU and a 1-GPU gang; B
    (min 2) fits its quota but not the nodes: it reclaims A's 1-GPU gang and runs."""
    kube = own_kube
    async with (
        pool(kube, count=1, cpu="8", gpu=5) as (_, pool_name),
        namespaces(kube, "team-a", "team-b", "free") as (a, b, free),
    ):
        await create_quota(kube, a, "a", min={GPU: "2"})
        await create_quota(kube, b, "b", min={GPU: "2"})
        await read(kube, (a, "a"), (b, "b"))
        await gpu_gang(kube, free, "outside", 1, pool_name)
        await wait_for(lambda: all_running(kube, free, "outside", 1), 45, "the ungoverned pod")
        await gpu_gang(kube, a, "a2", 2, pool_name)
        await wait_for(lambda: all_running(kube, a, "a2", 2), 45, "A's 2-GPU gang to run")
        kept = await names_of(kube, a, "a2")
        await gpu_gang(kube, a, "a1", 1, pool_name)
        await wait_for(lambda: all_running(kube, a, "a1", 1), 45, "A's 1-GPU gang to borrow")
        await gpu_gang(kube, b, "b2", 2, pool_name)
        await wait_for(lambda: all_running(kube, b, "b2", 2), 45, "B's gang to reclaim room")
        assert not await running_members(kube, a, "a1")
        assert await names_of(kube, a, "a2") == kept
        assert await all_running(kube, free, "outside", 1)
