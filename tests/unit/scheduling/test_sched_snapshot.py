"""Snapshot bookkeeping: bound pods count, incremental events, assume and undo."""

from __future__ import annotations

import pytest

from podgroup_operator.constants import PodPhase
from podgroup_operator.domain.membership import group_key_of
from podgroup_operator.scheduling.filters import NO_CONSTRAINTS
from podgroup_operator.scheduling.selectors import parse_selector
from podgroup_operator.scheduling.snapshot import Snapshot
from tests.builders import node, pod
from tests.unit.scheduling.helpers import uid_of

CPU_8 = 8000


def test_bound_pods_of_any_scheduler_count_and_finished_or_unbound_do_not() -> None:
    pods = [
        pod("mine", requests={"cpu": "2"}, node="n1", phase=PodPhase.RUNNING),
        pod("theirs", requests={"cpu": "1"}, node="n1", scheduler="default-scheduler"),
        pod("done", requests={"cpu": "4"}, node="n1", phase=PodPhase.SUCCEEDED),
        pod("failed", requests={"cpu": "4"}, node="n1", phase=PodPhase.FAILED),
        pod("pending", requests={"cpu": "4"}),
    ]
    snapshot = Snapshot.build([node("n1")], pods)
    assert snapshot.free("n1")["cpu"] == CPU_8 - 3000
    assert snapshot.free("n1")["pods"] == 108_000


def test_pod_events_are_incremental_and_reversible() -> None:
    snapshot = Snapshot.build([node("n1"), node("n2")], [])
    before = snapshot.state()
    bound = pod("p", requests={"cpu": "3"}, node="n2")
    snapshot.add_pod(bound)
    assert snapshot.free("n2")["cpu"] == 5000
    assert snapshot.total_free()["cpu"] == 2 * CPU_8 - 3000
    finished = {**bound, "status": {"phase": PodPhase.SUCCEEDED}}
    snapshot.update_pod(finished)
    assert snapshot.state() == before
    snapshot.add_pod(bound)
    snapshot.remove_pod(uid_of(bound))
    assert snapshot.state() == before


def test_pod_seen_before_its_node_counts_once_the_node_arrives() -> None:
    snapshot = Snapshot()
    snapshot.add_pod(pod("early", requests={"cpu": "2"}, node="late"))
    snapshot.add_node(node("late"))
    assert snapshot.free("late")["cpu"] == 6000
    snapshot.remove_node("late")
    assert len(snapshot) == 0
    snapshot.add_node(node("late"))
    assert snapshot.free("late")["cpu"] == 6000


def test_node_update_recomputes_free_from_new_allocatable() -> None:
    snapshot = Snapshot.build([node("n1")], [pod("p", requests={"cpu": "2"}, node="n1")])
    snapshot.update_node(node("n1", cpu=16))
    assert snapshot.free("n1")["cpu"] == 14_000
    assert snapshot.total_free()["cpu"] == 14_000


def test_not_ready_and_cordoned_nodes_do_not_count_toward_total_free() -> None:
    snapshot = Snapshot.build(
        [node("ok"), node("down", ready=False), node("cordon", unschedulable=True)], []
    )
    assert snapshot.total_free()["cpu"] == CPU_8
    snapshot.update_node(node("down"))
    assert snapshot.total_free()["cpu"] == 2 * CPU_8


def test_update_dispatches_on_kind() -> None:
    snapshot = Snapshot()
    snapshot.update(node("n1"))
    snapshot.update(pod("p", requests={"cpu": "1"}, node="n1"))
    assert snapshot.free("n1")["cpu"] == 7000


def test_assume_returns_an_undo_that_restores_the_snapshot() -> None:
    snapshot = Snapshot.build([node("n1"), node("n2")], [])
    before = snapshot.state()
    undo = snapshot.assume([("a", "n1", {"cpu": 2000, "pods": 1000}), ("b", "n1", {"cpu": 1000})])
    assert snapshot.free("n1")["cpu"] == 5000
    assert snapshot.is_assumed("a")
    undo()
    assert snapshot.state() == before
    undo()  # twice is harmless
    assert snapshot.state() == before


def test_a_bound_pod_confirms_its_assumption_and_undo_then_leaves_it() -> None:
    snapshot = Snapshot.build([node("n1")], [])
    real = pod("p", requests={"cpu": "2"}, node="n1")
    undo = snapshot.assume([(uid_of(real), "n1", {"cpu": 2000, "pods": 1000})])
    snapshot.add_pod(real)
    assert not snapshot.is_assumed(uid_of(real))
    undo()
    assert snapshot.free("n1")["cpu"] == 6000


def test_fullest_node_comes_first_and_ties_go_by_name() -> None:
    snapshot = Snapshot.build([node("c"), node("a"), node("b")], [])
    order = [
        n.name
        for n in snapshot.classes.best_fit_order(snapshot.classes.feasibility(NO_CONSTRAINTS))
    ]
    assert order == ["a", "b", "c"]
    snapshot.add_pod(pod("p", requests={"cpu": "4"}, node="c"))
    order = [
        n.name
        for n in snapshot.classes.best_fit_order(snapshot.classes.feasibility(NO_CONSTRAINTS))
    ]
    assert order == ["c", "a", "b"]


def test_assume_refuses_unknown_nodes_and_duplicates_without_changing_anything() -> None:
    snapshot = Snapshot.build([node("n1")], [])
    before = snapshot.state()
    with pytest.raises(KeyError, match="unknown node"):
        snapshot.assume([("a", "n1", {"cpu": 1000}), ("b", "ghost", {"cpu": 1000})])
    with pytest.raises(ValueError, match="duplicate"):
        snapshot.assume([("a", "n1", {"cpu": 1000}), ("a", "n1", {"cpu": 1000})])
    assert snapshot.state() == before


def test_update_without_kind_is_refused() -> None:
    raw = node("n1")
    del raw["kind"]
    with pytest.raises(ValueError, match="kind"):
        Snapshot().update(raw)


def test_simulated_removal_is_undone_exactly() -> None:
    pods = [
        pod("a", requests={"cpu": "2"}, node="n1", labels={"app": "x"}, priority=5),
        pod("b", requests={"cpu": "1"}, node="n2", group="g"),
        pod("c", requests={"cpu": "1"}, node="n2", group="g", deleting=True),
    ]
    snapshot = Snapshot.build([node("n1"), node("n2")], pods)
    before = (snapshot.state(), snapshot.index_state())
    undo = snapshot.simulate_removal([uid_of(p) for p in pods])
    assert snapshot.free("n1")["cpu"] == CPU_8
    assert snapshot.pod_index.units() == {}
    assert snapshot.pod_index.terminating() == frozenset()
    undo()
    assert (snapshot.state(), snapshot.index_state()) == before
    undo()  # a second call changes nothing
    assert (snapshot.state(), snapshot.index_state()) == before


def test_pods_are_indexed_by_label_namespace_gang_and_priority() -> None:
    pods = [
        pod("a", node="n1", labels={"app": "x"}, group="g", priority=7),
        pod("b", "other", node="n1", labels={"app": "x"}),
        pod("c", node="n1", labels={"app": "y"}, priority=7),
    ]
    snapshot = Snapshot.build([node("n1")], pods, gang_of=group_key_of)
    selector = parse_selector({"matchLabels": {"app": "x"}}, "s")
    found = sorted(
        e.info.name for e in snapshot.pod_index.pods_matching(selector, frozenset({"default"}))
    )
    assert found == ["a"]
    assert sorted(e.info.name for e in snapshot.pod_index.pods_matching(selector, None)) == [
        "a",
        "b",
    ]
    assert set(snapshot.pod_index.units()) == {
        ("gang", "default", "g"),
        ("pod", "other", uid_of(pods[1])),
        ("pod", "default", uid_of(pods[2])),
    }
    assert snapshot.nodes["n1"].priorities == {7: 2, 0: 1}


def test_anti_affinity_of_a_pod_on_an_unknown_node_counts_once_the_node_arrives() -> None:
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "x"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    guard = pod("guard", node="late", affinity=anti)
    snapshot = Snapshot()
    snapshot.add_pod(guard)
    assert snapshot.pod_index.has_anti_affinity
    assert snapshot.nodes == {}
    snapshot.add_node(node("late"))
    [(term, holders)] = snapshot.pod_index.anti_affinity_against("default", {"app": "x"})
    assert term.topology_key == "kubernetes.io/hostname"
    assert list(holders) == ["late"]
    assert list(snapshot.pod_index.anti_affinity_against("default", {"app": "y"})) == []
    snapshot.remove_pod(uid_of(guard))
    assert not snapshot.pod_index.has_anti_affinity
