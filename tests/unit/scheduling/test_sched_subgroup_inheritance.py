"""A sub-group's constraint inherits the Topology above it, and a refusal's "no room" is true.

A sub-group whose `topologyConstraint` names no `topology` reads its levels in its nearest
ancestor's Topology (the group's for the top), as KAI-Scheduler's sub-groups do; one in no
Topology at all has its levels named under its parent's chain, so its domains lie inside its
parent's. A refusal says a domain has no room only when its free capacity is short of what
was asked.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from podgroup_operator.api.models import PodGroupSpec
from podgroup_operator.constants import PodPhase
from podgroup_operator.scheduling.gang import Placement, Refusal
from podgroup_operator.scheduling.placement import place_group
from podgroup_operator.scheduling.snapshot import Snapshot
from podgroup_operator.scheduling.subgroups import sub_group_tree
from tests.builders import node, pod
from tests.unit.scheduling.test_sched_subgroups import (
    BLOCK,
    RACK,
    fabric,
    levels_of,
    part,
    racks_of,
    request,
)

NAMED_BLOCK = {"topology": "fabric", "requiredTopologyLevel": BLOCK}
ANY_BLOCK = {"requiredTopologyLevel": BLOCK}
ANY_RACK = {"requiredTopologyLevel": RACK}


def _two_parts(where: str) -> dict[str, Any]:
    """Two sub-groups of 4 x 4 cpu saying only `requiredTopologyLevel: rack`; the Topology
    is named by the group, by their parent, or by nobody (`where`)."""
    subs: list[dict[str, Any]] = [
        {"name": s, "minMember": 4, "topologyConstraint": dict(ANY_RACK)} for s in ("s0", "s1")
    ]
    if where == "group":
        return {"minMember": 8, "topologyConstraint": NAMED_BLOCK, "subGroups": subs}
    if where == "parent":
        for sub in subs:
            sub["parent"] = "p"
        parent = {"name": "p", "topologyConstraint": NAMED_BLOCK}
        return {"minMember": 8, "subGroups": [parent, *subs]}
    return {"minMember": 8, "topologyConstraint": ANY_BLOCK, "subGroups": subs}


@pytest.mark.parametrize("where", ["group", "parent", "nobody"])
def test_sub_groups_naming_no_topology_are_placed_each_in_one_rack_of_one_block(
    where: str,
) -> None:
    snapshot = Snapshot.build(fabric(2, 2, 2, cpu=8), [])
    pods = part("s0", 4, 4) + part("s1", 4, 4)
    outcome = place_group(request(_two_parts(where), pods), snapshot)
    assert isinstance(outcome, Placement), outcome
    racks = racks_of(outcome, pods)
    assert all(len(r) == 1 for r in racks.values()) and racks["s0"] != racks["s1"], racks
    assert len({r.split("-")[0] for used in racks.values() for r in used}) == 1, racks
    assert {name: d.level for name, d in outcome.sub_domains if name != "p"} == {
        "s0": RACK,
        "s1": RACK,
    }
    # Each rack is named under its block: the path of the block it lies in, then its own.
    assert {d.path[0][0] for name, d in outcome.sub_domains} == {BLOCK}


def test_the_tree_reads_an_inherited_topologys_levels() -> None:
    spec = PodGroupSpec.model_validate(_two_parts("group"))
    tree = sub_group_tree(spec, [], [], levels_of)
    assert tree is not None
    for root in tree.roots:
        assert root.topology is not None and root.topology.topology == "fabric"
        assert root.topology.chain == (BLOCK, RACK) and root.topology.problem is None


def test_a_level_the_inherited_topology_lacks_waits_naming_it() -> None:
    """Admission refuses it; one admitted before (or with the webhook off) says why it waits."""
    spec = {
        "minMember": 2,
        "topologyConstraint": NAMED_BLOCK,
        "subGroups": [
            {"name": "s0", "minMember": 2, "topologyConstraint": {"requiredTopologyLevel": "x/y"}}
        ],
    }
    snapshot = Snapshot.build(fabric(1, 1, 2), [])
    outcome = place_group(request(spec, part("s0", 2, 1)), snapshot)
    assert isinstance(outcome, Refusal)
    assert "sub-group s0: spec.topologyConstraint.requiredTopologyLevel: 'x/y' is not a level" in (
        outcome.message
    )


# --- a refusal's "no room" is true ---------------------------------------------------------------
ROOM = re.compile(r"no rack(?: of example\.com/block (\w+))? has room for (\d+) x \{cpu: (\d+)\}")
UNUSABLE = "has a node its members may use"


@st.composite
def crowded_fabrics(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """2 blocks x 2 racks x 1-2 nodes of 4 cpu, each with 0-4 cpu already taken."""
    nodes: list[dict[str, Any]] = []
    running: list[dict[str, Any]] = []
    for b in range(2):
        for r in range(2):
            for h in range(draw(st.integers(1, 2))):
                name = f"b{b}-r{r}-h{h}"
                nodes.append(node(name, cpu=4, labels={BLOCK: f"b{b}", RACK: f"r{r}"}))
                used = draw(st.integers(0, 4))
                if used:
                    running.append(
                        pod(
                            f"used-{name}",
                            requests={"cpu": used},
                            node=name,
                            phase=PodPhase.RUNNING,
                        )
                    )
    return nodes, running


def _free_cpu(nodes: list[dict[str, Any]], running: list[dict[str, Any]]) -> dict[str, int]:
    """Free cpu (millicores) per `block-rack`, from the raw objects, not the snapshot."""
    free: dict[str, int] = {}
    for n in nodes:  # every node of 4 cpu
        labels = n["metadata"]["labels"]
        key = f"{labels[BLOCK]}-{labels[RACK]}"
        free[key] = free.get(key, 0) + int(n["status"]["allocatable"]["cpu"]) * 1000
    for p in running:
        key = p["spec"]["nodeName"].rsplit("-", 1)[0]
        free[key] -= int(p["spec"]["containers"][0]["resources"]["requests"]["cpu"]) * 1000
    return free


@given(
    world=crowded_fabrics(),
    count=st.integers(1, 4),
    cpu=st.integers(1, 4),
    group=st.sampled_from([NAMED_BLOCK, ANY_BLOCK, None]),
    named=st.booleans(),
)
@settings(max_examples=150, deadline=None)
def test_every_rack_a_refusal_says_has_no_room_is_short_of_what_was_asked(
    world: tuple[list[dict[str, Any]], list[dict[str, Any]]],
    count: int,
    cpu: int,
    group: dict[str, Any] | None,
    named: bool,
) -> None:
    nodes, running = world
    constraint = {"topology": "fabric", **ANY_RACK} if named else ANY_RACK
    spec: dict[str, Any] = {
        "minMember": count,
        "subGroups": [{"name": "s", "minMember": count, "topologyConstraint": constraint}],
    }
    if group is not None:
        spec["topologyConstraint"] = group
    pods = part("s", count, cpu)
    outcome = place_group(request(spec, pods), Snapshot.build(nodes, running))
    free = _free_cpu(nodes, running)
    if isinstance(outcome, Placement):
        return
    assert UNUSABLE not in outcome.message, outcome.message  # every node here may be used
    claims = ROOM.findall(outcome.message)
    for block, asked, each in claims:
        wanted = int(asked) * int(each) * 1000
        racks = [key for key in free if not block or key.startswith(f"{block}-")]
        assert racks, outcome.message
        for key in racks:
            assert free[key] < wanted, (key, free, outcome.message)


@pytest.mark.parametrize("named", [True, False])
def test_racks_short_inside_a_block_with_room_are_said_to_have_no_room(named: bool) -> None:
    """Block b0 has 6 cpu free over two racks of 3: the group fits the block by capacity, the
    sub-group (one pod of 4 cpu) fits no rack of it, and the refusal says so, truly."""
    nodes = [node(f"b0-r{r}-h0", cpu=4, labels={BLOCK: "b0", RACK: f"r{r}"}) for r in range(2)]
    running = [
        pod(f"used-{r}", requests={"cpu": 1}, node=f"b0-r{r}-h0", phase=PodPhase.RUNNING)
        for r in range(2)
    ]
    constraint = {"topology": "fabric", **ANY_RACK} if named else ANY_RACK
    spec = {
        "minMember": 1,
        "topologyConstraint": NAMED_BLOCK,
        "subGroups": [{"name": "s", "minMember": 1, "topologyConstraint": constraint}],
    }
    outcome = place_group(request(spec, part("s", 1, 4)), Snapshot.build(nodes, running))
    assert isinstance(outcome, Refusal)
    assert ROOM.findall(outcome.message) == [("b0", "1", "4")], outcome.message
    assert _free_cpu(nodes, running) == {"b0-r0": 3000, "b0-r1": 3000}


def test_a_block_whose_nodes_carry_no_rack_label_is_not_said_to_lack_room() -> None:
    """Block b0's nodes are free but in no rack: the refusal says no rack of it has a node
    the members may use, never that one has no room."""
    nodes = [node(f"b0-h{h}", cpu=8, labels={BLOCK: "b0"}) for h in range(2)]
    spec = {
        "minMember": 1,
        "topologyConstraint": NAMED_BLOCK,
        "subGroups": [{"name": "s", "minMember": 1, "topologyConstraint": ANY_RACK}],
    }
    outcome = place_group(request(spec, part("s", 1, 1)), Snapshot.build(nodes, []))
    assert isinstance(outcome, Refusal)
    assert "sub-group s: no rack of example.com/block b0 has a node its members may use" in (
        outcome.message
    ), outcome.message
    assert "room" not in outcome.message, outcome.message
