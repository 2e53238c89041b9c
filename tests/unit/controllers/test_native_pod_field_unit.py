"""The native pod field `spec.schedulingGroup.podGroupName` makes a gang on the scheduler
harness (in-memory API server): the dev cluster's API server (v1.20) drops pod fields it does
not know, so the pod side of the native PodGroup is shown here and on pure code only."""

from __future__ import annotations

from podgroup_operator.adapters.slim import slim_pod
from podgroup_operator.domain.membership import group_key_of
from podgroup_operator.domain.scheduling_status import Verdict
from tests.unit.controllers.test_gang_scheduler_unit import NS, Harness


async def test_members_named_by_the_native_field_alone_are_bound_as_one_gang() -> None:
    h = Harness()
    h.add_node("n1", cpu=4)
    h.add_group("native", min_member=3)
    for i in range(3):
        stored = h.add_pod(f"native-{i}", cpu=1, schedulingGroup={"podGroupName": "native"})
        # As the pod informer stores it (slimmed) and indexes it (by group_key_of).
        key = group_key_of(slim_pod(stored))
        assert key == (NS, "native")
        h.members.put(key, stored)
        h.scheduler.on_pod("MODIFIED", stored)
    await h.scheduler.cycle()
    assert sorted(h.bound_pods("native-")) == ["native-0", "native-1", "native-2"]
    assert h.verdicts_for("native") == [Verdict(placed=True)]


async def test_two_members_of_a_native_gang_of_three_are_not_bound() -> None:
    h = Harness()
    h.add_node("n1", cpu=4)
    h.add_group("native", min_member=3)
    for i in range(2):
        stored = h.add_pod(f"native-{i}", cpu=1, schedulingGroup={"podGroupName": "native"})
        h.members.put(group_key_of(slim_pod(stored)), stored)
        h.scheduler.on_pod("MODIFIED", stored)
    await h.scheduler.cycle()
    assert h.bound_pods("native-") == []
    (verdict,) = h.verdicts_for("native")
    assert not verdict.placed
