"""Our filters held against kube-scheduler's, pod by pod, on one real control plane.

kube-scheduler v1.20.2 (built from the same Debian source as the control plane) places random
single pods one at a time on sim nodes of varied labels, taints, capacities and pod limits, one
of them cordoned. Before each pod is created, the cluster is read as the operator's informers
keep it (`slim_pod`, `slim_node`) into a snapshot, and `feasible_nodes` says which nodes our
filters would let the pod onto; `place_group` decides it as a gang of one. Then:

- kube-scheduler's node is one of ours, and our own choice is one of ours;
- kube-scheduler refuses the pod exactly when we find no node (and `place_group` refuses).

kube-scheduler's choice among feasible nodes is scored (and ties are broken at random), so the
test compares feasibility, not the node chosen. Pods cover resources (extended, init containers,
pod counts), nodeSelector, required node affinity with every operator and `matchFields`,
tolerations against NoSchedule/NoExecute/PreferNoSchedule taints and the cordon, host ports by
protocol and host IP, required pod affinity and anti-affinity across namespaces and topology
keys (including one no node has), and hard topology spread; preferences ride along and must not
change feasibility. Half the pods have a controlling owner, so the operator's slim copy (not the
whole pod) is what our side reads.

One difference is left out on purpose: v1.20's PodTopologySpread counted the matching pods of
every node whose domain exists, even on nodes that fail the pod's node affinity or lack another
constraint's key (kubernetes#106971, fixed in v1.24 by kubernetes#107009). We count what the fix
counts, so spread pods here get one constraint and no node selection, where both rules agree.
"""

from __future__ import annotations

import asyncio
import functools
import json
import random
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from podgroup_operator.adapters.kube import NAMESPACES, NODES, PODS, ApiError, Kind, KubeClient
from podgroup_operator.adapters.slim import slim_node, slim_pod
from podgroup_operator.devcluster import cluster as devcluster
from podgroup_operator.devcluster.simnodes import NodePool, SimCluster
from podgroup_operator.scheduling.gang import GangRequest, Placement
from podgroup_operator.scheduling.placement import feasible_nodes, place_group
from podgroup_operator.scheduling.snapshot import Snapshot
from tests.waiting import wait_for

CONFIGMAPS = Kind("", "v1", "configmaps")
SERVICEACCOUNTS = Kind("", "v1", "serviceaccounts")
NAMESPACE_NAMES = ("agree-a", "agree-b")
APPS = ("web", "db", "cache")
HOSTNAME = "kubernetes.io/hostname"
PODS_TO_TRY = 400
FREE_EVERY = 25
"""After this many pods, a third of the placed ones are deleted, so room comes and goes."""
SEED = 20261127

POOLS = [
    NodePool(count=5, cpu="4", memory="8Gi", labels={"zone": "z1", "disk": "ssd"}, name_prefix="a"),
    NodePool(
        count=5,
        cpu="8",
        memory="16Gi",
        labels={"zone": "z2", "disk": "hdd", "gen": "3"},
        name_prefix="b",
    ),
    NodePool(
        count=4,
        cpu="2",
        memory="8Gi",
        pods=4,
        labels={"zone": "z3"},
        taints=[{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}],
        name_prefix="c",
    ),
    NodePool(
        count=3,
        cpu="16",
        memory="32Gi",
        gpu=2,
        labels={"zone": "z1", "gen": "5"},
        taints=[{"key": "gpu", "value": "true", "effect": "NoExecute"}],
        name_prefix="d",
    ),
    NodePool(
        count=2,
        cpu="4",
        memory="8Gi",
        labels={"zone": "z2"},
        taints=[{"key": "soft", "value": "x", "effect": "PreferNoSchedule"}],
        name_prefix="e",
    ),
    NodePool(count=2, cpu="4", memory="8Gi", name_prefix="f"),
]
CORDONED = "f-1"
NODE_NAMES = [name for pool in POOLS for name in pool.node_names()]
LABEL_VALUES = {
    "zone": ["z1", "z2", "z3"],
    "disk": ["ssd", "hdd"],
    "gen": ["3", "5"],
    "none": ["x"],
}
TOLERATIONS = [
    {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
    {"key": "dedicated", "operator": "Exists"},
    {"key": "dedicated", "operator": "Equal", "value": "other"},
    {"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoExecute"},
    {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"operator": "Exists"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]


def _expression(rng: random.Random) -> dict[str, Any]:
    key = rng.choice(sorted(LABEL_VALUES))
    operator = rng.choice(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"])
    if operator in ("Exists", "DoesNotExist"):
        return {"key": key, "operator": operator}
    if operator in ("Gt", "Lt"):
        return {"key": "gen", "operator": operator, "values": [str(rng.randint(1, 6))]}
    values = LABEL_VALUES[key]
    return {
        "key": key,
        "operator": operator,
        "values": rng.sample(values, rng.randint(1, len(values))),
    }


def _pod_term(rng: random.Random) -> dict[str, Any]:
    term: dict[str, Any] = {
        "labelSelector": {"matchLabels": {"app": rng.choice(APPS)}},
        "topologyKey": rng.choice(["zone", HOSTNAME, "disk", "none"]),
    }
    draw = rng.random()
    if draw < 0.2:
        term["namespaces"] = [rng.choice(NAMESPACE_NAMES)]
    elif draw < 0.3:
        operator = rng.choice(["In", "NotIn", "Exists"])
        expression: dict[str, Any] = {"key": "app", "operator": operator}
        if operator != "Exists":
            expression["values"] = [rng.choice(APPS)]
        term["labelSelector"] = {"matchExpressions": [expression]}
    return term


def random_pod(rng: random.Random, index: int) -> dict[str, Any]:
    """One pod of the mix the module docstring lists."""
    namespace = rng.choice(NAMESPACE_NAMES)
    labels = {"app": rng.choice(APPS)}
    if rng.random() < 0.5:
        labels["tier"] = rng.choice(["x", "y"])
    requests = {
        "cpu": rng.choice(["100m", "500m", "1", "2", "3"]),
        "memory": rng.choice(["128Mi", "1Gi", "4Gi"]),
    }
    if rng.random() < 0.05:
        requests["ephemeral-storage"] = "1Gi"
    container: dict[str, Any] = {
        "name": "main",
        "image": "sim",
        "resources": {"requests": requests},
    }
    if rng.random() < 0.08:
        requests["nvidia.com/gpu"] = "1"
        container["resources"]["limits"] = {"nvidia.com/gpu": "1"}
    if rng.random() < 0.15:
        port: dict[str, Any] = {
            "containerPort": 80,
            "hostPort": rng.choice([8080, 8081]),
            "protocol": rng.choice(["TCP", "UDP"]),
        }
        if rng.random() < 0.3:
            port["hostIP"] = rng.choice(["127.0.0.1", "0.0.0.0", "10.0.0.1"])
        container["ports"] = [port]
    spec: dict[str, Any] = {
        "schedulerName": "default-scheduler",
        "containers": [container],
        "terminationGracePeriodSeconds": 0,
    }
    if rng.random() < 0.05:
        init_requests = {"cpu": rng.choice(["2", "5"]), "memory": "1Gi"}
        spec["initContainers"] = [
            {"name": "init", "image": "sim", "resources": {"requests": init_requests}}
        ]
    affinity: dict[str, Any] = {}
    node_terms = []
    if rng.random() < 0.3:
        node_terms = [
            {"matchExpressions": [_expression(rng) for _ in range(rng.randint(1, 2))]}
            for _ in range(rng.randint(1, 2))
        ]
    if rng.random() < 0.05:
        node_terms.append(
            {
                "matchFields": [
                    {
                        "key": "metadata.name",
                        "operator": rng.choice(["In", "NotIn"]),
                        "values": [rng.choice(["a-0", "b-1", "c-2", "e-0", CORDONED])],
                    }
                ]
            }
        )
    if node_terms:
        affinity["nodeAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": node_terms}
        }
    if rng.random() < 0.2:
        spec["nodeSelector"] = rng.choice(
            [
                {"zone": rng.choice(["z1", "z2", "z3"])},
                {"disk": "ssd"},
                {"gen": "5"},
                {HOSTNAME: "b-2"},
            ]
        )
    if rng.random() < 0.2:
        affinity["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [_pod_term(rng)]
        }
    if rng.random() < 0.25:
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [_pod_term(rng)]
        }
    if rng.random() < 0.15:  # preferences: they order nodes, never exclude one
        affinity.setdefault("podAntiAffinity", {})[
            "preferredDuringSchedulingIgnoredDuringExecution"
        ] = [{"weight": 50, "podAffinityTerm": _pod_term(rng)}]
        affinity.setdefault("nodeAffinity", {})[
            "preferredDuringSchedulingIgnoredDuringExecution"
        ] = [{"weight": 10, "preference": {"matchExpressions": [_expression(rng)]}}]
    tolerations = [t for t in TOLERATIONS if rng.random() < 0.12]
    if tolerations:
        spec["tolerations"] = tolerations
    spread = []
    if rng.random() < 0.2:
        spread.append(
            {
                "maxSkew": rng.choice([1, 2]),
                "topologyKey": rng.choice(["zone", HOSTNAME, "disk"]),
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": rng.choice(APPS)}},
            }
        )
        # v1.20 counts spread differently under node selection (module docstring).
        spec.pop("nodeSelector", None)
        if "nodeAffinity" in affinity:
            affinity["nodeAffinity"].pop("requiredDuringSchedulingIgnoredDuringExecution", None)
            if not affinity["nodeAffinity"]:
                del affinity["nodeAffinity"]
    if rng.random() < 0.1:
        spread.append(
            {
                "maxSkew": 1,
                "topologyKey": "rack",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": rng.choice(APPS)}},
            }
        )
    if spread:
        spec["topologySpreadConstraints"] = spread
    if affinity:
        spec["affinity"] = affinity
    metadata: dict[str, Any] = {"name": f"p{index}", "namespace": namespace, "labels": labels}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


@dataclass
class Tally:
    placed: int = 0
    refused: int = 0
    invalid: list[str] = field(default_factory=list)
    """The apiserver's refusals: the generator must make only pods it accepts."""
    disagreements: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def versus_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[devcluster.ClusterState]:
    devcluster.ensure_binaries(with_scheduler=True)
    state_dir = tmp_path_factory.mktemp("podgroup-versus")
    state = devcluster.up(state_dir)
    scheduler = devcluster.start_kube_scheduler(state.kubeconfig, state_dir)
    try:
        yield state
    finally:
        scheduler.terminate()
        try:
            scheduler.wait(10)
        except subprocess.TimeoutExpired:
            scheduler.kill()
            scheduler.wait()
        devcluster.down(state_dir)


@pytest.fixture(scope="module")
async def versus_kube(versus_cluster: devcluster.ClusterState) -> AsyncIterator[KubeClient]:
    kube = KubeClient.from_kubeconfig(str(versus_cluster.kubeconfig))
    yield kube
    await kube.close()


async def _owners(kube: KubeClient) -> dict[str, dict[str, Any]]:
    """The namespaces, each with a ConfigMap to own half the pods (a controller reference is
    all the slim copy looks at; the garbage collector only needs the owner to exist), once
    their default ServiceAccount exists (pod admission refuses until then)."""
    owners = {}
    for namespace in NAMESPACE_NAMES:
        await kube.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
        owner = await kube.create(
            CONFIGMAPS,
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}},
            namespace,
        )
        owners[namespace] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
            "controller": True,
        }
        await wait_for(
            functools.partial(_exists, kube, SERVICEACCOUNTS, "default", namespace),
            30,
            f"the default ServiceAccount of {namespace}",
        )
    return owners


async def _exists(kube: KubeClient, kind: Kind, name: str, namespace: str) -> bool:
    try:
        await kube.get(kind, name, namespace)
    except ApiError as exc:
        if exc.not_found:
            return False
        raise
    return True


async def _snapshot(kube: KubeClient) -> Snapshot:
    """The cluster as the operator's informers keep it."""
    nodes = [slim_node(node) for node in (await kube.list(NODES))["items"]]
    pods = [slim_pod(pod) for pod in (await kube.list(PODS))["items"]]
    return Snapshot.build(nodes, pods)


async def _decision(kube: KubeClient, namespace: str, name: str) -> tuple[str | None, str]:
    """(node, "") once kube-scheduler bound the pod, (None, its message) once it refused."""

    async def decided() -> tuple[str | None, str] | None:
        pod = await kube.get(PODS, name, namespace)
        if pod["spec"].get("nodeName"):
            return pod["spec"]["nodeName"], ""
        for condition in pod["status"].get("conditions") or ():
            if condition["type"] == "PodScheduled" and condition["status"] == "False":
                return None, condition.get("message", "")
        return None

    found = await wait_for(
        decided, 30, f"kube-scheduler to decide {namespace}/{name}", interval=0.02
    )
    assert found is not None  # wait_for returns only a truthy answer
    return found


async def _delete(kube: KubeClient, pod: dict[str, Any]) -> None:
    meta = pod["metadata"]
    await kube.delete(
        PODS, meta["name"], meta["namespace"], uid=meta["uid"], grace_period_seconds=0
    )


async def _gone(kube: KubeClient, pods: list[dict[str, Any]]) -> None:
    """Wait until the API no longer lists these pods: kube-scheduler's pod watch delivers their
    deletion before the next pod's creation, so both sides then count the same pods."""
    uids = {p["metadata"]["uid"] for p in pods}

    async def none_left() -> bool:
        items = (await kube.list(PODS))["items"]
        return not uids & {p["metadata"]["uid"] for p in items}

    await wait_for(none_left, 30, f"{len(uids)} deleted pods to go")


async def _try(
    kube: KubeClient, pod: dict[str, Any], tally: Tally, placed: list[dict[str, Any]]
) -> None:
    snapshot = await _snapshot(kube)
    try:
        created = await kube.create(PODS, pod, pod["metadata"]["namespace"])
    except ApiError as exc:
        if exc.status != 422:
            raise
        tally.invalid.append(exc.message)
        return
    ours = feasible_nodes(slim_pod(created), snapshot)
    decision = place_group(
        GangRequest(pod["metadata"]["namespace"], pod["metadata"]["name"], 1, [slim_pod(created)]),
        snapshot,
    )
    ours_choice = decision.bindings[0].node if isinstance(decision, Placement) else None
    node, message = await _decision(kube, pod["metadata"]["namespace"], pod["metadata"]["name"])
    problems = []
    if node is not None and node not in ours:
        problems.append(f"kube-scheduler bound it to {node}, which our filters refuse")
    if node is None and ours:
        problems.append(
            f"kube-scheduler refused it ({message}) but our filters pass {sorted(ours)}"
        )
    if ours_choice is not None and ours_choice not in ours:
        problems.append(f"place_group chose {ours_choice}, outside feasible_nodes")
    if (ours_choice is None) != (not ours):
        problems.append(f"place_group {'refused' if ours_choice is None else 'placed'} it")
    if problems:
        tally.disagreements.append(
            f"{pod['metadata']['namespace']}/{pod['metadata']['name']}: {'; '.join(problems)}; "
            f"ours {sorted(ours)}; spec {json.dumps(pod['spec'], sort_keys=True)}; "
            f"labels {pod['metadata']['labels']}"
        )
    if node is None:
        tally.refused += 1
        await _delete(kube, created)
        await _gone(kube, [created])
    else:
        tally.placed += 1
        placed.append(created)


async def test_our_filters_pass_exactly_the_nodes_kube_scheduler_may_choose(
    versus_kube: KubeClient,
) -> None:
    kube = versus_kube
    async with SimCluster(kube, POOLS, start_delay=0.1, lease_interval=2.0) as sim:
        await sim.wait_ready(60)
        await kube.patch(NODES, CORDONED, {"spec": {"unschedulable": True}})
        owners = await _owners(kube)
        rng = random.Random(SEED)
        tally = Tally()
        placed: list[dict[str, Any]] = []
        for index in range(PODS_TO_TRY):
            pod = random_pod(rng, index)
            if index % 2:
                pod["metadata"]["ownerReferences"] = [owners[pod["metadata"]["namespace"]]]
            await _try(kube, pod, tally, placed)
            if index % FREE_EVERY == FREE_EVERY - 1 and placed:
                freed = rng.sample(placed, len(placed) // 3)
                await asyncio.gather(*(_delete(kube, p) for p in freed))
                await _gone(kube, freed)
                placed = [p for p in placed if p not in freed]
    assert not tally.disagreements, "\n".join(
        [f"seed {SEED}: {len(tally.disagreements)} disagreement(s)", *tally.disagreements]
    )
    # Every pod was decided, and both answers often, so agreement was not reached by never
    # deciding.
    assert not tally.invalid, tally.invalid
    assert tally.placed >= 100 and tally.refused >= 50, tally
