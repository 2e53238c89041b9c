"""Static node filters: selector, required node affinity, taints/tolerations, cordon, readiness."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from podgroup_operator.scheduling.filters import (
    NODE_NAME_FIELD,
    Exclusion,
    Requirement,
    Taint,
    Term,
    TermIndex,
    Toleration,
    TolerationIndex,
    check_node,
    node_facts,
    pod_constraints,
)
from podgroup_operator.scheduling.snapshot import Snapshot
from tests.builders import node, pod


def affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    body: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        body["values"] = list(values)
    return body


def verdict(raw_pod: dict[str, Any], raw_node: dict[str, Any]) -> Exclusion | None:
    result = check_node(pod_constraints(raw_pod), node_facts(raw_node))
    return None if result is None else result.exclusion


GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def test_node_selector_needs_every_label() -> None:
    raw = pod("p", nodeSelector={"pool": "gpu", "zone": "a"})
    assert verdict(raw, node("n1", labels={"pool": "gpu", "zone": "a"})) is None
    assert verdict(raw, node("n2", labels={"pool": "gpu"})) is Exclusion.NODE_SELECTOR
    assert verdict(raw, node("n3", labels={"pool": "cpu", "zone": "a"})) is Exclusion.NODE_SELECTOR


@pytest.mark.parametrize(
    ("requirement", "labels", "matches"),
    [
        (expr("zone", "In", "a", "b"), {"zone": "b"}, True),
        (expr("zone", "In", "a", "b"), {"zone": "c"}, False),
        (expr("zone", "In", "a"), {}, False),
        (expr("zone", "NotIn", "a"), {"zone": "b"}, True),
        (expr("zone", "NotIn", "a"), {}, True),
        (expr("zone", "NotIn", "a"), {"zone": "a"}, False),
        (expr("gpu", "Exists"), {"gpu": ""}, True),
        (expr("gpu", "Exists"), {}, False),
        (expr("gpu", "DoesNotExist"), {}, True),
        (expr("gpu", "DoesNotExist"), {"gpu": "x"}, False),
        (expr("cores", "Gt", "8"), {"cores": "16"}, True),
        (expr("cores", "Gt", "8"), {"cores": "8"}, False),
        (expr("cores", "Gt", "8"), {"cores": "many"}, False),
        (expr("cores", "Gt", "8"), {}, False),
        (expr("cores", "Lt", "8"), {"cores": "4"}, True),
        (expr("cores", "Lt", "8"), {"cores": "8"}, False),
    ],
)
def test_affinity_operators(
    requirement: dict[str, Any], labels: dict[str, str], matches: bool
) -> None:
    raw = pod("p", affinity=affinity({"matchExpressions": [requirement]}))
    expected = None if matches else Exclusion.NODE_AFFINITY
    assert verdict(raw, node("n", labels=labels)) is expected


def test_affinity_terms_are_ored_and_expressions_anded() -> None:
    raw = pod(
        "p",
        affinity=affinity(
            {"matchExpressions": [expr("zone", "In", "a"), expr("pool", "In", "gpu")]},
            {"matchExpressions": [expr("zone", "In", "b")]},
        ),
    )
    assert verdict(raw, node("both", labels={"zone": "a", "pool": "gpu"})) is None
    assert verdict(raw, node("half", labels={"zone": "a", "pool": "cpu"})) is not None
    assert verdict(raw, node("second", labels={"zone": "b"})) is None


def test_empty_term_matches_nothing() -> None:
    raw = pod("p", affinity=affinity({}))
    assert verdict(raw, node("n")) is Exclusion.NODE_AFFINITY


def test_match_fields_select_on_node_name() -> None:
    raw = pod(
        "p",
        affinity=affinity({"matchFields": [expr("metadata.name", "In", "node-a")]}),
    )
    assert verdict(raw, node("node-a")) is None
    assert verdict(raw, node("node-b")) is Exclusion.NODE_AFFINITY
    not_in = pod(
        "q", affinity=affinity({"matchFields": [expr("metadata.name", "NotIn", "node-a")]})
    )
    assert verdict(not_in, node("node-a")) is Exclusion.NODE_AFFINITY
    assert verdict(not_in, node("node-b")) is None


@pytest.mark.parametrize("effect", ["NoSchedule", "NoExecute"])
def test_enforced_taints_must_be_tolerated(effect: str) -> None:
    tainted = node("n", taints=[{**GPU_TAINT, "effect": effect}])
    assert verdict(pod("p"), tainted) is Exclusion.TAINT
    tolerant = pod(
        "q",
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present"}],
    )
    assert verdict(tolerant, tainted) is None


def test_prefer_no_schedule_is_ignored() -> None:
    soft = node("n", taints=[{**GPU_TAINT, "effect": "PreferNoSchedule"}])
    assert verdict(pod("p"), soft) is None


def test_toleration_exists_ignores_the_value() -> None:
    tainted = node("n", taints=[GPU_TAINT])
    raw = pod("p", tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}])
    assert verdict(raw, tainted) is None


def test_toleration_equal_needs_the_same_value() -> None:
    tainted = node("n", taints=[GPU_TAINT])
    raw = pod("p", tolerations=[{"key": "nvidia.com/gpu", "operator": "Equal", "value": "no"}])
    assert verdict(raw, tainted) is Exclusion.TAINT


def test_toleration_effect_must_match_when_given() -> None:
    tainted = node("n", taints=[GPU_TAINT])
    wrong = pod(
        "p", tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}]
    )
    right = pod(
        "q", tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    )
    assert verdict(wrong, tainted) is Exclusion.TAINT
    assert verdict(right, tainted) is None


def test_empty_key_with_exists_tolerates_every_taint() -> None:
    tainted = node(
        "n",
        taints=[GPU_TAINT, {"key": "dedicated", "value": "x", "effect": "NoExecute"}],
        unschedulable=True,
    )
    assert verdict(pod("p", tolerations=[{"operator": "Exists"}]), tainted) is None
    # An empty key with Equal tolerates nothing.
    assert verdict(pod("q", tolerations=[{"operator": "Equal"}]), tainted) is not None


_TOLERATIONS = st.builds(
    Toleration,
    st.sampled_from(["", "a", "b"]),
    st.sampled_from(["Exists", "Equal"]),
    st.sampled_from(["", "x", "y"]),
    st.sampled_from(["", "NoSchedule", "NoExecute", "PreferNoSchedule"]),
)
_TAINTS = st.builds(
    Taint,
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from(["", "x", "y"]),
    st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"]),
)


@given(tolerations=st.lists(_TOLERATIONS, max_size=6), taint=_TAINTS)
def test_the_toleration_index_tolerates_what_any_toleration_does(
    tolerations: list[Toleration], taint: Taint
) -> None:
    """The index looks a taint's key up (a pod may carry thousands of tolerations); the rule
    is each toleration's own."""
    expected = any(t.tolerates(taint) for t in tolerations)
    assert TolerationIndex.of(tolerations).tolerates(taint) is expected


def test_cordoned_node_needs_the_unschedulable_toleration() -> None:
    cordoned = node("n", unschedulable=True)
    assert verdict(pod("p"), cordoned) is Exclusion.UNSCHEDULABLE
    raw = pod(
        "q",
        tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}],
    )
    assert verdict(raw, cordoned) is None


def test_not_ready_node_is_excluded() -> None:
    assert verdict(pod("p", tolerations=[{"operator": "Exists"}]), node("n", ready=False)) is (
        Exclusion.NOT_READY
    )
    no_conditions = node("m")
    no_conditions["status"]["conditions"] = []
    assert verdict(pod("p"), no_conditions) is Exclusion.NOT_READY


def test_identical_nodes_share_one_class_but_hostname_selectors_still_work() -> None:
    snapshot = Snapshot.build([node(f"n{i}", labels={"pool": "a"}) for i in range(4)], [])
    any_node = snapshot.classes.feasibility(pod_constraints(pod("p")))
    assert len(any_node.classes) == 1
    assert len(list(snapshot.classes.best_fit_order(any_node))) == 4
    pinned = pod("q", nodeSelector={"kubernetes.io/hostname": "n2"})
    only = [
        n.name
        for n in snapshot.classes.best_fit_order(
            snapshot.classes.feasibility(pod_constraints(pinned))
        )
    ]
    assert only == ["n2"]


def test_cached_verdicts_follow_node_changes() -> None:
    snapshot = Snapshot.build([node("n1"), node("n2")], [])
    constraints = pod_constraints(pod("p"))
    assert (
        len(list(snapshot.classes.best_fit_order(snapshot.classes.feasibility(constraints)))) == 2
    )
    snapshot.update_node(node("n2", taints=[GPU_TAINT]))
    names = [
        n.name for n in snapshot.classes.best_fit_order(snapshot.classes.feasibility(constraints))
    ]
    assert names == ["n1"]
    counts = snapshot.classes.exclusions(snapshot.classes.feasibility(constraints))
    assert sum(counts.values()) == 1


_VALUES = st.sampled_from(["x", "y", "1", "5"])
_REQUIREMENTS = st.builds(
    Requirement,
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Bogus"]),
    st.lists(_VALUES, max_size=3).map(tuple),
)
_FIELDS = st.builds(
    Requirement,
    st.sampled_from([NODE_NAME_FIELD, "spec.unschedulable"]),
    st.sampled_from(["In", "NotIn"]),
    st.lists(st.sampled_from(["n1", "n2"]), max_size=3).map(tuple),
)
_TERMS = st.builds(
    Term,
    st.lists(_REQUIREMENTS, max_size=3).map(tuple),
    st.lists(_FIELDS, max_size=2).map(tuple),
)
_LABELS = st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), _VALUES, max_size=4)


@given(
    terms=st.lists(_TERMS, max_size=12),
    name=st.sampled_from(["n1", "n2", "n3"]),
    labels=_LABELS,
)
@example(terms=[Term((Requirement("a", "In", ("x", "x")),), ())], name="n1", labels={"a": "x"})
@example(
    terms=[Term((), (Requirement(NODE_NAME_FIELD, "In", ("n1", "n1")),))], name="n1", labels={}
)
def test_the_term_index_offers_every_term_that_matches_and_each_once(
    terms: list[Term], name: str, labels: dict[str, str]
) -> None:
    """The index only skips terms that cannot match the node (a pod may list thousands); the
    rule is each term's own, and a term offered twice would count twice in a score."""
    offered = list(TermIndex.of(terms).candidates(name, labels))
    assert len(offered) == len(set(offered))
    matching = {i for i, term in enumerate(terms) if term.matches(name, labels)}
    assert matching <= set(offered)


def test_thousands_of_terms_still_find_the_one_that_matches() -> None:
    """Past SCAN_TERMS the verdict goes through the index: the last term of 5,000 admits."""
    terms = [{"matchExpressions": [expr(f"k{i}", "Exists")]} for i in range(4999)]
    raw = pod("p", affinity=affinity(*terms, {"matchExpressions": [expr("pool", "In", "a")]}))
    assert verdict(raw, node("n", labels={"pool": "a"})) is None
    assert verdict(raw, node("n", labels={"pool": "b"})) is Exclusion.NODE_AFFINITY
    named = pod("q", affinity=affinity(*terms, {"matchFields": [expr(NODE_NAME_FIELD, "In", "n")]}))
    assert verdict(named, node("n")) is None
    assert verdict(named, node("m")) is Exclusion.NODE_AFFINITY
