"""`spec.subGroups`: each bad tree is refused with the field and the fix, a good one passes."""

from __future__ import annotations

from typing import Any

import pytest

from podgroup_operator.api.models import PodGroupSpec
from podgroup_operator.api.validation import constraint_findings, spec_errors

LEVELS = ("example.com/block", "example.com/rack", "kubernetes.io/hostname")


def _levels_of(name: str) -> tuple[str, ...] | None:
    return LEVELS if name == "fabric" else None


def _sub(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, **fields}


def _rack(level: str = "example.com/rack") -> dict[str, Any]:
    return {"topology": "fabric", "requiredTopologyLevel": level}


def test_a_two_level_tree_passes() -> None:
    spec = {
        "minMember": 8,
        "topologyConstraint": _rack("example.com/block"),
        "subGroups": [
            _sub("stages", minSubGroup=2),
            _sub("a", parent="stages", minMember=4, topologyConstraint=_rack()),
            _sub("b", parent="stages", minMember=4, topologyConstraint=_rack()),
        ],
    }
    assert spec_errors(spec) == []
    assert constraint_findings(spec, _levels_of) == ([], [])
    parsed = PodGroupSpec.model_validate(spec)
    assert parsed.sub_groups is not None and parsed.sub_groups[1].parent == "stages"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"minMember": 4, "subGroups": [_sub("a", minMember=4), _sub("a", minMember=1)]},
            "spec.subGroups[1].name: 'a' repeats subGroups[0]; give each sub-group its own name",
        ),
        (
            {"minMember": 4, "subGroups": [_sub("a", parent="nope", minMember=4)]},
            "spec.subGroups[0].parent: 'nope' is not a sub-group of this group (names: a); "
            "name one of them or leave parent out",
        ),
        (
            {"minMember": 4, "subGroups": [_sub("a", parent="b"), _sub("b", parent="a")]},
            "spec.subGroups[0].parent: a -> b -> a is a cycle",
        ),
        (
            {
                "minMember": 1,
                "subGroups": [
                    _sub("l1"),
                    _sub("l2", parent="l1"),
                    _sub("l3", parent="l2"),
                    _sub("l4", parent="l3"),
                    _sub("l5", parent="l4", minMember=1),
                ],
            },
            "spec.subGroups[4].parent: 'l5' is 5 levels deep (l1 -> l2 -> l3 -> l4 -> l5); "
            "at most 4: flatten the tree",
        ),
        (
            {"minMember": 6, "subGroups": [_sub("a", minMember=4), _sub("b", minMember=4)]},
            "spec.minMember: 6 is below the 8 members its 2 counted sub-groups need at least; "
            "raise it to 8",
        ),
        (
            {
                "minMember": 8,
                "subGroups": [
                    _sub("p", minMember=3),
                    _sub("a", parent="p", minMember=2),
                    _sub("b", parent="p", minMember=2),
                ],
            },
            "spec.subGroups[0].minMember: 3 is below the 4 members its 2 counted sub-groups",
        ),
        (
            {"minMember": 4, "minSubGroup": 3, "subGroups": [_sub("a", minMember=4)]},
            "spec.minSubGroup: 3 but only 1 direct children; lower it to at most 1",
        ),
        (
            {"minMember": 4, "subGroups": [_sub("a")]},
            "spec.subGroups[0].minMember: is required of a leaf sub-group",
        ),
        (
            {"minMember": 4, "minSubGroup": 1},
            "spec.minSubGroup: counts sub-groups, and there are none; remove it",
        ),
        (
            {"minMember": 4, "subGroups": [_sub("Bad_Name", minMember=4)]},
            "spec.subGroups[0].name: 'Bad_Name' does not match",
        ),
    ],
)
def test_each_bad_tree_is_refused_naming_the_field_and_fix(
    spec: dict[str, Any], expected: str
) -> None:
    errors = spec_errors(spec)
    assert any(error.startswith(expected) for error in errors), errors


def test_k_of_n_counts_the_smallest_children() -> None:
    """With minSubGroup 2 of sizes 4, 2, 8, the group needs at least 2 + 4 members."""
    subs = [_sub("a", minMember=4), _sub("b", minMember=2), _sub("c", minMember=8)]
    assert spec_errors({"minMember": 6, "minSubGroup": 2, "subGroups": subs}) == []
    assert spec_errors({"minMember": 5, "minSubGroup": 2, "subGroups": subs})


def test_a_sub_group_level_coarser_than_its_parents_is_refused() -> None:
    spec = {
        "minMember": 4,
        "topologyConstraint": _rack(),
        "subGroups": [_sub("a", minMember=4, topologyConstraint=_rack("example.com/block"))],
    }
    errors, _ = constraint_findings(spec, _levels_of)
    assert errors == [
        "spec.subGroups[0].topologyConstraint.requiredTopologyLevel: 'example.com/block' is "
        "coarser than the group's level 'example.com/rack'; a sub-group lies inside its "
        "parent's domain: use 'example.com/rack' or a finer level (example.com/rack, "
        "kubernetes.io/hostname)"
    ]


def test_a_sub_group_on_another_topology_is_refused() -> None:
    spec = {
        "minMember": 4,
        "topologyConstraint": _rack(),
        "subGroups": [
            _sub("p", minMember=4, topologyConstraint=_rack()),
            _sub(
                "a",
                parent="p",
                minMember=4,
                topologyConstraint={"topology": "other", "requiredTopologyLevel": "x.io/y"},
            ),
        ],
    }
    assert spec_errors(spec) == [
        "spec.subGroups[1].topologyConstraint.topology: 'other' differs from parent 'p''s "
        "'fabric'; a sub-group's domain lies inside its parent's, so both use the same "
        "Topology: use the same, or leave topology out to inherit it"
    ]


@pytest.mark.parametrize("named_by", ["group", "parent", "grandparent"])
def test_a_sub_group_naming_no_topology_inherits_its_nearest_ancestors(named_by: str) -> None:
    """Admitted with no error, and its levels checked in the inherited Topology: a level of
    it passes, a level not in it is refused naming the field, the Topology and the fix."""

    def spec(level: str) -> dict[str, Any]:
        block = {"requiredTopologyLevel": "example.com/block"}
        named = {**block, "topology": "fabric"}
        return {
            "minMember": 4,
            "topologyConstraint": named if named_by == "group" else block,
            "subGroups": [
                _sub("g", minMember=4, topologyConstraint=named),
                _sub(
                    "p",
                    parent="g",
                    minMember=4,
                    topologyConstraint=named if named_by == "parent" else block,
                ),
                _sub(
                    "a",
                    parent="p",
                    minMember=4,
                    topologyConstraint={"requiredTopologyLevel": level},
                ),
            ][(0 if named_by == "grandparent" else 1) :],
        }

    fine = spec("example.com/rack")
    if named_by != "grandparent":
        fine["subGroups"][0].pop("parent")
    assert spec_errors(fine) == []
    assert constraint_findings(fine, _levels_of) == ([], [])
    bad = spec("example.com/pod")
    if named_by != "grandparent":
        bad["subGroups"][0].pop("parent")
    errors, warnings = constraint_findings(bad, _levels_of)
    source = {
        "group": "the group",
        "parent": "parent sub-group 'p'",
        "grandparent": "parent sub-group 'g'",
    }[named_by]
    index = len(bad["subGroups"]) - 1
    assert errors == [
        f"spec.subGroups[{index}].topologyConstraint.requiredTopologyLevel: 'example.com/pod' "
        f"is not a level of Topology 'fabric', which this sub-group inherits from {source} "
        "(levels, coarse to fine: example.com/block, example.com/rack, "
        "kubernetes.io/hostname); a sub-group lies inside its parent's domain, so its levels "
        "are that Topology's: use one of them, or add 'example.com/pod' to Topology 'fabric'"
    ]
    assert warnings == []


def test_a_level_in_no_topology_at_all_is_any_node_label() -> None:
    """Neither the sub-group nor an ancestor names a Topology: any node label key passes."""
    spec = {
        "minMember": 4,
        "topologyConstraint": {"requiredTopologyLevel": "x.io/block"},
        "subGroups": [
            _sub("a", minMember=4, topologyConstraint={"requiredTopologyLevel": "x.io/rack"})
        ],
    }
    assert spec_errors(spec) == []
    assert constraint_findings(spec, _levels_of) == ([], [])


def test_a_sub_group_level_not_in_the_topology_is_refused() -> None:
    spec = {
        "minMember": 4,
        "subGroups": [_sub("a", minMember=4, topologyConstraint=_rack("example.com/pod"))],
    }
    errors, _ = constraint_findings(spec, _levels_of)
    assert errors[0].startswith(
        "spec.subGroups[0].topologyConstraint.requiredTopologyLevel: 'example.com/pod' is not "
        "a level of Topology 'fabric'"
    )


def test_a_template_child_may_form_more_sub_groups_than_listed() -> None:
    """minSubGroup 3 over one template: it forms one sub-group per label value."""
    template = _sub("replica", minMember=2, matchLabelKeys=["app/replica"])
    assert spec_errors({"minMember": 6, "minSubGroup": 3, "subGroups": [template]}) == []


@pytest.mark.parametrize("group_named", [True, False])
def test_a_named_level_not_in_the_topology_suggests_what_leaving_topology_out_would_do(
    group_named: bool,
) -> None:
    """Leaving out `topology` means any node label only when nothing above names one; else
    the sub-group would inherit the same Topology, so the fix is its levels."""
    spec: dict[str, Any] = {
        "minMember": 4,
        "subGroups": [_sub("a", minMember=4, topologyConstraint=_rack("example.com/pod"))],
    }
    if group_named:
        spec["topologyConstraint"] = _rack("example.com/block")
    errors, _ = constraint_findings(spec, _levels_of)
    fix = (
        "add 'example.com/pod' to Topology 'fabric'"
        if group_named
        else "leave out topology to use any node label"
    )
    assert errors == [
        "spec.subGroups[0].topologyConstraint.requiredTopologyLevel: 'example.com/pod' is not a "
        "level of Topology 'fabric' (levels, coarse to fine: example.com/block, "
        f"example.com/rack, kubernetes.io/hostname); use one of them, or {fix}"
    ]
