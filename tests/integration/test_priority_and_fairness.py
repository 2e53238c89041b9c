"""The install's FlowSchemas, on a control plane with API Priority and Fairness turned on.

Every response of such an API server names the priority level its request was given
(`X-Kubernetes-PF-PriorityLevel-UID`); the level is chosen before authorization, so a request the
identity may not make still shows where it would have queued. A cluster of its own: the session's
runs with Priority and Fairness off (devcluster.up), as the benchmarks need.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from podgroup_operator.adapters.kube import PODS, ApiError, Kind, KubeClient
from podgroup_operator.devcluster import cluster as devcluster
from podgroup_operator.manifests import OPERATOR_NAMESPACE
from tests.deploy_helpers import DEPLOY, for_this_server, kubectl, render
from tests.waiting import wait_for

SECRETS = Kind("", "v1", "secrets")
LEVELS = Kind("flowcontrol.apiserver.k8s.io", "v1beta1", "prioritylevelconfigurations")
SERVICE_ACCOUNTS = Kind("", "v1", "serviceaccounts")
LEVEL_HEADER = "X-Kubernetes-PF-PriorityLevel-UID"
LEADER_LEASE = "podgroup-operator-leader"


@pytest.fixture(scope="module")
def apf_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[devcluster.ClusterState]:
    state_dir = tmp_path_factory.mktemp("podgroup-apf-cluster")
    state = devcluster.up(state_dir, priority_and_fairness=True)
    try:
        yield state
    finally:
        devcluster.down(state_dir)


@pytest.fixture
async def apf_kube(apf_cluster: devcluster.ClusterState) -> AsyncIterator[KubeClient]:
    async with KubeClient.from_kubeconfig(str(apf_cluster.kubeconfig)) as kube:
        yield kube


async def token_of(kube: KubeClient, account: str) -> str:
    """The token kube-controller-manager minted for the ServiceAccount (Kubernetes 1.20)."""

    async def minted() -> str | None:
        for secret in (await kube.list(SECRETS, OPERATOR_NAMESPACE))["items"]:
            annotations = secret["metadata"].get("annotations") or {}
            if annotations.get("kubernetes.io/service-account.name") == account:
                token = (secret.get("data") or {}).get("token")
                if token:
                    return base64.b64decode(token).decode()
        return None

    return await wait_for(minted, 30, f"a token for ServiceAccount {account}")


def level_of(state: devcluster.ClusterState, token: str, path: str) -> str:
    """The UID of the priority level the API server gave a GET of `path` with `token` (a GET
    that RBAC refuses is classified all the same)."""
    _, headers, _ = devcluster.api_get(state, path, token=token)
    level = headers.get(LEVEL_HEADER)
    assert level, f"no {LEVEL_HEADER} on GET {path}: {dict(headers)}"
    return str(level)


async def test_the_operator_is_given_kube_schedulers_levels_and_its_lease_leader_election(
    apf_cluster: devcluster.ClusterState, apf_kube: KubeClient, tmp_path: Path
) -> None:
    kubeconfig = apf_cluster.kubeconfig
    documents = render(for_this_server(DEPLOY / "base", kubeconfig, tmp_path / "k"))
    wanted = [d for d in documents if d["kind"] in ("Namespace", "ServiceAccount", "FlowSchema")]
    assert sorted(d["kind"] for d in wanted) == [
        "FlowSchema",
        "FlowSchema",
        "Namespace",
        "ServiceAccount",
    ]
    kubectl("apply", "-f", "-", kubeconfig=kubeconfig, stdin=yaml.safe_dump_all(wanted))
    (account,) = [d["metadata"]["name"] for d in wanted if d["kind"] == "ServiceAccount"]
    # Another identity of the same namespace, which no FlowSchema of ours names: the control.
    await apf_kube.create(SERVICE_ACCOUNTS, {"metadata": {"name": "bystander"}}, OPERATOR_NAMESPACE)
    ours, bystander = await token_of(apf_kube, account), await token_of(apf_kube, "bystander")
    uid = {
        name: (await apf_kube.get(LEVELS, name))["metadata"]["uid"]
        for name in ("workload-high", "workload-low", "leader-election")
    }
    pods = f"/api/v1/namespaces/{OPERATOR_NAMESPACE}/pods"
    lease = f"/apis/coordination.k8s.io/v1/namespaces/{OPERATOR_NAMESPACE}/leases/{LEADER_LEASE}"
    podgroups = "/apis/scheduling.x-k8s.io/v1alpha1/podgroups"
    assert level_of(apf_cluster, ours, pods) == uid["workload-high"]
    assert level_of(apf_cluster, ours, podgroups) == uid["workload-high"]
    assert level_of(apf_cluster, ours, lease) == uid["leader-election"]
    assert level_of(apf_cluster, bystander, pods) == uid["workload-low"]
    assert level_of(apf_cluster, bystander, lease) == uid["workload-low"]


TINY = "tiny-test"
"""A priority level of one concurrency share that rejects what it cannot run at once."""


def throttle(user: str) -> list[dict[str, Any]]:
    """A priority level that rejects at once (429, Retry-After: 1) what exceeds its few seats,
    and a FlowSchema sending every request of `user` there."""
    level = {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1beta1",
        "kind": "PriorityLevelConfiguration",
        "metadata": {"name": TINY},
        "spec": {
            "type": "Limited",
            "limited": {"assuredConcurrencyShares": 1, "limitResponse": {"type": "Reject"}},
        },
    }
    everything = {
        "verbs": ["*"],
        "apiGroups": ["*"],
        "resources": ["*"],
        "namespaces": ["*"],
        "clusterScope": True,
    }
    schema = {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1beta1",
        "kind": "FlowSchema",
        "metadata": {"name": TINY},
        "spec": {
            "priorityLevelConfiguration": {"name": TINY},
            "matchingPrecedence": 100,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [
                {
                    "subjects": [{"kind": "User", "user": {"name": user}}],
                    "resourceRules": [everything],
                }
            ],
        },
    }
    viewer = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"{TINY}-view"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    return [level, schema, viewer]


def rejected(kubeconfig: Path) -> float:
    """Requests the API server has rejected at the tiny level so far (its own metrics)."""
    text = kubectl("get", "--raw", "/metrics", kubeconfig=kubeconfig).stdout
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("apiserver_flowcontrol_rejected_requests_total{")
        and f'priority_level="{TINY}"' in line
    )


async def test_requests_the_api_server_rejects_for_now_are_sent_again_and_answered(
    apf_cluster: devcluster.ClusterState, tmp_path: Path
) -> None:
    """An API server over its limits answers 429 with Retry-After: 1 (here API Priority and
    Fairness, whose level for this user has a few seats and no queue). Each such refusal was a
    failed bind, status write or Event; now the client waits and sends the request again."""
    user = "developer"
    kubectl(
        "apply",
        "-f",
        "-",
        kubeconfig=apf_cluster.kubeconfig,
        stdin=yaml.safe_dump_all(throttle(user)),
    )
    async with KubeClient.from_kubeconfig(str(apf_cluster.kubeconfig_for(user))) as kube:

        async def allowed() -> bool:
            try:
                await kube.list(PODS)
            except ApiError as exc:
                if exc.status != 403:
                    raise
                return False
            return True

        await wait_for(allowed, 30, "the ClusterRoleBinding to take effect")

        async def burst() -> float:
            answers = await asyncio.gather(*(kube.list(PODS) for _ in range(60)))
            assert all(answer["kind"] == "PodList" for answer in answers)
            return rejected(apf_cluster.kubeconfig)

        # The level must come into force and the burst overflow its seats: a handful of bursts.
        count = await wait_for(burst, 60, "the API server to reject some of a burst", interval=0)
    assert count > 0
