"""Label selectors and affinity terms: kube-scheduler's matching, strict and lenient parsing."""

from __future__ import annotations

import pytest

from podgroup_operator.scheduling.podinfo import HostPort, inter_pod_constraints, pod_claims
from podgroup_operator.scheduling.selectors import (
    UnsupportedConstraintError,
    parse_affinity_term,
    parse_selector,
)
from tests.builders import pod


def test_match_labels_and_expressions_are_anded() -> None:
    selector = parse_selector(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["a", "b"]},
                {"key": "canary", "operator": "DoesNotExist"},
                {"key": "zone", "operator": "NotIn", "values": ["x"]},
                {"key": "team", "operator": "Exists"},
            ],
        },
        "s",
    )
    assert selector.matches({"app": "web", "tier": "a", "team": "t"})
    assert not selector.matches({"app": "web", "tier": "a", "team": "t", "canary": "1"})
    assert not selector.matches({"app": "web", "tier": "c", "team": "t"})
    assert not selector.matches({"app": "web", "tier": "a", "team": "t", "zone": "x"})
    assert not selector.matches({"app": "web", "tier": "a"})
    assert str(selector) == "app=web,!canary,team,tier in (a,b),zone notin (x)"


def test_empty_selects_everything_and_null_selects_nothing() -> None:
    assert parse_selector({}, "s").matches({})
    assert not parse_selector(None, "s").matches({"app": "web"})


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}, "operator"),
        ({"matchExpressions": [{"key": "a", "operator": "In"}]}, "values"),
        ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}, "values"),
        ({"matchExpressions": [{"operator": "Exists"}]}, "key"),
    ],
)
def test_bad_requirements_name_their_field(raw: dict[str, object], field: str) -> None:
    with pytest.raises(UnsupportedConstraintError) as caught:
        parse_selector(raw, "spec.x")
    assert caught.value.path == f"spec.x.matchExpressions[0].{field}"


def test_lenient_parsing_widens_instead_of_failing() -> None:
    raw = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "a", "operator": "Near", "values": ["1"]}],
    }
    assert parse_selector(raw, "s", strict=False).matches({"app": "web"})


def test_affinity_term_namespaces_default_to_the_owner() -> None:
    raw = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}
    term = parse_affinity_term(raw, "team-a", "t")
    assert term.namespaces == frozenset({"team-a"})
    assert term.matches("team-a", {"app": "db"})
    assert not term.matches("team-b", {"app": "db"})
    listed = parse_affinity_term({**raw, "namespaces": ["x", "y"]}, "team-a", "t")
    assert listed.namespaces == frozenset({"x", "y"})
    everywhere = parse_affinity_term({**raw, "namespaceSelector": {}}, "team-a", "t")
    assert everywhere.namespaces is None


def test_a_term_needs_a_topology_key() -> None:
    with pytest.raises(UnsupportedConstraintError) as caught:
        parse_affinity_term({"labelSelector": {}}, "ns", "t")
    assert caught.value.path == "t.topologyKey"


def test_inter_pod_constraints_collect_ports_claims_and_sidecar_ports() -> None:
    sidecar = {
        "name": "proxy",
        "image": "x",
        "restartPolicy": "Always",
        "ports": [{"containerPort": 15001, "hostPort": 15001}],
    }
    plain_init = {"name": "init", "image": "x", "ports": [{"containerPort": 1, "hostPort": 1}]}
    raw = pod(
        "p",
        initContainers=[plain_init, sidecar],
        volumes=[
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}},
            {"name": "tmp", "emptyDir": {}},
        ],
    )
    parsed = inter_pod_constraints(raw)
    assert parsed.ports == (HostPort("0.0.0.0", "TCP", 15001),)
    assert parsed.claims == ("data-0", "p-scratch")
    assert pod_claims(raw) == ("data-0", "p-scratch")
