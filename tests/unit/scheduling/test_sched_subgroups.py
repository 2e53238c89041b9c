"""Sub-groups: each part whole in one domain inside its parent's, found by a bounded search."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from podgroup_operator.api.models import PodGroupSpec, SubGroupPlacement, TopologyPlacement
from podgroup_operator.constants import LABEL_SUB_GROUP
from podgroup_operator.scheduling import subgroup_search
from podgroup_operator.scheduling.gang import GangRequest, Placement, Refusal
from podgroup_operator.scheduling.placement import place_group
from podgroup_operator.scheduling.preemption import PreemptionPlan, plan_preemption
from podgroup_operator.scheduling.registry import MEMBER_STEPS
from podgroup_operator.scheduling.snapshot import Snapshot
from podgroup_operator.scheduling.subgroup_search import SubGroupStep
from podgroup_operator.scheduling.subgroups import sub_group_tree
from podgroup_operator.scheduling.topology import topology_of
from tests.builders import node, pod
from tests.unit.scheduling.helpers import overcommitted, uid_of, usage_by_node

BLOCK = "example.com/block"
RACK = "example.com/rack"
HOST = "kubernetes.io/hostname"
LEVELS = (BLOCK, RACK, HOST)


def levels_of(name: str) -> tuple[str, ...] | None:
    return LEVELS if name == "fabric" else None


def within(level: str) -> dict[str, Any]:
    return {"topology": "fabric", "requiredTopologyLevel": level}


def fabric(blocks: int, racks: int, hosts: int, cpu: int = 8) -> list[dict[str, Any]]:
    return [
        node(f"b{b}-r{r}-h{h}", cpu=cpu, labels={BLOCK: f"b{b}", RACK: f"r{r}"})
        for b in range(blocks)
        for r in range(racks)
        for h in range(hosts)
    ]


def part(name: str, count: int, cpu: str | int, **labels: str) -> list[dict[str, Any]]:
    """`count` pending members of group `g` labelled into sub-group `name` (when given)."""
    extra = {LABEL_SUB_GROUP: name} if name else {}
    return [
        pod(f"{name or 'loose'}-{i}", group="g", requests={"cpu": cpu}, labels={**extra, **labels})
        for i in range(count)
    ]


def request(spec: dict[str, Any], pods: list[dict[str, Any]], **kwargs: Any) -> GangRequest:
    parsed = PodGroupSpec.model_validate(spec)
    return GangRequest(
        namespace="default",
        name="g",
        uid="uid-g",
        min_member=parsed.min_member,
        pending=tuple(pods),
        topology=topology_of(parsed.topology_constraint, levels_of),
        sub_groups=sub_group_tree(parsed, pods, kwargs.pop("bound", []), levels_of),
        **kwargs,
    )


def racks_of(placement: Placement, pods: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Sub-group -> the (block-rack)s its members were bound in."""
    by_uid = {uid_of(p): p for p in pods}
    out: dict[str, set[str]] = {}
    for binding in placement.bindings:
        labels = by_uid[binding.pod_uid]["metadata"]["labels"]
        out.setdefault(labels.get(LABEL_SUB_GROUP, "-"), set()).add(
            "-".join(binding.node.split("-")[:2])
        )
    return out


def test_the_sub_group_step_is_a_member_step_of_the_framework() -> None:
    assert any(isinstance(step, SubGroupStep) for step in MEMBER_STEPS)


def test_two_levels_each_sub_group_in_one_rack_the_group_in_one_block() -> None:
    snapshot = Snapshot.build(fabric(2, 2, 2), [])
    pods = part("a", 4, 4) + part("b", 4, 4)
    spec = {
        "minMember": 8,
        "topologyConstraint": within(BLOCK),
        "subGroups": [
            {"name": "a", "minMember": 4, "topologyConstraint": within(RACK)},
            {"name": "b", "minMember": 4, "topologyConstraint": within(RACK)},
        ],
    }
    outcome = place_group(request(spec, pods), snapshot)
    assert isinstance(outcome, Placement), outcome
    racks = racks_of(outcome, pods)
    assert all(len(where) == 1 for where in racks.values())
    assert racks["a"] != racks["b"]
    assert len({r.split("-")[0] for where in racks.values() for r in where}) == 1
    assert outcome.domain is not None and outcome.domain.level == BLOCK
    assert {name: d.level for name, d in outcome.sub_domains} == {"a": RACK, "b": RACK}
    assert len(outcome.bindings) == 8


def first_fit_trap() -> list[dict[str, Any]]:
    """One block: rack r0 is one node of 8 cpu, rack r1 two nodes of 4 cpu; both racks have 8
    cpu free, so best fit ties and takes r0 first for whichever sub-group comes first."""
    labels = {BLOCK: "b0"}
    return [
        node("b0-r0-h0", cpu=8, labels={**labels, RACK: "r0"}),
        node("b0-r1-h0", cpu=4, labels={**labels, RACK: "r1"}),
        node("b0-r1-h1", cpu=4, labels={**labels, RACK: "r1"}),
    ]


TRAP_SUBS = [
    {"name": "pair", "minMember": 2, "topologyConstraint": within(RACK)},
    {"name": "big", "minMember": 1, "topologyConstraint": within(RACK)},
]


@pytest.mark.parametrize("order", list(itertools.permutations(range(2))))
@pytest.mark.parametrize("pods_first", ["pair", "big"])
def test_an_assignment_first_fit_misses_is_found_in_every_order(
    order: tuple[int, ...], pods_first: str
) -> None:
    """`pair` (2 x 4 cpu) first takes r0, where `big` (1 x 8 cpu) alone fits: the search
    undoes it and puts `pair` on r1's two nodes."""
    snapshot = Snapshot.build(first_fit_trap(), [])
    parts = {"pair": part("pair", 2, 4), "big": part("big", 1, 8)}
    pods = parts[pods_first] + parts["big" if pods_first == "pair" else "pair"]
    spec = {"minMember": 3, "subGroups": [TRAP_SUBS[i] for i in order]}
    outcome = place_group(request(spec, pods), snapshot)
    assert isinstance(outcome, Placement), outcome
    assert racks_of(outcome, pods) == {"pair": {"b0-r1"}, "big": {"b0-r0"}}


def test_first_fit_alone_fails_the_trap(monkeypatch: pytest.MonkeyPatch) -> None:
    """The trap is one: keeping one domain per sub-group (first fit) refuses it."""
    monkeypatch.setattr(subgroup_search, "DOMAINS_PER_SUB_GROUP", 1)
    snapshot = Snapshot.build(first_fit_trap(), [])
    pods = part("pair", 2, 4) + part("big", 1, 8)
    outcome = place_group(request({"minMember": 3, "subGroups": TRAP_SUBS}, pods), snapshot)
    assert isinstance(outcome, Refusal)
    assert "no assignment of its sub-groups to domains fits" in outcome.message
    assert "sub-group big" in outcome.message


def test_min_sub_group_k_of_n_places_the_k_that_fit() -> None:
    """Three sub-groups of a full rack each, two racks: two of three suffice."""
    snapshot = Snapshot.build(fabric(1, 2, 2), [])
    pods = part("a", 2, 8) + part("b", 2, 8) + part("c", 2, 8)
    subs = [{"name": n, "minMember": 2, "topologyConstraint": within(RACK)} for n in "abc"]
    refused = place_group(request({"minMember": 6, "subGroups": subs}, pods), snapshot)
    assert isinstance(refused, Refusal)
    assert snapshot.total_free()["cpu"] == 4 * 8000
    outcome = place_group(
        request({"minMember": 4, "minSubGroup": 2, "subGroups": subs}, pods), snapshot
    )
    assert isinstance(outcome, Placement), outcome
    racks = racks_of(outcome, pods)
    assert len(racks) == 2 and all(len(r) == 1 for r in racks.values())
    assert len(outcome.unplaced) == 2


def test_a_parents_min_sub_group_counts_its_children() -> None:
    """stage (1 of 2 children) in one block, each child in one rack; only one child fits."""
    snapshot = Snapshot.build(fabric(1, 1, 2), [])
    pods = part("x", 2, 8) + part("y", 2, 8)
    spec = {
        "minMember": 2,
        "subGroups": [
            {"name": "stage", "minSubGroup": 1, "topologyConstraint": within(BLOCK)},
            {"name": "x", "parent": "stage", "minMember": 2, "topologyConstraint": within(RACK)},
            {"name": "y", "parent": "stage", "minMember": 2, "topologyConstraint": within(RACK)},
        ],
    }
    outcome = place_group(request(spec, pods), snapshot)
    assert isinstance(outcome, Placement), outcome
    assert len(racks_of(outcome, pods)) == 1
    assert {name for name, _ in outcome.sub_domains} in ({"stage", "x"}, {"stage", "y"})


def test_match_label_keys_forms_one_sub_group_per_value() -> None:
    snapshot = Snapshot.build(fabric(1, 3, 1), [])
    pods = [
        pod(f"w{r}-{i}", group="g", requests={"cpu": 4}, labels={"app/replica": str(r)})
        for r in range(3)
        for i in range(2)
    ]
    spec = {
        "minMember": 6,
        "subGroups": [
            {
                "name": "replica",
                "minMember": 2,
                "matchLabelKeys": ["app/replica"],
                "topologyConstraint": within(RACK),
            }
        ],
    }
    gang = request(spec, pods)
    assert gang.sub_groups is not None
    assert [n.name for n in gang.sub_groups.roots] == ["replica-0", "replica-1", "replica-2"]
    outcome = place_group(gang, snapshot)
    assert isinstance(outcome, Placement), outcome
    by_uid = {uid_of(p): p for p in pods}
    racks: dict[str, set[str]] = {}
    for binding in outcome.bindings:
        replica = by_uid[binding.pod_uid]["metadata"]["labels"]["app/replica"]
        racks.setdefault(replica, set()).add(binding.node)
    assert sorted(len(nodes) for nodes in racks.values()) == [1, 1, 1]
    assert len({n for nodes in racks.values() for n in nodes}) == 3


def test_the_group_minimum_counts_members_outside_the_sub_groups() -> None:
    snapshot = Snapshot.build(fabric(1, 2, 1), [])
    pods = part("a", 1, 8) + part("", 1, 8)
    subs = [{"name": "a", "minMember": 1, "topologyConstraint": within(RACK)}]
    outcome = place_group(request({"minMember": 2, "subGroups": subs}, pods), snapshot)
    assert isinstance(outcome, Placement) and len(outcome.bindings) == 2
    outcome.undo()
    crowded = Snapshot.build(fabric(1, 1, 1), [])
    refused = place_group(request({"minMember": 2, "subGroups": subs}, pods), crowded)
    assert isinstance(refused, Refusal)
    assert "the group's minMember 2 is not reached" in refused.message
    assert crowded.total_free()["cpu"] == 8000


def test_a_refusal_names_the_sub_group_and_leaves_the_snapshot_alone() -> None:
    snapshot = Snapshot.build(fabric(1, 2, 1), [])
    before = snapshot.total_free()
    pods = part("a", 2, 8)
    subs = [{"name": "a", "minMember": 2, "topologyConstraint": within(RACK)}]
    outcome = place_group(request({"minMember": 2, "subGroups": subs}, pods), snapshot)
    assert isinstance(outcome, Refusal)
    assert outcome.message.startswith("default/g: no assignment of its sub-groups to domains fits")
    assert "sub-group a:" in outcome.message
    assert snapshot.total_free() == before


def test_a_replacement_goes_back_to_its_sub_groups_rack() -> None:
    nodes = fabric(1, 2, 2)
    running = [
        pod(
            "a-0",
            group="g",
            node="b0-r1-h0",
            phase="Running",
            requests={"cpu": 4},
            labels={LABEL_SUB_GROUP: "a"},
        ),
    ]
    snapshot = Snapshot.build(nodes, running)
    pods = part("a", 1, 4)
    subs = [{"name": "a", "minMember": 2, "topologyConstraint": within(RACK)}]
    gang = request(
        {"minMember": 2, "subGroups": subs},
        pods,
        bound=running,
        already_bound=1,
        bound_uids=frozenset({uid_of(running[0])}),
    )
    outcome = place_group(gang, snapshot)
    assert isinstance(outcome, Placement), outcome
    assert [b.node.rsplit("-", 1)[0] for b in outcome.bindings] == ["b0-r1"]


def test_a_sub_group_whose_members_all_hold_nodes_stays_in_its_rack_beside_a_repair() -> None:
    """s0 runs whole in rack r0 (nothing of it pending) while s1 is replaced: s0 is counted
    where it is, and s1 goes into a rack of its own."""
    nodes = fabric(1, 2, 2, cpu=4)
    running = [
        pod(
            f"s0-{i}",
            group="g",
            node=f"b0-r0-h{i}",
            phase="Running",
            requests={"cpu": 2},
            labels={LABEL_SUB_GROUP: "s0"},
        )
        for i in range(2)
    ]
    snapshot = Snapshot.build(nodes, running)
    pods = part("s1", 2, 4)
    subs = [
        {"name": name, "minMember": 2, "topologyConstraint": within(RACK)} for name in ("s0", "s1")
    ]
    gang = request(
        {"minMember": 4, "subGroups": subs},
        pods,
        bound=running,
        already_bound=2,
        bound_uids=frozenset(uid_of(p) for p in running),
    )
    outcome = place_group(gang, snapshot)
    assert isinstance(outcome, Placement), outcome
    assert racks_of(outcome, pods) == {"s1": {"b0-r1"}}
    assert dict((name, d.value) for name, d in outcome.sub_domains) == {"s0": "r0", "s1": "r1"}


# --- properties ----------------------------------------------------------------------------------
@st.composite
def clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    """2 blocks x 2 racks x 1-3 nodes of 1-8 cpu."""
    return [
        node(f"b{b}-r{r}-h{h}", cpu=draw(st.integers(1, 8)), labels={BLOCK: f"b{b}", RACK: f"r{r}"})
        for b in range(2)
        for r in range(2)
        for h in range(draw(st.integers(1, 3)))
    ]


@st.composite
def trees(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A group of 1-4 leaf sub-groups (some under a parent), each of 1-3 pods in a rack."""
    leaves = draw(st.integers(1, 4))
    nested = draw(st.booleans())
    subs: list[dict[str, Any]] = []
    if nested:
        subs.append({"name": "p", "topologyConstraint": within(BLOCK)})
    pods: list[dict[str, Any]] = []
    minimums: list[int] = []
    for i in range(leaves):
        size = draw(st.integers(1, 3))
        least = draw(st.integers(1, size))
        entry: dict[str, Any] = {"name": f"s{i}", "minMember": least}
        entry["topologyConstraint"] = within(draw(st.sampled_from([RACK, BLOCK])))
        if nested:
            entry["parent"] = "p"
        subs.append(entry)
        pods += part(f"s{i}", size, draw(st.sampled_from(["1", "2", "3"])))
        minimums.append(least)
    k = draw(st.one_of(st.none(), st.integers(1, leaves)))
    least_total = sum(sorted(minimums)[: k or leaves])
    if nested:
        subs[0]["minSubGroup"] = k
        if k is None:
            del subs[0]["minSubGroup"]
        spec: dict[str, Any] = {"minMember": least_total, "subGroups": subs}
    else:
        spec = {"minMember": least_total, "subGroups": subs}
        if k is not None:
            spec["minSubGroup"] = k
    return spec, pods


@given(nodes=clusters(), case=trees())
@settings(max_examples=80, deadline=None)
def test_property_no_split_no_overcommit_no_minimum_broken(
    nodes: list[dict[str, Any]], case: tuple[dict[str, Any], list[dict[str, Any]]]
) -> None:
    spec, pods = case
    snapshot = Snapshot.build(nodes, [])
    before = snapshot.total_free()
    outcome = place_group(request(spec, pods), snapshot)
    if isinstance(outcome, Refusal):
        assert snapshot.total_free() == before
        return
    by_uid = {uid_of(p): p for p in pods}
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in nodes}
    levels = {
        s["name"]: s["topologyConstraint"]["requiredTopologyLevel"]
        for s in spec["subGroups"]
        if "topologyConstraint" in s
    }
    count: dict[str, int] = {}
    where: dict[str, set[tuple[str | None, ...]]] = {}
    for binding in outcome.bindings:
        name = by_uid[binding.pod_uid]["metadata"]["labels"][LABEL_SUB_GROUP]
        count[name] = count.get(name, 0) + 1
        chain = LEVELS[: LEVELS.index(levels[name]) + 1]
        where.setdefault(name, set()).add(tuple(labels[binding.node].get(k) for k in chain))
    # Never a sub-group split across domains of its level.
    assert all(len(domains) == 1 for domains in where.values()), where
    # Never below a minimum: each placed sub-group reaches its own, and enough of them.
    mins = {s["name"]: s.get("minMember", 0) for s in spec["subGroups"]}
    assert all(count[name] >= mins[name] for name in count)
    k = spec.get("minSubGroup") or next(
        (s.get("minSubGroup") for s in spec["subGroups"] if s["name"] == "p"), None
    )
    leaves = [s for s in spec["subGroups"] if s["name"] != "p"]
    assert len(count) >= (k or len(leaves))
    if any(s["name"] == "p" for s in spec["subGroups"]):
        # The parent's children share its one block.
        blocks = {labels[b.node][BLOCK] for b in outcome.bindings}
        assert len(blocks) == 1
    # Never a node over capacity.
    assert overcommitted(usage_by_node(outcome.bindings, by_uid), nodes) == []


def test_the_search_is_bounded_over_every_domain_of_the_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A gang that fits in no block is refused after ATTEMPTS leaf placements in all, not
    ATTEMPTS per block."""
    monkeypatch.setattr(subgroup_search, "ATTEMPTS", 5)
    monkeypatch.setattr(
        subgroup_search.Budget, "__init__", lambda self, left=5: setattr(self, "left", left)
    )
    snapshot = Snapshot.build(fabric(4, 2, 1, cpu=12), [])
    calls = []
    original = subgroup_search._Search.one

    def counting(self: Any, node: Any, domain: Any, then: Any) -> bool:
        if not node.children:
            calls.append(node.name)
        return original(self, node, domain, then)

    monkeypatch.setattr(subgroup_search._Search, "one", counting)
    pods = part("a", 1, 7) + part("b", 1, 7) + part("c", 1, 7)  # two racks of 12 hold two
    spec = {
        "minMember": 3,
        "topologyConstraint": within(BLOCK),
        "subGroups": [
            {"name": n, "minMember": 1, "topologyConstraint": within(RACK)} for n in "abc"
        ],
    }
    outcome = place_group(request(spec, pods), snapshot)
    assert isinstance(outcome, Refusal)
    # Five placements (b0's four, b1's first), then each later block stops at its first.
    assert len(calls) == 5 + 3
    assert "best b0 holds 2, short 1 pods" in outcome.message, outcome.message
    assert "sub-group c: no rack of example.com/block b0 has room" in outcome.message


def test_a_restarted_sub_groups_replacements_go_back_to_its_rack_first() -> None:
    """Best fit alone would take the fuller rack r0; the sub-group was in r1, and goes back."""
    nodes = [
        node("b0-r0-h0", cpu=8, labels={BLOCK: "b0", RACK: "r0"}),
        node("b0-r1-h0", cpu=16, labels={BLOCK: "b0", RACK: "r1"}),
    ]
    pods = part("a", 2, 4)
    spec = PodGroupSpec.model_validate(
        {
            "minMember": 2,
            "subGroups": [{"name": "a", "minMember": 2, "topologyConstraint": within(RACK)}],
        }
    )
    fresh = request(spec.to_api(), pods)
    outcome = place_group(fresh, Snapshot.build(nodes, []))
    assert isinstance(outcome, Placement)
    assert {b.node for b in outcome.bindings} == {"b0-r0-h0"}
    before = TopologyPlacement(sub_groups=[SubGroupPlacement(name="a", level=RACK, domain="r1")])
    again = dataclasses.replace(fresh, sub_groups=sub_group_tree(spec, pods, [], levels_of, before))
    outcome = place_group(again, Snapshot.build(nodes, []))
    assert isinstance(outcome, Placement)
    assert {b.node for b in outcome.bindings} == {"b0-r1-h0"}


def _running(name: str, node_name: str, cpu: int) -> dict[str, Any]:
    return pod(
        f"{name}-0", group=name, requests={"cpu": cpu}, node=node_name, phase="Running", priority=1
    )


def _gang_of(raw: Any) -> Any:
    from podgroup_operator.domain.membership import group_key_of

    return group_key_of(raw)


def test_preemption_never_evicts_where_a_sub_group_would_still_not_fit() -> None:
    """Two racks of one 4-cpu node, each half used by a low gang: evicting both frees room
    for two 3-cpu pods, but not in one rack, where the sub-group must be."""
    nodes = fabric(1, 2, 1, cpu=4)
    running = [_running("low0", "b0-r0-h0", 2), _running("low1", "b0-r1-h0", 2)]
    snapshot = Snapshot.build(nodes, running, gang_of=_gang_of)
    subs = [{"name": "a", "minMember": 2, "topologyConstraint": within(RACK)}]
    big = request({"minMember": 2, "subGroups": subs}, part("a", 2, 3), priority=100)
    outcome = plan_preemption(big, snapshot)
    assert not isinstance(outcome, PreemptionPlan), outcome


def test_preemption_evicts_for_a_sub_group_in_one_rack() -> None:
    nodes = fabric(1, 2, 1, cpu=8)
    running = [_running("low0", "b0-r0-h0", 4), _running("low1", "b0-r1-h0", 4)]
    snapshot = Snapshot.build(nodes, running, gang_of=_gang_of)
    subs = [{"name": "a", "minMember": 2, "topologyConstraint": within(RACK)}]
    big = request({"minMember": 2, "subGroups": subs}, part("a", 2, 4), priority=100)
    plan = plan_preemption(big, snapshot)
    assert isinstance(plan, PreemptionPlan), plan
    assert len(plan.victims) == 1
    assert len({b.node for b in plan.nominations}) == 1
