"""examples/crdjob end to end on the real control plane, next to the operator.

The example controller runs in this process through `kopf.testing.KopfRunner`, as Kopf's own
example tests run theirs: `kopf run examples/crdjob/controller.py` in a thread, with its real
login, handlers and timers against the dev cluster. Copy the `crdjob_controller` fixture to test
a controller of your own. The operator runs as users run it, a child process (the `operator`
fixture), and places the gang; sim nodes play the kubelet; kube-controller-manager's garbage
collector deletes what the job owned.

The failure is made deterministic by writing it the way a kubelet reports a crashed container:
a status patch (pods/status) that turns one running member Failed. The sim kubelet only fails
pods on a timer set by annotations at start, which would fail every replica of the template.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kopf.testing import KopfRunner

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import (
    EVENTS,
    PODGROUPS,
    PODS,
    STRATEGIC_PATCH,
    ApiError,
    Kind,
    KubeClient,
)
from podgroup_operator.api import embed
from podgroup_operator.local import free_port
from tests import conftest as fixtures
from tests.conftest import REPO, OperatorProcess
from tests.kube_helpers import apply_crd, gone, kopf_registry, kopf_run_env, pool, wait_serving
from tests.waiting import wait_for

EXAMPLE = REPO / "examples" / "crdjob"
CRDJOBS = Kind("example.podgroup.dev", "v1", "crdjobs")
SERVICE_ACCOUNTS = Kind("", "v1", "serviceaccounts")
JOB_LABEL = "example.podgroup.dev/job"
GC_TIMEOUT = 120
"""The garbage collector learns a new resource type on its discovery resync (every 30s)."""


@pytest.fixture(scope="module")
async def crdjob_crd(kube: KubeClient) -> None:
    await apply_crd(kube, yaml.safe_load((EXAMPLE / "crd.yaml").read_text()))


@pytest.fixture(scope="module")
def crdjob_controller(
    cluster: fixtures.ClusterUnderTest, crdjob_crd: None, operator: OperatorProcess
) -> Iterator[KopfRunner]:
    """The example controller, in a thread of this process, until the module's tests end.

    `kopf run` reads KUBECONFIG (Kopf's login and the example's `kubernetes` client alike, see
    `kopf_run_env`); its own registry (`kopf_registry`) keeps its handlers apart from any other
    Kopf code this process loads; its liveness endpoint answers once the startup handlers ran.
    """
    health = f"http://127.0.0.1:{free_port()}/healthz"
    args = ["run", "--all-namespaces", "--standalone", f"--liveness={health}"]
    with pytest.MonkeyPatch.context() as env:
        kopf_run_env(env, cluster.kubeconfig)
        with KopfRunner(
            [*args, str(EXAMPLE / "controller.py")], registry=kopf_registry(), timeout=60
        ) as runner:
            wait_serving(health)
            yield runner
    assert runner.exit_code == 0 and runner.exception is None, runner.output


def crdjob(name: str, replicas: int, pool_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "example.podgroup.dev/v1",
        "kind": "CRDJob",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": {"pool": pool_name},
                    "containers": [
                        {
                            "name": "worker",
                            "image": "registry.local/sim:latest",
                            "resources": {"requests": {"cpu": "1"}},
                        }
                    ],
                },
            },
        },
    }


async def job_pods(kube: KubeClient, namespace: str, job: str) -> dict[str, dict[str, Any]]:
    listing = await kube.list(PODS, namespace, label_selector=f"{JOB_LABEL}={job}")
    return {pod["metadata"]["name"]: pod for pod in listing["items"]}


async def default_service_account(kube: KubeClient, namespace: str) -> None:
    """Pods are refused in a fresh namespace until its default ServiceAccount exists."""

    async def exists() -> bool:
        return not await gone(kube, SERVICE_ACCOUNTS, "default", namespace)

    await wait_for(exists, 30, f"the default ServiceAccount of {namespace}")


async def gang_running(
    kube: KubeClient, namespace: str, name: str, running: int
) -> dict[str, Any] | None:
    """The PodGroup, once Running with `running` members; None before (or before it exists)."""
    try:
        group = await kube.get(PODGROUPS, name, namespace)
    except ApiError as exc:
        if exc.not_found:
            return None
        raise
    status = embed.read_status(group)
    return group if status.phase is embed.Phase.RUNNING and status.running == running else None


async def job_phase(
    kube: KubeClient, namespace: str, name: str, phase: str
) -> dict[str, Any] | None:
    """The CRDJob, once its status mirrors `phase`."""
    current = await kube.get(CRDJOBS, name, namespace)
    return current if (current.get("status") or {}).get("phase") == phase else None


async def test_crdjob_runs_as_a_gang_recovers_a_failed_pod_and_is_garbage_collected(
    kube: KubeClient, crdjob_controller: KopfRunner, namespace: str
) -> None:
    async with pool(kube, count=2, cpu="4", memory="16Gi") as (_, pool_name):
        await default_service_account(kube, namespace)
        job = await kube.create(CRDJOBS, crdjob("train", 3, pool_name), namespace)

        # One PodGroup owned by the job, and three member pods placed by the gang scheduler.
        group = await wait_for(
            lambda: gang_running(kube, namespace, "train", 3), 60, "the job's gang to run"
        )
        owner = group["metadata"]["ownerReferences"]
        assert [(o["kind"], o["uid"], o["controller"]) for o in owner] == [
            ("CRDJob", job["metadata"]["uid"], True)
        ]
        assert group["spec"] == {"minMember": 3}, "no policy: the CRDJob controller owns failures"
        pods = await job_pods(kube, namespace, "train")
        assert sorted(pods) == ["train-0", "train-1", "train-2"]
        for pod in pods.values():
            assert pod["metadata"]["labels"][c.LABEL_POD_GROUP] == "train"
            assert pod["spec"]["schedulerName"] == c.SCHEDULER_NAME
            assert pod["spec"]["nodeName"].startswith(pool_name)
            assert pod["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]

        await wait_for(
            lambda: job_phase(kube, namespace, "train", "Running"),
            20,
            "the CRDJob to mirror phase Running",
        )

        # train-1 crashes, reported as a kubelet reports it: the pod's status turns Failed.
        failed_uid = pods["train-1"]["metadata"]["uid"]
        await kube.patch(
            PODS,
            "train-1",
            {
                "metadata": {"uid": failed_uid},
                "status": {"phase": "Failed", "reason": "Error", "message": "worker crashed"},
            },
            namespace,
            subresource="status",
            content_type=STRATEGIC_PATCH,
        )

        # The gang goes Unknown; the controller replaces the failed pod (same name, new uid),
        # the scheduler places the replacement, and the gang runs again.
        async def replaced_and_running() -> dict[str, Any] | None:
            current = await job_pods(kube, namespace, "train")
            replacement = current.get("train-1")
            if replacement is None or replacement["metadata"]["uid"] == failed_uid:
                return None
            if replacement.get("status", {}).get("phase") != "Running":
                return None
            return current if await gang_running(kube, namespace, "train", 3) else None

        after = await wait_for(replaced_and_running, 60, "train-1 replaced and the gang running")
        for survivor in ("train-0", "train-2"):  # the controller replaced only what failed
            assert after[survivor]["metadata"]["uid"] == pods[survivor]["metadata"]["uid"]
        status = embed.read_status(await kube.get(PODGROUPS, "train", namespace))
        assert status.last_failure_time is not None, "the PodGroup saw the member fail"
        assert status.restarts == 0, "no policy: the operator itself restarted nothing"

        async def broke_and_recovered() -> set[str] | None:
            events = await kube.list(
                EVENTS,
                namespace,
                field_selector="involvedObject.kind=PodGroup,involvedObject.name=train",
            )
            # Events carry whole seconds; order within one second is lost, so compare sets.
            changes = {
                e["message"].split(":")[0]
                for e in events["items"]
                if e["reason"] == c.Reason.PHASE_CHANGED
            }
            return changes if {"Running -> Unknown", "Unknown -> Running"} <= changes else None

        await wait_for(broke_and_recovered, 20, "PodGroup events Running -> Unknown -> Running")
        recovered = await wait_for(
            lambda: job_phase(kube, namespace, "train", "Running"),
            20,
            "the CRDJob to mirror Running again",
        )
        assert recovered["status"]["recreated"] == 1
        assert recovered["status"]["running"] == 3

        # Deleting the job deletes its PodGroup and pods through their owner references.
        await kube.delete(CRDJOBS, "train", namespace)

        async def collected() -> bool:
            return (
                await gone(kube, CRDJOBS, "train", namespace)
                and await gone(kube, PODGROUPS, "train", namespace)
                and not await job_pods(kube, namespace, "train")
            )

        await wait_for(
            collected, GC_TIMEOUT, "the garbage collector to delete the job's PodGroup and pods"
        )


async def test_crdjob_recreates_a_member_deleted_from_under_it(
    kube: KubeClient, crdjob_controller: KopfRunner, namespace: str
) -> None:
    """A deleted member: the gang goes Unknown (PodDeleted) while the pod is still terminating,
    so the event alone cannot replace it; the job's timer does once the name is free."""
    async with pool(kube, count=1, cpu="4", memory="16Gi") as (_, pool_name):
        await default_service_account(kube, namespace)
        await kube.create(CRDJOBS, crdjob("svc", 2, pool_name), namespace)
        await wait_for(lambda: gang_running(kube, namespace, "svc", 2), 60, "the gang to run")
        before = await job_pods(kube, namespace, "svc")

        await kube.delete(PODS, "svc-0", namespace)

        async def replaced() -> dict[str, dict[str, Any]] | None:
            current = await job_pods(kube, namespace, "svc")
            pod = current.get("svc-0")
            if pod is None or pod["metadata"]["uid"] == before["svc-0"]["metadata"]["uid"]:
                return None
            if pod.get("status", {}).get("phase") != "Running":
                return None
            return current if await gang_running(kube, namespace, "svc", 2) else None

        after = await wait_for(replaced, 60, "svc-0 recreated and the gang running again")
        assert after["svc-1"]["metadata"]["uid"] == before["svc-1"]["metadata"]["uid"]
        group = embed.read_status(await kube.get(PODGROUPS, "svc", namespace))
        assert group.last_failure_time is not None and group.restarts == 0
        job = await wait_for(
            lambda: job_phase(kube, namespace, "svc", "Running"), 20, "the job to mirror Running"
        )
        assert job["status"]["recreated"] == 1
