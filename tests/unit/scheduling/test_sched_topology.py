"""Topology-aware placement: required and preferred levels, best fit, replacements, preemption."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from podgroup_operator.constants import Reason
from podgroup_operator.scheduling.gang import Placement, PreemptionPolicy, Refusal
from podgroup_operator.scheduling.generators import TopologyDomains, WholeCluster
from podgroup_operator.scheduling.placement import place_gang_group, place_group
from podgroup_operator.scheduling.preemption import PreemptionPlan, plan_preemption
from podgroup_operator.scheduling.registry import GENERATORS
from podgroup_operator.scheduling.snapshot import Snapshot
from podgroup_operator.scheduling.topology import Domain, topology_request
from tests.builders import node, pod
from tests.unit.scheduling.helpers import (
    gang,
    members,
    overcommitted,
    uid_of,
    usage_by_node,
)

BLOCK = "example.com/block"
RACK = "example.com/rack"
HOST = "kubernetes.io/hostname"
LEVELS = (BLOCK, RACK, HOST)


def fabric(blocks: int, racks: int, hosts: int, cpu: int = 8) -> list[dict[str, Any]]:
    """blocks x racks x hosts nodes; rack values repeat across blocks (`r0` in every block)."""
    return [
        node(f"b{b}-r{r}-h{h}", cpu=cpu, labels={BLOCK: f"b{b}", RACK: f"r{r}"})
        for b in range(blocks)
        for r in range(racks)
        for h in range(hosts)
    ]


def rack_of(name: str) -> tuple[str, str]:
    block, rack, _ = name.split("-")
    return block, rack


def topo(required: str | None = None, preferred: str | None = None, levels: Any = LEVELS) -> Any:
    return topology_request(
        required=required, preferred=preferred, topology="fabric", topology_levels=levels
    )


def test_the_default_generator_is_the_whole_cluster_and_topology_comes_first() -> None:
    assert isinstance(GENERATORS[-1], WholeCluster)
    assert isinstance(GENERATORS[0], TopologyDomains)


def test_search_walks_from_the_preferred_level_up_to_the_required_one() -> None:
    request = topo(required=BLOCK, preferred=HOST)
    assert request.levels == (HOST, RACK, BLOCK)
    assert request.chain == LEVELS
    assert not request.cluster_wide
    assert topo(preferred=RACK).levels == (RACK, BLOCK)
    assert topo(preferred=RACK).cluster_wide
    bare = topology_request(required="rack", preferred=None)
    assert bare.levels == ("rack",) and bare.chain == ("rack",)


@pytest.mark.parametrize(
    ("required", "preferred", "field"),
    [
        ("example.com/zone", None, "requiredTopologyLevel"),
        (None, "example.com/zone", "preferredTopologyLevel"),
        (RACK, BLOCK, "preferredTopologyLevel"),
    ],
)
def test_levels_that_do_not_fit_the_topology_name_the_field(
    required: str | None, preferred: str | None, field: str
) -> None:
    request = topo(required=required, preferred=preferred)
    assert request.problem is not None
    assert f"spec.topologyConstraint.{field}" in request.problem
    snapshot = Snapshot.build(fabric(1, 1, 1), [])
    outcome = place_group(gang("job", members("job", 1), topology=request), snapshot)
    assert isinstance(outcome, Refusal)
    assert outcome.reason is Reason.INVALID_TOPOLOGY
    assert request.problem in outcome.message


def test_a_missing_topology_keeps_the_gang_waiting_with_the_fix() -> None:
    request = topology_request(required=RACK, preferred=None, topology="gone")
    assert request.problem is not None and "Topology 'gone' does not exist" in request.problem
    snapshot = Snapshot.build(fabric(1, 1, 1), [])
    outcome = place_group(gang("job", members("job", 1), topology=request), snapshot)
    assert isinstance(outcome, Refusal) and outcome.reason is Reason.INVALID_TOPOLOGY
    plan = plan_preemption(gang("job", members("job", 1), topology=request), snapshot)
    assert not isinstance(plan, PreemptionPlan) and "does not exist" in plan.message


def test_required_rack_keeps_every_member_in_one_rack() -> None:
    snapshot = Snapshot.build(fabric(2, 2, 2), [])
    pods = members("job", 6, requests={"cpu": "2"})
    outcome = place_group(gang("job", pods, topology=topo(required=RACK)), snapshot)
    assert isinstance(outcome, Placement)
    assert len({rack_of(b.node) for b in outcome.bindings}) == 1
    assert outcome.domain is not None and outcome.domain.level == RACK


def test_racks_of_the_same_name_in_two_blocks_are_two_domains() -> None:
    snapshot = Snapshot.build(fabric(2, 1, 2), [])
    pods = members("job", 6, requests={"cpu": "4"})  # 6 x 4 cpu: 3 nodes, a rack holds 2
    outcome = place_group(gang("job", pods, topology=topo(required=RACK)), snapshot)
    assert isinstance(outcome, Refusal)
    assert "2 of 2 racks tried" in outcome.message


def test_best_fit_chooses_the_fuller_rack() -> None:
    busy = [pod("busy", requests={"cpu": "6"}, node="b0-r1-h0", phase="Running")]
    snapshot = Snapshot.build(fabric(1, 2, 2), busy)
    pods = members("job", 2, requests={"cpu": "2"})
    outcome = place_group(gang("job", pods, topology=topo(required=RACK)), snapshot)
    assert isinstance(outcome, Placement)
    assert {rack_of(b.node) for b in outcome.bindings} == {("b0", "r1")}


def test_no_rack_fits_names_the_level_the_tries_and_the_best_shortfall() -> None:
    busy = [pod(f"busy{i}", requests={"cpu": "8"}, node=f"b0-r0-h{i}") for i in range(3)]
    snapshot = Snapshot.build(fabric(1, 4, 4), busy)
    pods = members("job", 12, requests={"cpu": "4"})
    outcome = place_group(gang("job", pods, topology=topo(required=RACK)), snapshot)
    assert isinstance(outcome, Refusal)
    assert outcome.reason is Reason.NOT_ENOUGH_RESOURCES
    assert "no rack (example.com/rack) holds 12 x {cpu: 4}: 4 of 4 racks tried" in outcome.message
    assert "best r1 holds 8, short 4 pods" in outcome.message
    assert snapshot.total_free()["cpu"] == (16 - 3) * 8_000


def test_preferred_rack_falls_back_to_the_block_never_past_the_required_level() -> None:
    snapshot = Snapshot.build(fabric(2, 2, 2), [])
    pods = members("job", 6, requests={"cpu": "4"})  # 3 nodes: more than a rack, less than a block
    request = topo(required=BLOCK, preferred=RACK)
    outcome = place_group(gang("job", pods, topology=request), snapshot)
    assert isinstance(outcome, Placement)
    assert outcome.domain is not None and outcome.domain.level == BLOCK
    assert len({rack_of(b.node)[0] for b in outcome.bindings}) == 1
    too_big = members("big", 10, requests={"cpu": "4"})  # 5 nodes: more than a block
    refused = place_group(gang("big", too_big, topology=request), snapshot)
    assert isinstance(refused, Refusal)
    assert "no rack" in refused.message and "no block" in refused.message


def test_preferred_without_required_falls_back_to_the_cluster() -> None:
    snapshot = Snapshot.build(fabric(2, 2, 2), [])
    pods = members("job", 10, requests={"cpu": "4"})
    outcome = place_group(gang("job", pods, topology=topo(preferred=RACK)), snapshot)
    assert isinstance(outcome, Placement)
    assert outcome.domain is None
    assert len({rack_of(b.node)[0] for b in outcome.bindings}) == 2


def test_preferred_takes_the_finest_level_that_fits() -> None:
    snapshot = Snapshot.build(fabric(2, 2, 2), [])
    pods = members("job", 4, requests={"cpu": "4"})
    outcome = place_group(gang("job", pods, topology=topo(preferred=RACK)), snapshot)
    assert isinstance(outcome, Placement)
    assert outcome.domain is not None and outcome.domain.level == RACK


def test_nodes_without_the_label_are_not_candidates() -> None:
    snapshot = Snapshot.build([node("bare-0"), node("bare-1"), *fabric(1, 1, 1)], [])
    pods = members("job", 2, requests={"cpu": "8"})
    outcome = place_group(gang("job", pods, topology=topo(required=RACK)), snapshot)
    assert isinstance(outcome, Refusal)
    assert "1 of 1 racks tried; best r0 holds 1" in outcome.message


def test_a_replacement_stays_in_its_gangs_rack() -> None:
    running = [
        pod(f"job-{i}", group="job", requests={"cpu": "2"}, node=host, phase="Running")
        for i, host in enumerate(["b0-r1-h0", "b0-r1-h0", "b0-r1-h1"])
    ]
    snapshot = Snapshot.build(fabric(1, 2, 2, cpu=4), running)
    replacement = members("job", 1, requests={"cpu": "2"})
    replacement[0]["metadata"]["name"] = replacement[0]["metadata"]["uid"] = "job-3"
    request = gang(
        "job",
        replacement,
        min_member=4,
        already_bound=3,
        bound_uids=frozenset(uid_of(p) for p in running),
        satisfied_before=True,
        topology=topo(required=RACK),
    )
    outcome = place_group(request, snapshot)
    assert isinstance(outcome, Placement)
    assert [rack_of(b.node) for b in outcome.bindings] == [("b0", "r1")]
    # The rack is full now: a second replacement waits rather than going to the empty rack.
    again = members("job", 1, requests={"cpu": "2"})
    refused = place_group(dataclasses.replace(request, pending=tuple(again)), snapshot)
    assert isinstance(refused, Refusal)


def test_a_gang_group_places_each_group_in_its_own_domain() -> None:
    snapshot = Snapshot.build(fabric(1, 2, 2), [])
    first = gang("a", members("a", 4, requests={"cpu": "4"}), topology=topo(required=RACK))
    second = gang("b", members("b", 4, requests={"cpu": "4"}), topology=topo(required=RACK))
    outcome = place_gang_group([first, second], snapshot)
    assert not isinstance(outcome, Refusal)
    racks = [{rack_of(b.node) for b in p.bindings} for p in outcome.placements]
    assert all(len(r) == 1 for r in racks)
    assert racks[0] != racks[1]


def test_hostname_level_is_one_node() -> None:
    snapshot = Snapshot.build(fabric(1, 1, 3), [])
    pods = members("job", 2, requests={"cpu": "4"})
    outcome = place_group(gang("job", pods, topology=topo(required=HOST)), snapshot)
    assert isinstance(outcome, Placement)
    assert len({b.node for b in outcome.bindings}) == 1
    assert outcome.domain == Domain(((BLOCK, "b0"), (RACK, "r0"), (HOST, outcome.bindings[0].node)))


def _low_gang(name: str, node_names: list[str]) -> list[dict[str, Any]]:
    return [
        pod(
            f"{name}-{i}",
            group=name,
            requests={"cpu": "8"},
            node=n,
            phase="Running",
            priority=1,
        )
        for i, n in enumerate(node_names)
    ]


def test_preemption_evicts_inside_one_rack_only() -> None:
    # Rack r0 holds one low gang on both nodes; rack r1 holds two low gangs of one node each,
    # of a higher priority. The required-rack gang needs both nodes of one rack.
    running = _low_gang("cheap", ["b0-r0-h0", "b0-r0-h1"])
    dear = [
        {**p, "spec": {**p["spec"], "priority": 5}}
        for p in _low_gang("dear1", ["b0-r1-h0"]) + _low_gang("dear2", ["b0-r1-h1"])
    ]
    snapshot = Snapshot.build(fabric(1, 2, 2), running + dear, gang_of=_gang_of)
    pods = members("big", 2, requests={"cpu": "8"})
    request = gang("big", pods, priority=100, topology=topo(required=RACK))
    plan = plan_preemption(request, snapshot)
    assert isinstance(plan, PreemptionPlan), plan
    assert [v.label for v in plan.victims] == ["default/cheap"]
    assert {rack_of(b.node) for b in plan.nominations} == {("b0", "r0")}
    assert "in rack r0" in plan.message


def test_preemption_never_evicts_where_the_gang_would_still_not_fit() -> None:
    # Each rack has one node: the 2-node gang fits in no rack even with every victim gone.
    running = _low_gang("low", ["b0-r0-h0"]) + _low_gang("low2", ["b0-r1-h0"])
    snapshot = Snapshot.build(fabric(1, 2, 1), running, gang_of=_gang_of)
    request = gang(
        "big", members("big", 2, requests={"cpu": "8"}), priority=100, topology=topo(RACK)
    )
    outcome = plan_preemption(request, snapshot)
    assert not isinstance(outcome, PreemptionPlan)
    assert "no domain would hold the gang even after preemption (2 tried)" in outcome.message


def _gang_of(raw: Any) -> Any:
    from podgroup_operator.domain.membership import group_key_of

    return group_key_of(raw)


# --- properties ----------------------------------------------------------------------------------
@st.composite
def labelled_clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    """2 blocks x 2 racks x 1-3 nodes of random size; some nodes lack the rack label."""
    nodes = []
    for b in range(2):
        for r in range(2):
            for h in range(draw(st.integers(1, 3))):
                labels = {BLOCK: f"b{b}", RACK: f"r{r}"}
                if draw(st.integers(0, 7)) == 0:
                    del labels[RACK]
                nodes.append(node(f"b{b}-r{r}-h{h}", cpu=draw(st.integers(1, 8)), labels=labels))
    return nodes


@st.composite
def topology_gangs(draw: st.DrawFn, index: int) -> tuple[Any, list[dict[str, Any]]]:
    size = draw(st.integers(1, 8))
    cpu = draw(st.sampled_from(["500m", "1", "2", "3"]))
    pods = members(f"g{index}", size, requests={"cpu": cpu})
    required = draw(st.sampled_from([None, BLOCK, RACK]))
    preferred = draw(st.sampled_from([None, RACK, HOST]))
    if required is None and preferred is None:
        preferred = RACK
    if (
        required is not None
        and preferred is not None
        and LEVELS.index(preferred) < LEVELS.index(required)
    ):
        preferred = None
    request = gang(
        f"g{index}",
        pods,
        min_member=draw(st.integers(1, size)),
        topology=topo(required=required, preferred=preferred),
    )
    return request, pods


@given(
    nodes=labelled_clusters(),
    requests=st.lists(st.integers(0, 1000), min_size=1, max_size=4).flatmap(
        lambda seeds: st.tuples(*(topology_gangs(i) for i in range(len(seeds))))
    ),
)
@settings(max_examples=60)
def test_property_required_domain_capacity_and_finest_level(
    nodes: list[dict[str, Any]], requests: tuple[tuple[Any, list[dict[str, Any]]], ...]
) -> None:
    snapshot = Snapshot.build(nodes, [])
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in nodes}
    pods_by_uid: dict[str, dict[str, Any]] = {}
    bindings = []
    for request, pods in requests:
        pods_by_uid.update({uid_of(p): p for p in pods})
        outcome = place_group(request, snapshot)
        if not isinstance(outcome, Placement):
            continue
        bindings.extend(outcome.bindings)
        topology = request.topology
        placed = [labels[b.node] for b in outcome.bindings]
        # Never a member outside its required domain.
        if topology.required is not None:
            assert outcome.domain is not None
            values = {
                tuple(
                    p.get(k) for k in topology.chain[: topology.chain.index(topology.required) + 1]
                )
                for p in placed
            }
            assert len(values) == 1 and None not in next(iter(values))
        if outcome.domain is not None:
            assert all(outcome.domain.holds(p) for p in placed)
        # With a preferred level, never a coarser level when a finer one fits: the gang, put
        # back, fits in no domain of any finer level it searched.
        used = outcome.domain.level if outcome.domain is not None else None
        finer = topology.levels[: topology.levels.index(used)] if used else topology.levels
        outcome.undo()
        for level in finer:
            alone = dataclasses.replace(request, topology=topo(required=level, preferred=None))
            assert isinstance(place_group(alone, snapshot), Refusal), level
        again = place_group(request, snapshot)
        assert isinstance(again, Placement)
    # Never a node over capacity.
    assert overcommitted(usage_by_node(bindings, pods_by_uid), nodes) == []


def test_node_classes_keep_their_free_sums_as_pods_and_nodes_change() -> None:
    nodes = fabric(1, 2, 2)
    snapshot = Snapshot.build(nodes, [pod("a", requests={"cpu": "3"}, node="b0-r0-h0")])

    def consistent() -> None:
        for node_class in snapshot.classes.by_id.values():
            expected: dict[str, int] = {}
            for _, name in node_class.order:
                for resource, amount in snapshot.nodes[name].free.items():
                    expected[resource] = expected.get(resource, 0) + amount
            assert {k: v for k, v in node_class.free.items() if v or k in expected} == expected

    consistent()
    undo = snapshot.assume([("x", "b0-r1-h1", {"cpu": 2000})])
    consistent()
    undo()
    consistent()
    snapshot.add_pod(pod("b", requests={"cpu": "1"}, node="b0-r1-h0"))
    consistent()
    relabelled = node("b0-r0-h1", cpu=16, labels={BLOCK: "b0", RACK: "r1"})
    snapshot.update_node(relabelled)
    consistent()
    snapshot.update_node(node("b0-r0-h0", cpu=4, labels={BLOCK: "b0", RACK: "r0"}))
    consistent()
    snapshot.remove_node("b0-r1-h0")
    consistent()
    snapshot.remove_pod(pod("a", requests={"cpu": "3"}, node="b0-r0-h0"))
    consistent()


def test_a_gang_that_may_not_preempt_gets_no_plan_in_any_domain() -> None:
    running = _low_gang("low", ["b0-r0-h0", "b0-r0-h1"])
    snapshot = Snapshot.build(fabric(1, 1, 2), running, gang_of=_gang_of)
    request = gang(
        "big",
        members("big", 2, requests={"cpu": "8"}),
        priority=100,
        topology=topo(RACK),
        preemption_policy=PreemptionPolicy.NEVER,
    )
    outcome = plan_preemption(request, snapshot)
    assert not isinstance(outcome, PreemptionPlan)
    assert "preemptionPolicy is Never" in outcome.message
