"""Other schedulers' PodGroup kinds, written as their own docs write them, run as gangs on the
real control plane, and their status reads as their own scheduler would write it.

A control plane of this module's own (`own_cluster`): the operator runs here with
`--dialect-crds install` (it installs the Volcano and Koordinator PodGroup CRDs and
Koordinator's ElasticQuota CRD, which no scheduler serves on the dev cluster) and
`--scheduler-name volcano`, taking over the pods Volcano's controllers make; the session's
operator must not lead here too.

The native PodGroup cannot be shown here. Its pod field `spec.schedulingGroup.podGroupName`
is dropped by the dev cluster's API server (v1.20), which does not know it; and the kind has no
CRD-backed stand-in: a CRD in the group `scheduling.k8s.io` is Established but never served,
since the API server serves that group itself (PriorityClass) and answers 404 for any other
resource in it (tried on v1.20). Both sides are tested on pure code and on the in-memory API server
(tests/unit/domain/test_membership_keys.py, tests/unit/controllers/test_dialect_mirrors_unit.py).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator import devcluster
from podgroup_operator.adapters.kube import (
    CRDS,
    EVENTS,
    KOORD_PODGROUPS,
    NAMESPACES,
    PODGROUPS,
    PODS,
    TOPOLOGIES,
    VOLCANO_PODGROUPS,
    Kind,
    KubeClient,
)
from podgroup_operator.api.dialect_crds import DIALECT_CRDS
from podgroup_operator.devcluster.process import OperatorProcess
from podgroup_operator.domain.dialects import ANNOTATION_TOPOLOGY
from tests.kube_helpers import (
    create_bound,
    create_pod,
    group_status,
    pool,
    running_operator,
    wait_group,
)
from tests.waiting import wait_for

DIALECT_OPERATOR_ARGS = [
    "--webhooks",
    "off",
    "--dialect-crds",
    "install",
    "--scheduler-name",
    c.SCHEDULER_NAME,
    "--scheduler-name",
    c.VOLCANO_SCHEDULER_NAME,
]
"""The other schedulers' CRDs installed, and Volcano's pods taken over besides ours."""


@pytest.fixture(scope="module")
def dialect_operator(
    own_cluster: devcluster.ClusterState, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    log = tmp_path_factory.mktemp("dialects") / "operator.log"
    with running_operator(own_cluster.kubeconfig, log, DIALECT_OPERATOR_ARGS) as process:
        yield process


@pytest.fixture
async def ns(own_kube: KubeClient, dialect_operator: OperatorProcess) -> AsyncIterator[str]:
    name = f"d-{uuid.uuid4().hex[:10]}"
    await own_kube.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    yield name
    await own_kube.delete(NAMESPACES, name)


async def source_status(kube: KubeClient, kind: Kind, namespace: str, name: str) -> dict[str, Any]:
    return dict((await kube.get(kind, name, namespace)).get("status") or {})


async def wait_source(
    kube: KubeClient, kind: Kind, namespace: str, name: str, timeout: float = 30, **expected: Any
) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        status = await source_status(kube, kind, namespace, name)
        return status if all(status.get(k) == v for k, v in expected.items()) else None

    return await wait_for(probe, timeout, f"{kind.group} {namespace}/{name} status {expected}")


async def events_about(kube: KubeClient, namespace: str, name: str, reason: str) -> list[str]:
    found = await kube.list(EVENTS, namespace, field_selector=f"involvedObject.name={name}")
    return [e["message"] for e in found["items"] if e["reason"] == reason]


def bound(pods: list[dict[str, Any]]) -> list[str]:
    return sorted(p["metadata"]["name"] for p in pods if p["spec"].get("nodeName"))


async def members(kube: KubeClient, namespace: str) -> list[dict[str, Any]]:
    return list((await kube.list(PODS, namespace))["items"])


async def test_the_dialect_crds_are_installed_where_none_serves_the_kind(
    own_kube: KubeClient, dialect_operator: OperatorProcess
) -> None:
    """Each CRD the operator installed (Volcano's and Koordinator's PodGroup, Koordinator's
    ElasticQuota) carries its mark, the only one it would ever replace, and is served. Those of
    the protected `scheduling.sigs.k8s.io` group carry the approval Koordinator's own carry,
    which the API server reads as approved (KubernetesAPIApprovalPolicyConformant True)."""
    for name in DIALECT_CRDS:
        crd = await own_kube.get(CRDS, name)
        assert crd["metadata"]["labels"][c.DIALECT_CRD_LABEL] == "true"
        conditions = {x["type"]: x["status"] for x in crd["status"]["conditions"]}
        assert conditions["Established"] == "True"
        if crd["spec"]["group"] == c.KOORD_QUOTA_GROUP:
            annotations = crd["metadata"]["annotations"]
            assert annotations[c.ANNOTATION_API_APPROVED] == c.KOORD_API_APPROVAL
            assert conditions["KubernetesAPIApprovalPolicyConformant"] == "True"


async def test_a_volcano_podgroup_runs_as_one_gang_under_schedulername_volcano(
    own_kube: KubeClient, ns: str
) -> None:
    """A Volcano PodGroup and its pods as Volcano's docs write them (annotation
    `scheduling.k8s.io/group-name`, `schedulerName: volcano`). Before any pod exists it reads
    Inqueue (Volcano's job controller makes pods only then); 3 members of 1 cpu where 2 fit:
    none is bound and it reads Pending with Volcano's Unschedulable condition; with room, all
    three are bound and it reads Running, running 3. Its queue is said to be ignored."""
    kube = own_kube
    async with pool(kube, count=1, cpu="4", memory="16Gi") as (sim, name):
        await create_bound(kube, ns, "blocker", sim.node_names[0], requests={"cpu": "2"})
        await kube.create(
            VOLCANO_PODGROUPS,
            {
                "apiVersion": f"{c.VOLCANO_GROUP}/{c.VOLCANO_VERSION}",
                "kind": "PodGroup",
                "metadata": {"name": "mpi-job", "namespace": ns},
                "spec": {"minMember": 3, "minResources": {"cpu": "3"}, "queue": "research"},
            },
            ns,
        )
        await wait_source(kube, VOLCANO_PODGROUPS, ns, "mpi-job", phase=c.VolcanoPhase.INQUEUE)
        mirror = await kube.get(PODGROUPS, "mpi-job", ns)
        assert mirror["metadata"]["labels"][c.LABEL_MIRROR_OF] == c.Dialect.VOLCANO
        assert mirror["spec"] == {"minMember": 3, "minResources": {"cpu": "3"}}
        for i in range(3):
            await create_pod(
                kube,
                ns,
                f"mpi-job-worker-{i}",
                annotations={c.ANNOTATION_GROUP_NAME: "mpi-job"},
                requests={"cpu": "1"},
                scheduler=c.VOLCANO_SCHEDULER_NAME,
                nodeSelector={"pool": name},
            )

        async def refused() -> dict[str, Any] | None:
            status = await source_status(kube, VOLCANO_PODGROUPS, ns, "mpi-job")
            conds = {x["type"]: x for x in status.get("conditions") or ()}
            cond = conds.get(c.ConditionType.UNSCHEDULABLE)
            if status.get("phase") != c.VolcanoPhase.PENDING or not cond:
                return None
            return status if cond["reason"] == c.Reason.NOT_ENOUGH_RESOURCES else None

        status = await wait_for(refused, 30, "the Volcano PodGroup Pending for room")
        assert status["running"] == 0, status
        assert bound(await members(kube, ns)) == ["blocker"]

        await kube.delete(PODS, "blocker", ns)
        status = await wait_source(
            kube, VOLCANO_PODGROUPS, ns, "mpi-job", phase=c.VolcanoPhase.RUNNING, running=3
        )
        assert (status["succeeded"], status["failed"]) == (0, 0), status
        assert bound(await members(kube, ns)) == [f"mpi-job-worker-{i}" for i in range(3)]
        (queue,) = await events_about(kube, ns, "mpi-job", c.DialectReason.QUEUE_IGNORED)
        assert "'research'" in queue and "spec.queue" in queue, queue


async def test_volcano_min_task_member_holds_the_gang_until_each_task_has_its_minimum(
    own_kube: KubeClient, ns: str
) -> None:
    """`minTaskMember: {ps: 1, worker: 2}` with minMember 3, pods labelled by task with
    `volcano.sh/task-spec` as Volcano's job controller labels them: three workers alone reach
    minMember but not the ps task's minimum, so none is bound; the ps pod lets all four run."""
    kube = own_kube
    async with pool(kube, count=1, cpu="8", memory="16Gi") as (_, name):
        await kube.create(
            VOLCANO_PODGROUPS,
            {
                "apiVersion": f"{c.VOLCANO_GROUP}/{c.VOLCANO_VERSION}",
                "kind": "PodGroup",
                "metadata": {"name": "tf", "namespace": ns},
                "spec": {"minMember": 3, "minTaskMember": {"ps": 1, "worker": 2}},
            },
            ns,
        )

        async def make(pod_name: str, task: str) -> None:
            await create_pod(
                kube,
                ns,
                pod_name,
                labels={c.LABEL_VOLCANO_TASK_SPEC: task},
                annotations={c.ANNOTATION_GROUP_NAME: "tf"},
                requests={"cpu": "1"},
                scheduler=c.VOLCANO_SCHEDULER_NAME,
                nodeSelector={"pool": name},
            )

        for i in range(3):
            await make(f"tf-worker-{i}", "worker")

        async def held() -> dict[str, Any] | None:
            """The scheduler's verdict naming the ps task (a status written before it, from
            the members' count alone, says nothing of the tasks)."""
            conds = (await group_status(kube, ns, "tf")).get("conditions") or ()
            cond = next((x for x in conds if x["type"] == c.ConditionType.UNSCHEDULABLE), None)
            if cond and cond["status"] == c.ConditionStatus.TRUE and "ps" in cond["message"]:
                return cond
            return None

        cond = await wait_for(held, 30, "the gang held for its ps task")
        assert "ps" in cond["message"], cond
        assert bound(await members(kube, ns)) == []
        mirror = await kube.get(PODGROUPS, "tf", ns)
        assert mirror["spec"]["subGroups"] == [
            {"name": "ps", "minMember": 1},
            {"name": "worker", "minMember": 2},
        ]

        await make("tf-ps-0", "ps")
        await wait_source(
            kube, VOLCANO_PODGROUPS, ns, "tf", phase=c.VolcanoPhase.RUNNING, running=4
        )
        assert len(bound(await members(kube, ns))) == 4


async def test_volcano_network_tiers_keep_the_gang_within_one_rack_of_the_topology(
    own_kube: KubeClient, ns: str
) -> None:
    """`networkTopology: {mode: hard, highestTierAllowed: 2}` over a Topology of (rack, host):
    tier 1 is the host, tier 2 the rack, so the gang of 3 is bound within one rack. Rack a
    holds 2 of the 3 members, rack b all 3: all go to rack b."""
    kube = own_kube
    rack, group = "example.com/rack", uuid.uuid4().hex[:8]
    topology = f"fabric-{group}"
    await kube.create(
        TOPOLOGIES,
        {
            "apiVersion": c.API_VERSION,
            "kind": c.TOPOLOGY_KIND,
            "metadata": {"name": topology},
            "spec": {"levels": [{"nodeLabel": rack}, {"nodeLabel": c.LABEL_HOSTNAME}]},
        },
    )
    try:
        async with (
            pool(kube, count=1, cpu="2", memory="16Gi", labels={"set": group, rack: "a"}) as (a, _),
            pool(kube, count=2, cpu="2", memory="16Gi", labels={"set": group, rack: "b"}) as (b, _),
        ):
            await kube.create(
                VOLCANO_PODGROUPS,
                {
                    "apiVersion": f"{c.VOLCANO_GROUP}/{c.VOLCANO_VERSION}",
                    "kind": "PodGroup",
                    "metadata": {
                        "name": "ring",
                        "namespace": ns,
                        "annotations": {ANNOTATION_TOPOLOGY: topology},
                    },
                    "spec": {
                        "minMember": 3,
                        "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
                    },
                },
                ns,
            )
            for i in range(3):
                await create_pod(
                    kube,
                    ns,
                    f"ring-{i}",
                    annotations={c.ANNOTATION_GROUP_NAME: "ring"},
                    requests={"cpu": "1"},
                    scheduler=c.VOLCANO_SCHEDULER_NAME,
                    nodeSelector={"set": group},
                )
            await wait_source(
                kube, VOLCANO_PODGROUPS, ns, "ring", phase=c.VolcanoPhase.RUNNING, running=3
            )
            nodes = {p["spec"]["nodeName"] for p in await members(kube, ns)}
            assert nodes <= set(b.node_names), (nodes, a.node_names)
            mirror = await kube.get(PODGROUPS, "ring", ns)
            assert mirror["spec"]["topologyConstraint"] == {
                "topology": topology,
                "preferredTopologyLevel": c.LABEL_HOSTNAME,
                "requiredTopologyLevel": rack,
            }
    finally:
        await kube.delete(TOPOLOGIES, topology)


async def test_a_volcano_podgroup_with_bad_fields_is_refused_naming_each(
    own_kube: KubeClient, ns: str
) -> None:
    """minMember -1 and a task name that cannot be a sub-group: no mirror, one Warning naming
    both fields and the fix."""
    await own_kube.create(
        VOLCANO_PODGROUPS,
        {
            "apiVersion": f"{c.VOLCANO_GROUP}/{c.VOLCANO_VERSION}",
            "kind": "PodGroup",
            "metadata": {"name": "bad", "namespace": ns},
            "spec": {"minMember": -1, "minTaskMember": {"Worker_1": 2}},
        },
        ns,
    )

    async def warned() -> list[str] | None:
        return await events_about(own_kube, ns, "bad", c.DialectReason.INVALID) or None

    (message,) = await wait_for(warned, 30, "a Warning on the bad Volcano PodGroup")
    assert "spec.minMember: must be a whole number of at least 1, not -1" in message
    assert "spec.minTaskMember[Worker_1]" in message and "DNS label" in message
    assert (await own_kube.list(PODGROUPS, ns))["items"] == []


def koord_group(namespace: str, name: str, minimum: int, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{c.KOORD_PODGROUP_GROUP}/{c.KOORD_PODGROUP_VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {"minMember": minimum},
    }


async def test_a_koordinator_podgroup_with_bare_labelled_pods_runs_whole(
    own_kube: KubeClient, ns: str
) -> None:
    """A `scheduling.sigs.k8s.io` PodGroup with Koordinator's annotations (waiting-time, mode,
    total-number) and pods labelled `pod-group.scheduling.sigs.k8s.io: NAME`: its status reads
    as scheduler-plugins/Koordinator write it (phase Running, scheduled and running 2)."""
    kube = own_kube
    async with pool(kube, count=1, cpu="4", memory="16Gi") as (_, name):
        await kube.create(
            KOORD_PODGROUPS,
            koord_group(
                ns,
                "train",
                2,
                **{
                    c.ANNOTATION_KOORD_WAITING_TIME: "5m",
                    c.ANNOTATION_KOORD_MODE: c.GangMode.STRICT,
                    c.ANNOTATION_KOORD_TOTAL_NUMBER: "2",
                },
            ),
            ns,
        )
        for i in range(2):
            await create_pod(
                kube,
                ns,
                f"train-{i}",
                labels={c.LABEL_KOORD_POD_GROUP: "train"},
                requests={"cpu": "1"},
                scheduler=c.SCHEDULER_NAME,
                nodeSelector={"pool": name},
            )
        status = await wait_source(
            kube, KOORD_PODGROUPS, ns, "train", phase=c.KoordPhase.RUNNING, running=2
        )
        assert status["scheduled"] == 2, status
        mirror = await kube.get(PODGROUPS, "train", ns)
        assert mirror["spec"] == {"minMember": 2, "scheduleTimeoutSeconds": 300, "mode": "Strict"}
        (note,) = await events_about(kube, ns, "train", c.DialectReason.NOT_MAPPED)
        assert c.ANNOTATION_KOORD_TOTAL_NUMBER in note, note


async def test_a_koordinator_gang_made_by_annotations_alone_runs_whole(
    own_kube: KubeClient, ns: str
) -> None:
    """Pods with `gang.scheduling.koordinator.sh/name` and `/min-available` and no PodGroup:
    the operator makes one; 2 of 3 are not bound alone, the third lets all run."""
    kube = own_kube
    annotations = {c.ANNOTATION_KOORD_NAME: "anno", c.ANNOTATION_KOORD_MIN_AVAILABLE: "3"}
    async with pool(kube, count=1, cpu="8", memory="16Gi") as (_, name):
        for i in range(2):
            await create_pod(
                kube,
                ns,
                f"anno-{i}",
                annotations=annotations,
                requests={"cpu": "1"},
                scheduler=c.SCHEDULER_NAME,
                nodeSelector={"pool": name},
            )
        await wait_group(kube, ns, "anno", timeout=30, phase=c.Phase.PENDING)

        async def short() -> dict[str, Any] | None:
            status = await group_status(kube, ns, "anno")
            conds = {x["type"]: x for x in status.get("conditions") or ()}
            cond = conds.get(c.ConditionType.UNSCHEDULABLE)
            return cond if cond and cond["reason"] == c.Reason.NOT_ENOUGH_TASKS else None

        await wait_for(short, 30, "the annotation gang waiting for its third pod")
        assert bound(await members(kube, ns)) == []
        await create_pod(
            kube,
            ns,
            "anno-2",
            annotations=annotations,
            requests={"cpu": "1"},
            scheduler=c.SCHEDULER_NAME,
            nodeSelector={"pool": name},
        )
        await wait_group(kube, ns, "anno", timeout=30, phase=c.Phase.RUNNING, running=3)
        assert bound(await members(kube, ns)) == ["anno-0", "anno-1", "anno-2"]


async def test_a_koordinator_gang_of_gangs_binds_both_or_neither(
    own_kube: KubeClient, ns: str
) -> None:
    """Two Koordinator PodGroups that name each other in `gang.scheduling.koordinator.sh/groups`:
    with room for 3 of their 4 members, none is bound (each alone would fit); with room for
    all, all four are."""
    kube = own_kube
    groups = json.dumps([f"{ns}/ps", f"{ns}/worker"])
    async with pool(kube, count=1, cpu="4", memory="16Gi") as (sim, name):
        await create_bound(kube, ns, "blocker", sim.node_names[0], requests={"cpu": "1"})
        for group in ("ps", "worker"):
            await kube.create(
                KOORD_PODGROUPS,
                koord_group(ns, group, 2, **{c.ANNOTATION_KOORD_GROUPS: groups}),
                ns,
            )
            for i in range(2):
                await create_pod(
                    kube,
                    ns,
                    f"{group}-{i}",
                    labels={c.LABEL_KOORD_POD_GROUP: group},
                    requests={"cpu": "1"},
                    scheduler=c.SCHEDULER_NAME,
                    nodeSelector={"pool": name},
                )

        async def refused() -> dict[str, Any] | None:
            status = await group_status(kube, ns, "worker")
            conds = {x["type"]: x for x in status.get("conditions") or ()}
            cond = conds.get(c.ConditionType.UNSCHEDULABLE)
            return cond if cond and cond["reason"] == c.Reason.NOT_ENOUGH_RESOURCES else None

        await wait_for(refused, 30, "the gang of gangs refused while 3 of 4 fit")
        assert bound(await members(kube, ns)) == ["blocker"]
        mirror = await kube.get(PODGROUPS, "ps", ns)
        assert mirror["spec"]["gangGroup"] == [f"{ns}/ps", f"{ns}/worker"]

        await kube.delete(PODS, "blocker", ns)
        for group in ("ps", "worker"):
            await wait_source(
                kube, KOORD_PODGROUPS, ns, group, phase=c.KoordPhase.RUNNING, running=2
            )
        assert bound(await members(kube, ns)) == ["ps-0", "ps-1", "worker-0", "worker-1"]


async def test_a_pod_claimed_by_volcano_and_koordinator_keys_is_warned_naming_both(
    own_kube: KubeClient, ns: str
) -> None:
    """Koordinator's label names `koord`, Volcano's annotation names `vc`: counted in `koord`
    (labels before annotations), one Warning naming both."""
    kube = own_kube
    async with pool(kube, count=1, cpu="4", memory="16Gi") as (_, name):
        await kube.create(KOORD_PODGROUPS, koord_group(ns, "koord", 1), ns)
        await create_pod(
            kube,
            ns,
            "both",
            labels={c.LABEL_KOORD_POD_GROUP: "koord"},
            annotations={c.ANNOTATION_GROUP_NAME: "vc"},
            requests={"cpu": "1"},
            scheduler=c.SCHEDULER_NAME,
            nodeSelector={"pool": name},
        )
        await wait_source(kube, KOORD_PODGROUPS, ns, "koord", phase=c.KoordPhase.RUNNING)

        async def warned() -> list[str] | None:
            return await events_about(kube, ns, "both", c.Reason.CONFLICTING_MEMBERSHIP) or None

        (message,) = await wait_for(warned, 30, "a ConflictingMembership Warning")
        assert "'koord'" in message and "'vc'" in message, message
        assert c.ANNOTATION_GROUP_NAME in message and c.LABEL_KOORD_POD_GROUP in message
