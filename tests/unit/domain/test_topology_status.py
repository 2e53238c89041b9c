"""A Topology's status is a pure function of its levels and the nodes' labels and readiness."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from podgroup_operator import constants as c
from podgroup_operator.api.models import TopologyStatus
from podgroup_operator.devcluster.fabric import fabric_labels
from podgroup_operator.domain.topology import (
    NodeLabels,
    status_differs,
    stored_levels,
    topology_status,
)

ZONE, RACK = "example.com/zone", "example.com/rack"


def test_domains_count_every_node_with_the_label_and_missing_counts_ready_ones() -> None:
    nodes = [
        NodeLabels({ZONE: "z0", RACK: "z0-r0", c.LABEL_HOSTNAME: "n0"}, ready=True),
        NodeLabels({ZONE: "z0", RACK: "z0-r1", c.LABEL_HOSTNAME: "n1"}, ready=False),
        NodeLabels({ZONE: "z1", c.LABEL_HOSTNAME: "n2"}, ready=True),  # no rack, Ready
        NodeLabels({c.LABEL_HOSTNAME: "n3"}, ready=False),  # no labels, not Ready: not counted
        NodeLabels({c.LABEL_HOSTNAME: "n4"}, ready=True),
    ]
    status = topology_status([ZONE, RACK, c.LABEL_HOSTNAME], nodes, generation=3)
    assert status.to_api() == {
        "levels": [
            {"nodeLabel": ZONE, "domains": 2, "nodesWithoutLabel": 1},
            {"nodeLabel": RACK, "domains": 2, "nodesWithoutLabel": 2},
            {"nodeLabel": c.LABEL_HOSTNAME, "domains": 5, "nodesWithoutLabel": 0},
        ],
        "observedGeneration": 3,
    }


def test_a_fabric_has_the_domains_its_spec_says() -> None:
    nodes = [NodeLabels(labels, ready=True) for labels in fabric_labels("zone=4,rack=8,host=2")]
    status = topology_status([ZONE, RACK], nodes)
    assert [(level.domains, level.nodes_without_label) for level in status.levels] == [
        (4, 0),
        (32, 0),
    ]
    assert status.observed_generation is None


def test_no_nodes_no_domains() -> None:
    status = topology_status([RACK], [])
    assert status.to_api() == {
        "levels": [{"nodeLabel": RACK, "domains": 0, "nodesWithoutLabel": 0}]
    }


def test_a_stored_status_differs_only_when_it_says_something_else() -> None:
    computed = topology_status([RACK], [NodeLabels({RACK: "r0"}, ready=True)], generation=1)
    assert not status_differs(computed.to_api(), computed)
    # Stored through JSON with a field this operator does not write: the same status.
    assert not status_differs({**computed.to_api(), "note": "x"}, computed)
    assert status_differs(None, computed)
    assert status_differs({}, computed)
    assert status_differs({"levels": "garbage"}, computed)
    assert status_differs({**computed.to_api(), "observedGeneration": 0}, computed)


def test_stored_levels_read_the_label_keys_in_order_and_skip_broken_entries() -> None:
    body = {"spec": {"levels": [{"nodeLabel": ZONE}, {"nodeLabel": 3}, "x", {"nodeLabel": RACK}]}}
    assert stored_levels(body) == (ZONE, RACK)
    assert stored_levels({"spec": {}}) == ()
    assert stored_levels({}) == ()


@given(
    st.lists(
        st.tuples(
            st.dictionaries(st.sampled_from([ZONE, RACK]), st.sampled_from("abc"), max_size=2),
            st.booleans(),
        ),
        max_size=30,
    )
)
def test_every_ready_node_is_counted_in_a_domain_or_as_missing(
    nodes: list[tuple[dict[str, str], bool]],
) -> None:
    facts = [NodeLabels(labels, ready) for labels, ready in nodes]
    status = topology_status([ZONE, RACK], facts)
    for level in status.levels:
        carrying = [labels[level.node_label] for labels, _ in nodes if level.node_label in labels]
        assert level.domains == len(set(carrying))
        ready_without = [1 for labels, ready in nodes if ready and level.node_label not in labels]
        assert level.nodes_without_label == len(ready_without)
    assert TopologyStatus.model_validate(status.to_api()) == status
