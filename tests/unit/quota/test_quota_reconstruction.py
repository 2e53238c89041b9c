"""The ledger rebuilt from raw API objects agrees with the one kept up to date incrementally."""

from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.api.models import Reservation
from podgroup_operator.domain.quota import (
    GroupReservation,
    Ledger,
    PodUsage,
    admit_group,
    reservation_status,
)
from tests import builders
from tests.unit.quota.helpers import group, key, milli, pod, quota


def test_group_reservation_reads_total_phase_and_deletion() -> None:
    body = builders.podgroup("train-a", totalResources={"cpu": "4", "memory": "8Gi"})
    assert GroupReservation.from_podgroup(body) == GroupReservation(
        key=("default", "train-a"), total=milli({"cpu": 4, "memory": "8Gi"}), active=True
    )
    for phase in (c.Phase.PENDING, c.Phase.RUNNING, c.Phase.UNKNOWN):
        running = builders.podgroup("a", totalResources={"cpu": 1}, status={"phase": phase})
        assert GroupReservation.from_podgroup(running).reserves
    for phase in (c.Phase.FINISHED, c.Phase.FAILED):
        done = builders.podgroup("a", totalResources={"cpu": 1}, status={"phase": phase})
        assert not GroupReservation.from_podgroup(done).reserves
    deleting = builders.podgroup("a", totalResources={"cpu": 1})
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:05Z"
    assert not GroupReservation.from_podgroup(deleting).reserves
    plain = GroupReservation.from_podgroup(builders.podgroup("a"))
    assert plain.total is None
    assert not plain.reserves


def test_pod_usage_reads_identity_and_liveness() -> None:
    for phase, live in (
        (c.PodPhase.PENDING, True),
        (c.PodPhase.RUNNING, True),
        (c.PodPhase.UNKNOWN, True),
        (c.PodPhase.SUCCEEDED, False),
        (c.PodPhase.FAILED, False),
    ):
        body = builders.pod("p", group="a", phase=phase)
        usage = PodUsage.from_pod(body, ("default", "a"), milli({"cpu": 1}))
        assert usage.uid == body["metadata"]["uid"]
        assert usage.live is live
        assert usage.usage == ({"cpu": 1000, "pods": 1000} if live else {})
    unnamed = builders.pod("q")
    del unnamed["metadata"]["uid"]
    assert PodUsage.from_pod(unnamed, None, {}).uid == "default/q"


def test_build_from_api_objects_equals_incremental_updates() -> None:
    quotas = [quota("compute", {"requests.cpu": 16, "memory": "32Gi", "pods": 20})]
    podgroups = [
        builders.podgroup("a", totalResources={"cpu": 6, "memory": "8Gi"}),
        builders.podgroup("b", totalResources={"cpu": 4}, status={"phase": c.Phase.FINISHED}),
        builders.podgroup("c"),
    ]
    raw_pods: list[tuple[dict[str, Any], str | None, dict[str, str | int]]] = [
        (
            builders.pod("a-0", group="a", phase=c.PodPhase.RUNNING),
            "a",
            {"cpu": 2, "memory": "2Gi"},
        ),
        (
            builders.pod("a-1", group="a", phase=c.PodPhase.SUCCEEDED),
            "a",
            {"cpu": 2, "memory": "2Gi"},
        ),
        (builders.pod("b-0", group="b", phase=c.PodPhase.RUNNING), "b", {"cpu": 3}),
        (builders.pod("c-0", group="c"), "c", {"cpu": 1}),
        (builders.pod("loose"), None, {"cpu": "500m", "memory": "1Gi"}),
    ]
    groups = [GroupReservation.from_podgroup(body) for body in podgroups]
    pods = [
        PodUsage.from_pod(body, None if name is None else ("default", name), milli(requests))
        for body, name, requests in raw_pods
    ]
    rebuilt = Ledger.build(quotas, groups, pods)

    incremental = Ledger.build(quotas, [], [])
    for usage in pods:
        incremental.add_pod(usage)
    incremental.add_reservation(GroupReservation(key=("default", "b"), total=milli({"cpu": 4})))
    for reservation in groups:
        incremental.add_reservation(reservation)
    incremental.add_pod(pods[0])  # a repeated watch event changes nothing

    for resource in ("cpu", "memory", "pods"):
        assert rebuilt.free(resource) == incremental.free(resource)
    # cpu: 16 - (2 + 3 + 1 + 0.5) live - (6 - 2) unused of a = 5.5
    assert rebuilt.free("cpu") == 5500
    # memory: 32Gi - (2Gi + 1Gi) - (8Gi - 2Gi) = 23Gi
    assert rebuilt.free("memory") == milli({"memory": "23Gi"})["memory"]
    assert rebuilt.free("pods") == 16000
    assert admit_group(rebuilt, key("d"), milli({"cpu": "5500m"})).allowed
    assert not admit_group(rebuilt, key("d"), milli({"cpu": "5501m"})).allowed


def test_copy_is_independent() -> None:
    state = Ledger.build([quota("compute", {"cpu": 4})], [group("a", {"cpu": 1})], [])
    scratch = state.copy()
    scratch.add_reservation(group("b", {"cpu": 3}))
    scratch.add_pod(pod("x", {"cpu": 1}))
    assert state.free("cpu") == 3000
    assert scratch.free("cpu") == -1000


def test_reservation_status_reports_reserved_and_used_as_quantities() -> None:
    state = Ledger.build(
        [quota("compute", {"cpu": 10})],
        [group("a", {"cpu": 4, "memory": "8Gi", "nvidia.com/gpu": 2})],
        [
            pod("m1", {"cpu": "1500m", "memory": "1536Mi"}, group="a"),
            pod("m2", {"cpu": 1, "memory": "512Mi", "example.com/other": 1}, group="a"),
            pod("m3", {"cpu": 1}, group="a", live=False),
        ],
    )
    status = reservation_status(state, key("a"))
    assert status == Reservation(
        reserved={"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "2"},
        used={"cpu": "2500m", "memory": "2Gi", "nvidia.com/gpu": "0"},
    )
    assert status.to_api() == {
        "reserved": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "2"},
        "used": {"cpu": "2500m", "memory": "2Gi", "nvidia.com/gpu": "0"},
    }


def test_reservation_status_is_none_when_nothing_is_held() -> None:
    state = Ledger.build(
        [quota("compute", {"cpu": 10})], [group("a", {"cpu": 4}), group("plain")], []
    )
    assert reservation_status(state, key("plain")) is None
    assert reservation_status(state, key("unknown")) is None
    assert reservation_status(state, key("a")) is not None
    state.release(key("a"))
    assert reservation_status(state, key("a")) is None
