"""docs/guides/troubleshooting.md: each situation the page describes, made on the dev cluster, and
the command the page gives shows its cause.

* The operator's Lease, webhook configurations and CRDs, read with the page's commands while the
  session operator runs (outside a cluster its Lease lives in kube-system, not in the install's
  namespace: the only difference).
* A gang placed whose pods do not start: sim nodes that take 10 minutes to start its pods. The
  PodGroup says `Scheduled` with every member bound and stays `Pending`; the pods show their node.
* A Job-like controller whose pods exceed the namespace's ResourceQuota: the ReplicaSet's
  `FailedCreate` Events say `exceeded quota`, the quota shows used against hard, and the gang waits
  with `NotEnoughTasks`.
* The topology page's `kubectl get nodes -L ...` lists the label columns.

Commands that need the operator's own pods (its logs, its endpoints, its Deployment's arguments)
cannot run here, where no kubelet runs them: tests/unit/test_docs_commands.py lists them as shown
only, with that reason.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import EVENTS, RESOURCE_QUOTAS, Kind, KubeClient
from podgroup_operator.devcluster.simnodes import SIM_ANNOTATION_START_DELAY
from tests.builders import replicaset
from tests.kube_helpers import create_group, gang_pods, group_status, kubectl_ok, pool
from tests.waiting import wait_for

REPLICASETS = Kind("apps", "v1", "replicasets")
LEASE = "podgroup-operator-leader"


async def test_the_operators_lease_webhooks_and_crds_show_with_the_pages_commands(
    kubeconfig: Path, operator: Any
) -> None:
    lease = await asyncio.to_thread(
        kubectl_ok, kubeconfig, "-n", "kube-system", "get", "lease", LEASE, "-o", "yaml"
    )
    assert "holderIdentity:" in lease and "renewTime:" in lease

    configs = await asyncio.to_thread(
        kubectl_ok,
        kubeconfig,
        "get",
        "validatingwebhookconfiguration,mutatingwebhookconfiguration",
        "podgroup-operator.scheduling.x-k8s.io",
    )
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
        assert f"{kind}.admissionregistration.k8s.io/podgroup-operator" in configs, configs

    crds = await asyncio.to_thread(
        kubectl_ok,
        kubeconfig,
        "get",
        "crd",
        "podgroups.scheduling.x-k8s.io",
        "topologies.scheduling.x-k8s.io",
    )
    assert "podgroups.scheduling.x-k8s.io" in crds and "topologies.scheduling.x-k8s.io" in crds

    listing = await asyncio.to_thread(kubectl_ok, kubeconfig, "get", "podgroups", "-A")
    assert listing == "" or listing.split()[:3] == ["NAMESPACE", "NAME", "PHASE"]


async def test_a_gang_placed_but_not_started_shows_scheduled_and_its_nodes(
    kube: KubeClient, kubeconfig: Path, operator: Any, namespace: str
) -> None:
    async with pool(kube, count=2, cpu="4", memory="8Gi") as (_, pool_name):
        await create_group(kube, namespace, "train", min_member=2)
        await gang_pods(
            kube,
            namespace,
            "train",
            2,
            pool_name,
            group="train",
            annotations={SIM_ANNOTATION_START_DELAY: "600"},
        )
        status = await wait_group(kube, namespace, "train", scheduled=2)
        assert status["phase"] == c.Phase.PENDING
        scheduled = [x for x in status["conditions"] if x["type"] == c.ConditionType.SCHEDULED]
        assert [x["status"] for x in scheduled] == [c.ConditionStatus.TRUE]

        wide = await asyncio.to_thread(
            kubectl_ok, kubeconfig, "get", "podgroup", "train", "-n", namespace, "-o", "wide"
        )
        header, row = wide.rstrip("\n").splitlines()
        cells = columns(header, row)
        assert (cells["NAME"], cells["PHASE"], cells["SCHEDULED"]) == ("train", "Pending", "2")

        pods = await asyncio.to_thread(
            kubectl_ok,
            kubeconfig,
            "get",
            "pods",
            "-n",
            namespace,
            "-l",
            f"{c.LABEL_POD_GROUP}=train",
            "-o",
            "wide",
        )
        lines = pods.strip().splitlines()
        assert len(lines) == 3
        for line in lines[1:]:
            name, _ready, phase, *_rest = line.split()
            assert phase == "Pending", line
            assert pool_name in line, f"{name}: no node shown"

        nodes = await asyncio.to_thread(kubectl_ok, kubeconfig, "get", "nodes")
        assert f"{pool_name}" in nodes and " Ready " in nodes

        labelled = await asyncio.to_thread(
            kubectl_ok,
            kubeconfig,
            "get",
            "nodes",
            "-L",
            "topology.kubernetes.io/zone",
            "-L",
            "nvidia.com/gpu.clique",
        )
        assert labelled.split("\n")[0].split()[-2:] == ["ZONE", "GPU.CLIQUE"]


def columns(header: str, row: str) -> dict[str, str]:
    """kubectl's table row by its header's column positions (empty cells stay empty)."""
    starts = [i for i, ch in enumerate(header) if ch != " " and (i == 0 or header[i - 1] == " ")]
    ends = [*starts[1:], None]
    return {
        header[start:end].strip(): row[start:end].strip()
        for start, end in zip(starts, ends, strict=True)
    }


async def wait_group(
    kube: KubeClient, namespace: str, name: str, **expected: Any
) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        status = await group_status(kube, namespace, name)
        return status if all(status.get(k) == v for k, v in expected.items()) else None

    return await wait_for(probe, 30, f"{namespace}/{name} status {expected}")


def replica_set(name: str, replicas: int) -> dict[str, Any]:
    """Members of PodGroup `name`, made by a ReplicaSet (`builders.replicaset`), 1 cpu each."""
    template = {
        "metadata": {"labels": {c.LABEL_POD_GROUP: name}},
        "spec": {
            "schedulerName": c.SCHEDULER_NAME,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.local/sim:latest",
                    "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}},
                }
            ],
        },
    }
    return replicaset(name, replicas, template)


async def test_quota_that_stops_pods_being_created_shows_in_events_and_the_quota(
    kube: KubeClient, kubeconfig: Path, operator: Any, namespace: str
) -> None:
    await kube.create(
        RESOURCE_QUOTAS,
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "team"},
            "spec": {"hard": {"requests.cpu": "1", "limits.cpu": "1"}},
        },
        namespace,
    )

    async def quota_counted() -> bool:
        quota = await kube.get(RESOURCE_QUOTAS, "team", namespace)
        return "used" in (quota.get("status") or {})

    await wait_for(quota_counted, 30, "the quota controller to count the namespace")
    await create_group(kube, namespace, "train", min_member=3)
    await kube.create(REPLICASETS, replica_set("train", 3), namespace)

    async def refused() -> list[dict[str, Any]] | None:
        events = (await kube.list(EVENTS, namespace))["items"]
        found = [e for e in events if e.get("reason") == "FailedCreate"]
        return found or None

    await wait_for(refused, 60, "the ReplicaSet's FailedCreate Event")
    shown = await asyncio.to_thread(
        kubectl_ok,
        kubeconfig,
        "get",
        "events",
        "-n",
        namespace,
        "--field-selector",
        "reason=FailedCreate",
    )
    assert "exceeded quota: team" in shown, shown
    assert "requests.cpu=1" in shown

    described = await asyncio.to_thread(
        kubectl_ok, kubeconfig, "describe", "resourcequota", "-n", namespace
    )
    used = [line.split() for line in described.splitlines() if line.startswith("requests.cpu")]
    assert used == [["requests.cpu", "1", "1"]], described

    async def not_enough_tasks() -> dict[str, Any] | None:
        status = await group_status(kube, namespace, "train")
        waiting = [x for x in status.get("conditions", []) if x["type"] == "Unschedulable"]
        return waiting[0] if waiting and waiting[0]["reason"] == c.Reason.NOT_ENOUGH_TASKS else None

    condition = await wait_for(not_enough_tasks, 30, "the gang to wait with NotEnoughTasks")
    assert "1 member pod" in condition["message"], "the one pod the quota let through"
    assert "minMember" in condition["message"] and "3" in condition["message"]
