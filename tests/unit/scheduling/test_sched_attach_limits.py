"""Attach limits, as kube-scheduler's NodeVolumeLimits (CSI): a node takes at most its CSINode's
(or its `attachable-volumes-csi-*` allocatable's) count of each driver's volumes, a volume
shared by pods counting once."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from podgroup_operator.domain.membership import group_key_of
from podgroup_operator.scheduling.gang import GangRequest, Placement, Refusal
from podgroup_operator.scheduling.placement import place_group
from podgroup_operator.scheduling.preemption import PreemptionPlan, plan_preemption
from podgroup_operator.scheduling.snapshot import Snapshot
from podgroup_operator.scheduling.volumes import (
    VolumeAction,
    VolumeClaim,
    attach_limit_key,
    csi_node_limits,
    exceeds_attach_limits,
    persistent_volume,
    volume_claim,
)
from tests.builders import node, pod
from tests.unit.scheduling.helpers import gang, pvc

DRIVER = "disk.csi.example.com"
KEY = f"attachable-volumes-csi-{DRIVER}"
WFFC_CSI = {"provisioner": DRIVER, "volumeBindingMode": "WaitForFirstConsumer"}
WFFC_STATIC = {
    "provisioner": "kubernetes.io/no-provisioner",
    "volumeBindingMode": "WaitForFirstConsumer",
}
EXCEEDED = "node(s) exceed max volume count"


def claim(name: str, klass: str = "disk", **spec: Any) -> dict[str, Any]:
    return pvc(name, "1Gi", klass, **spec)


def csi_pv(
    name: str, *, claim: str | None = None, klass: str = "disk", driver: str = DRIVER
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "storageClassName": klass,
        "capacity": {"storage": "1Gi"},
        "accessModes": ["ReadWriteOnce"],
        "csi": {"driver": driver, "volumeHandle": f"vol-{name}"},
    }
    if claim is not None:
        spec["claimRef"] = {"namespace": "default", "name": claim}
    return {"kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}


def host_path_pv(name: str, claim: str) -> dict[str, Any]:
    return {
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "storageClassName": "disk",
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": f"/mnt/{name}"},
            "claimRef": {"namespace": "default", "name": claim},
        },
    }


def mounting(name: str, *claims: str, node_name: str | None = None) -> dict[str, Any]:
    return pod(
        name,
        group=None if node_name else "job",
        node=node_name,
        phase="Running" if node_name else "Pending",
        volumes=[
            {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
            for i, c in enumerate(claims)
        ],
    )


def csi_node(name: str, count: int, driver: str = DRIVER) -> dict[str, Any]:
    return {
        "kind": "CSINode",
        "metadata": {"name": name},
        "spec": {"drivers": [{"name": driver, "nodeID": name, "allocatable": {"count": count}}]},
    }


def claims(*models: VolumeClaim) -> dict[tuple[str, str], VolumeClaim]:
    return {c.key: c for c in models}


def nodes_with_limit(count: int, *names: str) -> Snapshot:
    snapshot = Snapshot.build([node(n) for n in names], [])
    for name in names:
        snapshot.volumes.set_csi_limits(name, csi_node_limits(csi_node(name, count)))
    return snapshot


def provisioned_gang(count: int) -> GangRequest:
    """`count` members job-<i>, each mounting a claim data-<i> of its own that DRIVER provisions."""
    models = [volume_claim(claim(f"data-{i}"), WFFC_CSI) for i in range(count)]
    pods = [mounting(f"job-{i}", f"data-{i}") for i in range(count)]
    return gang("job", pods, claims=claims(*models))


def test_the_limit_key_is_upstreams_and_long_driver_names_are_cut_and_hashed() -> None:
    assert attach_limit_key(DRIVER) == KEY
    long = "a-very-long-driver-name.csi.storage.example.com"
    key = attach_limit_key(long)
    digest = hashlib.sha1(long.encode()).hexdigest()[:16]
    assert key == f"attachable-volumes-csi-{long[:23]}{digest}"
    assert len(key) < 63
    assert csi_node_limits(csi_node("n0", 3)) == {KEY: 3}
    # A driver without a count sets no limit.
    assert csi_node_limits({"spec": {"drivers": [{"name": DRIVER}]}}) == {}


def test_the_counting_rule() -> None:
    limits = {KEY: 2}
    assert not exceeds_attach_limits({"d/a": KEY, "d/b": KEY}, {}, limits)
    assert exceeds_attach_limits({"d/a": KEY, "d/b": KEY, "d/c": KEY}, {}, limits)
    # A volume the node already has counts once.
    assert not exceeds_attach_limits({"d/a": KEY, "d/b": KEY}, {"d/a": KEY}, limits)
    assert exceeds_attach_limits({"d/c": KEY}, {"d/a": KEY, "d/b": KEY}, limits)
    # Other drivers' volumes and drivers without a limit do not count.
    other = attach_limit_key("other")
    assert not exceeds_attach_limits({"o/x": other}, {"d/a": KEY, "d/b": KEY}, limits)
    assert not exceeds_attach_limits({"d/c": KEY}, {"o/x": other, "d/a": KEY}, limits)
    assert not exceeds_attach_limits({"d/c": KEY}, {"d/a": KEY, "d/b": KEY}, {})


def test_members_with_provisioned_claims_spread_over_nodes_past_their_limit() -> None:
    snapshot = nodes_with_limit(2, "n0", "n1")
    outcome = place_group(provisioned_gang(4), snapshot)
    assert isinstance(outcome, Placement)
    per_node = sorted(b.node for b in outcome.bindings)
    assert per_node == ["n0", "n0", "n1", "n1"]  # packing alone puts all four on one node
    assert all(d.action is VolumeAction.PROVISION for b in outcome.bindings for d in b.volumes)
    outcome.undo()
    assert snapshot.volumes.node_attachments("n0") == {}


def test_a_gang_with_more_volumes_than_the_nodes_take_is_refused_saying_why() -> None:
    snapshot = nodes_with_limit(1, "n0", "n1")
    outcome = place_group(provisioned_gang(3), snapshot)
    assert isinstance(outcome, Refusal)
    assert "only 2 fit" in outcome.message
    assert f"2 {EXCEEDED}" in outcome.message


def test_running_pods_volumes_count_and_a_shared_volume_counts_once() -> None:
    running = [mounting("old", "old-data", node_name="n0")]
    snapshot = Snapshot.build([node("n0"), node("n1", cpu=4)], running)
    snapshot.volumes.set_volume(persistent_volume(csi_pv("pv-old", claim="old-data")))
    snapshot.volumes.set_csi_limits("n0", {KEY: 1})
    snapshot.volumes.set_csi_limits("n1", {KEY: 1})
    assert snapshot.volumes.node_attachments("n0") == {f"{DRIVER}/vol-pv-old": KEY}
    fresh = volume_claim(claim("data"), WFFC_CSI)
    outcome = place_group(gang("job", [mounting("job-0", "data")], claims=claims(fresh)), snapshot)
    assert isinstance(outcome, Placement)
    assert outcome.bindings[0].node == "n1"  # n0 is emptier of cpu but at its limit
    outcome.undo()
    # The running pod's own volume, mounted again (ReadWriteMany), adds nothing to n0.
    shared = volume_claim(claim("old-data", volumeName="pv-old"), WFFC_CSI)
    outcome = place_group(
        gang("job", [mounting("job-0", "old-data")], claims=claims(shared)), snapshot
    )
    assert isinstance(outcome, Placement)
    assert outcome.bindings[0].node == "n0"


@pytest.mark.parametrize("source", ["allocatable", "csinode"])
def test_the_limit_comes_from_the_csinode_over_the_nodes_allocatable(source: str) -> None:
    running = [mounting("old", "old-data", node_name="n0")]
    snapshot = Snapshot.build(
        [node("n0", cpu=16, extended={KEY: 1}), node("n1", cpu=4, extended={KEY: 1})], running
    )
    snapshot.volumes.set_volume(persistent_volume(csi_pv("pv-old", claim="old-data")))
    if source == "csinode":
        snapshot.volumes.set_csi_limits("n0", {KEY: 5})  # the CSINode says more: it wins
    fresh = volume_claim(claim("data"), WFFC_CSI)
    outcome = place_group(gang("job", [mounting("job-0", "data")], claims=claims(fresh)), snapshot)
    assert isinstance(outcome, Placement)
    assert outcome.bindings[0].node == ("n1" if source == "allocatable" else "n0")


def test_a_volume_that_is_not_csi_counts_nothing() -> None:
    running = [mounting("old", "old-data", node_name="n0")]
    snapshot = Snapshot.build([node("n0"), node("n1", cpu=4)], running)
    snapshot.volumes.set_volume(persistent_volume(host_path_pv("pv-old", "old-data")))
    snapshot.volumes.set_csi_limits("n0", {KEY: 1})
    assert snapshot.volumes.node_attachments("n0") == {}
    fresh = volume_claim(claim("data"), WFFC_CSI)
    outcome = place_group(gang("job", [mounting("job-0", "data")], claims=claims(fresh)), snapshot)
    assert isinstance(outcome, Placement)
    assert outcome.bindings[0].node == "n0"


def test_a_running_pods_claim_not_bound_yet_counts_as_its_provisioners() -> None:
    """As upstream: a pod bound by another scheduler whose volume is still being provisioned
    already takes one of the node's attachments."""
    running = [mounting("old", "old-data", node_name="n0")]
    snapshot = Snapshot.build([node("n0"), node("n1", cpu=4)], running)
    snapshot.volumes.set_csi_limits("n0", {KEY: 1})
    assert snapshot.volumes.node_attachments("n0") == {}
    snapshot.volumes.set_claim_provisioner(("default", "old-data"), DRIVER)
    assert list(snapshot.volumes.node_attachments("n0").values()) == [KEY]
    fresh = volume_claim(claim("data"), WFFC_CSI)
    outcome = place_group(gang("job", [mounting("job-0", "data")], claims=claims(fresh)), snapshot)
    assert isinstance(outcome, Placement)
    assert outcome.bindings[0].node == "n1"
    snapshot.volumes.set_claim_provisioner(("default", "old-data"), "")
    assert snapshot.volumes.node_attachments("n0") == {}


def test_a_static_csi_pv_chosen_for_a_claim_counts_as_its_driver() -> None:
    """A class without a provisioner whose static PVs are CSI: upstream counts such a claim as
    the class's provisioner (no limit); here it counts as the PV it would get, so the node's
    limit holds."""
    running = [mounting("old", "old-data", node_name="n0")]
    snapshot = Snapshot.build([node("n0"), node("n1", cpu=4)], running)
    snapshot.volumes.set_volume(
        persistent_volume(csi_pv("pv-old", claim="old-data", klass="static"))
    )
    snapshot.volumes.set_volume(persistent_volume(csi_pv("pv-free", klass="static")))
    snapshot.volumes.set_csi_limits("n0", {KEY: 1})
    fresh = volume_claim(claim("data", klass="static"), WFFC_STATIC)
    outcome = place_group(gang("job", [mounting("job-0", "data")], claims=claims(fresh)), snapshot)
    assert isinstance(outcome, Placement)
    binding = outcome.bindings[0]
    assert binding.node == "n1"
    assert [(d.action, d.volume) for d in binding.volumes] == [(VolumeAction.BIND, "pv-free")]


def test_preemption_frees_a_nodes_attach_slot_for_a_higher_priority_gang() -> None:
    """As kube-scheduler's preemption runs its filters with victims removed, ours evicts the
    lower-priority gang whose volume takes the node's one slot, though cpu is plentiful."""
    low = pod(
        "low",
        group="low",
        node="n0",
        phase="Running",
        priority=0,
        volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "old-data"}}],
    )
    snapshot = Snapshot.build([node("n0")], [low], gang_of=group_key_of)
    snapshot.volumes.set_volume(persistent_volume(csi_pv("pv-old", claim="old-data")))
    snapshot.volumes.set_csi_limits("n0", {KEY: 1})
    fresh = volume_claim(claim("data"), WFFC_CSI)
    high = gang("high", [mounting("high-0", "data")], claims=claims(fresh), priority=1000)
    assert isinstance(place_group(high, snapshot), Refusal)
    plan = plan_preemption(high, snapshot)
    assert isinstance(plan, PreemptionPlan), plan
    assert [v.gang for v in plan.victims] == [("default", "low")]
    assert [b.node for b in plan.nominations] == ["n0"]


def test_the_keys_some_node_limits_follow_nodes_and_csinodes() -> None:
    """A member whose volumes no node limits skips the count on every node (`may_limit`)."""
    snapshot = Snapshot.build([node("n0"), node("n1", extended={KEY: 2})], [])
    assert snapshot.volumes.may_limit("attachable-volumes-aws-ebs")  # in-tree: every node has it
    assert snapshot.volumes.may_limit(KEY)
    snapshot.remove_node("n1")
    assert not snapshot.volumes.may_limit(KEY)
    snapshot.volumes.set_csi_limits("n0", {KEY: 1})
    assert snapshot.volumes.may_limit(KEY)
    snapshot.volumes.set_csi_limits("n0", {})
    assert not snapshot.volumes.may_limit(KEY)
    snapshot.add_node(node("n0", extended={KEY: 1}))
    assert snapshot.volumes.may_limit(KEY)
    snapshot.update_node(node("n0"))
    assert not snapshot.volumes.may_limit(KEY)
