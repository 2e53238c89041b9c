"""Scores: preferred node affinity and PreferNoSchedule taints weigh against packing."""

from __future__ import annotations

from typing import Any

from podgroup_operator.scheduling.filters import node_facts
from podgroup_operator.scheduling.gang import Placement, Refusal
from podgroup_operator.scheduling.placement import place_group
from podgroup_operator.scheduling.scores import (
    node_affinity_score,
    pod_preferences,
    taint_score,
)
from podgroup_operator.scheduling.snapshot import Snapshot
from tests.builders import node, pod
from tests.unit.scheduling.helpers import gang, members

SOFT_TAINT = {"key": "spot", "value": "true", "effect": "PreferNoSchedule"}


def prefer(*weighted: tuple[int, str, str]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": weight,
                    "preference": {
                        "matchExpressions": [{"key": key, "operator": "In", "values": [value]}]
                    },
                }
                for weight, key, value in weighted
            ]
        }
    }


def nodes_of(outcome: Placement | Refusal) -> list[str]:
    assert isinstance(outcome, Placement), getattr(outcome, "message", outcome)
    return [b.node for b in outcome.bindings]


def test_scores_are_fixed_scale_shares() -> None:
    preferences = pod_preferences(pod("p", affinity=prefer((30, "disk", "ssd"), (10, "zone", "a"))))
    ssd = node_facts(node("n", labels={"disk": "ssd"}))
    both = node_facts(node("m", labels={"disk": "ssd", "zone": "a"}))
    assert node_affinity_score(preferences, ssd) == 75.0
    assert node_affinity_score(preferences, both) == 100.0
    assert taint_score(preferences, node_facts(node("t", taints=[SOFT_TAINT]))) == 50.0
    tolerant = pod_preferences(pod("q", tolerations=[{"key": "spot", "operator": "Exists"}]))
    assert taint_score(tolerant, node_facts(node("t", taints=[SOFT_TAINT]))) == 100.0


def test_preferred_node_affinity_beats_packing() -> None:
    busy = pod("busy", node="plain", requests={"cpu": "6"})
    snapshot = Snapshot.build([node("plain"), node("ssd", labels={"disk": "ssd"})], [busy])
    pods = members("job", 1, requests={"cpu": "1"}, affinity=prefer((50, "disk", "ssd")))
    assert nodes_of(place_group(gang("job", pods), snapshot)) == ["ssd"]
    # Without the preference, packing picks the fuller node.
    assert nodes_of(place_group(gang("other", members("other", 1)), snapshot)) == ["plain"]


def test_prefer_no_schedule_taint_is_avoided_while_there_is_room_elsewhere() -> None:
    busy = pod("busy", node="spot", requests={"cpu": "2"})
    snapshot = Snapshot.build([node("spot", taints=[SOFT_TAINT]), node("steady")], [busy])
    # Packing alone would pick the fuller tainted node.
    assert nodes_of(place_group(gang("job", members("job", 1)), snapshot)) == ["steady"]
    big = members("big", 2, requests={"cpu": "5"})
    # The second member only fits on the tainted node: a preference, never a filter.
    assert nodes_of(place_group(gang("big", big), snapshot)) == ["steady", "spot"]


def test_preferences_on_hostname_score_each_node() -> None:
    snapshot = Snapshot.build([node("a"), node("b"), node("c")], [])
    pods = members("job", 1, affinity=prefer((1, "kubernetes.io/hostname", "b")))
    assert nodes_of(place_group(gang("job", pods), snapshot)) == ["b"]


def test_ties_go_to_the_node_name_so_decisions_repeat() -> None:
    def decide() -> list[str]:
        snapshot = Snapshot.build(
            [node(n, labels={"disk": "ssd"}) for n in ("c", "a", "b")] + [node("z")], []
        )
        pods = members("job", 3, requests={"cpu": "8"}, affinity=prefer((5, "disk", "ssd")))
        return nodes_of(place_group(gang("job", pods), snapshot))

    assert decide() == decide() == ["a", "b", "c"]
