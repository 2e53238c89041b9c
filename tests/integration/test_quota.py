"""Quota reservation on the real control plane: the webhook, the durable record, release, status.

Every test works in a fresh namespace labelled `scheduling.x-k8s.io/quota-reservation: enabled`
(except the one proving that other namespaces are untouched) with real ResourceQuota objects;
Kubernetes' own quota admission stays on. The session operator serves the webhooks; the kill -9
test stops it with SIGKILL and starts it again.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import (
    NAMESPACES,
    PODGROUPS,
    RESOURCE_QUOTAS,
    ApiError,
    KubeClient,
    Request,
)
from podgroup_operator.adapters.quota_record import CONFIG_MAPS, RECORD_KEY
from podgroup_operator.devcluster import keys as sim_keys
from podgroup_operator.devcluster.simnodes import SimCluster
from tests.builders import podgroup
from tests.kube_helpers import create_bound, create_pod, kubectl_ok, sim_nodes
from tests.waiting import wait_for

OPT_IN = {c.NAMESPACE_LABEL_QUOTA_RESERVATION: c.OPT_IN_VALUE}


# --- helpers --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
async def sim(kube: KubeClient) -> AsyncIterator[SimCluster]:
    async with sim_nodes(kube, count=2, cpu="16", memory="64Gi", pods=100) as cluster:
        yield cluster


async def opt_in(kube: KubeClient, namespace: str) -> None:
    """Label the namespace and wait until the apiserver routes its PodGroups to our webhook.

    The apiserver matches namespaceSelectors against its namespace cache, so the label takes a
    moment to count. A dry-run PodGroup naming resource `gpu` is refused only by the quota
    webhook, which makes a side-effect-free probe.
    """
    await kube.patch(NAMESPACES, namespace, {"metadata": {"labels": OPT_IN}})
    probe = podgroup("probe", namespace, totalResources={"gpu": 1})
    del probe["metadata"]["uid"]

    async def intercepted() -> bool:
        try:
            await create(kube, PODGROUPS, probe, namespace, dry_run=True)
        except ApiError as exc:
            return "quota-podgroup" in exc.message
        return False

    await wait_for(intercepted, 15, f"namespace {namespace} to be intercepted by the webhook")


async def create(
    kube: KubeClient, kind: Any, body: dict[str, Any], namespace: str, *, dry_run: bool = False
) -> dict[str, Any]:
    """POST through the client's transport: `KubeClient.create` has no dry-run option."""
    params = {"dryRun": "All"} if dry_run else None
    path = kind.path(namespace)
    status, answer = await kube.transport.send(Request("POST", path, params=params, body=body))
    if status >= 300:
        raise ApiError(status, answer, "POST", path)
    return dict(answer)


@pytest.fixture
async def quota_ns(kube: KubeClient, namespace: str, operator: Any) -> str:
    await opt_in(kube, namespace)
    return namespace


async def make_quota(kube: KubeClient, namespace: str, name: str, hard: dict[str, Any]) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"hard": {k: str(v) for k, v in hard.items()}},
    }
    await kube.create(RESOURCE_QUOTAS, body, namespace)

    async def observed() -> bool:
        # Kubernetes' quota admission refuses pods until the quota controller filled status.
        quota = await kube.get(RESOURCE_QUOTAS, name, namespace)
        return bool((quota.get("status") or {}).get("hard"))

    await wait_for(observed, 15, f"ResourceQuota {name} to be observed")


async def make_group(
    kube: KubeClient, namespace: str, name: str, total: dict[str, Any] | None, **spec: Any
) -> dict[str, Any]:
    spec.setdefault("min_member", 1)
    if total is not None:
        spec["totalResources"] = total
    body = podgroup(name, namespace, **spec)
    del body["metadata"]["uid"]
    return await kube.create(PODGROUPS, body, namespace)


async def refused(awaitable: Any) -> str:
    """The apiserver's message for a request that must be refused."""
    try:
        await awaitable
    except ApiError as exc:
        assert exc.status in (400, 403, 422), exc
        return exc.message
    raise AssertionError("the request was admitted but should have been refused")


async def record(kube: KubeClient, namespace: str) -> dict[str, Any]:
    try:
        body = await kube.get(CONFIG_MAPS, c.QUOTA_LEDGER_CONFIG_MAP, namespace)
    except ApiError as exc:
        if exc.not_found:
            return {}
        raise
    return dict(json.loads((body.get("data") or {}).get(RECORD_KEY) or "{}"))


def quota_condition(group: dict[str, Any]) -> dict[str, Any] | None:
    conditions = (group.get("status") or {}).get("conditions") or []
    return next((x for x in conditions if x["type"] == c.ConditionType.QUOTA_RESERVED), None)


async def wait_reserved(
    kube: KubeClient, namespace: str, name: str, reserved: dict[str, str], used: dict[str, str]
) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        group = await kube.get(PODGROUPS, name, namespace)
        status = group.get("status") or {}
        cond = quota_condition(group)
        ok = (
            status.get("reservation") == {"reserved": reserved, "used": used}
            and cond is not None
            and cond["status"] == c.ConditionStatus.TRUE
            and cond["reason"] == c.Reason.QUOTA_RESERVED
        )
        return group if ok else None

    return await wait_for(probe, 20, f"{name} to show reservation {reserved} used {used}")


async def wait_released(kube: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        group = await kube.get(PODGROUPS, name, namespace)
        cond = quota_condition(group)
        ok = (
            cond is not None
            and cond["status"] == c.ConditionStatus.FALSE
            and cond["reason"] == c.Reason.QUOTA_RELEASED
            and "reservation" not in (group.get("status") or {})
            and name not in await record(kube, namespace)
        )
        return group if ok else None

    return await wait_for(probe, 20, f"{name} to release its reservation")


async def extra_namespace(kube: KubeClient) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    await kube.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    return name


# --- admission of PodGroups -----------------------------------------------------------------------


async def test_reservation_within_quota_is_admitted_recorded_and_shown(
    kube: KubeClient, quota_ns: str, kubeconfig: Path
) -> None:
    ns = quota_ns
    await make_quota(kube, ns, "compute", {"requests.cpu": 10, "requests.memory": "20Gi"})
    created = await make_group(kube, ns, "train-a", {"cpu": 4, "memory": "8Gi"})

    entry = (await record(kube, ns))["train-a"]
    assert entry["uid"] == created["metadata"]["uid"]
    assert entry["total"] == {"cpu": "4", "memory": "8Gi"}

    group = await wait_reserved(
        kube, ns, "train-a", {"cpu": "4", "memory": "8Gi"}, {"cpu": "0", "memory": "0"}
    )
    assert "reserved" in quota_condition(group)["message"]  # type: ignore[index]

    wide = kubectl_ok(kubeconfig, "get", "pg", "-n", ns, "-o", "wide")
    header, row = wide.splitlines()[0], wide.splitlines()[1]
    assert "RESERVED" in header
    assert "cpu" in row and "8Gi" in row, wide


async def test_shortfall_names_every_short_resource_across_two_quotas(
    kube: KubeClient, quota_ns: str
) -> None:
    ns = quota_ns
    await make_quota(
        kube,
        ns,
        "big",
        {"requests.cpu": 8, "requests.memory": "8Gi", "requests.nvidia.com/gpu": 2, "pods": 3},
    )
    await make_quota(kube, ns, "small", {"cpu": 3})
    message = await refused(
        make_group(kube, ns, "huge", {"cpu": 5, "memory": "16Gi", "nvidia.com/gpu": 4, "pods": 4})
    )
    assert "quota-podgroup" in message
    for expected in (
        "spec.totalResources.cpu: quota 'small'",  # the smaller of two quotas binds
        "short 2 cpu",
        "spec.totalResources.memory",
        "short 8Gi memory",
        "spec.totalResources.nvidia.com/gpu",
        "short 2 nvidia.com/gpu",
        "spec.totalResources.pods",
        "short 1 pods",
    ):
        assert expected in message, message
    with pytest.raises(ApiError) as missing:
        await kube.get(PODGROUPS, "huge", ns)
    assert missing.value.not_found
    assert "huge" not in await record(kube, ns)

    # What fits in both quotas is admitted.
    await make_group(kube, ns, "fits", {"cpu": 3, "memory": "8Gi", "nvidia.com/gpu": 2})
    assert "fits" in await record(kube, ns)


async def test_other_groups_reservations_count_against_free_quota(
    kube: KubeClient, quota_ns: str
) -> None:
    ns = quota_ns
    await make_quota(kube, ns, "compute", {"requests.cpu": 10})
    await make_group(kube, ns, "a", {"cpu": 6})
    message = await refused(make_group(kube, ns, "b", {"cpu": 5}))
    assert "spec.totalResources.cpu" in message and "short 1 cpu" in message, message
    assert "a (6 reserved, 0 used)" in message, message
    await make_group(kube, ns, "b", {"cpu": 4})
    assert set(await record(kube, ns)) == {"a", "b"}


# --- admission of pods ----------------------------------------------------------------------------


async def test_member_pods_fit_the_reservation_and_the_next_is_refused(
    kube: KubeClient, quota_ns: str
) -> None:
    ns = quota_ns
    await make_quota(kube, ns, "compute", {"requests.cpu": 10, "pods": 20})
    await make_group(kube, ns, "train-a", {"cpu": 4}, min_member=4)
    for i in range(4):
        await create_pod(kube, ns, f"w{i}", group="train-a", requests={"cpu": "1"})
    message = await refused(create_pod(kube, ns, "w4", group="train-a", requests={"cpu": "1"}))
    assert "exceeds PodGroup train-a reservation: cpu 5 > 4 reserved" in message, message
    assert "quota-pod" in message
    await wait_reserved(kube, ns, "train-a", {"cpu": "4"}, {"cpu": "4"})


async def test_pods_outside_reservations_keep_out_of_reserved_quota(
    kube: KubeClient, quota_ns: str
) -> None:
    ns = quota_ns
    await make_quota(kube, ns, "compute", {"requests.cpu": 10, "pods": 20})
    await make_group(kube, ns, "held", {"cpu": 6})
    await make_group(kube, ns, "plain", None)  # reserves nothing: members are ordinary usage
    await create_pod(kube, ns, "loner", requests={"cpu": "2"})
    await create_pod(kube, ns, "plain-0", group="plain", requests={"cpu": "1"})
    # 10 hard - 3 used - 6 reserved = 1 free outside reservations.
    await create_pod(kube, ns, "plain-1", group="plain", requests={"cpu": "1"})
    message = await refused(create_pod(kube, ns, "greedy", requests={"cpu": "1"}))
    assert "cpu: pod requests 1 but quota 'compute' has cpu 0 free" in message, message
    assert "held (6 reserved, 0 used)" in message, message
    # The reserving group's own members still fit.
    await create_pod(kube, ns, "held-0", group="held", requests={"cpu": "6"})


# --- release --------------------------------------------------------------------------------------


async def test_finished_group_releases_once_and_another_group_reserves(
    kube: KubeClient, quota_ns: str, sim: SimCluster
) -> None:
    ns = quota_ns
    await make_quota(kube, ns, "compute", {"requests.cpu": 8, "pods": 20})
    await make_group(kube, ns, "job", {"cpu": 6}, min_member=2)
    assert "short 2 cpu" in await refused(make_group(kube, ns, "next", {"cpu": 4}))

    done = {sim_keys.SIM_ANNOTATION_SUCCEED_AFTER: "0.5"}
    nodes = sim.node_names
    for i in range(2):
        await create_bound(
            kube,
            ns,
            f"j{i}",
            nodes[i % len(nodes)],
            group="job",
            requests={"cpu": "1"},
            annotations=done,
        )
    group = await wait_released(kube, ns, "job")
    assert group["status"]["phase"] == c.Phase.FINISHED
    assert "Finished" in quota_condition(group)["message"]  # type: ignore[index]

    await make_group(kube, ns, "next", {"cpu": 8})
    assert set(await record(kube, ns)) == {"next"}

    # A finished group never re-takes a reservation, even when its totalResources changes.
    await kube.patch(PODGROUPS, "job", {"spec": {"totalResources": {"cpu": 7}}}, ns)
    assert set(await record(kube, ns)) == {"next"}
    message = await refused(make_group(kube, ns, "third", {"cpu": 1}))
    assert "next (8 reserved, 0 used)" in message, message


async def test_deleted_group_releases_and_its_quota_is_reusable(
    kube: KubeClient, quota_ns: str
) -> None:
    ns = quota_ns
    await make_quota(kube, ns, "compute", {"requests.cpu": 8})
    await make_group(kube, ns, "first", {"cpu": 8})
    await refused(make_group(kube, ns, "second", {"cpu": 1}))
    await kube.delete(PODGROUPS, "first", ns)

    async def released() -> bool:
        return "first" not in await record(kube, ns)

    await wait_for(released, 20, "the deleted group's reservation to be released")
    await make_group(kube, ns, "second", {"cpu": 8})
    assert set(await record(kube, ns)) == {"second"}


# --- changes --------------------------------------------------------------------------------------


async def test_increase_is_checked_and_decrease_below_usage_is_refused(
    kube: KubeClient, quota_ns: str
) -> None:
    ns = quota_ns
    await make_quota(kube, ns, "compute", {"requests.cpu": 10, "pods": 20})
    await make_group(kube, ns, "g", {"cpu": 4}, min_member=3)
    await make_group(kube, ns, "h", {"cpu": 4})
    for i in range(3):
        await create_pod(kube, ns, f"g{i}", group="g", requests={"cpu": "1"})

    def change(cpu: int) -> Any:
        return kube.patch(PODGROUPS, "g", {"spec": {"totalResources": {"cpu": cpu}}}, ns)

    message = await refused(change(7))
    assert "raising PodGroup g's reservation from 4 to 7 needs 3 more" in message, message
    assert "short 1 cpu" in message, message
    await change(6)
    assert (await record(kube, ns))["g"]["total"] == {"cpu": "6"}

    message = await refused(change(2))
    assert "spec.totalResources.cpu: 2 is below the 3 cpu" in message, message
    await change(3)
    assert (await record(kube, ns))["g"]["total"] == {"cpu": "3"}
    await wait_reserved(kube, ns, "g", {"cpu": "3"}, {"cpu": "3"})
    # The freed cpu is available again: 10 - 3 - 4 = 3.
    await make_group(kube, ns, "k", {"cpu": 3})

    # Removing totalResources releases the reservation.
    await kube.patch(PODGROUPS, "h", {"spec": {"totalResources": None}}, ns)
    await wait_released(kube, ns, "h")


# --- scope ----------------------------------------------------------------------------------------


async def test_namespace_without_the_label_is_untouched(
    kube: KubeClient, namespace: str, operator: Any
) -> None:
    await make_quota(kube, namespace, "compute", {"requests.cpu": 2})
    await make_group(kube, namespace, "big", {"cpu": 50})
    await create_pod(kube, namespace, "p", group="big", requests={"cpu": "1"})

    async def lifecycle_wrote_status() -> dict[str, Any] | None:
        group = await kube.get(PODGROUPS, "big", namespace)
        return group if (group.get("status") or {}).get("phase") else None

    group = await wait_for(lifecycle_wrote_status, 20, "the lifecycle to write the status")
    assert quota_condition(group) is None
    assert "reservation" not in group["status"]
    assert await record(kube, namespace) == {}


async def test_webhook_configuration_is_scoped_and_policies_declared(
    kube: KubeClient, operator: Any
) -> None:
    from podgroup_operator.adapters.kube import VALIDATING_WEBHOOKS
    from podgroup_operator.handlers.webhooks import VALIDATING_CONFIG_NAME

    config = await kube.get(VALIDATING_WEBHOOKS, VALIDATING_CONFIG_NAME)
    hooks = {hook["name"].split(".")[0]: hook for hook in config["webhooks"]}
    for name, resource in (("quota-podgroup", c.PLURAL), ("quota-pod", "pods")):
        hook = hooks[name]
        assert hook["failurePolicy"] == "Fail"
        assert hook["rules"][0]["resources"] == [resource]
        expressions = hook["namespaceSelector"]["matchExpressions"]
        assert {
            "key": c.NAMESPACE_LABEL_QUOTA_RESERVATION,
            "operator": "In",
            "values": [c.OPT_IN_VALUE],
        } in expressions
        protected = next(e for e in expressions if e["operator"] == "NotIn")["values"]
        assert "kube-system" in protected and c.OPERATOR_NAME in protected
    assert hooks["quota-podgroup"]["sideEffects"] == "NoneOnDryRun"
    assert hooks["quota-pod"]["rules"][0]["operations"] == ["CREATE"]


# --- bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("total", "spec", "expected"),
    [
        ({"gpu": 1}, {}, "spec.totalResources.gpu: unknown resource 'gpu'"),
        ({"requests.cpu": 1}, {}, "write 'cpu' instead of 'requests.cpu'"),
        ({"cpu": 2}, {"minResources": {"cpu": 4}}, "totalResources"),
        ({"memory": "4GB"}, {}, "spec.totalResources.memory"),
        ({"cpu": "-1"}, {}, "spec.totalResources.cpu"),
        ({"cpu": "two"}, {}, "spec.totalResources.cpu"),
    ],
    ids=["unknown-name", "quota-key", "below-minResources", "bad-suffix", "negative", "malformed"],
)
async def test_bad_total_resources_is_refused_with_the_field_path(
    kube: KubeClient, quota_ns: str, total: dict[str, Any], spec: dict[str, Any], expected: str
) -> None:
    await make_quota(kube, quota_ns, "compute", {"requests.cpu": 10})
    message = await refused(make_group(kube, quota_ns, "bad", total, **spec))
    assert expected in message, message
    if spec:
        assert "minResources" in message, message
    assert await record(kube, quota_ns) == {}


# --- concurrency and faults -----------------------------------------------------------------------


async def test_fifty_concurrent_creates_admit_exactly_ten_every_time(
    kube: KubeClient, operator: Any
) -> None:
    for _round in range(3):
        ns = await extra_namespace(kube)
        try:
            await opt_in(kube, ns)
            await make_quota(kube, ns, "compute", {"requests.cpu": 10})
            results = await asyncio.gather(
                *(make_group(kube, ns, f"g{i:02d}", {"cpu": 1}) for i in range(50)),
                return_exceptions=True,
            )
            admitted = {r["metadata"]["name"] for r in results if isinstance(r, dict)}
            refusals = [r for r in results if isinstance(r, ApiError)]
            assert len(admitted) == 10, results
            assert len(refusals) == 40
            assert all("short 1 cpu" in r.message for r in refusals), refusals[0].message
            assert set(await record(kube, ns)) == admitted
            stored = {g["metadata"]["name"] for g in (await kube.list(PODGROUPS, ns))["items"]}
            assert stored == admitted
        finally:
            await kube.delete(NAMESPACES, ns)


async def test_kill_9_mid_admission_loses_and_leaks_no_reservation(
    kube: KubeClient, quota_ns: str, operator: Any
) -> None:
    ns = quota_ns
    await make_quota(kube, ns, "compute", {"requests.cpu": 40})
    tasks = [asyncio.create_task(make_group(kube, ns, f"g{i:02d}", {"cpu": 1})) for i in range(30)]
    try:

        async def some_admitted() -> bool:
            return sum(t.done() and not t.exception() for t in tasks) >= 3

        await wait_for(some_admitted, 20, "a few admissions", interval=0.005)
        operator.stop(kill=True)  # SIGKILL: no cleanup, statuses possibly unwritten
        results = await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        if operator.process.poll() is not None:
            operator.start()
            await asyncio.to_thread(operator.wait_ready)
    admitted = {r["metadata"]["name"] for r in results if isinstance(r, dict)}
    assert admitted, results
    stored = {g["metadata"]["name"] for g in (await kube.list(PODGROUPS, ns))["items"]}
    assert stored == admitted

    # No loss: every stored group keeps its entry and gets its status after the restart.
    for name in sorted(admitted):
        try:
            await wait_reserved(kube, ns, name, {"cpu": "1"}, {"cpu": "0"})
        except AssertionError:
            print(
                await kube.get(PODGROUPS, name, ns), await record(kube, ns), operator.log_tail(80)
            )
            raise

    # No leak: entries of creates that died with the operator go after their deadline.
    async def record_matches() -> bool:
        return set(await record(kube, ns)) == stored

    await wait_for(record_matches, 40, "the record to hold exactly the stored groups")
    await opt_in(kube, ns)  # the restarted operator serves on a new port
    free = 40 - len(stored)
    await make_group(kube, ns, "rest", {"cpu": free})
    assert "short 1 cpu" in await refused(make_group(kube, ns, "one-more", {"cpu": 1}))


async def test_entry_of_a_group_never_stored_is_dropped_after_its_deadline(
    kube: KubeClient, quota_ns: str
) -> None:
    ns = quota_ns
    await make_quota(kube, ns, "compute", {"requests.cpu": 4})
    await make_group(kube, ns, "real", {"cpu": 1})
    # As if another replica admitted "ghost" and the apiserver then failed to store it.
    cm = await kube.get(CONFIG_MAPS, c.QUOTA_LEDGER_CONFIG_MAP, ns)
    entries = json.loads(cm["data"][RECORD_KEY])
    entries["ghost"] = {
        "uid": "0000-ghost",
        "total": {"cpu": "3"},
        "deadline": "2020-01-01T00:00:00Z",
    }
    cm["data"][RECORD_KEY] = json.dumps(entries)
    await kube.patch(CONFIG_MAPS, c.QUOTA_LEDGER_CONFIG_MAP, {"data": cm["data"]}, ns)

    async def dropped() -> bool:
        return set(await record(kube, ns)) == {"real"}

    await wait_for(dropped, 20, "the never-stored entry to be dropped")
    await make_group(kube, ns, "after", {"cpu": 3})
