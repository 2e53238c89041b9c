"""In-tree disks as kube-scheduler v1.20's default profile treats them: VolumeRestrictions keeps
conflicting mounts of one inline disk off a node, and EBSLimits, GCEPDLimits and AzureDiskLimits
hold every node to a count of each type's disks (its allocatable, else upstream's defaults)."""

from __future__ import annotations

from typing import Any

import pytest

from podgroup_operator import main
from podgroup_operator.domain.membership import group_key_of
from podgroup_operator.scheduling.gang import Placement, Refusal
from podgroup_operator.scheduling.placement import feasible_nodes, place_group
from podgroup_operator.scheduling.preemption import PreemptionPlan, plan_preemption
from podgroup_operator.scheduling.snapshot import Snapshot
from podgroup_operator.scheduling.volumes import (
    Disk,
    DiskPlugin,
    exceeds_attach_limits,
    node_attach_limits,
    persistent_volume,
    pod_disks,
    volume_claim,
)
from podgroup_operator.settings import max_pd_volumes_from_env
from tests.builders import node, pod
from tests.unit.scheduling.helpers import gang, pvc

EBS_KEY = "attachable-volumes-aws-ebs"
GCE_KEY = "attachable-volumes-gce-pd"
AZURE_KEY = "attachable-volumes-azure-disk"
CONFLICT = "node(s) had no available disk"
EXCEEDED = "node(s) exceed max volume count"


def ebs(volume_id: str, **extra: Any) -> dict[str, Any]:
    return {"name": f"ebs-{volume_id}", "awsElasticBlockStore": {"volumeID": volume_id, **extra}}


def gce(pd_name: str, *, read_only: bool = False) -> dict[str, Any]:
    return {
        "name": f"pd-{pd_name}",
        "gcePersistentDisk": {"pdName": pd_name, "readOnly": read_only},
    }


def with_volumes(
    name: str, *volumes: dict[str, Any], node_name: str | None = None, **kwargs: Any
) -> dict[str, Any]:
    """A gang member (or, on `node_name`, a running pod) mounting these volumes."""
    return pod(
        name,
        group=kwargs.pop("group", None if node_name else "job"),
        node=node_name,
        phase="Running" if node_name else "Pending",
        volumes=list(volumes),
        **kwargs,
    )


def placed(outcome: Placement | Refusal) -> list[str]:
    assert isinstance(outcome, Placement), outcome
    nodes = [b.node for b in outcome.bindings]
    outcome.undo()
    return nodes


def test_which_mounts_of_one_disk_conflict() -> None:
    def disk(plugin: DiskPlugin, name: str, ro: bool = False, **kw: Any) -> Disk:
        return Disk(plugin, name, read_only=ro, **kw)

    ebs_a, gce_a, iscsi_a = (
        disk(DiskPlugin.AWS_EBS, "a"),
        disk(DiskPlugin.GCE_PD, "a"),
        disk(DiskPlugin.ISCSI, "a"),
    )
    # EBS: the same volume always, even read-only on both sides.
    assert ebs_a.conflicts(disk(DiskPlugin.AWS_EBS, "a", True))
    assert disk(DiskPlugin.AWS_EBS, "a", True).conflicts(disk(DiskPlugin.AWS_EBS, "a", True))
    assert not ebs_a.conflicts(disk(DiskPlugin.AWS_EBS, "b"))
    # GCE PD and iSCSI: unless both are read-only.
    for plugin, first in ((DiskPlugin.GCE_PD, gce_a), (DiskPlugin.ISCSI, iscsi_a)):
        assert first.conflicts(disk(plugin, "a", True))
        assert not disk(plugin, "a", True).conflicts(disk(plugin, "a", True))
    # RBD: one image only on a shared monitor and in the same pool.
    rbd: dict[str, Any] = {"pool": "p", "monitors": frozenset({"m1", "m2"})}
    image = disk(DiskPlugin.RBD, "img", **rbd)
    assert image.conflicts(disk(DiskPlugin.RBD, "img", pool="p", monitors=frozenset({"m2"})))
    assert not image.conflicts(disk(DiskPlugin.RBD, "img", pool="p", monitors=frozenset({"m3"})))
    assert not image.conflicts(disk(DiskPlugin.RBD, "img", pool="q", monitors=frozenset({"m1"})))
    assert not disk(DiskPlugin.RBD, "img", True, **rbd).conflicts(
        disk(DiskPlugin.RBD, "img", True, **rbd)
    )
    # Azure disks never; different types never.
    assert not disk(DiskPlugin.AZURE_DISK, "a").conflicts(disk(DiskPlugin.AZURE_DISK, "a"))
    assert not ebs_a.conflicts(gce_a)


def test_a_pods_inline_disks_are_read_once_each() -> None:
    raw = pod(
        "p",
        volumes=[
            ebs("vol-1"),
            ebs("vol-1") | {"name": "again"},
            gce("pd-1", read_only=True),
            {"name": "r", "rbd": {"monitors": ["m1"], "pool": "rbd", "image": "img"}},
            {"name": "i", "iscsi": {"targetPortal": "10.0.0.1", "iqn": "iqn.x", "lun": 0}},
            {"name": "s", "secret": {"secretName": "s"}},
        ],
    )
    assert pod_disks(raw) == (
        Disk(DiskPlugin.AWS_EBS, "vol-1"),
        Disk(DiskPlugin.GCE_PD, "pd-1", read_only=True),
        Disk(DiskPlugin.RBD, "img", pool="rbd", monitors=frozenset({"m1"})),
        Disk(DiskPlugin.ISCSI, "iqn.x"),
    )
    assert [d.attachment for d in pod_disks(raw)] == [
        ("kubernetes.io/aws-ebs/vol-1", EBS_KEY),
        ("kubernetes.io/gce-pd/pd-1", GCE_KEY),
        None,
        None,
    ]


@pytest.mark.parametrize(
    ("labels", "ebs_limit"),
    [
        ({}, 39),
        ({"node.kubernetes.io/instance-type": "m5.large"}, 25),
        ({"beta.kubernetes.io/instance-type": "t3.medium"}, 25),
        ({"node.kubernetes.io/instance-type": "z1d.large"}, 25),
        ({"node.kubernetes.io/instance-type": "c4.large"}, 39),
    ],
)
def test_every_node_has_upstreams_in_tree_limits(labels: dict[str, str], ebs_limit: int) -> None:
    assert node_attach_limits({}, None, labels) == {
        EBS_KEY: ebs_limit,
        GCE_KEY: 16,
        AZURE_KEY: 16,
    }


def test_the_nodes_allocatable_then_kube_max_pd_vols_set_the_in_tree_limits() -> None:
    allocatable = {EBS_KEY: 3000, "cpu": 8000}
    assert node_attach_limits(allocatable, None, {}) == {EBS_KEY: 3, GCE_KEY: 16, AZURE_KEY: 16}
    assert node_attach_limits(allocatable, None, {}, max_pd_volumes=5) == {
        EBS_KEY: 3,
        GCE_KEY: 5,
        AZURE_KEY: 5,
    }
    assert max_pd_volumes_from_env(None) is None
    assert max_pd_volumes_from_env(" ") is None
    assert max_pd_volumes_from_env("7") == 7
    for bad in ("0", "-3", "many", "2.5"):
        with pytest.raises(ValueError, match=r"KUBE_MAX_PD_VOLS=.*positive whole number.*unset"):
            max_pd_volumes_from_env(bad)


def test_members_mounting_one_ebs_volume_go_to_different_nodes() -> None:
    snapshot = Snapshot.build([node("n0"), node("n1")], [])
    pods = [with_volumes(f"job-{i}", ebs("vol-shared", readOnly=True)) for i in range(2)]
    assert sorted(placed(place_group(gang("job", pods), snapshot))) == ["n0", "n1"]
    # A third cannot go anywhere: the gang is refused, saying why.
    pods.append(with_volumes("job-2", ebs("vol-shared")))
    outcome = place_group(gang("job", pods), snapshot)
    assert isinstance(outcome, Refusal)
    assert f"2 {CONFLICT}" in outcome.message


def test_read_only_gce_pds_share_a_node_and_a_writer_does_not() -> None:
    running = [with_volumes("old", gce("pd-1", read_only=True), node_name="n0")]
    snapshot = Snapshot.build([node("n0"), node("n1", cpu=4)], running)
    reader = with_volumes("job-0", gce("pd-1", read_only=True))
    assert placed(place_group(gang("job", [reader]), snapshot)) == ["n0"]  # packed with it
    writer = with_volumes("job-0", gce("pd-1"))
    assert placed(place_group(gang("job", [writer]), snapshot)) == ["n1"]
    assert feasible_nodes(writer, snapshot) == {"n1"}


def test_inline_disks_and_ebs_pvs_count_against_the_limit_once_each() -> None:
    running = [
        with_volumes(
            "old",
            ebs("vol-a"),
            {"name": "data", "persistentVolumeClaim": {"claimName": "old-data"}},
            node_name="n0",
        )
    ]
    snapshot = Snapshot.build(
        [node("n0", extended={EBS_KEY: 2}), node("n1", cpu=4, extended={EBS_KEY: 2})], running
    )
    pv = {
        "kind": "PersistentVolume",
        "metadata": {"name": "pv-b"},
        "spec": {
            "storageClassName": "gp2",
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "awsElasticBlockStore": {"volumeID": "vol-b"},
            "claimRef": {"namespace": "default", "name": "old-data"},
        },
    }
    snapshot.volumes.set_volume(persistent_volume(pv))
    assert snapshot.volumes.node_attachments("n0") == {
        "kubernetes.io/aws-ebs/vol-a": EBS_KEY,
        "kubernetes.io/aws-ebs/vol-b": EBS_KEY,
    }
    # A third EBS volume does not fit n0 (fuller, so packing's first choice).
    fresh = with_volumes("job-0", ebs("vol-c"))
    assert placed(place_group(gang("job", [fresh]), snapshot)) == ["n1"]
    # The PV named inline is the same volume: nothing new for n0 (and claims never conflict).
    same = with_volumes("job-0", ebs("vol-b"))
    assert placed(place_group(gang("job", [same]), snapshot)) == ["n0"]
    # A GCE PD counts against its own limit, not EBS's.
    other = with_volumes("job-0", gce("pd-1"))
    assert placed(place_group(gang("job", [other]), snapshot)) == ["n0"]


def test_a_gang_past_the_default_limit_spreads_and_nitro_nodes_take_fewer() -> None:
    big: dict[str, Any] = {"cpu": 64, "memory": "256Gi", "pods": 200}
    snapshot = Snapshot.build([node("n0", **big), node("n1", **big)], [])
    pods = [with_volumes(f"job-{i}", ebs(f"vol-{i}")) for i in range(45)]
    nodes = placed(place_group(gang("job", pods), snapshot))
    assert sorted({n: nodes.count(n) for n in nodes}.values()) == [6, 39]
    nitro = {"node.kubernetes.io/instance-type": "m5.24xlarge"}
    snapshot = Snapshot.build(
        [node("n0", labels=nitro, **big), node("n1", labels=nitro, **big)], []
    )
    nodes = placed(place_group(gang("job", pods), snapshot))
    assert sorted({n: nodes.count(n) for n in nodes}.values()) == [20, 25]
    more = pods + [with_volumes(f"job-{i}", ebs(f"vol-{i}")) for i in range(45, 51)]
    outcome = place_group(gang("job", more), snapshot)
    assert isinstance(outcome, Refusal)
    assert "only 50 fit" in outcome.message and f"2 {EXCEEDED}" in outcome.message
    limited = Snapshot.build([node("n0", **big)], [], max_pd_volumes=3)
    nodes = placed(place_group(gang("job", pods[:3]), limited))
    assert nodes == ["n0"] * 3
    assert isinstance(place_group(gang("job", pods[:4]), limited), Refusal)


def test_a_claim_of_an_in_tree_class_counts_before_it_is_bound() -> None:
    """As upstream: a claim not bound yet whose class provisions EBS takes one EBS slot."""
    snapshot = Snapshot.build(
        [node("n0", extended={EBS_KEY: 1}), node("n1", cpu=4, extended={EBS_KEY: 1})], []
    )
    klass = {"provisioner": "kubernetes.io/aws-ebs", "volumeBindingMode": "WaitForFirstConsumer"}
    models = {
        (m.namespace, m.name): m
        for m in (volume_claim(pvc(f"d{i}", "1Gi", "gp2"), klass) for i in range(2))
    }
    pods = [
        with_volumes(f"job-{i}", {"name": "d", "persistentVolumeClaim": {"claimName": f"d{i}"}})
        for i in range(2)
    ]
    assert sorted(placed(place_group(gang("job", pods, claims=models), snapshot))) == ["n0", "n1"]


def test_preemption_evicts_the_pod_holding_an_ebs_volume_a_gang_needs() -> None:
    """kube-scheduler's preemption runs VolumeRestrictions with the victims removed; so do we."""
    low = with_volumes("low", ebs("vol-x"), node_name="n0", group="low", priority=0)
    snapshot = Snapshot.build([node("n0")], [low], gang_of=group_key_of)
    high = gang("high", [with_volumes("high-0", ebs("vol-x"))], priority=1000)
    refusal = place_group(high, snapshot)
    assert isinstance(refusal, Refusal) and CONFLICT in refusal.message
    plan = plan_preemption(high, snapshot)
    assert isinstance(plan, PreemptionPlan), plan
    assert [v.gang for v in plan.victims] == [("default", "low")]


def test_the_operator_refuses_to_start_with_a_bad_kube_max_pd_vols(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before anything else starts: one line naming the variable and the fix, exit code 2."""
    monkeypatch.setenv("KUBE_MAX_PD_VOLS", "lots")
    assert main.run(namespaces=[]) == 2
    err = capsys.readouterr().err
    assert "KUBE_MAX_PD_VOLS='lots': must be a positive whole number" in err
    assert "unset it for kube-scheduler's defaults" in err


@pytest.mark.parametrize("in_tree", [True, False])
def test_a_node_past_its_in_tree_limit_takes_no_pod_of_that_type_even_adding_nothing(
    in_tree: bool,
) -> None:
    """Two read-only GCE PDs on a node whose limit is one (bound by name, or the limit was
    lowered). Upstream's GCEPDLimits refuses a pod mounting one of them again, though it adds
    no attachment; its CSI filter lets such a pod through (the same rule counted there)."""
    key = GCE_KEY if in_tree else "attachable-volumes-csi-x"
    snapshot = Snapshot.build([node("n0", extended={key: 1})], [])
    new = {"kubernetes.io/gce-pd/pd-a": key}
    attached = {"kubernetes.io/gce-pd/pd-a": key, "kubernetes.io/gce-pd/pd-b": key}
    limits = snapshot.volumes.attach_limits(snapshot.nodes["n0"])
    assert exceeds_attach_limits(new, attached, limits) is in_tree
    if in_tree:
        running = [
            with_volumes(f"old-{d}", gce(f"pd-{d}", read_only=True), node_name="n0") for d in "ab"
        ]
        snapshot = Snapshot.build([node("n0", extended={key: 1})], running)
        again = with_volumes("job-0", gce("pd-a", read_only=True))
        assert feasible_nodes(again, snapshot) == frozenset()
