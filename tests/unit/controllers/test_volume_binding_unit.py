"""The scheduler's volume side over the in-memory API server: claims into requests, PVs into the
snapshot, and a gang's volumes bound (PV claimRef, or the claim annotated for its provisioner)
before any of its pods, with failures un-assumed and reported.

The informers' stores are plain dicts here, filled and announced by hand; kube-controller-
manager's PV controller is played by `pv_controller_binds`. Cycles run with `await cycle()`
(binds awaited), in a task when the test must act while the gang waits for its claims.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import (
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODS,
    KubeClient,
)
from podgroup_operator.constants import WatchEventType
from podgroup_operator.controllers.scheduler import GangScheduler
from podgroup_operator.controllers.volumes import VolumeBinder, with_volumes
from podgroup_operator.domain.scheduling_status import Verdict
from podgroup_operator.scheduling.gang import Binding
from podgroup_operator.scheduling.volumes import (
    SELECTED_NODE_ANNOTATION,
    VolumeAction,
    VolumeDecision,
)
from tests.builders import node, pod, podgroup
from tests.clock import Clock
from tests.fakes import FakeApiServer, FakeIndex

NS = "default"
HOST = "kubernetes.io/hostname"
Body = dict[str, Any]
Key = tuple[str, str]

STATIC = {
    "provisioner": "kubernetes.io/no-provisioner",
    "volumeBindingMode": "WaitForFirstConsumer",
}
DYNAMIC = {"provisioner": "csi.example.com", "volumeBindingMode": "WaitForFirstConsumer"}
IMMEDIATE = {"provisioner": "csi.example.com", "volumeBindingMode": "Immediate"}


def storage_class(name: str, facts: dict[str, str]) -> Body:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        **facts,
    }


def local_pv(name: str, host: str, klass: str = "local") -> Body:
    term = {"matchExpressions": [{"key": HOST, "operator": "In", "values": [host]}]}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "storageClassName": klass,
            "capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteOnce"],
            "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
        },
        "status": {"phase": "Available"},
    }


def claim(name: str, klass: str = "local") -> Body:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "storageClassName": klass,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "5Gi"}},
        },
        "status": {"phase": "Pending"},
    }


class World:
    """The scheduler with a VolumeBinder over dict stores, and the fake API server behind it."""

    def __init__(self, bind_timeout_seconds: float = 30) -> None:
        self.clock = Clock()
        self.fake = FakeApiServer(clock=self.clock)
        self.kube = KubeClient(self.fake)
        self.groups: FakeIndex[Key, Body] = FakeIndex()
        self.members: FakeIndex[Key, Body] = FakeIndex()
        self.verdicts: list[tuple[Key, Verdict]] = []
        self.volumes: dict[str, Body] = {}
        self.claims: dict[str, Body] = {}
        self.classes: dict[str, Body] = {}
        self.binder = VolumeBinder(
            self.kube,
            self.volumes,
            self.claims,
            self.classes,
            bind_timeout_seconds=bind_timeout_seconds,
        )
        self.scheduler = GangScheduler(
            self.kube,
            self.groups,
            self.members,
            publish=lambda key, verdict: self.verdicts.append((key, verdict)),
            clock=self.clock,
            volumes=self.binder,
        )
        for name in ("n0", "n1"):
            (stored,) = self.fake.seed(node(name))
            self.scheduler.on_node("ADDED", stored)

    def add_class(self, name: str, facts: dict[str, str]) -> None:
        (stored,) = self.fake.seed(storage_class(name, facts))
        self.classes[name] = stored
        self.binder.on_storage_class(WatchEventType.ADDED, stored, None)

    def add_pv(self, body: Body) -> Body:
        (stored,) = self.fake.seed(body)
        self.volumes[stored["metadata"]["name"]] = stored
        self.binder.on_volume(WatchEventType.ADDED, stored, None)
        return stored

    def add_claim(self, body: Body) -> Body:
        (stored,) = self.fake.seed(body)
        self.claims[f"{NS}/{stored['metadata']['name']}"] = stored
        self.binder.on_claim(WatchEventType.ADDED, stored, None)
        return stored

    def watch_claim(self, name: str) -> Body:
        """The claims informer delivers the claim as the API server holds it now."""
        stored = self.fake.get_object(PERSISTENT_VOLUME_CLAIMS, name, NS)
        assert stored is not None
        old = self.claims.get(f"{NS}/{name}")
        self.claims[f"{NS}/{name}"] = stored
        self.binder.on_claim(WatchEventType.MODIFIED, stored, old)
        return stored

    def add_gang(self, name: str, *claims: str) -> Body:
        (group,) = self.fake.seed(podgroup(name, NS, min_member=len(claims)))
        self.groups.put((NS, name), group)
        self.scheduler.on_group((NS, name))
        for i, claim_name in enumerate(claims):
            volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]
            body = pod(
                f"{name}-{i}",
                NS,
                group=name,
                requests={"cpu": "1"},
                scheduler=c.SCHEDULER_NAME,
                volumes=volumes,
            )
            (stored,) = self.fake.seed(body)
            self.members.put((NS, name), stored)
            self.scheduler.on_pod("ADDED", stored)
        return group

    def pv_controller_binds(self, claim_name: str, volume: str | None = None) -> None:
        """kube-controller-manager's part: the claim gets `spec.volumeName` (`volume`, else
        the PV pointing at it, else a provisioned one) and phase Bound."""
        pvs = [
            pv
            for pv in self.fake.objects(PERSISTENT_VOLUMES)
            if (pv["spec"].get("claimRef") or {}).get("name") == claim_name
        ]
        current = self.fake.get_object(PERSISTENT_VOLUME_CLAIMS, claim_name, NS)
        assert current is not None
        bound = copy.deepcopy(current)
        bound["spec"]["volumeName"] = volume or (
            pvs[0]["metadata"]["name"] if pvs else f"pvc-{claim_name}"
        )
        bound["status"] = {"phase": "Bound"}
        self.fake.seed(bound)
        self.watch_claim(claim_name)

    def selected_node(self, claim_name: str) -> str | None:
        """The node the scheduler asked the claim's provisioner for, if any."""
        pvc = self.fake.get_object(PERSISTENT_VOLUME_CLAIMS, claim_name, NS)
        assert pvc is not None
        return (pvc["metadata"].get("annotations") or {}).get(SELECTED_NODE_ANNOTATION)

    def node_of(self, name: str) -> str | None:
        stored = self.fake.get_object(PODS, name, NS)
        assert stored is not None
        return (stored.get("spec") or {}).get("nodeName")

    def binds(self) -> int:
        return self.fake.count("POST", "/binding")

    def verdicts_for(self, group: str) -> list[Verdict]:
        return [v for k, v in self.verdicts if k == (NS, group)]


async def until(check: Any, what: str) -> None:
    """Let the event loop run until `check()` holds (the cycle task makes progress meanwhile)."""
    for _ in range(10_000):
        if check():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never happened: {what}")


async def test_a_waiting_for_first_consumer_claim_gets_the_static_pv_before_the_pod_binds() -> None:
    world = World()
    world.add_class("local", STATIC)
    world.add_pv(local_pv("pv-n1", "n1"))
    pvc = world.add_claim(claim("data"))
    world.add_gang("job", "data")

    cycle = asyncio.create_task(world.scheduler.cycle())

    def pv_claimed() -> bool:
        pv = world.fake.get_object(PERSISTENT_VOLUMES, "pv-n1")
        return pv is not None and bool(pv["spec"].get("claimRef"))

    await until(pv_claimed, "the PV to be pointed at the claim")
    pv = world.fake.get_object(PERSISTENT_VOLUMES, "pv-n1")
    assert pv is not None
    ref = pv["spec"]["claimRef"]
    assert (ref["namespace"], ref["name"], ref["uid"]) == (NS, "data", pvc["metadata"]["uid"])
    assert ref["kind"] == "PersistentVolumeClaim"
    assert pv["metadata"]["annotations"][c.ANNOTATION_BOUND_BY_CONTROLLER] == "yes"
    # The PV write carried the PV's resourceVersion as its precondition.
    (patch,) = [r for r in world.fake.request_log if r.method == "PATCH"]
    assert (
        patch.body["metadata"]["resourceVersion"]
        == world.volumes["pv-n1"]["metadata"]["resourceVersion"]
    )
    assert not cycle.done() and world.binds() == 0, "the pod waits for its claim to be Bound"

    world.pv_controller_binds("data")
    await asyncio.wait_for(cycle, 2)
    assert world.node_of("job-0") == "n1"
    assert world.verdicts_for("job") == [Verdict(placed=True)]


async def test_a_pv_changed_since_the_decision_unassumes_the_gang_and_says_so() -> None:
    world = World()
    world.add_class("local", STATIC)
    stale = world.add_pv(local_pv("pv-n0", "n0"))
    changed = copy.deepcopy(stale)
    changed["metadata"]["labels"] = {"touched": "yes"}
    world.fake.seed(changed)  # a newer version the PV watch has not delivered yet
    world.add_claim(claim("a"))
    world.add_claim(claim("b"))
    world.add_pv(local_pv("pv-n1", "n1"))
    world.add_gang("job", "a", "b")

    await world.scheduler.cycle()

    assert world.binds() == 0, "no member is bound when one member's volume failed"
    failed = world.verdicts_for("job")[-1]
    assert failed.reason == c.Reason.VOLUME_BINDING_FAILED
    assert "PV 'pv-n0'" in failed.message and "409" in failed.message, failed.message
    assert world.scheduler.snapshot.free("n0")["cpu"] == 8000, "the assumption is undone"
    assert world.scheduler.snapshot.free("n1")["cpu"] == 8000
    assert not world.scheduler.snapshot.volumes.holders
    assert not world.scheduler.queue.in_flight
    assert len(world.scheduler.queue.pending[(NS, "job")]) == 2, "the members wait for another try"


async def test_dynamic_provisioning_annotates_the_claim_with_the_chosen_node() -> None:
    world = World()
    world.add_class("fast", DYNAMIC)
    world.add_claim(claim("data", klass="fast"))
    world.add_gang("job", "data")

    cycle = asyncio.create_task(world.scheduler.cycle())

    await until(lambda: world.selected_node("data") is not None, "the claim to name its node")
    assert world.binds() == 0
    world.pv_controller_binds("data")
    await asyncio.wait_for(cycle, 2)
    assert world.node_of("job-0") == world.selected_node("data")


async def test_an_unbound_immediate_claim_waits_and_names_the_claim_without_any_write() -> None:
    world = World()
    world.add_class("slow", IMMEDIATE)
    world.add_claim(claim("data", klass="slow"))
    world.add_gang("job", "data")
    world.fake.clear_requests()

    await world.scheduler.cycle()

    (refused,) = world.verdicts_for("job")
    assert refused.reason == c.Reason.NOT_ENOUGH_RESOURCES
    assert "waiting for PVC 'data' to be bound" in refused.message, refused.message
    assert world.fake.writes == []


async def test_a_claim_not_bound_in_time_is_reported_and_its_pod_stays_pending() -> None:
    world = World(bind_timeout_seconds=0.05)
    world.add_class("fast", DYNAMIC)
    world.add_claim(claim("data", klass="fast"))
    world.add_gang("job", "data")

    await world.scheduler.cycle()  # no provisioner answers

    failed = world.verdicts_for("job")[-1]
    assert failed.reason == c.Reason.VOLUME_BINDING_FAILED
    assert "PVC(s) data not Bound" in failed.message, failed.message
    assert world.binds() == 0 and world.node_of("job-0") is None


async def test_a_claim_becoming_bound_lets_a_waiting_gang_retry_at_once() -> None:
    world = World()
    world.add_class("slow", IMMEDIATE)
    world.add_claim(claim("data", klass="slow"))
    world.add_gang("job", "data")
    await world.scheduler.cycle()
    assert world.scheduler.queue.waiting[(NS, "job")].failures == 1

    world.add_pv(local_pv("pv-n0", "n0", klass="slow"))
    world.pv_controller_binds("data", "pv-n0")  # bound by the PV controller (Immediate)
    assert world.scheduler.queue.waiting[(NS, "job")].failures == 0, "backoff lifted"
    await world.scheduler.cycle()
    assert world.node_of("job-0") == "n0", "placed where the bound PV is reachable"


def test_bindings_of_gangs_with_volume_decisions_are_kept_together() -> None:
    decision = VolumeDecision(NS, "data", VolumeAction.BIND, "n0", "pv-n0")
    a0 = Binding(NS, "a-0", "a0", "n0", (decision,))
    a1 = Binding(NS, "a-1", "a1", "n0")
    b0 = Binding(NS, "b-0", "b0", "n1")
    gangs = {"a0": (NS, "a"), "a1": (NS, "a"), "b0": (NS, "b")}
    plain, prepared = with_volumes([a0, b0, a1], gangs.get)
    assert plain == [b0]
    assert prepared == [[a0, a1]]


def csi_node(name: str, count: int) -> Body:
    driver = {"name": DYNAMIC["provisioner"], "nodeID": name, "allocatable": {"count": count}}
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": name},
        "spec": {"drivers": [driver]},
    }


async def test_csinode_limits_and_running_pods_claims_keep_a_gang_off_a_full_node() -> None:
    """A pod another scheduler bound to n0 mounts a claim still being provisioned; each node
    takes one volume of the driver (its CSINode): the gang's member goes to n1, though packing
    would pick n0. A CSINode deleted lifts its node's limit."""
    world = World()
    world.add_class("fast", DYNAMIC)
    world.add_claim(claim("old", klass="fast"))
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": "old"}}]
    running = pod("old-0", NS, node="n0", phase="Running", requests={"cpu": "1"}, volumes=volumes)
    (stored,) = world.fake.seed(running)
    world.scheduler.on_pod("ADDED", stored)
    for name in ("n0", "n1"):
        world.binder.on_csi_node(WatchEventType.ADDED, csi_node(name, 1), None)
    snapshot = world.scheduler.snapshot
    assert list(snapshot.volumes.node_attachments("n0").values()) == [
        f"attachable-volumes-csi-{DYNAMIC['provisioner']}"
    ]
    world.add_claim(claim("data", klass="fast"))
    world.add_gang("job", "data")

    cycle = asyncio.create_task(world.scheduler.cycle())

    await until(lambda: world.selected_node("data") is not None, "the claim to name its node")
    assert world.selected_node("data") == "n1"
    world.pv_controller_binds("data")
    await asyncio.wait_for(cycle, 2)
    assert world.node_of("job-0") == "n1"

    world.binder.on_csi_node(WatchEventType.DELETED, csi_node("n0", 1), None)
    csi_key = f"attachable-volumes-csi-{DYNAMIC['provisioner']}"
    assert csi_key not in snapshot.volumes.attach_limits(snapshot.nodes["n0"])
    world.binder.on_claim(WatchEventType.DELETED, world.claims[f"{NS}/old"], None)
    assert snapshot.volumes.node_attachments("n0") == {}


def test_a_class_made_after_its_claims_gives_them_its_provisioner_and_its_deletion_takes_it() -> (
    None
):
    """What a running pod's claim still being provisioned counts against its node's limit
    comes from its class; a class created later (or deleted) is read back into the claims."""
    world = World()
    world.add_claim(claim("old", klass="fast"))
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": "old"}}]
    running = pod("old-0", NS, node="n0", phase="Running", requests={"cpu": "1"}, volumes=volumes)
    (stored,) = world.fake.seed(running)
    world.scheduler.on_pod("ADDED", stored)
    snapshot = world.scheduler.snapshot
    assert snapshot.volumes.node_attachments("n0") == {}
    world.add_class("fast", DYNAMIC)
    csi_key = f"attachable-volumes-csi-{DYNAMIC['provisioner']}"
    assert list(snapshot.volumes.node_attachments("n0").values()) == [csi_key]
    world.binder.on_storage_class(WatchEventType.DELETED, world.classes.pop("fast"), None)
    assert snapshot.volumes.node_attachments("n0") == {}
