"""Scores: preferred node affinity and PreferNoSchedule taints weigh against packing."""

from __future__ import annotations

from typing import Any

import pytest

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


def test_many_preferred_terms_score_as_their_weights_say() -> None:
    """Past SCAN_TERMS the score adds the weights of the terms the index offers: each once."""
    terms = [(1, f"k{i}", "v") for i in range(20)] + [(60, "disk", "ssd"), (20, "disk", "ssd")]
    preferences = pod_preferences(pod("p", affinity=prefer(*terms)))
    assert preferences.matching is not None
    ssd = node_facts(node("n", labels={"disk": "ssd", "k3": "v", "k4": "w"}))
    assert node_affinity_score(preferences, ssd) == 100.0 * 81 / 100


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


# --- preferred pod (anti-)affinity ----------------------------------------------------------------
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def prefer_pods(*weighted: tuple[int, dict[str, str], str]) -> dict[str, Any]:
    """Preferred pod affinity (weight > 0) and anti-affinity (weight < 0) terms."""

    def terms(sign: int) -> list[dict[str, Any]]:
        return [
            {
                "weight": abs(weight),
                "podAffinityTerm": {"labelSelector": {"matchLabels": labels}, "topologyKey": key},
            }
            for weight, labels, key in weighted
            if weight * sign > 0
        ]

    return {
        "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms(1)},
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms(-1)},
    }


def zones(busy_zone: str = "a") -> Snapshot:
    """a-1 and b-1 in zones a and b; a-1 is fuller (packing prefers it); a db pod runs on b-1."""
    return Snapshot.build(
        [node("a-1", labels={ZONE: "a"}), node("b-1", labels={ZONE: "b"})],
        [
            pod("filler", node="a-1", requests={"cpu": "6"}),
            pod("db", node="b-1", requests={"cpu": "1"}, labels={"app": "db"}),
        ],
    )


def test_preferred_pod_affinity_beats_packing() -> None:
    pods = members("web", 1, affinity=prefer_pods((50, {"app": "db"}, ZONE)))
    assert nodes_of(place_group(gang("web", pods), zones())) == ["b-1"]
    # Without it, packing picks the fuller node.
    assert nodes_of(place_group(gang("other", members("other", 1)), zones())) == ["a-1"]


def test_preferred_pod_anti_affinity_keeps_away_from_what_it_shuns() -> None:
    """The noisy pod fills b-1, so packing alone would pick it."""
    noisy = Snapshot.build(
        [node("a-1", labels={ZONE: "a"}), node("b-1", labels={ZONE: "b"})],
        [pod("filler", node="b-1", requests={"cpu": "6"}, labels={"app": "noisy"})],
    )
    shy = members("shy", 1, affinity=prefer_pods((-80, {"app": "noisy"}, ZONE)))
    assert nodes_of(place_group(gang("shy", shy), noisy)) == ["a-1"]
    assert nodes_of(place_group(gang("bold", members("bold", 1)), noisy)) == ["b-1"]


def test_a_gang_that_prefers_apart_spreads_over_hosts_while_it_can() -> None:
    """Members shun each other's host, softly: three members, three nodes with room for all
    on any one. Packing alone would stack them; the preference spreads them; a fourth member
    still fits (a preference never refuses)."""
    snapshot = Snapshot.build([node(f"n{i}", cpu=8) for i in range(3)], [])
    apart = prefer_pods((-100, {"app": "ring"}, HOST))
    pods = members("ring", 4, labels={"app": "ring"}, affinity=apart)
    placed = nodes_of(place_group(gang("ring", pods, min_member=4), snapshot))
    assert sorted(placed[:3]) == ["n0", "n1", "n2"] and placed[3] in placed[:3]
    stacked = nodes_of(
        place_group(gang("stack", members("stack", 3, labels={"app": "stack"})), snapshot)
    )
    assert len(set(stacked)) == 1


def test_a_gang_that_prefers_together_follows_its_first_member_into_an_emptier_node() -> None:
    """Members seek each other's zone, softly. The first two go where packing says (b-1, the
    fullest); once b-1 is full the rest stay in zone b, on empty b-2, where packing alone would
    take a-1, fuller but in zone a."""

    def cluster() -> Snapshot:
        return Snapshot.build(
            [
                node("a-1", cpu=8, labels={ZONE: "a"}),
                node("b-1", cpu=8, labels={ZONE: "b"}),
                node("b-2", cpu=8, labels={ZONE: "b"}),
            ],
            [
                pod("fa", node="a-1", requests={"cpu": "5"}),
                pod("fb", node="b-1", requests={"cpu": "6"}),
            ],
        )

    cpu = {"cpu": "1"}
    together = prefer_pods((100, {"app": "pair"}, ZONE))
    pods = members("pair", 4, labels={"app": "pair"}, requests=cpu, affinity=together)
    assert nodes_of(place_group(gang("pair", pods), cluster())) == ["b-1", "b-1", "b-2", "b-2"]
    alone = members("solo", 4, labels={"app": "solo"}, requests=cpu)
    assert nodes_of(place_group(gang("solo", alone), cluster())) == ["b-1", "b-1", "a-1", "a-1"]


def test_unreadable_preferred_terms_are_left_out_not_refused() -> None:
    """A preference the scheduler cannot evaluate (namespaces chosen by label) is not scored;
    the pod is still placed, where packing says."""
    term = {
        "weight": 50,
        "podAffinityTerm": {
            "labelSelector": {"matchLabels": {"app": "db"}},
            "namespaceSelector": {"matchLabels": {"team": "data"}},
            "topologyKey": ZONE,
        },
    }
    affinity = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [term]}}
    pods = members("web", 1, affinity=affinity)
    assert nodes_of(place_group(gang("web", pods), zones())) == ["a-1"]


# --- running pods' terms toward the pod placed (InterPodAffinity's symmetric part) ---------------
def hosts(*carrier_affinity: dict[str, Any]) -> Snapshot:
    """a-1 (zone a, fuller: packing prefers it) and b-1 (zone b), where small pods carrying
    the given affinities run."""
    return Snapshot.build(
        [node("a-1", labels={ZONE: "a"}), node("b-1", labels={ZONE: "b"})],
        [pod("filler", node="a-1", requests={"cpu": "6"})]
        + [
            pod(f"carrier-{i}", node="b-1", requests={"cpu": "100m"}, affinity=affinity)
            for i, affinity in enumerate(carrier_affinity)
        ],
    )


def test_a_running_pods_preference_draws_the_pods_it_selects() -> None:
    """The web pod has no terms of its own; a pod on b-1 prefers web pods in its zone."""
    plain = members("web", 1, labels={"app": "web"})
    drawn = hosts(prefer_pods((80, {"app": "web"}, ZONE)))
    assert nodes_of(place_group(gang("web", plain), drawn)) == ["b-1"]
    pushed = hosts(prefer_pods((-80, {"app": "web"}, ZONE)))
    assert nodes_of(place_group(gang("web", plain), pushed)) == ["a-1"]
    unselected = members("db", 1, labels={"app": "db"})
    assert nodes_of(
        place_group(gang("db", unselected), hosts(prefer_pods((80, {"app": "web"}, ZONE))))
    ) == ["a-1"]


def test_a_running_pods_required_affinity_draws_at_weight_one() -> None:
    """kube-scheduler's hardPodAffinityWeight: a running pod's required affinity toward the
    newcomer scores it 1 in the carrier's domain; alone, that is the whole range of the score."""
    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": ZONE}
    required = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    plain = members("web", 1, labels={"app": "web"})
    assert nodes_of(place_group(gang("web", plain), hosts(required))) == ["b-1"]


@pytest.mark.parametrize("drawn", [True, False], ids=["ps-prefers-workers", "no-preference"])
def test_a_member_placed_first_draws_the_later_ones_its_terms_select(drawn: bool) -> None:
    """One gang of two shapes: a parameter server pinned to zone b, placed first (the bigger
    shape), that prefers workers in its zone; then workers with no terms of their own. Packing
    alone sends the workers to a-1, the fuller node; the server's preference, once it is
    assumed, brings them to its zone."""
    snapshot = Snapshot.build(
        [node("a-1", labels={ZONE: "a"}), node("b-1", labels={ZONE: "b"})],
        [pod("filler", node="a-1", requests={"cpu": "6"})],
    )
    server = pod(
        "job-ps",
        group="job",
        labels={"app": "ps"},
        requests={"cpu": "4"},
        nodeSelector={ZONE: "b"},
        affinity=prefer_pods((100, {"app": "worker"}, ZONE)) if drawn else None,
    )
    workers = [
        pod(f"job-w{i}", group="job", labels={"app": "worker"}, requests={"cpu": "1"})
        for i in range(2)
    ]
    expected = ["b-1", "b-1", "b-1"] if drawn else ["b-1", "a-1", "a-1"]
    assert nodes_of(place_group(gang("job", [server, *workers]), snapshot)) == expected
