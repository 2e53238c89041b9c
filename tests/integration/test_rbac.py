"""The operator works with exactly the permissions deploy/ grants, not as admin.

The session operator runs as admin; here it is stopped, and `podgroup-operator run` runs as the
dev cluster's non-admin identity `podgroup-operator`, bound to the ClusterRole and the Role of
the rendered install (`kubectl kustomize deploy/`). A missing permission shows as a gang that
never runs, a refused webhook, or `User "podgroup-operator" cannot ...` in its log.

The webhook configurations are installed by an admin (`podgroup-operator webhooks install`, as
deploy/ installs them in a cluster), pointing at the restricted operator: the operator itself
may only read them and update their caBundle, never create or delete them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import (
    EVENTS,
    LEASES,
    PODGROUPS,
    PODS,
    ApiError,
    KubeClient,
)
from podgroup_operator.adapters.record_key import RECORD_KEY_FIELD, RECORD_KEY_SECRET
from podgroup_operator.adapters.webhook_tls import SECRETS
from podgroup_operator.local import free_port
from podgroup_operator.manifests import OPERATOR_NAMESPACE, install_local
from podgroup_operator.settings import OperatorSettings
from podgroup_operator.tls import ensure_ca
from tests.builders import podgroup
from tests.conftest import ClusterUnderTest, OperatorProcess
from tests.deploy_helpers import (
    DEPLOY,
    ensure_operator_namespace,
    find,
    render,
    roles_bound_to_user,
    webhook_configurations_restored,
)
from tests.kube_helpers import crash, gang_pods, pool, wait_group
from tests.waiting import wait_for

USER = "podgroup-operator"


class Restricted(NamedTuple):
    process: OperatorProcess
    webhook_url: str
    """Where it serves webhooks (the installed configurations point here)."""


@pytest.fixture
def non_admin_operator(
    cluster: ClusterUnderTest, operator: OperatorProcess, tmp_path: Path
) -> Iterator[Restricted]:
    """The session operator paused, a non-admin one in its place; restored afterwards."""
    if cluster.state is None:
        pytest.fail("needs the dev cluster's static identities (PODGROUP_TEST_KUBECONFIG set)")
    operator.stop()
    port = free_port()
    restricted = OperatorProcess(
        cluster.state.kubeconfig_for(USER),
        tmp_path / "operator.log",
        # The Lease in the operator's namespace, where the Role of deploy/ lets it be written.
        extra_args=[
            "--webhooks",
            "local",
            "--webhook-port",
            str(port),
            "--leader-elect-namespace",
            OPERATOR_NAMESPACE,
        ],
    )
    try:
        yield Restricted(restricted, f"https://127.0.0.1:{port}")
    finally:
        restricted.stop()
        operator.start()
        operator.wait_ready()


@asynccontextmanager
async def _serving_as_user(
    kube: KubeClient, restricted: Restricted, documents: list[dict[str, Any]]
) -> AsyncIterator[None]:
    """The rendered install's roles bound to USER, its webhook configurations installed by an
    admin (as deploy/ does; the CA is the one the local operator signs with) and the
    restricted operator started and ready; roles and configurations restored afterwards."""
    await ensure_operator_namespace(kube)
    async with (
        roles_bound_to_user(kube, documents, USER),
        webhook_configurations_restored(kube),
    ):
        ca = ensure_ca(OperatorSettings().webhook_cert_dir).read_bytes()
        await install_local(kube, restricted.webhook_url, ca)
        restricted.process.start()
        await asyncio.to_thread(restricted.process.wait_ready)
        yield


async def test_operator_runs_with_the_deploy_cluster_role(
    kube: KubeClient, non_admin_operator: Restricted, namespace: str, cluster: ClusterUnderTest
) -> None:
    documents = render(DEPLOY)
    assert find(documents, "Role")["metadata"]["namespace"] == OPERATOR_NAMESPACE
    async with _serving_as_user(kube, non_admin_operator, documents):
        await _runs_a_gang_and_answers_webhooks(kube, non_admin_operator.process, namespace)
        assert cluster.state is not None
        await _may_count_up_its_events(kube, cluster.state.kubeconfig_for(USER), namespace)
        await _may_watch_its_lease(cluster.state.kubeconfig_for(USER))
        await _restarts_a_bare_gang_from_a_signed_record(kube, non_admin_operator, namespace)


async def _restarts_a_bare_gang_from_a_signed_record(
    kube: KubeClient, restricted: Restricted, namespace: str
) -> None:
    """A restart of bare members makes the record key's Secret in the operator's namespace,
    signs its record and recreates the members from it (running again, restarted once): the
    Role allows the Secret's create and get, and nothing is denied."""
    async with pool(kube, count=1, cpu="4", memory="8Gi") as (_, name):
        group = podgroup("again", namespace, min_member=2)
        group["spec"]["policy"] = {"action": "RestartGang", "backoffSeconds": 0}
        del group["metadata"]["uid"]
        await kube.create(PODGROUPS, group, namespace)
        first = await gang_pods(kube, namespace, "a", 2, name, group="again")
        await wait_group(kube, namespace, "again", phase=c.Phase.RUNNING, running=2)
        await crash(kube, namespace, await kube.get(PODS, first[0]["metadata"]["name"], namespace))
        await wait_group(
            kube, namespace, "again", timeout=60, phase=c.Phase.RUNNING, running=2, restarts=1
        )
    secret = await kube.get(SECRETS, RECORD_KEY_SECRET, OPERATOR_NAMESPACE)
    assert secret["data"][RECORD_KEY_FIELD]
    log = restricted.process.log_path.read_text()
    assert f'User "{USER}" cannot' not in log, restricted.process.log_tail()


async def _may_watch_its_lease(kubeconfig: Path) -> None:
    """A standing-by replica watches the Lease to see a release at once
    (`LeaderElector._watch_for_release`): the Role allows that watch, by the Lease's name."""
    selector = f"metadata.name={c.LEADER_LEASE_NAME}"
    async with KubeClient.from_kubeconfig(str(kubeconfig)) as restricted:
        events = restricted.watch(
            LEASES, OPERATOR_NAMESPACE, field_selector=selector, timeout_seconds=5
        )
        event, lease = await anext(events)
        await events.aclose()
    assert (event, lease["metadata"]["name"]) == (c.WatchEventType.ADDED, c.LEADER_LEASE_NAME)


async def _may_count_up_its_events(kube: KubeClient, kubeconfig: Path, namespace: str) -> None:
    """A FailedScheduling repeated a minute later counts up the pod's Event (a PATCH): the
    Role allows it (the repeat itself is a minute away; controllers/podsignals.py)."""

    async def posted() -> list[dict[str, Any]]:
        events = (await kube.list(EVENTS, namespace))["items"]
        return [e for e in events if e["reason"] == c.PodReason.FAILED_SCHEDULING]

    event, *_ = await wait_for(posted, 30, "a FailedScheduling Event on a waiting member")
    async with KubeClient.from_kubeconfig(str(kubeconfig)) as restricted:
        patched = await restricted.patch(
            EVENTS, event["metadata"]["name"], {"count": event["count"] + 1}, namespace
        )
    assert patched["count"] == event["count"] + 1


async def _runs_a_gang_and_answers_webhooks(
    kube: KubeClient, non_admin_operator: OperatorProcess, namespace: str, *, withheld: str = ""
) -> None:
    """`withheld`: a resource the ClusterRole leaves out on purpose, whose refusals are
    expected."""
    # Its webhook works.
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
    log = non_admin_operator.log_path.read_text().splitlines()
    denied = [
        line
        for line in log
        if f'User "{USER}" cannot' in line and not (withheld and f'"{withheld}"' in line)
    ]
    assert not denied, non_admin_operator.log_tail()


async def test_operator_leads_under_an_older_cluster_role_without_csinodes(
    kube: KubeClient, non_admin_operator: Restricted, namespace: str
) -> None:
    """A new release run under the ClusterRole of the release before (no csinodes): it still
    leads, schedules and reports, and its log says attach limits wait for the permission."""
    documents = render(DEPLOY)
    role = find(documents, "ClusterRole", "podgroup-operator")
    for rule in role["rules"]:
        rule["resources"] = [r for r in rule["resources"] if r != "csinodes"]
    role["rules"] = [rule for rule in role["rules"] if rule["resources"]]
    async with _serving_as_user(kube, non_admin_operator, documents):
        await _runs_a_gang_and_answers_webhooks(
            kube, non_admin_operator.process, namespace, withheld="csinodes"
        )
    log = non_admin_operator.process.log_path.read_text()
    assert "csinodes: " in log and "going on without it: attach limits are not counted" in log
