"""Gang-aware autoscaling on the real control plane, with the dev provisioner as the autoscaler.

The operator runs with `--provisioning-class best-effort-atomic-scale-up...` on a control plane
of its own, where a ProvisioningRequest CRD (tests/crds/) is installed: the session's cluster
never has that CRD, so every other test runs without it. `SimProvisioner` plays
cluster-autoscaler, adding sim nodes from a template (docs/concepts/autoscaling.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import (
    NAMESPACES,
    NODES,
    POD_TEMPLATES,
    PODGROUPS,
    PODS,
    PROVISIONING_REQUESTS,
    ApiError,
    KubeClient,
)
from podgroup_operator.devcluster import cluster as devcluster
from podgroup_operator.devcluster.process import OperatorProcess, leading
from podgroup_operator.devcluster.provisioner import SimProvisioner
from podgroup_operator.devcluster.simnodes import NodePool
from tests.builders import podgroup
from tests.kube_helpers import (
    apply_crd,
    create_group,
    gang_pods,
    group_status,
    pool,
    running_operator,
    sample,
    scrape,
    unique_prefix,
    wait_group,
)
from tests.waiting import wait_for

CRD = Path(__file__).resolve().parents[1] / "crds" / f"{c.PROVISIONING_CRD_NAME}.yaml"
CLASS = c.ProvisioningClass.BEST_EFFORT_ATOMIC.value


@pytest.fixture(scope="module")
async def provreq_kube(own_kube: KubeClient) -> AsyncIterator[KubeClient]:
    """`own_kube` with the ProvisioningRequest CRD installed (this module's cluster only)."""
    await apply_crd(own_kube, yaml.safe_load(CRD.read_text()))
    yield own_kube


@pytest.fixture(scope="module")
def provisioning_operator(
    own_cluster: devcluster.ClusterState,
    provreq_kube: KubeClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[OperatorProcess]:
    log = tmp_path_factory.mktemp("provisioning") / "operator.log"
    args = ["--webhooks", "off", "--provisioning-class", CLASS]
    with running_operator(own_cluster.kubeconfig, log, args) as process:
        yield process


@pytest.fixture
async def ns(provreq_kube: KubeClient, provisioning_operator: OperatorProcess) -> str:
    await wait_for(
        lambda: leading(provreq_kube, [provisioning_operator]), 45, "the operator to lead"
    )
    name = f"prov-{uuid.uuid4().hex[:6]}"
    await provreq_kube.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    return name


async def requests_of(kube: KubeClient, namespace: str) -> list[dict[str, Any]]:
    return list((await kube.list(PROVISIONING_REQUESTS, namespace))["items"])


async def one_request(kube: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        found = [r for r in await requests_of(kube, namespace) if r["metadata"]["name"] == name]
        return found[0] if found else None

    return await wait_for(probe, 30, f"ProvisioningRequest {namespace}/{name}")


async def gone(kube: KubeClient, namespace: str, name: str, timeout: float = 30) -> None:
    async def probe() -> bool:
        names = {r["metadata"]["name"] for r in await requests_of(kube, namespace)}
        templates = (await kube.list(POD_TEMPLATES, namespace))["items"]
        return name not in names and not any(
            t["metadata"]["name"].startswith(f"{name}-") for t in templates
        )

    await wait_for(probe, timeout, f"ProvisioningRequest {name} and its templates to go")


def provisioning_condition(status: dict[str, Any]) -> dict[str, Any]:
    return next(
        (x for x in status.get("conditions") or () if x["type"] == c.ConditionType.PROVISIONING),
        {},
    )


def template(sim_pool: str, **node: Any) -> NodePool:
    return NodePool(name_prefix=f"{sim_pool}-scaled", labels={"pool": sim_pool}, **node)


@contextlib.asynccontextmanager
async def recording(kube: KubeClient, namespace: str) -> AsyncIterator[dict[str, set[str]]]:
    """Every ProvisioningRequest name and every member PodScheduled reason seen, polled until
    the block ends: what "never" is checked against once the block has reached its end."""
    seen: dict[str, set[str]] = {"requests": set(), "reasons": set()}

    async def poll() -> None:
        while True:
            for body in await requests_of(kube, namespace):
                seen["requests"].add(body["metadata"]["name"])
            for body in (await kube.list(PODS, namespace))["items"]:
                for cond in (body.get("status") or {}).get("conditions") or ():
                    if cond["type"] == "PodScheduled" and cond["status"] == "False":
                        seen["reasons"].add(cond.get("reason", ""))
            await asyncio.sleep(0.1)

    task = asyncio.create_task(poll())
    try:
        yield seen
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def bound_to(kube: KubeClient, namespace: str) -> list[str]:
    return [p["spec"].get("nodeName") for p in (await kube.list(PODS, namespace))["items"]]


async def test_an_8_pod_gang_with_room_for_2_gets_one_request_for_6_and_is_placed_whole(
    provreq_kube: KubeClient, ns: str
) -> None:
    kube = provreq_kube
    async with pool(kube, count=1, cpu="2", memory="8Gi") as (sim, pool_name):
        async with (
            SimProvisioner(kube, sim, template(pool_name, cpu="2", memory="8Gi"), delay=2.0),
            recording(kube, ns) as seen,
        ):
            # The members first: the gang's first decision sees all 8 and refuses it for room
            # (with fewer, it would wait for members, and its pods say Unschedulable then).
            await gang_pods(kube, ns, "train", 8, pool_name, group="train")
            await create_group(kube, ns, "train", min_member=8)
            request = await one_request(kube, ns, "train-pr1")
            pod_sets = request["spec"]["podSets"]
            assert [s["count"] for s in pod_sets] == [6], pod_sets
            assert request["spec"]["provisioningClassName"] == CLASS
            owner = request["metadata"]["ownerReferences"][0]
            assert (owner["kind"], owner["name"]) == (c.KIND, "train")

            async def annotated() -> bool:
                pods = (await kube.list(PODS, ns))["items"]
                return all(
                    (p["metadata"].get("annotations") or {}).get(c.ANNOTATION_CONSUME_PROVISIONING)
                    == "train-pr1"
                    for p in pods
                )

            await wait_for(annotated, 30, "every member to consume the request")
            status = await wait_group(kube, ns, "train", timeout=60, phase=c.Phase.RUNNING)
            await gone(kube, ns, "train-pr1")
        nodes = await bound_to(kube, ns)
        assert nodes.count(sim.node_names[0]) == 2, nodes
        assert len([n for n in nodes if n and "-scaled-" in n]) == 6, nodes
        assert seen["requests"] == {"train-pr1"}
        assert "WaitingForProvisioning" in seen["reasons"], seen
        assert "Unschedulable" not in seen["reasons"], seen

        async def ended() -> bool:
            condition = provisioning_condition(await group_status(kube, ns, "train"))
            return (condition.get("status"), condition.get("reason")) == (
                "False",
                c.Reason.PROVISIONING_ENDED,
            )

        # The request's end reaches the status in a later write than Running may (holds).
        await wait_for(ended, 30, "the Provisioning condition to say the request ended")
        assert status["running"] == 8


async def test_a_request_past_the_maximum_leaves_the_gang_waiting_with_the_message_and_retries(
    provreq_kube: KubeClient, ns: str
) -> None:
    kube = provreq_kube
    async with pool(kube, count=1, cpu="1", memory="8Gi") as (sim, pool_name):
        provisioner = SimProvisioner(
            kube, sim, template(pool_name, cpu="2", memory="8Gi"), maximum=1, delay=0.2
        )
        async with provisioner:
            await create_group(kube, ns, "big", min_member=4)
            await gang_pods(kube, ns, "big", 4, pool_name, group="big", requests={"cpu": "2"})

            async def failed() -> str:
                condition = provisioning_condition(await group_status(kube, ns, "big"))
                if condition.get("reason") == c.Reason.PROVISIONING_FAILED:
                    return str(condition.get("message"))
                return ""

            message = await wait_for(failed, 30, "the gang to report the failed request")
            assert "at most 1 may be added" in message, message
            assert "asking again in" in message, message
            await one_request(kube, ns, "big-pr2")  # the retry, after the backoff
            assert "big-pr1" not in {r["metadata"]["name"] for r in await requests_of(kube, ns)}
            assert all(node is None for node in await bound_to(kube, ns))
            assert provisioner.added == []


async def test_an_expired_booking_starts_over(provreq_kube: KubeClient, ns: str) -> None:
    """The provisioned nodes carry a taint the members do not tolerate, so the gang is not
    bound before the booking expires; a second request follows the first."""
    kube = provreq_kube
    taint = {"key": "spare", "value": "yes", "effect": "NoSchedule"}
    async with pool(kube, count=1, cpu="1", memory="8Gi") as (sim, pool_name):
        tainted = template(pool_name, cpu="2", memory="8Gi", taints=(taint,))
        provisioner = SimProvisioner(kube, sim, tainted, delay=0.2, booking_seconds=2)
        async with provisioner:
            await create_group(kube, ns, "late", min_member=2)
            await gang_pods(kube, ns, "late", 2, pool_name, group="late", requests={"cpu": "2"})

            async def expired() -> bool:
                return f"{ns}/late-pr1" in provisioner.expired

            await wait_for(expired, 30, "the first request's booking to expire")
            await one_request(kube, ns, "late-pr2")
            await gone(kube, ns, "late-pr1")
            assert all(node is None for node in await bound_to(kube, ns))


async def test_a_gang_waiting_for_its_last_member_asks_for_nothing(
    provreq_kube: KubeClient, ns: str
) -> None:
    kube = provreq_kube
    async with pool(kube, count=1, cpu="1", memory="8Gi") as (_, pool_name):
        await create_group(kube, ns, "short", min_member=3)
        await gang_pods(kube, ns, "short", 2, pool_name, group="short", requests={"cpu": "2"})

        async def refused_by_the_scheduler() -> bool:
            # The scheduler's own refusal, on the pods: it has decided this gang.
            pods = (await kube.list(PODS, ns))["items"]
            return len(pods) == 2 and all(
                any(
                    x["type"] == "PodScheduled" and "has 2 member pod(s)" in x.get("message", "")
                    for x in (p.get("status") or {}).get("conditions") or ()
                )
                for p in pods
            )

        await wait_for(refused_by_the_scheduler, 30, "the scheduler to refuse the short gang")
        assert await requests_of(kube, ns) == []
        assert provisioning_condition(await group_status(kube, ns, "short")) == {}
        # The last member comes: now the gang is refused for room, and asks.
        await gang_pods(kube, ns, "last", 1, pool_name, group="short", requests={"cpu": "2"})
        request = await one_request(kube, ns, "short-pr1")
        assert [s["count"] for s in request["spec"]["podSets"]] == [3]


async def test_deleting_the_podgroup_deletes_its_request(provreq_kube: KubeClient, ns: str) -> None:
    """No provisioner here: the request stays in flight until the PodGroup goes."""
    kube = provreq_kube
    async with pool(kube, count=1, cpu="1", memory="8Gi") as (_, pool_name):
        await create_group(kube, ns, "doomed", min_member=2)
        await gang_pods(kube, ns, "doomed", 2, pool_name, group="doomed", requests={"cpu": "2"})
        await one_request(kube, ns, "doomed-pr1")
        condition = await wait_for(
            lambda: _provisioning(kube, ns, "doomed", "True"), 30, "Provisioning=True"
        )
        assert "doomed-pr1" in condition["message"], condition
        await kube.delete(PODGROUPS, "doomed", ns)
        await gone(kube, ns, "doomed-pr1", timeout=60)


async def _provisioning(
    kube: KubeClient, namespace: str, name: str, status: str
) -> dict[str, Any] | None:
    condition = provisioning_condition(await group_status(kube, namespace, name))
    return condition if condition.get("status") == status else None


async def test_the_operator_restarted_mid_request_adopts_it_instead_of_making_a_second(
    provreq_kube: KubeClient, ns: str, provisioning_operator: OperatorProcess
) -> None:
    kube = provreq_kube
    async with pool(kube, count=1, cpu="1", memory="8Gi") as (sim, pool_name):
        async with recording(kube, ns) as seen:
            await create_group(kube, ns, "kept", min_member=2)
            await gang_pods(kube, ns, "kept", 2, pool_name, group="kept", requests={"cpu": "2"})
            await one_request(kube, ns, "kept-pr1")
            provisioning_operator.stop()
            provisioning_operator.start()
            provisioning_operator.wait_ready()
            await wait_for(
                lambda: leading(kube, [provisioning_operator]), 60, "the operator to lead again"
            )

            def adopted() -> bool:
                return (
                    f"adopted ProvisioningRequest {ns}/kept-pr1"
                    in Path(provisioning_operator.log_path).read_text()
                )

            await wait_for(_true(adopted), 60, "the restarted operator to adopt kept-pr1")
            async with SimProvisioner(kube, sim, template(pool_name, cpu="2"), delay=0.2):
                await wait_group(kube, ns, "kept", timeout=60, phase=c.Phase.RUNNING)
                await gone(kube, ns, "kept-pr1")
        assert seen["requests"] == {"kept-pr1"}


def _true(check: Any) -> Any:
    async def probe() -> bool:
        return bool(check())

    return probe


async def test_without_the_crd_a_gang_that_would_ask_waits_as_before_and_the_log_says_why(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    """The session's cluster has no ProvisioningRequest CRD: a PodGroup naming a class is
    refused for room as any gang is, and the operator says once why it asks for nothing."""
    with pytest.raises(ApiError) as missing:
        await kube.list(PROVISIONING_REQUESTS, namespace)
    assert missing.value.not_found
    async with pool(kube, count=1, cpu="1", memory="8Gi") as (_, pool_name):
        body = podgroup("wants", namespace, min_member=2)
        body["metadata"]["annotations"] = {c.ANNOTATION_PROVISIONING_CLASS: CLASS}
        del body["metadata"]["uid"]
        await kube.create(PODGROUPS, body, namespace)
        await gang_pods(
            kube, namespace, "wants", 2, pool_name, group="wants", requests={"cpu": "2"}
        )

        async def refused() -> bool:
            conditions = (await group_status(kube, namespace, "wants")).get("conditions") or ()
            return any(
                x["type"] == "Unschedulable" and x["reason"] == c.Reason.NOT_ENOUGH_RESOURCES
                for x in conditions
            )

        await wait_for(refused, 30, "the gang to be refused for room")
        log = operator.log_path.read_text()
        assert f"but {c.PROVISIONING_CRD_NAME} is not served or may not be listed" in log
        assert await sample_of(operator, "unavailable") >= 1
        assert provisioning_condition(await group_status(kube, namespace, "wants")) == {}


async def sample_of(operator: OperatorProcess, result: str) -> float:
    return sample(await scrape(operator), "podgroup_provisioning_requests_total", result=result)


async def test_the_sim_nodes_provisioner_command_answers_both_classes(
    own_cluster: devcluster.ClusterState, provreq_kube: KubeClient, ns: str
) -> None:
    """`sim-nodes --provisioner`: an atomic request gets its nodes from the template, a
    capacity check is answered from the room there is, and the added nodes go on SIGTERM."""
    kube = provreq_kube
    prefix = unique_prefix()
    await kube.create(
        POD_TEMPLATES,
        {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": "two-cpu"},
            "template": {
                "spec": {
                    "nodeSelector": {"pool": prefix},
                    "containers": [
                        {"name": "w", "image": "x", "resources": {"requests": {"cpu": "2"}}}
                    ],
                }
            },
        },
        ns,
    )
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("podgroup-operator")),
        "sim-nodes",
        "--count=1",
        "--cpu=4",
        f"--label=pool={prefix}",
        f"--name-prefix={prefix}",
        "--provisioner",
        "--provision-max=2",
        "--provision-delay=0.2",
        "--lease-interval=1",
        env={**os.environ, "KUBECONFIG": str(own_cluster.kubeconfig)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    added = [f"{prefix}-scaled-0-0", f"{prefix}-scaled-0-1"]
    try:
        for name, chosen, count in (
            ("atomic", CLASS, 3),
            ("check", c.ProvisioningClass.CHECK_CAPACITY.value, 1),
        ):
            await kube.create(
                PROVISIONING_REQUESTS,
                {
                    "apiVersion": f"{c.PROVISIONING_GROUP}/{c.PROVISIONING_VERSION}",
                    "kind": c.PROVISIONING_KIND,
                    "metadata": {"name": name},
                    "spec": {
                        "provisioningClassName": chosen,
                        "podSets": [{"podTemplateRef": {"name": "two-cpu"}, "count": count}],
                    },
                },
                ns,
            )

        async def provisioned(name: str) -> str:
            body = await one_request(kube, ns, name)
            conditions = (body.get("status") or {}).get("conditions") or ()
            return next((x["message"] for x in conditions if x["type"] == "Provisioned"), "")

        assert f"added 2 node(s) for 3 pod(s): {', '.join(added)}" == await wait_for(
            lambda: provisioned("atomic"), 30, "the atomic request to be provisioned"
        )
        assert "fit on the nodes there are" in await wait_for(
            lambda: provisioned("check"), 30, "the capacity check to be answered"
        )
        for name in added:
            node = await kube.get(NODES, name)
            assert node["metadata"]["labels"]["pool"] == prefix
            assert node["status"]["capacity"]["cpu"] == "4"
    finally:
        process.send_signal(signal.SIGTERM)
        stdout, stderr = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, stderr.decode()
    assert "provisioner: up to 2 x" in stdout.decode()
    for name in [f"{prefix}-0", *added]:
        with pytest.raises(ApiError) as missing:
            await kube.get(NODES, name)
        assert missing.value.not_found, f"{name} left behind"
