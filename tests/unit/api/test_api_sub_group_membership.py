"""Which part of its group a pod counts in, and when a group's own minimum holds while some of
its sub-groups are repaired (`api/subgroups.py`): shared by the restart policy and preemption."""

from __future__ import annotations

from podgroup_operator.api.models import PodGroupSpec
from podgroup_operator.api.subgroups import group_minimum_holds, sub_group_of, top_part
from podgroup_operator.constants import LABEL_SUB_GROUP

TREE = (
    PodGroupSpec.model_validate(
        {
            "minMember": 4,
            "subGroups": [
                {"name": "stage", "minSubGroup": 1},
                {"name": "a", "parent": "stage", "minMember": 2},
                {"name": "deep", "parent": "stage"},
                {"name": "b", "parent": "deep", "minMember": 2},
                {"name": "solo", "minMember": 1},
                {"name": "rep", "minMember": 1, "matchLabelKeys": ["replica"]},
            ],
        }
    ).sub_groups
    or []
)


def test_a_pod_counts_in_its_leafs_top_ancestor() -> None:
    assert top_part({LABEL_SUB_GROUP: "a"}, TREE) == "stage"
    assert top_part({LABEL_SUB_GROUP: "b"}, TREE) == "stage"  # two levels up
    assert sub_group_of({LABEL_SUB_GROUP: "b"}, TREE).name == "b"


def test_a_top_leaf_and_each_template_instance_are_parts_of_their_own() -> None:
    assert top_part({LABEL_SUB_GROUP: "solo"}, TREE) == "solo"
    assert top_part({"replica": "3"}, TREE) == "rep-3"
    assert top_part({LABEL_SUB_GROUP: "rep", "replica": "0"}, TREE) == "rep-0"


def test_outside_every_sub_group_or_naming_none_is_in_no_part() -> None:
    assert top_part({}, TREE) is None
    assert top_part({LABEL_SUB_GROUP: "nope"}, TREE) is None
    assert top_part({LABEL_SUB_GROUP: "stage"}, TREE) is None  # a parent is no leaf


def test_the_group_minimum_counts_members_and_whole_parts() -> None:
    assert group_minimum_holds(4, 2, live=4, parts=3, whole=2)
    assert not group_minimum_holds(4, 2, live=3, parts=3, whole=2)  # minMember
    assert not group_minimum_holds(4, 2, live=6, parts=3, whole=1)  # minSubGroup
    # Unset, minSubGroup means every part: no part may be under repair.
    assert group_minimum_holds(4, None, live=6, parts=3, whole=3)
    assert not group_minimum_holds(4, None, live=6, parts=3, whole=2)
