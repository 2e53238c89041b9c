"""`bench core`'s pod-to-pod scenarios decide what their docstring says, small enough to run
here (the figures come from the command; nothing here is timed)."""

from __future__ import annotations

import pytest

from podgroup_operator.bench.core import (
    CONSTRAINED,
    run_core,
    run_hostile,
    run_preemption,
    sub_group_scenario,
)
from podgroup_operator.constants import LABEL_SUB_GROUP
from podgroup_operator.scheduling.gang import Placement
from podgroup_operator.scheduling.placement import place_group
from podgroup_operator.scheduling.snapshot import Snapshot


@pytest.mark.parametrize("scenario", CONSTRAINED)
def test_each_constrained_scenario_places_every_member(scenario: str) -> None:
    result = run_core(30, 4, 5, False, 1, None, scenario=scenario)
    assert result["scenario"] == scenario
    assert (result["decisions"], result["placed_pods"], result["refused"]) == (4, 20, 0)


def test_each_hostile_pod_is_refused_for_what_it_lists_or_placed_if_it_lists_a_score() -> None:
    result = run_hostile(20, 50, 1)
    outcomes = {kind: found["outcome"] for kind, found in result["pods"].items()}
    assert outcomes == {
        "host ports": "20 node(s) didn't have free ports for the requested pod ports "
        "(0.0.0.0:9100/TCP)",
        "inline EBS volumes": "20 node(s) exceed max volume count",
        "tolerations": "20 node(s) had untolerated taint {dedicated-0=x: NoSchedule}",
        "node affinity values": "20 node(s) didn't match Pod's node affinity",
        "node affinity terms": "20 node(s) didn't match Pod's node affinity",
        "container images": "placed on node-00000",
        "spread constraints": "20 node(s) didn't match pod topology spread constraints "
        "(missing required label) (x-0)",
    }


def test_the_sub_group_scenario_places_each_sub_group_in_a_rack_and_each_gang_in_a_block() -> None:
    nodes, gangs = sub_group_scenario(4)
    snapshot = Snapshot.build(nodes, [])
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in nodes}
    for gang in gangs:
        outcome = place_group(gang, snapshot)
        assert isinstance(outcome, Placement), outcome
        assert len(outcome.bindings) == 32
        assert outcome.domain is not None and outcome.domain.level.endswith("block")
        by_uid = {p["metadata"]["uid"]: p for p in gang.pending}
        racks: dict[str, set[tuple[str, ...]]] = {}
        for binding in outcome.bindings:
            sub = by_uid[binding.pod_uid]["metadata"]["labels"][LABEL_SUB_GROUP]
            node = labels[binding.node]
            racks.setdefault(sub, set()).add(
                tuple(node[k] for k, _ in outcome.sub_domains[0][1].path)
            )
            assert outcome.domain.holds(node)
        assert len(racks) == 8 and all(len(r) == 1 for r in racks.values())


def test_the_sub_group_scenario_runs_in_bench_core() -> None:
    result = run_core(0, 3, 4, False, 1, None, scenario="subgroups")
    assert (result["decisions"], result["placed_pods"], result["refused"]) == (3, 96, 0)


def test_the_preemption_scenarios_take_whole_gangs_or_whole_sub_groups() -> None:
    """Same cluster, same preemptor: whole gangs of 8 evicted, or (their policy repairing a
    sub-group alone) sub-groups of 2, fewer pods in all."""
    whole = run_preemption(40, 2, 1)
    parts = run_preemption(40, 2, 1, sub_groups=True)
    assert whole["victim_sub_groups"] == 0 and whole["victim_pods"] == 8 * whole["victim_gangs"]
    assert parts["scenario"] == "preemption-subgroups"
    assert parts["victim_gangs"] == 0
    assert parts["victim_pods"] == 2 * parts["victim_sub_groups"]
    assert 0 < parts["victim_pods"] < whole["victim_pods"]
