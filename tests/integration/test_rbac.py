"""The operator works with exactly the permissions deploy/operator.yaml grants, not as admin.

The session operator runs as admin; here it is stopped, and `podgroup-operator run` runs as the
dev cluster's non-admin identity `podgroup-operator`, bound to the ClusterRole from
deploy/operator.yaml. A missing permission shows as a gang that never runs or a refused webhook
registration.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import PODGROUPS, PODS, ApiError, Kind, KubeClient
from tests.builders import podgroup
from tests.conftest import REPO, ClusterUnderTest, OperatorProcess
from tests.kube_helpers import gang_pods, pool
from tests.waiting import wait_for

CLUSTER_ROLES = Kind("rbac.authorization.k8s.io", "v1", "clusterroles")
CLUSTER_ROLE_BINDINGS = Kind("rbac.authorization.k8s.io", "v1", "clusterrolebindings")
USER = "podgroup-operator"


def deploy_cluster_role() -> dict[str, Any]:
    documents = yaml.safe_load_all((REPO / "deploy" / "operator.yaml").read_text())
    return next(d for d in documents if d and d["kind"] == "ClusterRole")


@pytest.fixture
def non_admin_operator(
    cluster: ClusterUnderTest, operator: OperatorProcess, tmp_path: Path
) -> Iterator[OperatorProcess]:
    """The session operator paused, a non-admin one in its place; restored afterwards."""
    if cluster.state is None:
        pytest.fail("needs the dev cluster's static identities (PODGROUP_TEST_KUBECONFIG set)")
    operator.stop()
    restricted = OperatorProcess(cluster.state.kubeconfig_for(USER), tmp_path / "operator.log")
    try:
        yield restricted
    finally:
        restricted.stop()
        operator.start()
        operator.wait_ready()


async def test_operator_runs_with_the_deploy_cluster_role(
    kube: KubeClient, non_admin_operator: OperatorProcess, namespace: str
) -> None:
    role = deploy_cluster_role()
    await kube.apply_json(CLUSTER_ROLES, role)
    await kube.apply_json(
        CLUSTER_ROLE_BINDINGS,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "podgroup-operator-test-user"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role["metadata"]["name"],
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}],
        },
    )
    non_admin_operator.start()
    await asyncio.to_thread(non_admin_operator.wait_ready)

    # Its webhook works (registration needed admissionregistration permissions).
    bad = podgroup("bad", namespace)
    bad["spec"] = {"minMember": 1, "minResources": {"cpu": "1e30"}}  # only the webhook knows
    with pytest.raises(ApiError) as refused:
        await kube.create(PODGROUPS, bad, namespace)
    assert "spec.minResources.cpu: '1e30' is too large" in refused.value.message

    # A gang is watched, scheduled, bound and reported.
    async with pool(kube, count=1, cpu="4", memory="8Gi") as (_, name):
        group = podgroup("rbac", namespace, min_member=2)
        del group["metadata"]["uid"]
        await kube.create(PODGROUPS, group, namespace)
        await gang_pods(kube, namespace, "r", 2, name, group="rbac")

        async def running() -> bool:
            status = (await kube.get(PODGROUPS, "rbac", namespace)).get("status") or {}
            return status.get("phase") == c.Phase.RUNNING

        await wait_for(running, 30, "the gang to run under the non-admin operator")

        # A gang that cannot fit gets its members marked, as kube-scheduler marks pods.
        waits = podgroup("waits", namespace, min_member=2)
        del waits["metadata"]["uid"]
        await kube.create(PODGROUPS, waits, namespace)
        await gang_pods(kube, namespace, "w", 2, name, group="waits", requests={"cpu": "3"})

        async def marked() -> bool:
            pod = await kube.get(PODS, "w-0", namespace)
            conditions = (pod.get("status") or {}).get("conditions") or []
            return any(
                x["type"] == c.PodConditionType.POD_SCHEDULED
                and x["reason"] == c.PodReason.UNSCHEDULABLE
                for x in conditions
            )

        await wait_for(marked, 30, "PodScheduled=False written by the non-admin operator")
    # RBAC denials read `User "podgroup-operator" cannot <verb> resource ...`; other 403s (a
    # namespace being deleted refusing Events) are not about permissions.
    log = non_admin_operator.log_path.read_text()
    assert f'User "{USER}" cannot' not in log, non_admin_operator.log_tail()
    await kube.delete(CLUSTER_ROLE_BINDINGS, "podgroup-operator-test-user")
