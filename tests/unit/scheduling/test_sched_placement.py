"""Gang decisions: all-or-nothing, packing, Strict/NonStrict, once-satisfied, gang groups."""

from __future__ import annotations

from typing import Any

import pytest

from podgroup_operator.constants import GangMode, Reason
from podgroup_operator.scheduling import interpod, nodeorder, placement
from podgroup_operator.scheduling.gang import GangGroupPlacement, GangRequest, Placement, Refusal
from podgroup_operator.scheduling.placement import place_gang_group, place_group
from podgroup_operator.scheduling.snapshot import Snapshot
from tests.builders import node, pod
from tests.unit.scheduling.helpers import GPU, gang, members, uid_of

HOSTNAME = "kubernetes.io/hostname"
GPU_TAINT = {"key": GPU, "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = [{"key": GPU, "operator": "Exists"}]


def gpu_nodes(count: int, gpus: int = 8) -> list[dict[str, object]]:
    return [
        node(f"gpu-{i}", cpu=64, memory="512Gi", extended={GPU: gpus}, taints=[GPU_TAINT])
        for i in range(count)
    ]


def test_gang_that_fits_is_placed_and_left_assumed() -> None:
    snapshot = Snapshot.build([node("n1"), node("n2")], [])
    outcome = place_group(gang("job", members("job", 3, requests={"cpu": "2"})), snapshot)
    assert isinstance(outcome, Placement)
    assert len(outcome.bindings) == 3
    assert all(snapshot.is_assumed(b.pod_uid) for b in outcome.bindings)
    outcome.undo()
    assert snapshot.total_free()["cpu"] == 16_000


def test_best_fit_packs_onto_the_fullest_node_and_ties_go_by_name() -> None:
    snapshot = Snapshot.build(
        [node("a"), node("b"), node("c")], [pod("busy", requests={"cpu": "4"}, node="c")]
    )
    outcome = place_group(gang("job", members("job", 2, requests={"cpu": "2"})), snapshot)
    assert isinstance(outcome, Placement)
    assert {b.node for b in outcome.bindings} == {"c"}
    more = place_group(gang("more", members("more", 3, requests={"cpu": "4"})), snapshot)
    assert isinstance(more, Placement)
    assert [b.node for b in more.bindings] == ["a", "a", "b"]


def test_strict_refusal_leaves_the_snapshot_identical() -> None:
    snapshot = Snapshot.build(gpu_nodes(3), [pod("x", requests={"cpu": "1"}, node="gpu-0")])
    before = snapshot.state()
    pods = members("train", 4, requests={"cpu": "8", GPU: "8"}, tolerations=GPU_TOLERATION)
    outcome = place_group(gang("train", pods), snapshot)
    assert isinstance(outcome, Refusal)
    assert outcome.reason is Reason.NOT_ENOUGH_RESOURCES
    assert outcome.partial == ()
    assert snapshot.state() == before
    assert not any(snapshot.is_assumed(uid_of(p)) for p in pods)


def test_refusal_message_names_the_shape_what_fits_and_what_is_short() -> None:
    nodes = [
        *gpu_nodes(3),
        node("cpu-0"),
        node("cpu-1"),
        node("down", extended={GPU: 8}, ready=False),
        node("cordoned", extended={GPU: 8}, unschedulable=True),
    ]
    snapshot = Snapshot.build(nodes, [])
    pods = members("train", 4, requests={"cpu": "8", GPU: "8"}, tolerations=GPU_TOLERATION)
    outcome = place_group(gang("train", pods), snapshot)
    assert isinstance(outcome, Refusal)
    message = outcome.message
    assert "default/train" in message
    assert "4 x {cpu: 8, nvidia.com/gpu: 8}" in message
    assert "3 fit on 3 node(s)" in message
    assert "short 1" in message
    assert "0/7 nodes can take another" in message
    # The three GPU nodes are now full and the two CPU nodes have none.
    assert "5 Insufficient nvidia.com/gpu" in message
    assert "each needs a node with {cpu: 8, nvidia.com/gpu: 8} free" in message
    assert "1 node(s) were not Ready" in message
    assert "1 node(s) were unschedulable" in message


def test_refusal_counts_taint_and_selector_exclusions() -> None:
    nodes = [*gpu_nodes(2), node("cpu-0", labels={"pool": "cpu"})]
    snapshot = Snapshot.build(nodes, [])
    untolerant = place_group(gang("a", members("a", 1, requests={GPU: "1"})), snapshot)
    assert isinstance(untolerant, Refusal)
    assert "2 node(s) had untolerated taint {nvidia.com/gpu=present: NoSchedule}" in (
        untolerant.message
    )
    assert "1 Insufficient nvidia.com/gpu" in untolerant.message
    selected = place_group(
        gang("b", members("b", 1, nodeSelector={"pool": "other"}, tolerations=GPU_TOLERATION)),
        snapshot,
    )
    assert isinstance(selected, Refusal)
    assert "3 node(s) didn't match Pod's node selector" in selected.message


def test_feasible_nodes_are_every_node_the_filters_pass_not_just_the_first() -> None:
    """Room, taints, selectors and running pods' anti-affinity each keep a node out."""
    shunned = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOSTNAME}
    loner = pod(
        "loner",
        node="b",
        labels={"app": "db"},
        affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [shunned]}},
    )
    nodes = [*gpu_nodes(1), node("a"), node("b"), node("c"), node("d", labels={"pool": "x"})]
    snapshot = Snapshot.build(nodes, [loner, pod("big", requests={"cpu": "7"}, node="c")])
    before = snapshot.state()
    web = pod("web", labels={"app": "web"}, requests={"cpu": "2"})
    assert placement.feasible_nodes(web, snapshot) == {"a", "d"}
    pinned = pod("pinned", requests={"cpu": "2"}, nodeSelector={"pool": "x"})
    assert placement.feasible_nodes(pinned, snapshot) == {"d"}
    tolerant = pod("gpu", requests={GPU: "1"}, tolerations=GPU_TOLERATION)
    assert placement.feasible_nodes(tolerant, snapshot) == {"gpu-0"}
    assert snapshot.state() == before  # asking assumes nothing


def test_feasible_nodes_are_none_for_a_constraint_the_scheduler_cannot_evaluate() -> None:
    snapshot = Snapshot.build([node("a")], [])
    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOSTNAME}
    odd = pod(
        "odd",
        affinity={
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {**term, "namespaceSelector": {"matchLabels": {"team": "a"}}}
                ]
            }
        },
    )
    assert placement.member_shape(odd).unsupported is not None
    assert placement.feasible_nodes(odd, snapshot) == frozenset()


def test_too_few_members_is_refused_without_trying() -> None:
    snapshot = Snapshot.build([node("n1")], [])
    outcome = place_group(gang("job", members("job", 2), min_member=4, already_bound=1), snapshot)
    assert isinstance(outcome, Refusal)
    assert outcome.reason is Reason.NOT_ENOUGH_TASKS
    assert "3 member pod(s) (2 pending, 1 bound)" in outcome.message
    assert "minMember is 4" in outcome.message
    assert "short 1 pod(s)" in outcome.message


def test_min_resources_beyond_cluster_free_capacity_is_refused_without_trying() -> None:
    snapshot = Snapshot.build([node("n1"), node("n2")], [])
    before = snapshot.state()
    outcome = place_group(gang("job", members("job", 1), min_resources={"cpu": 20_000}), snapshot)
    assert isinstance(outcome, Refusal)
    assert outcome.reason is Reason.NOT_ENOUGH_RESOURCES
    assert "minResources {cpu: 20}" in outcome.message
    assert "free capacity {cpu: 16}" in outcome.message
    assert "short {cpu: 4}" in outcome.message
    assert snapshot.state() == before


def test_min_resources_counts_back_what_bound_members_hold() -> None:
    bound = pod("job-0", requests={"cpu": "8"}, node="n1")
    snapshot = Snapshot.build([node("n1"), node("n2")], [bound])
    request = gang(
        "job",
        members("job-x", 1, requests={"cpu": "8"}),
        min_member=2,
        already_bound=1,
        bound_uids=frozenset({uid_of(bound)}),
        min_resources={"cpu": 16_000},
    )
    assert isinstance(place_group(request, snapshot), Placement)


def test_already_bound_members_count_toward_min_member() -> None:
    snapshot = Snapshot.build([node("n1")], [])
    outcome = place_group(
        gang("job", members("job", 2, requests={"cpu": "4"}), min_member=5, already_bound=3),
        snapshot,
    )
    assert isinstance(outcome, Placement)
    assert len(outcome.bindings) == 2


def test_extra_members_are_placed_when_they_fit_and_named_when_not() -> None:
    snapshot = Snapshot.build([node("n1")], [])
    outcome = place_group(
        gang("job", members("job", 3, requests={"cpu": "3"}), min_member=2), snapshot
    )
    assert isinstance(outcome, Placement)
    assert len(outcome.bindings) == 2
    assert outcome.unplaced == ("job-2",)


def test_non_strict_keeps_what_fits_and_reports_partial() -> None:
    snapshot = Snapshot.build([node("n1")], [])
    pods = members("job", 3, requests={"cpu": "3"})
    outcome = place_group(gang("job", pods, mode=GangMode.NON_STRICT), snapshot)
    assert isinstance(outcome, Refusal)
    assert len(outcome.partial) == 2
    assert "keeping 2 member(s) placed (NonStrict)" in outcome.message
    assert snapshot.free("n1")["cpu"] == 2000
    # Next cycle the kept members are bound; the last one still needs room.
    outcome.undo()
    assert snapshot.free("n1")["cpu"] == 8000


def test_once_satisfied_places_replacements_one_by_one() -> None:
    snapshot = Snapshot.build([node("n1")], [])
    replacements = members("job", 3, requests={"cpu": "3"})
    outcome = place_group(
        gang("job", replacements, min_member=4, already_bound=0, satisfied_before=True),
        snapshot,
    )
    assert isinstance(outcome, Placement)
    assert len(outcome.bindings) == 2  # no barrier: what fits goes now
    full = place_group(
        gang("job", members("late", 1, requests={"cpu": "3"}), min_member=4, satisfied_before=True),
        snapshot,
    )
    assert isinstance(full, Refusal)
    assert full.reason is Reason.NOT_ENOUGH_RESOURCES


def test_mixed_shapes_place_the_big_ones_first() -> None:
    snapshot = Snapshot.build([node("n1"), *gpu_nodes(1)], [])
    pods = [
        *members("w", 2, requests={"cpu": "2"}, tolerations=GPU_TOLERATION),
        pod("master", requests={"cpu": "60", GPU: "8"}, tolerations=GPU_TOLERATION),
    ]
    outcome = place_group(gang("job", pods), snapshot)
    assert isinstance(outcome, Placement)
    by_pod = {b.pod: b.node for b in outcome.bindings}
    assert by_pod["master"] == "gpu-0"
    assert by_pod["w-0"] == by_pod["w-1"]


def test_one_thousand_identical_members_fill_nodes_in_order() -> None:
    snapshot = Snapshot.build([node(f"n{i:04d}") for i in range(200)], [])
    outcome = place_group(gang("big", members("big", 1000, requests={"cpu": "1"})), snapshot)
    assert isinstance(outcome, Placement)
    assert len({b.node for b in outcome.bindings}) == 125
    assert all(snapshot.free(f"n{i:04d}")["cpu"] == 0 for i in range(125))


def test_gang_group_places_all_when_all_fit() -> None:
    snapshot = Snapshot.build([node("n1"), node("n2")], [])
    groups = [
        gang("a", members("a", 2, namespace="ns1", requests={"cpu": "4"}), namespace="ns1"),
        gang("b", members("b", 2, namespace="ns2", requests={"cpu": "4"}), namespace="ns2"),
    ]
    outcome = place_gang_group(groups, snapshot)
    assert isinstance(outcome, GangGroupPlacement)
    assert len(outcome.bindings) == 4
    assert snapshot.total_free()["cpu"] == 0


def test_gang_group_places_nothing_when_one_does_not_fit() -> None:
    snapshot = Snapshot.build([node("n1"), node("n2")], [])
    before = snapshot.state()
    groups = [
        gang("a", members("a", 2, namespace="ns1", requests={"cpu": "4"}), namespace="ns1"),
        gang(
            "b",
            members("b", 3, namespace="ns2", requests={"cpu": "4"}),
            namespace="ns2",
            mode=GangMode.NON_STRICT,
        ),
    ]
    outcome = place_gang_group(groups, snapshot)
    assert isinstance(outcome, Refusal)
    assert outcome.gang == ("ns2", "b")
    assert outcome.partial == ()
    assert outcome.message.startswith("gang group [ns1/a, ns2/b]: ")
    assert snapshot.state() == before


def test_a_thousand_group_gang_group_refusal_names_five_and_counts_the_rest() -> None:
    """Once one such refusal, published and logged for every member, wrote 10 MB per cycle."""
    snapshot = Snapshot.build([node("n1")], [])
    groups = [gang(f"g{i:04}", members(f"g{i:04}", 1), min_member=2) for i in range(1000)]
    outcome = place_gang_group(groups, snapshot)
    assert isinstance(outcome, Refusal)
    names = ", ".join(f"default/g{i:04}" for i in range(5))
    assert outcome.message.startswith(f"gang group [{names} and 995 more]: ")
    assert len(outcome.message) < 1000


def test_gang_group_prefilter_refuses_before_anything_is_tried() -> None:
    snapshot = Snapshot.build([node("n1")], [])
    groups = [gang("a", members("a", 1)), gang("b", members("b", 1), min_member=2)]
    outcome = place_gang_group(groups, snapshot)
    assert isinstance(outcome, Refusal)
    assert outcome.reason is Reason.NOT_ENOUGH_TASKS
    assert snapshot.total_free()["pods"] == 110_000


def test_gang_group_undo_releases_every_member_group() -> None:
    snapshot = Snapshot.build([node("n1"), node("n2")], [])
    before = snapshot.state()
    groups = [gang("a", members("a", 2, requests={"cpu": "3"})), gang("b", members("b", 1))]
    outcome = place_gang_group(groups, snapshot)
    assert isinstance(outcome, GangGroupPlacement)
    assert snapshot.state() != before
    outcome.undo()
    assert snapshot.state() == before


ZONE = "topology.kubernetes.io/zone"


def _two_zones_and_a_full_node(used_in_a: int, cpu: int) -> Snapshot:
    """a-node (zone a) runs one `app=web` pod using `used_in_a` cpu, b-node (zone b) is empty,
    both with `cpu`; c-node (no zone) is full, so the first member finds it lost at once."""
    return Snapshot.build(
        [
            node("a-node", cpu=cpu, labels={ZONE: "a"}),
            node("b-node", cpu=cpu, labels={ZONE: "b"}),
            node("c-node", cpu=1),
        ],
        [
            pod("web-old", labels={"app": "web"}, node="a-node", requests={"cpu": used_in_a}),
            pod("other", labels={"app": "other"}, node="c-node", requests={"cpu": 1}),
        ],
    )


def _spread_web(count: int) -> GangRequest:
    """`count` members of 2 cpu, spread over the zones with maxSkew 1."""
    spread = {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
    pods = members(
        "web", count, labels={"app": "web"}, requests={"cpu": 2}, topologySpreadConstraints=[spread]
    )
    return gang("web", pods)


def test_a_node_a_member_took_moves_up_in_the_shapes_own_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Once a shape walks its own best-fit order without its lost nodes (`Lost.order`; built
    here from the first lost node), the node a member was just assumed on must move up with
    its score: the next member takes the fullest node that passes, as a fresh walk would.

    a-node starts fuller than b-node (1 of 4 cpu against none), but zone spread sends the first
    member to b-node, which is then the fuller (2 of 4), so the second member goes there too."""
    monkeypatch.setattr(nodeorder, "UNLOST_ORDER_AFTER", 0.0)
    outcome = place_group(_spread_web(2), _two_zones_and_a_full_node(used_in_a=1, cpu=4))
    assert isinstance(outcome, Placement), outcome
    assert [b.node for b in outcome.bindings] == ["b-node", "b-node"]


def test_a_node_refused_for_spread_stays_in_the_shapes_own_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A spread refusal does not last (it changes as members are assumed), so the node stays
    in the shape's own order. The zones take turns; a-node comes first whenever it is as full
    as b-node or fuller (ties go by name), so it is refused to the third member (zone a one
    ahead) and is where the fourth goes."""
    monkeypatch.setattr(nodeorder, "UNLOST_ORDER_AFTER", 0.0)
    outcome = place_group(_spread_web(4), _two_zones_and_a_full_node(used_in_a=2, cpu=8))
    assert isinstance(outcome, Placement), outcome
    assert [b.node for b in outcome.bindings] == ["b-node", "a-node", "b-node", "a-node"]


def test_nodes_refused_for_zone_affinity_are_checked_once_for_the_whole_shape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Once a pod matches every affinity term, a node whose zone holds none stays refused as
    members are assumed (`interpod.LASTING_SETTLED`), so the shape's later members skip it.

    Forty fuller nodes in zone b come first in best-fit order; the only `app=web` pod runs in
    zone a. Each of the 20 members goes to a-node; zone b's nodes are checked by the first
    member only: 40 + 20 checks, where checking them for every member took 20 x 41."""
    nodes = [node("a-node", cpu=100, labels={ZONE: "a"})]
    running = [pod("web-old", labels={"app": "web"}, node="a-node", requests={"cpu": 1})]
    for i in range(40):
        nodes.append(node(f"b-{i:02}", cpu=100, labels={ZONE: "b"}))
        running.append(pod(f"other-{i}", node=f"b-{i:02}", requests={"cpu": 50}))
    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": ZONE}
    pods = members(
        "web",
        20,
        labels={"app": "web"},
        requests={"cpu": 1},
        affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
    )
    checked = 0
    verdict = interpod.MemberCheck.verdict

    def counted(self: interpod.MemberCheck, node_state: Any) -> Any:
        nonlocal checked
        checked += 1
        return verdict(self, node_state)

    monkeypatch.setattr(interpod.MemberCheck, "verdict", counted)
    outcome = place_group(gang("web", pods), Snapshot.build(nodes, running))
    assert isinstance(outcome, Placement), outcome
    assert {b.node for b in outcome.bindings} == {"a-node"}
    assert checked == 40 + 20
