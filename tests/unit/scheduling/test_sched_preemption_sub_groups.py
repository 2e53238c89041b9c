"""Preemption of a gang whose restart policy repairs one sub-group alone (`scope: SubGroup`):
only whole sub-groups are taken, and only while the group's own minimum holds without them;
past that the whole gang goes, as for any other victim."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from podgroup_operator.api.models import PodGroupSpec
from podgroup_operator.api.subgroups import group_minimum_holds
from podgroup_operator.constants import LABEL_SUB_GROUP, PodPhase
from podgroup_operator.domain.membership import group_key_of
from podgroup_operator.scheduling.preemption import (
    PreemptionPlan,
    PreemptionRefusal,
    plan_preemption,
)
from podgroup_operator.scheduling.snapshot import Snapshot
from tests.builders import node, pod
from tests.unit.scheduling.helpers import gang, members

LOW = ("default", "low")


def spec(parts: int, size: int, **fields: Any) -> PodGroupSpec:
    """A SubGroup-scoped gang of `parts` sub-groups s0.. of minMember `size`."""
    return PodGroupSpec.model_validate(
        {
            "minMember": fields.pop("minMember", parts * size),
            "subGroups": [{"name": f"s{i}", "minMember": size} for i in range(parts)],
            "policy": {"action": "RestartGang", "scope": "SubGroup"},
            **fields,
        }
    )


def member(name: str, on: str, cpu: str, sub: str | None, priority: int = 0) -> dict[str, Any]:
    return pod(
        name,
        node=on,
        requests={"cpu": cpu},
        priority=priority,
        group="low",
        phase=PodPhase.RUNNING,
        labels={LABEL_SUB_GROUP: sub} if sub is not None else None,
    )


def one_per_node(parts: int, size: int, cpu: str = "4") -> tuple[list[Any], list[Any]]:
    """Sub-group s<i> on node n<i>, `size` members of `cpu` each; nodes of 8 cpu."""
    nodes = [node(f"n{i}", cpu=8) for i in range(parts)]
    pods = [
        member(f"low-s{i}-{j}", f"n{i}", cpu, f"s{i}") for i in range(parts) for j in range(size)
    ]
    return nodes, pods


def high(count: int, cpu: str = "8") -> Any:
    return gang("high", members("high", count, requests={"cpu": cpu}), priority=100)


def plan(result: PreemptionPlan | PreemptionRefusal) -> PreemptionPlan:
    assert isinstance(result, PreemptionPlan), result
    return result


def test_one_sub_group_is_taken_when_the_group_holds_without_it() -> None:
    nodes, pods = one_per_node(3, 2)
    snapshot = Snapshot.build(nodes, pods, gang_of=group_key_of)
    before = (snapshot.state(), snapshot.index_state())
    result = plan(
        plan_preemption(high(1), snapshot, (), {LOW: spec(3, 2, minMember=4, minSubGroup=2)})
    )
    [victim] = result.victims
    assert victim.gang == LOW and victim.sub_group is not None
    assert len(victim.pods) == 2
    assert {p.node for p in victim.pods} == {b.node for b in result.nominations}
    assert all(p.name.startswith(f"low-{victim.sub_group}-") for p in victim.pods)
    assert f"default/low sub-group {victim.sub_group} (2 pod(s)" in result.message
    assert (snapshot.state(), snapshot.index_state()) == before


def test_without_the_scope_the_same_victim_goes_whole() -> None:
    nodes, pods = one_per_node(3, 2)
    snapshot = Snapshot.build(nodes, pods, gang_of=group_key_of)
    [victim] = plan(plan_preemption(high(1), snapshot)).victims
    assert victim.sub_group is None and len(victim.pods) == 6


@pytest.mark.parametrize(
    ("least", "fields"),
    [
        # Sub-groups of minMember 1 holding 2 each: minMember 3 would hold without one (4
        # left), but minSubGroup unset means all three are needed.
        pytest.param(1, {"minMember": 3}, id="min-sub-group-unset"),
        # minSubGroup 1 would hold, but minMember 5 not over the 4 members left.
        pytest.param(2, {"minMember": 5, "minSubGroup": 1}, id="min-member"),
    ],
)
def test_the_whole_gang_goes_when_its_own_minimum_would_break(
    least: int, fields: dict[str, int]
) -> None:
    nodes, pods = one_per_node(3, 2)
    snapshot = Snapshot.build(nodes, pods, gang_of=group_key_of)
    repairs = {LOW: spec(3, least, **fields)}
    [victim] = plan(plan_preemption(high(1), snapshot, (), repairs)).victims
    assert victim.sub_group is None and len(victim.pods) == 6


def test_two_sub_groups_go_when_the_minimum_allows_two() -> None:
    nodes, pods = one_per_node(3, 2)
    snapshot = Snapshot.build(nodes, pods, gang_of=group_key_of)
    repairs = {LOW: spec(3, 2, minMember=2, minSubGroup=1)}
    result = plan(plan_preemption(high(2), snapshot, (), repairs))
    assert sorted(len(v.pods) for v in result.victims) == [2, 2]
    assert len({v.sub_group for v in result.victims}) == 2
    assert all(v.gang == LOW for v in result.victims)


def test_a_second_sub_group_past_the_minimum_takes_the_gang_whole() -> None:
    """Each node holds two sub-groups: freeing one takes two of four, which minSubGroup 3 does
    not allow, so the gang goes whole (the first sub-group taken merged into it)."""
    nodes = [node("n0", cpu=8), node("n1", cpu=8)]
    pods = [member(f"low-s{i}-0", f"n{i // 2}", "4", f"s{i}") for i in range(4)]
    snapshot = Snapshot.build(nodes, pods, gang_of=group_key_of)
    before = (snapshot.state(), snapshot.index_state())
    repairs = {LOW: spec(4, 1, minMember=3, minSubGroup=3)}
    result = plan(plan_preemption(high(1), snapshot, (), repairs))
    [victim] = result.victims
    assert victim.sub_group is None and len(victim.pods) == 4
    assert "default/low (4 pod(s)" in result.message
    assert (snapshot.state(), snapshot.index_state()) == before


def test_a_member_outside_every_sub_group_takes_the_gang_whole() -> None:
    nodes = [node("n0", cpu=8), node("n1", cpu=8)]
    pods = [
        member("low-loose", "n0", "8", None),
        member("low-s0-0", "n1", "4", "s0"),
        member("low-s1-0", "n1", "4", "s1"),
    ]
    snapshot = Snapshot.build(nodes, pods, gang_of=group_key_of)
    repairs = {LOW: spec(2, 1, minMember=1, minSubGroup=1)}
    result = plan(plan_preemption(high(1), snapshot, (), repairs))
    [victim] = result.victims
    # n0's member is in no sub-group, so it is never taken alone; freeing n1 takes both
    # sub-groups, leaving none of minSubGroup 1. Either way the gang goes whole.
    assert victim.sub_group is None and len(victim.pods) == 3


def test_a_higher_priority_member_elsewhere_keeps_every_sub_group() -> None:
    nodes, pods = one_per_node(3, 2)
    pods[-1] = member("low-s2-1", "n2", "4", "s2", priority=500)
    snapshot = Snapshot.build(nodes, pods, gang_of=group_key_of)
    repairs = {LOW: spec(3, 2, minMember=2, minSubGroup=1)}
    result = plan_preemption(high(1), snapshot, (), repairs)
    assert isinstance(result, PreemptionRefusal), result


def test_match_label_keys_instances_are_taken_one_by_one() -> None:
    repairs = {
        LOW: PodGroupSpec.model_validate(
            {
                "minMember": 2,
                "minSubGroup": 2,
                "subGroups": [{"name": "r", "minMember": 2, "matchLabelKeys": ["replica"]}],
                "policy": {"action": "RestartGang", "scope": "SubGroup"},
            }
        )
    }
    nodes = [node(f"n{i}", cpu=8) for i in range(3)]
    pods = [
        pod(
            f"low-{i}-{j}",
            node=f"n{i}",
            requests={"cpu": "4"},
            group="low",
            phase=PodPhase.RUNNING,
            labels={"replica": str(i)},
        )
        for i in range(3)
        for j in range(2)
    ]
    snapshot = Snapshot.build(nodes, pods, gang_of=group_key_of)
    [victim] = plan(plan_preemption(high(1), snapshot, (), repairs)).victims
    assert victim.sub_group in {"r-0", "r-1", "r-2"} and len(victim.pods) == 2


@settings(max_examples=150, deadline=None)
@given(
    parts=st.integers(min_value=2, max_value=4),
    size=st.integers(min_value=1, max_value=3),
    min_sub_group=st.integers(min_value=1, max_value=4),
    spread=st.booleans(),
    wanted=st.integers(min_value=1, max_value=4),
)
def test_a_victim_keeps_its_own_minimum_or_goes_whole(
    parts: int, size: int, min_sub_group: int, spread: bool, wanted: int
) -> None:
    """Whatever the layout: every victim of the scoped gang is one whole sub-group or the whole
    gang, the sub-groups taken leave the group's minimum holding, the preemptor's nominations
    fit in the room freed, and the snapshot is left as it was."""
    min_sub_group = min(min_sub_group, parts)
    nodes = [node(f"n{i}", cpu=8) for i in range(parts)]
    pods = [
        member(f"low-s{i}-{j}", f"n{(i + j) % parts if spread else i}", "2", f"s{i}")
        for i in range(parts)
        for j in range(size)
    ]
    the_spec = spec(parts, size, minMember=size * min_sub_group, minSubGroup=min_sub_group)
    snapshot = Snapshot.build(nodes, pods, gang_of=group_key_of)
    before = (snapshot.state(), snapshot.index_state())
    result = plan_preemption(high(wanted, cpu="6"), snapshot, (), {LOW: the_spec})
    assert (snapshot.state(), snapshot.index_state()) == before
    if isinstance(result, PreemptionRefusal):
        assert wanted > parts, result.message
        return
    subs = [v for v in result.victims if v.sub_group is not None]
    whole = [v for v in result.victims if v.sub_group is None]
    event(f"{len(subs)} sub-group(s)" if subs else f"{len(whole)} whole")
    assert not (subs and whole)
    for victim in subs:
        assert sorted(p.name for p in victim.pods) == [
            f"low-{victim.sub_group}-{j}" for j in range(size)
        ]
    if whole:
        assert [len(v.pods) for v in whole] == [parts * size]
    else:
        taken = len(subs)
        assert group_minimum_holds(
            the_spec.min_member,
            the_spec.min_sub_group,
            live=(parts - taken) * size,
            parts=parts,
            whole=parts - taken,
        )
    freed = Counter(p.node for v in result.victims for p in v.pods)
    held = Counter(p["spec"]["nodeName"] for p in pods)
    for name, count in Counter(b.node for b in result.nominations).items():
        assert 6 * count <= 8 - 2 * (held[name] - freed[name]), (name, result.message)
