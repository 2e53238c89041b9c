"""A new kind of candidate set is one generator class and one registry line.

`Cliques` groups nodes by a label (an NVLink clique, say) and offers only the cliques it is told
are open. Registered in `registry.GENERATORS` and nowhere else, it must decide where a gang goes,
where each sub-group goes inside its parent's domain, and where preemption plans, with no edit
of placement, the sub-group search or preemption.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from podgroup_operator.domain.membership import group_key_of
from podgroup_operator.scheduling import registry
from podgroup_operator.scheduling.framework import Candidate, GangView, Round
from podgroup_operator.scheduling.gang import (
    GangRequest,
    Placement,
    SubGroupNode,
    SubGroupTree,
)
from podgroup_operator.scheduling.placement import place_group
from podgroup_operator.scheduling.preemption import PreemptionPlan, plan_preemption
from podgroup_operator.scheduling.snapshot import Snapshot
from podgroup_operator.scheduling.topology import Domain, DomainNodes, topology_request
from tests.builders import node, pod
from tests.unit.scheduling.helpers import gang, members

BLOCK = "example.com/block"
CLIQUE = "example.com/clique"
CLIQUES = {"b0": ("c0", "c1"), "b1": ("c2", "c3")}


class Cliques:
    """Nodes grouped by their clique label inside the parent's domain; only `open` cliques are
    offered, in name order. It applies to gangs (and sub-groups) that require a clique."""

    def __init__(self, open_cliques: set[str]) -> None:
        self.open = open_cliques
        self.asked: list[tuple[str, Domain | None]] = []

    def applies(self, gang: GangRequest) -> bool:
        return gang.topology is not None and gang.topology.required == CLIQUE

    def problem(self, gang: GangRequest) -> str | None:
        return None

    def rounds(
        self, view: GangView, snapshot: Snapshot, within: Domain | None = None
    ) -> Iterator[Round]:
        self.asked.append((view.gang.name, within))
        groups: dict[str, DomainNodes] = {}
        for state in snapshot.nodes.values():
            labels = state.facts.labels
            value = labels.get(CLIQUE)
            if value in self.open and (within is None or within.holds(labels)):
                groups.setdefault(value, DomainNodes()).nodes.append(state)
        above = within.path if within is not None else ()
        yield Round(
            CLIQUE,
            tuple(
                Candidate(Domain((*above, (CLIQUE, value))), nodes)
                for value, nodes in sorted(groups.items())
            ),
        )


def fabric() -> list[dict[str, Any]]:
    """2 blocks of 2 cliques of 2 nodes of 8 cpu: b0-c0-h0 .. b1-c3-h1."""
    return [
        node(f"{b}-{c}-h{h}", cpu=8, labels={BLOCK: b, CLIQUE: c})
        for b, cliques in CLIQUES.items()
        for c in cliques
        for h in range(2)
    ]


def clique_of(name: str) -> str:
    return name.split("-")[1]


def register(monkeypatch: pytest.MonkeyPatch, open_cliques: set[str]) -> Cliques:
    """The one registry line: `Cliques` ahead of the generators there are."""
    cliques = Cliques(open_cliques)
    monkeypatch.setattr(registry, "GENERATORS", (cliques, *registry.GENERATORS))
    return cliques


def a_clique() -> Any:
    return topology_request(required=CLIQUE, preferred=None)


def test_the_gang_goes_to_a_clique_the_registered_generator_offers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # c0 is the fullest clique with room for 2 x 4 cpu: best fit over the clique label picks it.
    running = [pod("other-0", requests={"cpu": "4"}, node="b0-c0-h0", phase="Running")]
    request = gang("job", members("job", 2, requests={"cpu": "4"}), topology=a_clique())

    before = place_group(request, Snapshot.build(fabric(), running))
    assert isinstance(before, Placement), before
    assert {clique_of(b.node) for b in before.bindings} == {"c0"}

    cliques = register(monkeypatch, {"c2"})
    outcome = place_group(request, Snapshot.build(fabric(), running))
    assert isinstance(outcome, Placement), outcome
    assert {clique_of(b.node) for b in outcome.bindings} == {"c2"}
    assert outcome.domain == Domain(((CLIQUE, "c2"),))
    assert cliques.asked == [("job", None)]


def _two_parts() -> GangRequest:
    """A gang in one block whose two sub-groups each need a whole clique (2 x 8 cpu)."""
    inside_block = topology_request(required=CLIQUE, preferred=None, above=(BLOCK,))
    parts = tuple(
        SubGroupNode(
            name,
            2,
            topology=inside_block,
            pending=tuple(members(f"job-{name}", 2, requests={"cpu": "8"})),
        )
        for name in ("a", "b")
    )
    pods = [p for part in parts for p in part.pending]
    return gang(
        "job",
        pods,
        topology=topology_request(required=BLOCK, preferred=None),
        sub_groups=SubGroupTree(parts),
    )


def test_each_sub_group_goes_to_a_clique_the_generator_offers_inside_its_parents_block(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = place_group(_two_parts(), Snapshot.build(fabric(), []))
    assert isinstance(before, Placement), before
    assert {clique_of(b.node) for b in before.bindings} == {"c0", "c1"}

    # c0 closed: block b0 holds one clique for the two sub-groups, so the gang goes to b1.
    cliques = register(monkeypatch, {"c1", "c2", "c3"})
    outcome = place_group(_two_parts(), Snapshot.build(fabric(), []))
    assert isinstance(outcome, Placement), outcome
    assert {clique_of(b.node) for b in outcome.bindings} == {"c2", "c3"}
    assert outcome.domain == Domain(((BLOCK, "b1"),))
    assert sorted(domain.value for _, domain in outcome.sub_domains) == ["c2", "c3"]
    asked_within = {within for _, within in cliques.asked}
    assert asked_within == {Domain(((BLOCK, "b0"),)), Domain(((BLOCK, "b1"),))}


def _low(name: str, nodes: list[str], priority: int) -> list[dict[str, Any]]:
    return [
        pod(
            f"{name}-{i}",
            group=name,
            requests={"cpu": "8"},
            node=n,
            phase="Running",
            priority=priority,
        )
        for i, n in enumerate(nodes)
    ]


def test_preemption_plans_in_the_cliques_the_generator_offers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every node is full; the gang in c0 is the cheapest to evict, c1's is dearer.
    running = _low("cheap", ["b0-c0-h0", "b0-c0-h1"], 1) + _low("dear", ["b0-c1-h0", "b0-c1-h1"], 5)
    running += _low("dearer", ["b1-c2-h0", "b1-c2-h1"], 9) + _low(
        "top", ["b1-c3-h0", "b1-c3-h1"], 9
    )
    request = gang(
        "big", members("big", 2, requests={"cpu": "8"}), priority=100, topology=a_clique()
    )

    before = plan_preemption(request, Snapshot.build(fabric(), running, gang_of=group_key_of))
    assert isinstance(before, PreemptionPlan), before
    assert [v.label for v in before.victims] == ["default/cheap"]

    cliques = register(monkeypatch, {"c1"})
    plan = plan_preemption(request, Snapshot.build(fabric(), running, gang_of=group_key_of))
    assert isinstance(plan, PreemptionPlan), plan
    assert [v.label for v in plan.victims] == ["default/dear"]
    assert {clique_of(b.node) for b in plan.nominations} == {"c1"}
    assert plan.message.endswith("in clique c1")
    assert ("big", None) in cliques.asked
