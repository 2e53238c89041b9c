"""PersistentVolumeClaims: bound PV node affinity, Immediate claims wait, WaitForFirstConsumer
claims get the smallest fitting static PV per node (never twice) or dynamic provisioning."""

from __future__ import annotations

from typing import Any

from podgroup_operator.scheduling.gang import Placement, Refusal
from podgroup_operator.scheduling.placement import place_group
from podgroup_operator.scheduling.snapshot import Snapshot
from podgroup_operator.scheduling.volumes import (
    BindingMode,
    VolumeAction,
    VolumeClaim,
    persistent_volume,
    volume_claim,
)
from tests.builders import node, pod
from tests.unit.scheduling.helpers import gang, pvc

GI = 1024**3
HOST = "kubernetes.io/hostname"


def local_pv(name: str, host: str, size: str, klass: str = "local", **spec: Any) -> dict[str, Any]:
    return {
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "storageClassName": klass,
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"],
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": HOST, "operator": "In", "values": [host]}]}
                    ]
                }
            },
            **spec,
        },
        "status": {"phase": "Available"},
    }


WFFC_STATIC = {
    "provisioner": "kubernetes.io/no-provisioner",
    "volumeBindingMode": "WaitForFirstConsumer",
}
WFFC_DYNAMIC = {"provisioner": "csi.example.com", "volumeBindingMode": "WaitForFirstConsumer"}


def mounting(name: str, *claims: str) -> dict[str, Any]:
    return pod(
        name,
        group="job",
        volumes=[
            {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
            for i, c in enumerate(claims)
        ],
    )


def claims(*models: VolumeClaim) -> dict[tuple[str, str], VolumeClaim]:
    return {c.key: c for c in models}


def test_parsers_read_the_fields_that_matter() -> None:
    pv = persistent_volume(local_pv("pv-a", "n0", "20Gi"))
    assert pv.capacity == 20 * GI
    assert pv.pinned_host == "n0"
    assert pv.access_modes == frozenset({"ReadWriteOnce"})
    claim = volume_claim(pvc("data"), WFFC_STATIC)
    assert claim.binding_mode is BindingMode.WAIT_FOR_FIRST_CONSUMER
    assert claim.request == 10 * GI
    assert not claim.can_provision
    assert volume_claim(pvc("data"), WFFC_DYNAMIC).can_provision
    assert volume_claim(pvc("data"), None).binding_mode is BindingMode.IMMEDIATE


def test_a_bound_claim_keeps_the_pod_where_its_pv_is_reachable() -> None:
    snapshot = Snapshot.build([node("n0"), node("n1")], [])
    snapshot.volumes.set_volume(persistent_volume(local_pv("pv-1", "n1", "10Gi")))
    bound = volume_claim(pvc("data", volumeName="pv-1"), WFFC_STATIC)
    request = gang("job", [mounting("job-0", "data")], claims=claims(bound))
    outcome = place_group(request, snapshot)
    assert isinstance(outcome, Placement)
    assert [b.node for b in outcome.bindings] == ["n1"]
    assert outcome.bindings[0].volumes == ()


def test_a_pv_of_thousands_of_node_terms_is_reachable_where_one_matches() -> None:
    """Past SCAN_TERMS a PV's node affinity goes through a TermIndex: only the last term of
    5,000 admits a node, and only node n1."""
    raw = local_pv("pv-1", "n1", "10Gi")
    terms = raw["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    others = [{"matchExpressions": [{"key": f"k{i}", "operator": "Exists"}]} for i in range(4999)]
    terms[:0] = others
    pv = persistent_volume(raw)
    assert pv.matching is not None
    assert pv.reachable_from("n1", {HOST: "n1"})
    assert not pv.reachable_from("n0", {HOST: "n0"})


ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"


def zoned_pv(name: str, labels: dict[str, str]) -> dict[str, Any]:
    """A PV with zone or region labels and no node affinity, as older cloud-disk PVs are."""
    return {
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "storageClassName": "disk",
            "capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": f"/mnt/{name}"},
        },
        "status": {"phase": "Bound"},
    }


def _zoned_nodes() -> list[dict[str, Any]]:
    return [
        node("a-0", labels={ZONE: "a", REGION: "r"}),
        node("b-0", labels={ZONE: "b", REGION: "r"}),
        node("plain"),  # no zone or region label: VolumeZone lets any PV through
    ]


def test_a_bound_claims_pv_zone_labels_keep_the_pod_in_its_zones() -> None:
    """kube-scheduler's VolumeZone: the node's value of each zone or region label the PV
    carries must be one of the PV's (`__` separates several); a node with no such label at all
    is not judged. Node names sort `plain` last, so packing alone would pick a-0 first."""
    cases = {
        "in-b": ({ZONE: "b"}, ["b-0", "plain"]),
        "in-a-or-b": ({ZONE: "a__b", REGION: "r"}, ["a-0", "b-0", "plain"]),
        "elsewhere": ({ZONE: "c"}, ["plain"]),
        "region-the-nodes-lack": ({"failure-domain.beta.kubernetes.io/region": "r"}, ["plain"]),
        "unreadable": ({ZONE: "a__"}, ["a-0", "b-0", "plain"]),
    }
    for case, (labels, allowed) in cases.items():
        reached = []
        for name in ("a-0", "b-0", "plain"):
            snapshot = Snapshot.build(_zoned_nodes(), [])
            snapshot.volumes.set_volume(persistent_volume(zoned_pv("pv-z", labels)))
            bound = volume_claim(pvc("data", klass="disk", volumeName="pv-z"), None)
            pinned = mounting("job-0", "data")
            pinned["spec"]["nodeName"] = None
            pinned["spec"]["nodeSelector"] = {HOST: name}
            request = gang("job", [pinned], claims=claims(bound))
            if isinstance(place_group(request, snapshot), Placement):
                reached.append(name)
        assert reached == allowed, (case, reached)
    snapshot = Snapshot.build(_zoned_nodes()[:2], [])
    snapshot.volumes.set_volume(persistent_volume(zoned_pv("pv-z", {ZONE: "c"})))
    bound = volume_claim(pvc("data", klass="disk", volumeName="pv-z"), None)
    refusal = place_group(gang("job", [mounting("job-0", "data")], claims=claims(bound)), snapshot)
    assert isinstance(refusal, Refusal)
    assert "2 node(s) had no available volume zone (PV pv-z)" in refusal.message, refusal.message


def test_an_unbound_immediate_claim_makes_the_pod_wait_whatever_the_node() -> None:
    snapshot = Snapshot.build([node("n0")], [])
    immediate = volume_claim(pvc("data"), {"provisioner": "csi.example.com"})
    outcome = place_group(
        gang("job", [mounting("job-0", "data")], claims=claims(immediate)), snapshot
    )
    assert isinstance(outcome, Refusal)
    assert "1 cannot be placed: waiting for PVC 'data' to be bound" in outcome.message


def test_a_claim_the_caller_did_not_resolve_is_not_found() -> None:
    snapshot = Snapshot.build([node("n0")], [])
    outcome = place_group(gang("job", [mounting("job-0", "missing")]), snapshot)
    assert isinstance(outcome, Refusal)
    assert "persistentvolumeclaim 'missing' not found" in outcome.message


def test_wait_for_first_consumer_takes_the_smallest_static_pv_that_fits_on_the_node() -> None:
    snapshot = Snapshot.build([node("n0"), node("n1")], [])
    for raw in (
        local_pv("small", "n0", "5Gi"),
        local_pv("big", "n0", "100Gi"),
        local_pv("right", "n0", "20Gi"),
        local_pv("other-class", "n0", "10Gi", klass="fast"),
    ):
        snapshot.volumes.set_volume(persistent_volume(raw))
    claim = volume_claim(pvc("data"), WFFC_STATIC)
    outcome = place_group(gang("job", [mounting("job-0", "data")], claims=claims(claim)), snapshot)
    assert isinstance(outcome, Placement)
    binding = outcome.bindings[0]
    assert binding.node == "n0"
    assert [(d.action, d.volume, d.claim) for d in binding.volumes] == [
        (VolumeAction.BIND, "right", "data")
    ]
    assert snapshot.volumes.holders == {"right": binding.pod_uid}
    outcome.undo()
    assert snapshot.volumes.holders == {}


def test_two_members_never_get_the_same_static_pv() -> None:
    snapshot = Snapshot.build([node("n0"), node("n1")], [])
    snapshot.volumes.set_volume(persistent_volume(local_pv("only", "n0", "20Gi")))
    a = volume_claim(pvc("data-0"), WFFC_STATIC)
    b = volume_claim(pvc("data-1"), WFFC_STATIC)
    pods = [mounting("job-0", "data-0"), mounting("job-1", "data-1")]
    outcome = place_group(gang("job", pods, claims=claims(a, b)), snapshot)
    assert isinstance(outcome, Refusal)
    assert "only 1 fit" in outcome.message
    assert (
        "node(s) didn't find available persistent volumes to bind (PVC data-1)" in outcome.message
    )
    assert snapshot.volumes.holders == {}


def test_dynamic_provisioning_selects_the_node_within_allowed_topologies() -> None:
    snapshot = Snapshot.build(
        [node("n0", labels={"zone": "a"}), node("n1", labels={"zone": "b"})], []
    )
    klass = {
        **WFFC_DYNAMIC,
        "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": ["b"]}]}],
    }
    claim = volume_claim(pvc("scratch"), klass)
    outcome = place_group(
        gang("job", [mounting("job-0", "scratch")], claims=claims(claim)), snapshot
    )
    assert isinstance(outcome, Placement)
    [decision] = outcome.bindings[0].volumes
    assert (decision.action, decision.node, decision.volume) == (VolumeAction.PROVISION, "n1", None)


def test_a_pv_pre_bound_to_the_claim_wins_over_a_smaller_one() -> None:
    snapshot = Snapshot.build([node("n0")], [])
    snapshot.volumes.set_volume(persistent_volume(local_pv("small", "n0", "10Gi")))
    snapshot.volumes.set_volume(
        persistent_volume(
            local_pv("reserved", "n0", "50Gi", claimRef={"namespace": "default", "name": "data"})
        )
    )
    snapshot.volumes.set_volume(
        persistent_volume(
            local_pv("theirs", "n0", "10Gi", claimRef={"namespace": "default", "name": "other"})
        )
    )
    claim = volume_claim(pvc("data"), WFFC_STATIC)
    outcome = place_group(gang("job", [mounting("job-0", "data")], claims=claims(claim)), snapshot)
    assert isinstance(outcome, Placement)
    assert [d.volume for d in outcome.bindings[0].volumes] == ["reserved"]


def test_access_modes_and_selector_must_match() -> None:
    snapshot = Snapshot.build([node("n0")], [])
    snapshot.volumes.set_volume(persistent_volume(local_pv("rwo", "n0", "10Gi")))
    labelled = local_pv("labelled", "n0", "10Gi", accessModes=["ReadWriteOnce", "ReadWriteMany"])
    labelled["metadata"]["labels"] = {"tier": "gold"}
    snapshot.volumes.set_volume(persistent_volume(labelled))
    shared = volume_claim(pvc("shared", accessModes=["ReadWriteMany"]), WFFC_STATIC)
    gold = volume_claim(pvc("gold", selector={"matchLabels": {"tier": "gold"}}), WFFC_STATIC)
    for claim in (shared, gold):
        outcome = place_group(
            gang("job", [mounting("job-0", claim.name)], claims=claims(claim)), snapshot
        )
        assert isinstance(outcome, Placement)
        assert [d.volume for d in outcome.bindings[0].volumes] == ["labelled"]
        outcome.undo()


def test_a_claim_shared_by_members_is_decided_once_and_they_follow_it() -> None:
    snapshot = Snapshot.build([node("n0", cpu=2), node("n1", cpu=2)], [])
    shared = volume_claim(pvc("shared", accessModes=["ReadWriteMany"]), WFFC_DYNAMIC)
    pods = [
        pod(
            f"job-{i}",
            group="job",
            requests={"cpu": "1"},
            volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "shared"}}],
        )
        for i in range(3)
    ]
    outcome = place_group(gang("job", pods, min_member=2, claims=claims(shared)), snapshot)
    # Provisioned for the first member's node, so every member must go there: two fit.
    assert isinstance(outcome, Placement)
    assert [b.node for b in outcome.bindings] == ["n0", "n0"]
    assert [len(b.volumes) for b in outcome.bindings] == [1, 0]
    assert outcome.unplaced == ("job-2",)
    outcome.undo()
    assert snapshot.volumes.claim_decisions == {}


def test_a_claim_mounted_twice_by_one_pod_is_one_claim() -> None:
    snapshot = Snapshot.build([node("n0")], [])
    snapshot.volumes.set_volume(persistent_volume(local_pv("only", "n0", "20Gi")))
    claim = volume_claim(pvc("data"), WFFC_STATIC)
    outcome = place_group(
        gang("job", [mounting("job-0", "data", "data")], claims=claims(claim)), snapshot
    )
    assert isinstance(outcome, Placement)
    assert [d.volume for d in outcome.bindings[0].volumes] == ["only"]
