"""`status.subGroups` and `subGroupsSatisfied`: a pure function of the members."""

from __future__ import annotations

from datetime import UTC, datetime

from podgroup_operator.api.models import PodGroup, PodGroupStatus
from podgroup_operator.constants import LABEL_SUB_GROUP, PodPhase
from podgroup_operator.domain.lifecycle import compute_status
from podgroup_operator.domain.subgroups import unknown_sub_group_message
from tests.builders import pod, podgroup

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def member(name: str, sub: str | None, phase: str, **labels: str) -> dict:
    extra = {LABEL_SUB_GROUP: sub} if sub else {}
    node = None if phase == PodPhase.PENDING else "n1"
    return pod(name, group="g", phase=phase, node=node, labels={**extra, **labels})


def test_each_sub_group_counts_its_members_and_a_parent_its_subtree() -> None:
    group = PodGroup.model_validate(
        podgroup(
            "g",
            min_member=3,
            subGroups=[
                {"name": "stage", "minSubGroup": 1},
                {"name": "a", "parent": "stage", "minMember": 2},
                {"name": "b", "parent": "stage", "minMember": 1},
            ],
        )
    )
    pods = [
        member("a-0", "a", PodPhase.RUNNING),
        member("a-1", "a", PodPhase.FAILED),
        member("b-0", "b", PodPhase.SUCCEEDED),
        member("x-0", None, PodPhase.RUNNING),
    ]
    status = compute_status(group, pods, PodGroupStatus(), T0).status
    assert status.sub_groups is not None
    rows = {s.name: (s.min_member, s.running, s.succeeded, s.failed) for s in status.sub_groups}
    assert rows == {"stage": (1, 1, 1, 1), "a": (2, 1, 0, 1), "b": (1, 0, 1, 0)}
    assert status.sub_groups_satisfied == "2/3"
    api = status.to_api()
    assert api["subGroupsSatisfied"] == "2/3"
    assert api["subGroups"][1] == {
        "name": "a",
        "minMember": 2,
        "running": 1,
        "succeeded": 0,
        "failed": 1,
    }


def test_a_template_has_one_entry_per_label_value() -> None:
    group = PodGroup.model_validate(
        podgroup(
            "g",
            min_member=1,
            subGroups=[{"name": "replica", "minMember": 2, "matchLabelKeys": ["app/replica"]}],
        )
    )
    pods = [
        member(f"r{r}-{i}", None, PodPhase.RUNNING, **{"app/replica": str(r)})
        for r in range(2)
        for i in range(r + 1)
    ]
    status = compute_status(group, pods, PodGroupStatus(), T0).status
    assert status.sub_groups is not None
    assert [(s.name, s.running) for s in status.sub_groups] == [("replica-0", 1), ("replica-1", 2)]
    assert status.sub_groups_satisfied == "1/2"


def test_a_group_without_sub_groups_has_no_entries() -> None:
    group = PodGroup.model_validate(podgroup("g", min_member=1))
    status = compute_status(group, [member("p", None, PodPhase.RUNNING)], PodGroupStatus(), T0)
    assert status.status.sub_groups is None and status.status.sub_groups_satisfied is None
    assert "subGroups" not in status.status.to_api()


def test_a_pod_naming_no_leaf_gets_a_warning_with_the_fix() -> None:
    group = PodGroup.model_validate(
        podgroup("g", min_member=1, subGroups=[{"name": "a", "minMember": 1}])
    )
    stray = member("s", "nope", PodPhase.PENDING)
    assert unknown_sub_group_message(stray, group.spec) == (
        f"label {LABEL_SUB_GROUP}: 'nope' is not a leaf sub-group of this pod's PodGroup "
        "(leaves: a); fix the label or add the sub-group to spec.subGroups. The pod counts "
        "toward the group, in no sub-group."
    )
    assert unknown_sub_group_message(member("a", "a", PodPhase.PENDING), group.spec) is None
    assert unknown_sub_group_message(member("x", None, PodPhase.PENDING), group.spec) is None
