"""Our filters held against kube-scheduler's, pod by pod, on one real control plane.

kube-scheduler v1.20.2 (built from the same Debian source as the control plane) places random
single pods one at a time on sim nodes of varied labels, taints, capacities and pod limits, one
of them cordoned. Before each pod is created, the cluster is read as the operator's informers
keep it (`slim_pod`, `slim_node`) into a snapshot, and `feasible_nodes` says which nodes our
filters would let the pod onto; `place_group` decides it as a gang of one. The operator runs
in-process too, and its own snapshot, kept by watch events while nodes are relabelled, tainted
and cordoned along the way, must first match the one built from lists. Then:

- the runtime's snapshot passes the same nodes as the fresh one (its verdict caches held);
- kube-scheduler's node is one of ours, and our own choice is one of ours;
- kube-scheduler refuses the pod exactly when we find no node (and `place_group` refuses).

kube-scheduler's choice among feasible nodes is scored (and ties are broken at random), so the
test compares feasibility, not the node chosen. Pods cover resources (extended, init containers,
RuntimeClass overhead, pod counts), nodeSelector, required node affinity with every operator and
`matchFields`, tolerations against NoSchedule/NoExecute/PreferNoSchedule taints and the cordon,
host ports by protocol and host IP (and those of host-network pods), required pod affinity and
anti-affinity across namespaces and topology keys (including one no node has), and hard topology
spread; preferences ride along and must not change feasibility. Half the pods have a controlling
owner, so the operator's slim copy (not the whole pod) is what our side reads. A second test
does the same for volumes: claims bound and unbound, WaitForFirstConsumer and Immediate, against
local PVs pinned to a node or a zone, and CSI PVs on nodes whose CSINode limits how many the
node attaches, with the PVs kube-scheduler binds (and so takes from later pods) read back into
our snapshot; another does the same for in-tree disks (inline EBS, GCE PD, Azure Disk, iSCSI and
RBD, and EBS PVs) on nodes with in-tree attach limits. A third holds `plan_preemption` to
kube-scheduler's
preemption of single pods: whether it preempts, and the highest priority it evicts. Two compare
scores where one decides: preferred pod (anti-)affinity, and the images nodes list.

One difference is left out on purpose: v1.20's PodTopologySpread counted the matching pods of
every node whose domain exists, even on nodes that fail the pod's node affinity or lack another
constraint's key (kubernetes#106971, fixed in v1.24 by kubernetes#107009). We count what the fix
counts, so spread pods here get one constraint and no node selection, where both rules agree.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import random
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from podgroup_operator.adapters.kube import (
    CSI_NODES,
    NAMESPACES,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODS,
    STORAGE_CLASSES,
    ApiError,
    Kind,
    KubeClient,
)
from podgroup_operator.adapters.slim import slim_node, slim_pod
from podgroup_operator.controllers.runtime import Runtime
from podgroup_operator.devcluster import cluster as devcluster
from podgroup_operator.devcluster.simnodes import NodePool, SimCluster
from podgroup_operator.domain.membership import group_key_of
from podgroup_operator.scheduling.gang import GangRequest, Placement
from podgroup_operator.scheduling.placement import feasible_nodes, place_group
from podgroup_operator.scheduling.preemption import (
    PreemptionPlan,
    PreemptionRefusal,
    plan_preemption,
)
from podgroup_operator.scheduling.snapshot import Snapshot
from podgroup_operator.scheduling.volumes import (
    IN_TREE_LIMIT_KEYS,
    DiskPlugin,
    VolumeClaim,
    attach_limit_key,
    csi_node_limits,
    persistent_volume,
    volume_claim,
)
from tests.kube_helpers import apply_crd, create_admitted, gone, in_process
from tests.waiting import wait_for

CRD_FILE = Path(__file__).resolve().parents[2] / "crds" / "podgroups.scheduling.x-k8s.io.yaml"
CONFIGMAPS = Kind("", "v1", "configmaps")
NAMESPACE_NAMES = ("agree-a", "agree-b")
SENTINEL_NAMESPACE = "agree-sentinel"
"""Where `_change_node`'s sentinels go: no random pod's term names it, so no running pod's
anti-affinity (an `app NotIn` term selects a pod without labels) can keep a sentinel off."""
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
RUNTIME_CLASS = "agree-overhead"
RUNTIME_CLASSES = Kind("node.k8s.io", "v1", "runtimeclasses")
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
    if rng.random() < 0.1:  # admission adds the RuntimeClass's overhead to the pod
        spec["runtimeClassName"] = RUNTIME_CLASS
    if rng.random() < 0.05:  # defaulting makes every container port a host port
        spec["hostNetwork"] = True
        container["ports"] = [{"containerPort": rng.choice([8080, 9090])}]
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


RELABEL_EVERY = 10
NODE_CHANGE_EVERY = 15
NODE_CHANGES: list[tuple[str, dict[str, Any]]] = [
    ("b-0", {"metadata": {"labels": {"zone": "z3"}}}),
    ("a-1", {"spec": {"taints": [{"key": "maint", "value": "yes", "effect": "NoSchedule"}]}}),
    (CORDONED, {"spec": {"unschedulable": None}}),
    ("b-1", {"metadata": {"labels": {"disk": None, "gen": "5"}}}),
    ("a-2", {"spec": {"unschedulable": True}}),
    ("b-0", {"metadata": {"labels": {"zone": "z2"}}}),
    ("a-1", {"spec": {"taints": None}}),
    ("e-0", {"spec": {"taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]}}),
    ("b-1", {"metadata": {"labels": {"disk": "ssd"}}}),
    ("a-2", {"spec": {"unschedulable": None}}),
]
"""Relabelled zones and disks, taints added and lifted, cordons on and off, in turn. No
NoExecute taint: the taint manager would evict pods meanwhile, and both sides would decide on
pods being deleted."""


async def _change_node(kube: KubeClient, step: int) -> None:
    """Apply the step's change, then wait until kube-scheduler has seen it: the same patch sets
    an `epoch` label that a sentinel pod (tolerating everything, asking for nothing) selects,
    and kube-scheduler binds the sentinel only from a node cache that holds the change. Node
    and pod watches are not ordered with each other, so without this the next pod could be
    decided on the node as it was."""
    name, change = NODE_CHANGES[step % len(NODE_CHANGES)]
    epoch = f"e{step}"
    body = json.loads(json.dumps(change))
    body.setdefault("metadata", {}).setdefault("labels", {})["epoch"] = epoch
    await kube.patch(NODES, name, body)
    sentinel: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"sentinel-{epoch}", "namespace": SENTINEL_NAMESPACE},
        "spec": {
            "schedulerName": "default-scheduler",
            "containers": [{"name": "main", "image": "sim"}],
            "nodeSelector": {"epoch": epoch},
            "tolerations": [{"operator": "Exists"}],
            "terminationGracePeriodSeconds": 0,
        },
    }
    created = await create_admitted(kube, sentinel, timeout=30)

    async def bound() -> str | None:
        # Refused first if its scheduling cycle ran before the node update came; kube-scheduler
        # tries it again on that update.
        pod = await kube.get(PODS, sentinel["metadata"]["name"], SENTINEL_NAMESPACE)
        return str(pod["spec"].get("nodeName") or "") or None

    node = await wait_for(bound, 30, f"the sentinel of {epoch} to be bound")
    assert node == name, f"the sentinel of {epoch} went to {node}"
    await _delete(kube, created)
    await _wait_deleted(kube, [created])


@dataclass
class Tally:
    placed: int = 0
    refused: int = 0
    invalid: list[str] = field(default_factory=list)
    """The apiserver's refusals: the generator must make only pods it accepts."""
    disagreements: list[str] = field(default_factory=list)
    limited: int = 0
    """Pods whose feasible nodes attach limits narrowed (counted when asked: `_try`)."""
    narrowed: int = 0
    """Pods our filters kept off some node: where nothing else selects nodes and room is
    ample, the rules under test did."""


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


@pytest.fixture
async def versus_runtime(
    versus_cluster: devcluster.ClusterState, versus_kube: KubeClient
) -> AsyncIterator[Runtime]:
    """The operator in-process, reading the cluster as it would: its snapshot is kept by
    watch events, not built from lists."""
    await apply_crd(versus_kube, yaml.safe_load(CRD_FILE.read_text()))
    async with in_process(versus_cluster.kubeconfig) as (runtime, _):
        yield runtime


async def _owners(kube: KubeClient) -> dict[str, dict[str, Any]]:
    """The namespaces, each with a ConfigMap to own half the pods (a controller reference is
    all the slim copy looks at; the garbage collector only needs the owner to exist)."""
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
    return owners


async def _snapshot(
    kube: KubeClient, *, limits: bool = True
) -> tuple[Snapshot, dict[tuple[str, str], VolumeClaim]]:
    """The cluster as the operator's informers keep it, and every claim resolved with its
    StorageClass (as `controllers.volumes` resolves a gang's claims). `limits=False` leaves
    out the CSINodes' attach limits."""
    nodes = [slim_node(node) for node in (await kube.list(NODES))["items"]]
    pods = [slim_pod(pod) for pod in (await kube.list(PODS))["items"]]
    snapshot = Snapshot.build(nodes, pods, gang_of=group_key_of)
    for volume in (await kube.list(PERSISTENT_VOLUMES))["items"]:
        snapshot.volumes.set_volume(persistent_volume(volume))
    for csi_node in (await kube.list(CSI_NODES))["items"] if limits else ():
        snapshot.volumes.set_csi_limits(csi_node["metadata"]["name"], csi_node_limits(csi_node))
    classes = {k["metadata"]["name"]: k for k in (await kube.list(STORAGE_CLASSES))["items"]}
    claims = {}
    for raw in (await kube.list(PERSISTENT_VOLUME_CLAIMS))["items"]:
        meta = raw["metadata"]
        klass = classes.get(raw["spec"].get("storageClassName") or "")
        model = volume_claim(raw, klass)
        claims[(meta["namespace"], meta["name"])] = model
        snapshot.volumes.set_claim_provisioner(model.key, model.provisioner)
    return snapshot, claims


def _cluster(snapshot: Snapshot) -> str:
    """Each node's labels (hostname and sim's own left out) and taints, and its pods'
    namespaces and labels: enough to replay a disagreement by hand, since kube-scheduler's
    random choices make the state of a run its own."""
    own = {HOSTNAME, "kubernetes.io/os", "kubernetes.io/arch", "beta.kubernetes.io/os"}
    parts = []
    for name, node in sorted(snapshot.nodes.items()):
        labels = {k: v for k, v in node.facts.labels.items() if k not in own and "sim" not in k}
        pods = sorted(f"{i.namespace}:{i.labels}" for i in snapshot.node_pods(name))
        parts.append(f"{name} {labels} {list(node.facts.taints)} {pods}")
    return " | ".join(parts)


async def _caught_up(
    kube: KubeClient, runtime: Runtime
) -> tuple[Snapshot, dict[tuple[str, str], VolumeClaim], Snapshot]:
    """A snapshot built from lists, its claims, and the runtime's own snapshot once its watch
    events have brought it to the same place: every node's labels, taints, cordon and
    readiness, free room and score, and every pod index. Read afresh each time, as the cluster
    may move on (the node lifecycle controller taints a cordoned node a moment later)."""
    leading = runtime.leading
    assert leading is not None
    kept = leading.scheduler.snapshot

    def seen(snapshot: Snapshot) -> tuple[Any, ...]:
        facts = {name: node.facts for name, node in snapshot.nodes.items()}
        return facts, snapshot.state(), snapshot.index_state()

    async def agreed() -> tuple[Snapshot, dict[tuple[str, str], VolumeClaim]] | None:
        fresh, claims = await _snapshot(kube)
        return (fresh, claims) if seen(kept) == seen(fresh) else None

    found = await wait_for(agreed, 30, "the runtime's snapshot to match one built from lists")
    assert found is not None  # wait_for returns only a truthy answer
    return found[0], found[1], kept


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


async def _wait_deleted(kube: KubeClient, pods: list[dict[str, Any]]) -> None:
    """Wait until the API no longer lists these pods: kube-scheduler's pod watch delivers their
    deletion before the next pod's creation, so both sides then count the same pods."""
    uids = {p["metadata"]["uid"] for p in pods}

    async def none_left() -> bool:
        items = (await kube.list(PODS))["items"]
        return not uids & {p["metadata"]["uid"] for p in items}

    await wait_for(none_left, 30, f"{len(uids)} deleted pods to go")


async def _free(
    kube: KubeClient, rng: random.Random, placed: list[dict[str, Any]], divisor: int
) -> list[dict[str, Any]]:
    """Delete a random 1/`divisor` of the placed pods, so room comes and goes, and wait until
    they are gone; `placed` keeps the others. Returns the deleted ones."""
    freed = rng.sample(placed, len(placed) // divisor)
    await asyncio.gather(*(_delete(kube, p) for p in freed))
    await _wait_deleted(kube, freed)
    placed[:] = [p for p in placed if p not in freed]
    return freed


def _assert_agreed(tally: Tally) -> None:
    assert not tally.disagreements, "\n".join(
        [f"seed {SEED}: {len(tally.disagreements)} disagreement(s)", *tally.disagreements]
    )
    assert not tally.invalid, tally.invalid


async def _try(
    kube: KubeClient,
    pod: dict[str, Any],
    tally: Tally,
    placed: list[dict[str, Any]],
    runtime: Runtime | None = None,
    *,
    count_limited: bool = False,
) -> None:
    """Create the pod, compare kube-scheduler's decision with ours (see the module docstring).
    `count_limited`: also count in `tally.limited` whether attach limits narrowed our feasible
    nodes, so a test can show its limits were met."""
    unlimited = None
    if count_limited:
        unlimited, _ = await _snapshot(kube, limits=False)
    if runtime is None:
        snapshot, claims = await _snapshot(kube)
    else:
        snapshot, claims, kept = await _caught_up(kube, runtime)
        # No await from here: the runtime's snapshot cannot change under these two questions.
        theirs, fresh = feasible_nodes(pod, kept), feasible_nodes(pod, snapshot)
        if theirs != fresh:
            tally.disagreements.append(
                f"{pod['metadata']['name']}: the runtime's snapshot passes {sorted(theirs)}, "
                f"one built afresh {sorted(fresh)}"
            )
    try:
        created = await create_admitted(kube, pod, timeout=30)
    except ApiError as exc:
        if exc.status != 422:
            raise
        tally.invalid.append(exc.message)
        return
    ours = feasible_nodes(slim_pod(created), snapshot, claims)
    tally.narrowed += len(ours) < len(snapshot.nodes)
    if unlimited is not None and feasible_nodes(slim_pod(created), unlimited, claims) != ours:
        tally.limited += 1
    gang = GangRequest(
        pod["metadata"]["namespace"], pod["metadata"]["name"], 1, [slim_pod(created)]
    )
    decision = place_group(dataclasses.replace(gang, claims=claims), snapshot)
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
            f"labels {pod['metadata']['labels']}; the cluster before it: {_cluster(snapshot)}"
        )
    if node is None:
        tally.refused += 1
        await _delete(kube, created)
        await _wait_deleted(kube, [created])
    else:
        tally.placed += 1
        placed.append(created)


async def test_our_filters_pass_exactly_the_nodes_kube_scheduler_may_choose(
    versus_kube: KubeClient, versus_runtime: Runtime
) -> None:
    """Every RELABEL_EVERY pods a running pod's labels change, and every NODE_CHANGE_EVERY a
    node's labels, taints or cordon, so the runtime's snapshot (compared with a fresh build
    before each pod) follows updates as well as creations and deletions."""
    kube = versus_kube
    async with SimCluster(kube, POOLS, start_delay=0.1, lease_interval=2.0) as sim:
        await sim.wait_ready(60)
        await kube.patch(NODES, CORDONED, {"spec": {"unschedulable": True}})
        await kube.create(
            RUNTIME_CLASSES,
            {
                "apiVersion": "node.k8s.io/v1",
                "kind": "RuntimeClass",
                "metadata": {"name": RUNTIME_CLASS},
                "handler": "sim",
                "overhead": {"podFixed": {"cpu": "250m", "memory": "512Mi"}},
            },
        )
        owners = await _owners(kube)
        sentinels = {"apiVersion": "v1", "kind": "Namespace"}
        await kube.create(NAMESPACES, {**sentinels, "metadata": {"name": SENTINEL_NAMESPACE}})
        rng = random.Random(SEED)
        tally = Tally()
        placed: list[dict[str, Any]] = []
        for index in range(PODS_TO_TRY):
            pod = random_pod(rng, index)
            if index % 2:
                pod["metadata"]["ownerReferences"] = [owners[pod["metadata"]["namespace"]]]
            await _try(kube, pod, tally, placed, versus_runtime)
            if index % RELABEL_EVERY == RELABEL_EVERY - 1 and placed:
                # A running pod's labels change what affinity, anti-affinity and spread count;
                # pod events reach kube-scheduler in order, so the next pod sees the change.
                relabelled = rng.choice(placed)["metadata"]
                labels = {"app": rng.choice(APPS), "tier": None}
                await kube.patch(
                    PODS,
                    relabelled["name"],
                    {"metadata": {"labels": labels}},
                    relabelled["namespace"],
                )
            if index % NODE_CHANGE_EVERY == NODE_CHANGE_EVERY - 1:
                await _change_node(kube, index // NODE_CHANGE_EVERY)
            if index % FREE_EVERY == FREE_EVERY - 1 and placed:
                await _free(kube, rng, placed, 3)
    _assert_agreed(tally)
    # Every pod was decided, and both answers often, so agreement was not reached by never
    # deciding.
    assert tally.placed >= 100 and tally.refused >= 50, tally


# --- volumes -------------------------------------------------------------------------------------
VOLUME_NAMESPACE = "agree-volumes"
TOPOLOGY_ZONE = "topology.kubernetes.io/zone"
VOLUME_POOLS = [
    NodePool(
        count=3,
        cpu="8",
        memory="16Gi",
        labels={"zone": "z1", TOPOLOGY_ZONE: "z1"},
        name_prefix="va",
    ),
    NodePool(
        count=3,
        cpu="8",
        memory="16Gi",
        labels={"zone": "z2", TOPOLOGY_ZONE: "z2"},
        name_prefix="vb",
    ),
]
WAIT_CLASS = "agree-wait"
IMMEDIATE_CLASS = "agree-immediate"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
VOLUME_PODS_TO_TRY = 100
"""Fewer than above: each pod mounts claims, and a static PV serves one claim for good."""


def _volume(
    name: str,
    klass: str,
    size: str,
    term: dict[str, Any] | None,
    *,
    labels: dict[str, str] | None = None,
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    block: bool = False,
    csi: bool = False,
) -> dict[str, Any]:
    """A local PV tied by `term`; without one a hostPath PV that only its labels place (as
    older cloud-disk PVs carry only zone labels). `csi`: a volume of CSI_DRIVER instead, which
    counts against a node's attach limit."""
    spec: dict[str, Any] = {
        "storageClassName": klass,
        "capacity": {"storage": size},
        "accessModes": list(modes),
        "persistentVolumeReclaimPolicy": "Retain",
    }
    if csi:
        spec["csi"] = {"driver": CSI_DRIVER, "volumeHandle": f"handle-{name}"}
    elif term is None:
        spec["hostPath"] = {"path": f"/mnt/disks/{name}"}
    else:
        spec["local"] = {"path": f"/mnt/disks/{name}"}
    if term is not None:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [term]}]}}
    if block:
        spec["volumeMode"] = "Block"
    metadata = {"name": name, "labels": labels or {}}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": metadata, "spec": spec}


def _volumes() -> list[dict[str, Any]]:
    """Per node a small and a big local PV (the big ones of zone z2 labelled fast), zone-wide
    PVs, PVs no Filesystem read-write-once claim may take, and pre-bindable Immediate ones."""
    found = []
    for pool in VOLUME_POOLS:
        for node in pool.node_names():
            host = {"key": HOSTNAME, "operator": "In", "values": [node]}
            found.append(_volume(f"{node}-small", WAIT_CLASS, "1Gi", host))
            fast = {"tier": "fast"} if pool.labels["zone"] == "z2" else {}
            found.append(_volume(f"{node}-big", WAIT_CLASS, "5Gi", host, labels=fast))
    z1 = {"key": "zone", "operator": "In", "values": ["z1"]}
    z2 = {"key": "zone", "operator": "In", "values": ["z2"]}
    found += [_volume(f"z1-shared-{i}", WAIT_CLASS, "2Gi", z1) for i in range(3)]
    va0 = {"key": HOSTNAME, "operator": "In", "values": ["va-0"]}
    vb1 = {"key": HOSTNAME, "operator": "In", "values": ["vb-1"]}
    found.append(_volume("va-0-shared", WAIT_CLASS, "3Gi", va0, modes=("ReadWriteMany",)))
    found.append(_volume("vb-1-block", WAIT_CLASS, "1Gi", vb1, block=True))
    found += [_volume(f"immediate-{i}", IMMEDIATE_CLASS, "1Gi", z2, csi=True) for i in range(8)]
    found += [
        _volume(f"immediate-zoned-{i}", IMMEDIATE_CLASS, "1Gi", None, labels=labels, csi=True)
        for i, labels in enumerate(ZONED_LABELS)
    ]
    return found


CSI_DRIVER = "agree.csi.example.com"
ATTACH_LIMITS = {"va-0": 1, "va-1": 2, "vb-0": 1, "vb-1": 1, "vb-2": 2}
"""CSINodes: how many CSI_DRIVER volumes each node attaches (va-2 has none: no limit). The
Immediate PVs are CSI_DRIVER's, eight of them pinned to zone z2, which attaches four at a
time: a pod mounting a fifth is refused."""


def _csi_node(name: str, count: int) -> dict[str, Any]:
    driver = {"name": CSI_DRIVER, "nodeID": name, "allocatable": {"count": count}}
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": name},
        "spec": {"drivers": [driver]},
    }


ZONED_LABELS = [
    {TOPOLOGY_ZONE: "z1"},
    {TOPOLOGY_ZONE: "z1"},
    {TOPOLOGY_ZONE: "z2"},
    {TOPOLOGY_ZONE: "z1__z2"},
    {TOPOLOGY_ZONE: "z3"},
    {"topology.kubernetes.io/region": "r1"},
    {"failure-domain.beta.kubernetes.io/zone": "z2"},
]
"""Labels of the PVs placed by zone labels only (kube-scheduler's VolumeZone): one zone, both,
a zone no node is in, a region the nodes lack, the older key the nodes lack."""
IMMEDIATE_VOLUMES = [f"immediate-{i}" for i in range(8)] + [
    f"immediate-zoned-{i}" for i in range(len(ZONED_LABELS))
]


def _storage_class(name: str, mode: str) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": NO_PROVISIONER,
        "volumeBindingMode": mode,
    }


def _claim(name: str, klass: str, size: str, **spec: Any) -> dict[str, Any]:
    body = {
        "storageClassName": klass,
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": size}},
        **spec,
    }
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": body,
    }


async def _phase(kube: KubeClient, kind: Kind, name: str, namespace: str | None = None) -> str:
    return str(((await kube.get(kind, name, namespace)).get("status") or {}).get("phase", ""))


@dataclass
class Claims:
    """The claims the volume test made: `fresh` for the next pod, `kept` once a placed pod
    that mounted them is deleted (bound to their PV for good, so reused they pin the pod)."""

    kept: list[str] = field(default_factory=list)
    immediate_left: list[str] = field(default_factory=list)
    count: int = 0

    def name(self) -> str:
        self.count += 1
        return f"claim-{self.count}"


async def _claims_for(kube: KubeClient, rng: random.Random, made: Claims) -> list[str]:
    """One or two claims for the next pod, each created (and an Immediate one Bound) first:
    a new WaitForFirstConsumer claim of some size, access mode, volume mode or selector; an
    Immediate claim pre-bound to a free PV (or one no PV can serve: it stays Pending); or a
    claim an earlier pod left bound."""
    names = []
    for _ in range(1 if rng.random() < 0.7 else 2):
        draw = rng.random()
        if draw < 0.2 and made.kept:
            names.append(rng.choice(made.kept))
            continue
        name = made.name()
        if draw < 0.3:
            if made.immediate_left and rng.random() < 0.8:
                volume = made.immediate_left.pop()
                body = _claim(name, IMMEDIATE_CLASS, "1Gi", volumeName=volume)
            else:
                body = _claim(name, IMMEDIATE_CLASS, "100Gi")
            await kube.create(PERSISTENT_VOLUME_CLAIMS, body, VOLUME_NAMESPACE)
            if "volumeName" in body["spec"]:
                await wait_for(
                    functools.partial(_bound, kube, name), 30, f"claim {name} to be Bound"
                )
        else:
            extra: dict[str, Any] = {}
            if rng.random() < 0.1:
                extra["accessModes"] = ["ReadWriteMany"]
            if rng.random() < 0.1:
                extra["volumeMode"] = "Block"
            if rng.random() < 0.15:
                extra["selector"] = {"matchLabels": {"tier": "fast"}}
            size = rng.choice(["1Gi", "1Gi", "2Gi", "3Gi", "5Gi", "8Gi"])
            body = _claim(name, WAIT_CLASS, size, **extra)
            await kube.create(PERSISTENT_VOLUME_CLAIMS, body, VOLUME_NAMESPACE)
        names.append(name)
    return list(dict.fromkeys(names))


async def _bound(kube: KubeClient, claim: str) -> bool:
    return await _phase(kube, PERSISTENT_VOLUME_CLAIMS, claim, VOLUME_NAMESPACE) == "Bound"


def _volume_pod(rng: random.Random, index: int, claims: list[str]) -> dict[str, Any]:
    volumes = [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": name}}
        for i, name in enumerate(claims)
    ]
    spec: dict[str, Any] = {
        "schedulerName": "default-scheduler",
        "containers": [
            {"name": "main", "image": "sim", "resources": {"requests": {"cpu": "100m"}}}
        ],
        "volumes": volumes,
        "terminationGracePeriodSeconds": 0,
    }
    if rng.random() < 0.2:
        spec["nodeSelector"] = {"zone": rng.choice(["z1", "z2"])}
    if rng.random() < 0.2:
        term = {"labelSelector": {"matchLabels": {"app": "vol"}}, "topologyKey": HOSTNAME}
        spec["affinity"] = {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        }
    metadata = {"name": f"v{index}", "namespace": VOLUME_NAMESPACE, "labels": {"app": "vol"}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


async def test_our_volume_filters_pass_exactly_the_nodes_kube_scheduler_may_choose(
    versus_kube: KubeClient,
) -> None:
    """Claims bound and unbound, WaitForFirstConsumer and Immediate, against local PVs pinned
    to a node or a zone, and PVs placed by zone labels only: kube-scheduler's VolumeBinding and
    VolumeZone (and its PV choice, which changes what later pods find) against our
    `scheduling.volumes`, as above."""
    kube = versus_kube
    for klass, mode in ((WAIT_CLASS, "WaitForFirstConsumer"), (IMMEDIATE_CLASS, "Immediate")):
        await kube.create(STORAGE_CLASSES, _storage_class(klass, mode))
    volumes = _volumes()
    for volume in volumes:
        await kube.create(PERSISTENT_VOLUMES, volume)
    for volume in volumes:  # a PV is Pending until the PV controller first sees it
        name = volume["metadata"]["name"]
        await wait_for(functools.partial(_available, kube, name), 30, f"PV {name} to be Available")
    await kube.create(
        NAMESPACES,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": VOLUME_NAMESPACE}},
    )
    made = Claims(immediate_left=list(IMMEDIATE_VOLUMES))
    async with SimCluster(kube, VOLUME_POOLS, start_delay=0.1, lease_interval=2.0) as sim:
        await sim.wait_ready(60)
        for node, count in ATTACH_LIMITS.items():
            await kube.create(CSI_NODES, _csi_node(node, count))
        rng = random.Random(SEED)
        tally = Tally()
        placed: list[dict[str, Any]] = []
        for index in range(VOLUME_PODS_TO_TRY):
            claims = await _claims_for(kube, rng, made)
            await _try(kube, _volume_pod(rng, index, claims), tally, placed, count_limited=True)
            if index % FREE_EVERY == FREE_EVERY - 1 and placed:
                freed = await _free(kube, rng, placed, 2)
                await _recycle(kube, rng, freed, made, {v["metadata"]["name"]: v for v in volumes})
    _assert_agreed(tally)
    assert tally.placed >= 20 and tally.refused >= 20, tally
    assert tally.limited >= 2, tally


async def _recycle(
    kube: KubeClient,
    rng: random.Random,
    freed: list[dict[str, Any]],
    made: Claims,
    volumes: dict[str, dict[str, Any]],
) -> None:
    """The claims of deleted pods: half are kept for later pods to mount again; the others are
    deleted and their PV made anew (as an admin recycles a Retained volume), so that the PVs
    are not all taken after the first few dozen pods."""
    names = {
        v["persistentVolumeClaim"]["claimName"]
        for pod in freed
        for v in pod["spec"]["volumes"]
        if v.get("persistentVolumeClaim")
    }
    for name in sorted(names - set(made.kept)):
        if rng.random() < 0.5:
            made.kept.append(name)
            continue
        claim = await kube.get(PERSISTENT_VOLUME_CLAIMS, name, VOLUME_NAMESPACE)
        await kube.delete(PERSISTENT_VOLUME_CLAIMS, name, VOLUME_NAMESPACE)
        volume = claim["spec"].get("volumeName")
        if not volume:
            continue
        await kube.delete(PERSISTENT_VOLUMES, volume)
        await wait_for(
            functools.partial(gone, kube, PERSISTENT_VOLUMES, volume), 30, f"PV {volume} gone"
        )
        await kube.create(PERSISTENT_VOLUMES, volumes[volume])
        await wait_for(
            functools.partial(_available, kube, volume), 30, f"PV {volume} to be Available"
        )
        if volume.startswith("immediate-"):
            made.immediate_left.append(volume)


async def _available(kube: KubeClient, volume: str) -> bool:
    return await _phase(kube, PERSISTENT_VOLUMES, volume) == "Available"


# --- attach limits -------------------------------------------------------------------------------
ATTACH_NAMESPACE = "agree-attach"
ATTACH_CLASS = "agree-attach"
ATTACH_POOLS = [
    NodePool(count=2, cpu="16", memory="32Gi", labels={"zone": "z1"}, name_prefix="ca"),
    NodePool(count=2, cpu="16", memory="32Gi", labels={"zone": "z2"}, name_prefix="cb"),
    NodePool(
        count=2,
        cpu="16",
        memory="32Gi",
        labels={"zone": "z2"},
        extended={attach_limit_key(CSI_DRIVER): "2"},
        name_prefix="cc",
    ),
]
ATTACH_CSI_NODES = {"ca-0": 1, "ca-1": 3, "cb-0": 2, "cb-1": 1, "cc-1": 3}
"""CSINode limits of CSI_DRIVER's volumes: cc-0 has none and takes its limit (2) from its
allocatable, as nodes did before CSINodes; cc-1's CSINode (3) wins over its allocatable (2)."""
ATTACH_PODS_TO_TRY = 60
ATTACH_FREE_EVERY = 8


@dataclass
class AttachVolumes:
    """PVs made (and Available) up front, handed out one per new claim of `klass`."""

    klass: str
    namespace: str
    counted: list[str] = field(default_factory=list)
    """PVs that count against a node's limit (a CSI driver's, or EBS)."""
    host_path: list[str] = field(default_factory=list)


async def _attach_volumes(
    kube: KubeClient, made: AttachVolumes, source: Callable[[str], dict[str, Any]]
) -> AttachVolumes:
    """Enough PVs for every claim a test can make: of the counted type (`source`, the PV's
    volume source for its name), and a few hostPath ones (no driver: they count nothing). Made
    first: a PV is Pending until the PV controller has seen it, and a claim pre-bound to a
    Pending PV waits for the controller's next resync."""
    for i in range(3 * ATTACH_PODS_TO_TRY):
        name = f"{made.klass}-{i}"
        spec: dict[str, Any] = {
            "storageClassName": made.klass,
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
        }
        if i % 5 == 4:
            spec["hostPath"] = {"path": f"/mnt/disks/{name}"}
            made.host_path.append(name)
        else:
            spec.update(source(name))
            made.counted.append(name)
        pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}}
        await kube.create(PERSISTENT_VOLUMES, {**pv, "spec": spec})

    async def all_available() -> bool:
        items = (await kube.list(PERSISTENT_VOLUMES))["items"]
        ours = [v for v in items if v["spec"].get("storageClassName") == made.klass]
        return all(v.get("status", {}).get("phase") == "Available" for v in ours)

    await wait_for(all_available, 60, f"the PVs of {made.klass} to be Available")
    return made


async def _try_series(
    kube: KubeClient,
    pools: list[NodePool],
    count: int,
    make: Callable[[random.Random, int], Awaitable[dict[str, Any]]],
    *,
    count_limited: bool = False,
) -> Tally:
    """`count` pods from `make`, each tried (`_try`) on sim nodes of `pools`, half the placed
    ones deleted every ATTACH_FREE_EVERY pods."""
    async with SimCluster(kube, pools, start_delay=0.1, lease_interval=2.0) as sim:
        await sim.wait_ready(60)
        rng = random.Random(SEED)
        tally = Tally()
        placed: list[dict[str, Any]] = []
        for index in range(count):
            pod = await make(rng, index)
            await _try(kube, pod, tally, placed, count_limited=count_limited)
            if index % ATTACH_FREE_EVERY == ATTACH_FREE_EVERY - 1 and placed:
                await _free(kube, rng, placed, 2)
    return tally


async def _claims_namespace(
    kube: KubeClient, klass: str, namespace: str, source: Callable[[str], dict[str, Any]]
) -> AttachVolumes:
    """A test's namespace for its claims, their Immediate StorageClass and the PVs they get
    (`_attach_volumes`)."""
    await kube.create(STORAGE_CLASSES, _storage_class(klass, "Immediate"))
    await kube.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    return await _attach_volumes(kube, AttachVolumes(klass, namespace), source)


async def _attach_claims(
    kube: KubeClient, rng: random.Random, index: int, volumes: AttachVolumes, most: int = 3
) -> list[str]:
    """Up to `most` claims for the next pod, each Bound before the pod is made: mostly one of
    a new counted volume, sometimes of a new hostPath one, sometimes a claim an earlier pod
    mounts or mounted (on its node already, it counts once)."""
    namespace = volumes.namespace
    existing = [
        c["metadata"]["name"]
        for c in (await kube.list(PERSISTENT_VOLUME_CLAIMS, namespace))["items"]
    ]
    names = []
    for i in range(min(most, rng.choice([1, 1, 2, 3]))):
        draw = rng.random()
        if draw < 0.2 and existing:
            names.append(rng.choice(existing))
            continue
        volume = (volumes.host_path if draw < 0.3 else volumes.counted).pop()
        name = f"a{index}-{i}"
        body = _claim(name, volumes.klass, "1Gi", volumeName=volume, accessModes=["ReadWriteMany"])
        await kube.create(PERSISTENT_VOLUME_CLAIMS, body, namespace)
        names.append(name)
    for name in names:
        await wait_for(
            functools.partial(_phase_is, kube, name, namespace, "Bound"),
            30,
            f"claim {name} to be Bound",
        )
    return list(dict.fromkeys(names))


def _csi_source(driver: str, name: str) -> dict[str, Any]:
    return {"csi": {"driver": driver, "volumeHandle": f"handle-{name}"}}


async def _phase_is(kube: KubeClient, claim: str, namespace: str, phase: str) -> bool:
    return await _phase(kube, PERSISTENT_VOLUME_CLAIMS, claim, namespace) == phase


def _attach_pod(rng: random.Random, index: int, claims: list[str]) -> dict[str, Any]:
    pod = _volume_pod(rng, index, claims)
    pod["metadata"]["namespace"] = ATTACH_NAMESPACE
    pod["spec"].pop("affinity", None)
    return pod


async def test_our_attach_limits_pass_exactly_the_nodes_kube_scheduler_may_choose(
    versus_kube: KubeClient,
) -> None:
    """Pods mounting one to three CSI volumes (some shared with pods already placed, some not
    CSI at all) on nodes whose CSINode or allocatable limits how many the node attaches:
    kube-scheduler's NodeVolumeLimits against our attach limits, as above. Resources are
    ample, so a refusal here is the limits' (or a zone's nodes all at theirs)."""
    kube = versus_kube
    # Before the nodes: kube-scheduler has them by the time the nodes are Ready.
    for node, count in ATTACH_CSI_NODES.items():
        await kube.create(CSI_NODES, _csi_node(node, count))
    csi = functools.partial(_csi_source, CSI_DRIVER)
    volumes = await _claims_namespace(kube, ATTACH_CLASS, ATTACH_NAMESPACE, csi)

    async def make(rng: random.Random, index: int) -> dict[str, Any]:
        return _attach_pod(rng, index, await _attach_claims(kube, rng, index, volumes))

    tally = await _try_series(kube, ATTACH_POOLS, ATTACH_PODS_TO_TRY, make, count_limited=True)
    _assert_agreed(tally)
    assert tally.placed >= 15 and tally.refused >= 5 and tally.limited >= 10, tally


# --- in-tree disks ------------------------------------------------------------------------------
DISK_NAMESPACE = "agree-disks"
DISK_CLASS = "agree-disks"
EBS_KEY = IN_TREE_LIMIT_KEYS[DiskPlugin.AWS_EBS]
GCE_KEY = IN_TREE_LIMIT_KEYS[DiskPlugin.GCE_PD]
AZURE_KEY = IN_TREE_LIMIT_KEYS[DiskPlugin.AZURE_DISK]
DISK_POOLS = [
    NodePool(
        count=2, cpu="16", memory="32Gi", extended={EBS_KEY: "2", GCE_KEY: "2"}, name_prefix="da"
    ),
    NodePool(
        count=2, cpu="16", memory="32Gi", extended={EBS_KEY: "3", AZURE_KEY: "1"}, name_prefix="db"
    ),
    NodePool(
        count=1,
        cpu="16",
        memory="32Gi",
        extended={EBS_KEY: "1", GCE_KEY: "1", AZURE_KEY: "2"},
        name_prefix="dc",
    ),
]
"""Resources are ample and nothing else selects nodes: a node is refused for a disk only."""
DISK_PODS_TO_TRY = 60
EBS_IDS = [f"vol-{i:04d}" for i in range(12)]
"""Inline EBS volumes are drawn from these, and so are a few of the EBS PVs' (one disk, named
inline by one pod and through a claim by another, counts once)."""
MONITORS = ["10.0.0.1:6789", "10.0.0.2:6789", "10.0.0.3:6789"]


def _ebs_source(name: str) -> dict[str, Any]:
    index = int(name.rsplit("-", 1)[1])
    volume_id = EBS_IDS[index] if index < len(EBS_IDS) and index % 3 == 0 else f"vol-pv-{index}"
    return {"awsElasticBlockStore": {"volumeID": volume_id}}


def _inline_disk(rng: random.Random, name: str) -> dict[str, Any]:
    """One inline disk volume: EBS most often, then GCE PD, Azure Disk, iSCSI or RBD, read-only
    or not, from small pools of names so that pods meet each other's disks."""
    read_only = rng.random() < 0.4
    kind = rng.choice(["ebs"] * 4 + ["gce"] * 2 + ["azure", "iscsi", "rbd"])
    if kind == "ebs":
        return {
            "name": name,
            "awsElasticBlockStore": {"volumeID": rng.choice(EBS_IDS), "readOnly": read_only},
        }
    if kind == "gce":
        pd = f"pd-{rng.randrange(5)}"
        return {"name": name, "gcePersistentDisk": {"pdName": pd, "readOnly": read_only}}
    if kind == "azure":
        disk = f"az-{rng.randrange(4)}"
        uri = f"https://agree.blob.core.windows.net/disks/{disk}.vhd"
        return {"name": name, "azureDisk": {"diskName": disk, "diskURI": uri}}
    if kind == "iscsi":
        iqn = f"iqn.2026-11.com.example:target-{rng.randrange(3)}"
        target = {"targetPortal": "10.0.1.1:3260", "iqn": iqn, "lun": 0, "readOnly": read_only}
        return {"name": name, "iscsi": target}
    monitors = rng.sample(MONITORS, rng.choice([1, 2]))
    image = {
        "monitors": monitors,
        "pool": rng.choice(["rbd", "rbd", "other"]),
        "image": f"img-{rng.randrange(2)}",
    }
    return {"name": name, "rbd": {**image, "readOnly": read_only}}


def _disk_pod(rng: random.Random, index: int, claims: list[str]) -> dict[str, Any]:
    """A pod with one to three inline disks and any claims given."""
    pod = _attach_pod(rng, index, claims)
    pod["metadata"]["namespace"] = DISK_NAMESPACE
    pod["spec"].pop("nodeSelector", None)
    pod["spec"]["volumes"] += [_inline_disk(rng, f"d{i}") for i in range(rng.choice([1, 1, 2, 3]))]
    return pod


async def test_our_in_tree_disk_rules_pass_exactly_the_nodes_kube_scheduler_may_choose(
    versus_kube: KubeClient,
) -> None:
    """Pods mounting inline EBS volumes, GCE PDs, Azure Disks, iSCSI targets and RBD images
    (read-only or not, drawn from small pools so that they meet), some also a claim bound to
    an EBS PV, on nodes whose allocatable limits how many EBS, GCE PD and Azure disks each
    attaches: kube-scheduler's VolumeRestrictions, EBSLimits, GCEPDLimits and AzureDiskLimits
    against ours, as above."""
    kube = versus_kube
    volumes = await _claims_namespace(kube, DISK_CLASS, DISK_NAMESPACE, _ebs_source)

    async def make(rng: random.Random, index: int) -> dict[str, Any]:
        claims: list[str] = []
        if rng.random() < 0.3:
            claims = await _attach_claims(kube, rng, index, volumes, most=1)
        return _disk_pod(rng, index, claims)

    tally = await _try_series(kube, DISK_POOLS, DISK_PODS_TO_TRY, make)
    _assert_agreed(tally)
    assert tally.placed >= 15 and tally.refused >= 3 and tally.narrowed >= 10, tally


# --- preemption ----------------------------------------------------------------------------------
PREEMPT_NAMESPACE = "agree-preempt"
PREEMPT_POOLS = [
    NodePool(count=3, cpu="4", memory="16Gi", labels={"zone": "z1"}, name_prefix="pa"),
    NodePool(count=2, cpu="6", memory="16Gi", labels={"zone": "z2"}, name_prefix="pb"),
    NodePool(
        count=1,
        cpu="8",
        memory="16Gi",
        labels={"zone": "z2"},
        taints=[{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}],
        name_prefix="pc",
    ),
]
PRIORITY_CLASSES = Kind("scheduling.k8s.io", "v1", "priorityclasses")
PRIORITIES: dict[str, int] = {
    "agree-mid": 100,
    "agree-high": 1000,
    "agree-filler-low": 10,
    "agree-filler-mid": 100,
}
"""The fillers' classes never preempt (their pods may not say so themselves in v1.20)."""
PREEMPTORS_TO_TRY = 60


def _filler(rng: random.Random, index: int) -> dict[str, Any]:
    """A pod that fills the cluster at low or middle priority and never preempts itself."""
    klass = rng.choice(["agree-filler-low", "agree-filler-low", "agree-filler-mid"])
    spec: dict[str, Any] = {
        "schedulerName": "default-scheduler",
        "priorityClassName": klass,
        "containers": [
            {
                "name": "main",
                "image": "sim",
                "resources": {"requests": {"cpu": rng.choice(["500m", "1", "2"])}},
            }
        ],
        "terminationGracePeriodSeconds": 0,
    }
    if rng.random() < 0.3:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    metadata = {"name": f"fill-{index}", "namespace": PREEMPT_NAMESPACE}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def _preemptor(rng: random.Random, index: int) -> dict[str, Any]:
    """A pod at middle or high priority that needs room, maybe in one zone, maybe allowed on
    the tainted node; no pod-to-pod terms, whose preemption kube-scheduler v1.20 treats apart."""
    spec: dict[str, Any] = {
        "schedulerName": "default-scheduler",
        "priorityClassName": rng.choice(["agree-mid", "agree-high"]),
        "containers": [
            {
                "name": "main",
                "image": "sim",
                "resources": {"requests": {"cpu": rng.choice(["1", "2", "3", "5", "9"])}},
            }
        ],
        "terminationGracePeriodSeconds": 0,
    }
    if rng.random() < 0.3:
        spec["nodeSelector"] = {"zone": rng.choice(["z1", "z2"])}
    if rng.random() < 0.3:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    metadata = {"name": f"preemptor-{index}", "namespace": PREEMPT_NAMESPACE}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


async def _classes_and_namespace(
    kube: KubeClient, priorities: dict[str, int], never: list[str], namespace: str
) -> None:
    """The PriorityClasses (those in `never` with `preemptionPolicy: Never`, as fillers' pods
    may not say so themselves in v1.20) and the namespace of a preemption test."""
    for name, value in priorities.items():
        klass: dict[str, Any] = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        if name in never:
            klass["preemptionPolicy"] = "Never"
        await kube.create(PRIORITY_CLASSES, klass)
    await kube.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )


async def _fill(kube: KubeClient, rng: random.Random, start: int) -> int:
    """Fillers one at a time until kube-scheduler refuses one (deleted again): the cluster is
    then full for a filler's size. Returns the next filler index."""
    index = start
    while True:
        filler = await create_admitted(kube, _filler(rng, index), timeout=30)
        index += 1
        node, _ = await _decision(kube, PREEMPT_NAMESPACE, filler["metadata"]["name"])
        if node is None:
            await _delete(kube, filler)
            await _wait_deleted(kube, [filler])
            return index


async def test_our_preemption_plans_exactly_when_kube_scheduler_preempts(
    versus_kube: KubeClient,
) -> None:
    """Single pods of low and middle priority fill the cluster (never preempting); then a pod
    of middle or high priority arrives. kube-scheduler binds it, preempts for it (naming the
    node it nominates and deleting its victims), or refuses. Our `plan_preemption`, on the
    snapshot just before, must fit it without victims, plan victims, or refuse alike; and
    where both preempt, the highest priority among the victims must be the same, the first
    thing both minimise (no PodDisruptionBudgets here, which kube-scheduler weighs first)."""
    kube = versus_kube
    never = [name for name in PRIORITIES if name.startswith("agree-filler-")]
    await _classes_and_namespace(kube, PRIORITIES, never, PREEMPT_NAMESPACE)
    rng = random.Random(SEED)
    outcomes: dict[str, int] = {"bound": 0, "preempted": 0, "refused": 0}
    disagreements = []
    async with SimCluster(kube, PREEMPT_POOLS, start_delay=0.1, lease_interval=2.0) as sim:
        await sim.wait_ready(60)
        filled = await _fill(kube, rng, 0)
        for index in range(PREEMPTORS_TO_TRY):
            body = _preemptor(rng, index)
            snapshot, _ = await _snapshot(kube)
            before = {
                p["metadata"]["uid"]: p
                for p in (await kube.list(PODS, PREEMPT_NAMESPACE))["items"]
                if p["spec"].get("nodeName")
            }
            ours_pod: dict[str, Any] = json.loads(json.dumps(body))
            ours_pod["metadata"]["uid"] = f"preemptor-{index}"
            ours_pod["spec"]["priority"] = PRIORITIES[body["spec"]["priorityClassName"]]
            gang = GangRequest(
                PREEMPT_NAMESPACE,
                body["metadata"]["name"],
                1,
                [ours_pod],
                priority=ours_pod["spec"]["priority"],
            )
            plan = plan_preemption(gang, snapshot)
            created = await create_admitted(kube, body, timeout=30)
            node, message = await _decision(kube, PREEMPT_NAMESPACE, body["metadata"]["name"])
            current = await kube.get(PODS, body["metadata"]["name"], PREEMPT_NAMESPACE)
            nominated = current["status"].get("nominatedNodeName")
            # kube-scheduler deletes its victims before it says it nominated a node, and binds
            # the pod once they are gone, maybe before the condition could be read: so whether
            # it preempted is whether pods were deleted (nothing else deletes any here).
            after = {
                p["metadata"]["uid"]
                for p in (await kube.list(PODS, PREEMPT_NAMESPACE))["items"]
                if not p["metadata"].get("deletionTimestamp")
            }
            theirs = [pod for uid, pod in before.items() if uid not in after]
            if theirs:
                outcome = "preempted"
            elif node is not None:
                outcome = "bound"
            else:
                outcome = "refused"
            outcomes[outcome] += 1
            ours = (
                "refused"
                if isinstance(plan, PreemptionRefusal)
                else "bound"
                if plan.empty
                else "preempted"
            )
            label = f"{body['metadata']['name']} {json.dumps(body['spec'], sort_keys=True)}"
            if ours != outcome:
                disagreements.append(
                    f"{label}: kube-scheduler {outcome} ({nominated or node or message}), "
                    f"we {ours} ({plan.message})"
                )
            elif isinstance(plan, PreemptionPlan) and theirs:
                highest = max(p["spec"].get("priority", 0) for p in theirs)
                if highest != max(v.priority for v in plan.victims):
                    disagreements.append(
                        f"{label}: kube-scheduler's victims' highest priority {highest} "
                        f"({[p['metadata']['name'] for p in theirs]} for {nominated or node}), "
                        f"ours {max(v.priority for v in plan.victims)} ({plan.message})"
                    )
            await _delete(kube, created)
            await _wait_deleted(kube, [created])
            await _wait_for_no_terminating(kube)
            filled = await _fill(kube, rng, filled)
    assert not disagreements, "\n".join(
        [f"seed {SEED}: {len(disagreements)} disagreement(s)", *disagreements]
    )
    assert outcomes["preempted"] >= 5 and outcomes["refused"] + outcomes["bound"] >= 3, outcomes


SHUT_NAMESPACE = "agree-shut"
SHUT_POOL = NodePool(count=2, cpu="4", memory="8Gi", labels={"pool": "shut"}, name_prefix="sh")
SHUT_PRIORITIES = {"agree-shut-low": 10, "agree-shut-high": 1000}
EVERYONE_AWAY = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {}, "topologyKey": HOSTNAME}
        ]
    }
}


def _shut_pod(name: str, klass: str, cpu: str, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main",
        "image": "sim",
        "resources": {"requests": {"cpu": cpu}},
    }
    ports = spec.pop("ports", None)
    if ports:
        container["ports"] = ports
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": SHUT_NAMESPACE},
        "spec": {
            "schedulerName": "default-scheduler",
            "priorityClassName": klass,
            "nodeSelector": {"pool": "shut"},
            "containers": [container],
            "terminationGracePeriodSeconds": 0,
            **spec,
        },
    }


async def test_room_a_lower_priority_pod_shuts_is_preempted_for_as_kube_scheduler_does(
    versus_kube: KubeClient,
) -> None:
    """Both nodes have room, but on each a low-priority pod shuts it: it holds the host port
    the preemptor asks for, or its anti-affinity keeps every pod of its namespace off its node.
    kube-scheduler runs its filters with a node's lower-priority pods taken out, so it evicts
    one; `plan_preemption`, counting room by resources, found nothing to free and refused."""
    kube = versus_kube
    await _classes_and_namespace(kube, SHUT_PRIORITIES, ["agree-shut-low"], SHUT_NAMESPACE)
    port = [{"containerPort": 8080, "hostPort": 8080}]
    cases: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
        "port": ({"ports": port}, {"ports": port}),
        "anti-affinity": ({"affinity": EVERYONE_AWAY}, {}),
    }
    outcomes = {}
    async with SimCluster(kube, [SHUT_POOL], start_delay=0.1, lease_interval=2.0) as sim:
        await sim.wait_ready(60)
        for case, (holder_spec, preemptor_spec) in cases.items():
            holders = []
            for index in range(SHUT_POOL.count):
                body = _shut_pod(f"{case}-holder-{index}", "agree-shut-low", "100m", **holder_spec)
                holders.append(await create_admitted(kube, body, timeout=30))
                node, message = await _decision(kube, SHUT_NAMESPACE, f"{case}-holder-{index}")
                assert node is not None, message
            # 3 of the node's 4 cpu: the holder's 100m is not what is short (evicting it gains
            # no room), so only the filters tell why it must go.
            body = _shut_pod(f"{case}-preemptor", "agree-shut-high", "3", **preemptor_spec)
            snapshot, _ = await _snapshot(kube)
            ours_pod: dict[str, Any] = json.loads(json.dumps(body))
            ours_pod["metadata"]["uid"] = f"{case}-preemptor"
            ours_pod["spec"]["priority"] = SHUT_PRIORITIES["agree-shut-high"]
            gang = GangRequest(SHUT_NAMESPACE, f"{case}-preemptor", 1, [ours_pod], priority=1000)
            plan = plan_preemption(gang, snapshot)
            created = await create_admitted(kube, body, timeout=30)

            async def evicted(holders: list[dict[str, Any]] = holders) -> list[str]:
                pods = (await kube.list(PODS, SHUT_NAMESPACE))["items"]
                left = {
                    p["metadata"]["uid"] for p in pods if not p["metadata"].get("deletionTimestamp")
                }
                return [h["metadata"]["name"] for h in holders if h["metadata"]["uid"] not in left]

            theirs = await wait_for(evicted, 30, f"kube-scheduler to preempt for {case}")
            outcomes[case] = (theirs, plan)
            await _delete(kube, created)
            leftover = [h for h in holders if h["metadata"]["name"] not in theirs]
            await asyncio.gather(*(_delete(kube, h) for h in leftover))
            await _wait_deleted(kube, [created, *holders])
    for case, (theirs, plan) in outcomes.items():
        assert len(theirs) == 1, (case, theirs)
        assert isinstance(plan, PreemptionPlan), (case, plan)
        assert [len(v.pods) for v in plan.victims] == [1], (case, plan.message)
        (victim,) = plan.victims
        assert victim.priority == SHUT_PRIORITIES["agree-shut-low"], (case, plan.message)
        assert victim.pods[0].name.startswith(f"{case}-holder-"), (case, plan.message)
        assert [b.node for b in plan.nominations] == [victim.pods[0].node], (case, plan.message)


async def _wait_for_no_terminating(kube: KubeClient) -> None:
    """Victims deleted by kube-scheduler are gone before the next round is read."""

    async def none() -> bool:
        pods = (await kube.list(PODS, PREEMPT_NAMESPACE))["items"]
        return not any(p["metadata"].get("deletionTimestamp") for p in pods)

    await wait_for(none, 30, "the preempted pods to be gone")


# --- preferred pod (anti-)affinity ---------------------------------------------------------------
PREFER_NAMESPACE = "agree-prefer"
PREFER_POOLS = [
    NodePool(count=3, cpu="8", memory="16Gi", labels={"zone": "y1"}, name_prefix="qa"),
    NodePool(count=3, cpu="8", memory="16Gi", labels={"zone": "y2"}, name_prefix="qb"),
]
PREFER_TRIALS = 60
ANCHORS = 8
DECISIVE = 20.0
"""How far (of 100) a node's preference score must lead every node outside the best for the
trial to count: kube-scheduler adds its other scores (least allocated, balanced allocation),
which on these near-empty nodes differ by a few points."""

Term = tuple[int, str, str]
"""A scoring term as the test writes it: (signed weight, app selected, topology key); weight 0
stands for a required affinity term, which kube-scheduler scores at hardPodAffinityWeight 1."""


def _random_terms(rng: random.Random, most: int) -> list[Term]:
    return [
        (
            rng.choice([1, -1]) * rng.randint(1, 100),
            rng.choice(APPS),
            rng.choice(["zone", HOSTNAME]),
        )
        for _ in range(rng.randint(0, most))
    ]


def _affinity(terms: list[Term]) -> dict[str, Any]:
    affinity: dict[str, Any] = {}
    for weight, app, key in terms:
        term: dict[str, Any] = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}
        item: dict[str, Any]
        if weight == 0:
            kind, field, item = (
                "podAffinity",
                "requiredDuringSchedulingIgnoredDuringExecution",
                term,
            )
        else:
            kind = "podAffinity" if weight > 0 else "podAntiAffinity"
            field = "preferredDuringSchedulingIgnoredDuringExecution"
            item = {"weight": abs(weight), "podAffinityTerm": term}
        affinity.setdefault(kind, {}).setdefault(field, []).append(item)
    return affinity


def _prefer_pod(name: str, app: str, terms: list[Term], node: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {"name": "main", "image": "sim", "resources": {"requests": {"cpu": "100m"}}}
        ],
        "terminationGracePeriodSeconds": 0,
    }
    if node is None:
        spec["schedulerName"] = "default-scheduler"
    else:
        spec["nodeName"] = node  # placed by hand: no scheduler looks at it
    if terms:
        spec["affinity"] = _affinity(terms)
    metadata = {"name": name, "namespace": PREFER_NAMESPACE, "labels": {"app": app}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


@dataclass(frozen=True)
class Anchor:
    node: str
    app: str
    terms: list[Term]


def _preference_scores(
    app: str, terms: list[Term], nodes: dict[str, dict[str, str]], anchors: list[Anchor]
) -> dict[str, float]:
    """Upstream's InterPodAffinity score per node, written out from its definition: the pod's
    own terms add their signed weight for every anchor they select in the node's domain, and
    every anchor's terms that select the pod add theirs (a required affinity term 1) in the
    anchor's domain; then each node's sum is scaled to 0..100 between min(0, lowest) and
    max(0, highest)."""
    raw = {}
    for name, labels in nodes.items():
        total = 0
        for anchor in anchors:
            where = nodes[anchor.node]
            for weight, selected, key in terms:
                if anchor.app == selected and key in labels and where.get(key) == labels[key]:
                    total += weight
            for weight, selected, key in anchor.terms:
                if app == selected and key in labels and where.get(key) == labels[key]:
                    total += weight or 1
        raw[name] = total
    low, high = min(0, *raw.values()), max(0, *raw.values())
    if high == low:
        return {name: 0.0 for name in raw}
    return {name: 100.0 * (value - low) / (high - low) for name, value in raw.items()}


async def test_a_decisive_pod_preference_leads_us_where_it_leads_kube_scheduler(
    versus_kube: KubeClient,
) -> None:
    """Small pods of apps web, db and cache sit on six identical nodes in two zones, some with
    preferred or required pod affinity, or preferred anti-affinity, toward an app. Pods of a
    random app, with none to three preferred terms of their own toward the apps, by zone or by
    host, arrive one at a time. Where the preference score (upstream's definition, its
    symmetric part included, computed here on its own) leads every other node by DECISIVE
    points, kube-scheduler must bind the pod to one of the best nodes, and so must
    `place_group`. Ours weighs the score against packing rather than against kube-scheduler's
    spreading scores, so close calls are not compared."""
    kube = versus_kube
    await kube.create(
        NAMESPACES,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PREFER_NAMESPACE}},
    )
    rng = random.Random(SEED)
    decisive = symmetric = 0
    disagreements = []
    async with SimCluster(kube, PREFER_POOLS, start_delay=0.1, lease_interval=2.0) as sim:
        await sim.wait_ready(60)
        names = sim.node_names
        anchors = []
        for index in range(ANCHORS):
            anchor = Anchor(
                rng.choice(names),
                rng.choice(APPS),
                [(0, rng.choice(APPS), "zone")] if rng.random() < 0.2 else _random_terms(rng, 1),
            )
            body = _prefer_pod(f"anchor-{index}", anchor.app, anchor.terms, anchor.node)
            await create_admitted(kube, body, timeout=30)
            anchors.append(anchor)
        labels = {
            n["metadata"]["name"]: n["metadata"].get("labels") or {}
            for n in (await kube.list(NODES))["items"]
            if n["metadata"]["name"] in names
        }
        for index in range(PREFER_TRIALS):
            app, terms = rng.choice(APPS), _random_terms(rng, 3)
            body = _prefer_pod(f"prefer-{index}", app, terms, None)
            scores = _preference_scores(app, terms, labels, anchors)
            decided, disagreement = await _scored_trial(kube, body, scores)
            if decided:
                decisive += 1
                symmetric += not terms
            if disagreement:
                disagreements.append(f"app {app} {terms}: {disagreement}; anchors {anchors}")
    assert not disagreements, "\n".join(
        [f"seed {SEED}: {len(disagreements)} disagreement(s)", *disagreements]
    )
    # Decided often, and by the anchors' terms alone in some trials (pods without terms).
    assert decisive >= PREFER_TRIALS // 3 and symmetric >= 3, (decisive, symmetric)


async def _scored_trial(
    kube: KubeClient, body: dict[str, Any], scores: dict[str, float]
) -> tuple[bool, str | None]:
    """Send `body` to kube-scheduler, decide it with `place_group` on the cluster as it was
    just before, then delete it. Whether the best nodes by `scores` lead every other node by
    DECISIVE points, and if so, and either side chose another node, what each chose."""
    meta = body["metadata"]
    top = max(scores.values())
    best = {name for name, score in scores.items() if score == top}
    rest = [score for name, score in scores.items() if name not in best]
    snapshot, _ = await _snapshot(kube)
    created = await create_admitted(kube, body, timeout=30)
    gang = GangRequest(meta["namespace"], meta["name"], 1, [slim_pod(created)])
    decision = place_group(gang, snapshot)
    ours = decision.bindings[0].node if isinstance(decision, Placement) else None
    node, message = await _decision(kube, meta["namespace"], meta["name"])
    await _delete(kube, created)
    await _wait_deleted(kube, [created])
    if not rest or top - max(rest) < DECISIVE:
        return False, None
    if node in best and ours in best:
        return True, None
    return True, (
        f"{meta['name']}: best {sorted(best)}, kube-scheduler {node or message}, ours {ours}; "
        f"scores {scores}"
    )


# --- image locality -------------------------------------------------------------------------------
IMAGE_NAMESPACE = "agree-images"
IMAGE_SIZES = {"img-a:v1": "1536Mi", "img-b:v1": "600Mi", "img-c:v1": "2Gi", "img-d:v1": "1200Mi"}


def _sized(*images: str) -> dict[str, str]:
    return {f"{image}:v1": IMAGE_SIZES[f"{image}:v1"] for image in images}


IMAGE_POOLS = [
    NodePool(count=2, cpu="8", memory="16Gi", name_prefix="ia", images=_sized("img-a", "img-d")),
    NodePool(count=1, cpu="8", memory="16Gi", name_prefix="ib", images=_sized("img-b", "img-c")),
    NodePool(count=2, cpu="8", memory="16Gi", name_prefix="ic", images=_sized("img-b", "img-d")),
    NodePool(count=1, cpu="8", memory="16Gi", name_prefix="id"),
]
IMAGE_TRIALS = 30


def _image_scores(containers: list[str], nodes: list[dict[str, Any]]) -> dict[str, float]:
    """Upstream's ImageLocality score per node, written out from its definition: for each
    container whose image (`:latest` added to a name without a tag) the node lists, the image's
    size times the share of all nodes listing it; the sum clamped to 23 MiB .. 1,000 MiB per
    container and scaled to 0..100, in integers."""
    listed: dict[str, dict[str, int]] = {
        node["metadata"]["name"]: {
            name: image["sizeBytes"]
            for image in node["status"].get("images") or ()
            for name in image["names"]
        }
        for node in nodes
    }
    holders: dict[str, int] = {}
    for images in listed.values():
        for name in images:
            holders[name] = holders.get(name, 0) + 1
    low, high = 23 * 2**20, 1000 * 2**20 * len(containers)
    scores = {}
    for node, images in listed.items():
        total = 0
        for image in containers:
            name = image if image.rfind(":") > image.rfind("/") else image + ":latest"
            if name in images:
                total += int(images[name] * holders[name] / len(nodes))
        scores[node] = float(100 * (min(max(total, low), high) - low) // (high - low))
    return scores


def _image_pod(name: str, images: list[str]) -> dict[str, Any]:
    containers = [
        {"name": f"c{i}", "image": image, "resources": {"requests": {"cpu": "100m"}}}
        for i, image in enumerate(images)
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": IMAGE_NAMESPACE},
        "spec": {
            "schedulerName": "default-scheduler",
            "containers": containers,
            "terminationGracePeriodSeconds": 0,
        },
    }


async def test_a_decisive_image_score_leads_us_where_it_leads_kube_scheduler(
    versus_kube: KubeClient,
) -> None:
    """Six empty nodes in four pools list four images of 600 MiB to 2 GiB, each on one to four
    nodes. Pods of one or two containers, of those images or one no node lists, arrive one at
    a time. Where the image score (upstream's definition, computed here on its own from the
    nodes as the API server lists them) leads every other node by DECISIVE points,
    kube-scheduler must bind the pod to one of the best nodes, and so must `place_group`, from
    the nodes as the operator's informers keep them."""
    kube = versus_kube
    await kube.create(
        NAMESPACES,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": IMAGE_NAMESPACE}},
    )
    rng = random.Random(SEED)
    decisive = 0
    disagreements = []
    async with SimCluster(kube, IMAGE_POOLS, start_delay=0.1, lease_interval=2.0) as sim:
        await sim.wait_ready(60)
        for index in range(IMAGE_TRIALS):
            images = rng.choices([*IMAGE_SIZES, "img-a", "sim"], k=rng.randint(1, 2))
            body = _image_pod(f"image-{index}", images)
            nodes = (await kube.list(NODES))["items"]
            decided, disagreement = await _scored_trial(kube, body, _image_scores(images, nodes))
            decisive += decided
            if disagreement:
                disagreements.append(f"{images}: {disagreement}")
        assert set(sim.node_names) <= {n["metadata"]["name"] for n in nodes}
    assert not disagreements, "\n".join(
        [f"seed {SEED}: {len(disagreements)} disagreement(s)", *disagreements]
    )
    assert decisive >= IMAGE_TRIALS // 3, decisive
