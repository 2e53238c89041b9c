"""A labelled fabric in memory: one label dict per node, values naming one domain each."""

from __future__ import annotations

from collections import Counter

import pytest

from podgroup_operator import constants as c
from podgroup_operator.api.models import TopologySpec
from podgroup_operator.cli import build_parser
from podgroup_operator.devcluster.fabric import (
    FABRIC_LABEL_PREFIX,
    Fabric,
    fabric_labels,
    parse_fabric,
)
from podgroup_operator.devcluster.simnodes import NodePool, pools_from_args

ZONE, BLOCK, RACK = (f"{FABRIC_LABEL_PREFIX}{name}" for name in ("zone", "block", "rack"))


def test_kai_layout_nests_512_nodes_two_per_rack() -> None:
    labels = fabric_labels("zone=4,block=8,rack=8,host=2")
    assert len(labels) == 4 * 8 * 8 * 2 == 512
    assert labels[0] == labels[1] == {ZONE: "z0", BLOCK: "z0-b0", RACK: "z0-b0-r0"}
    assert labels[2] == {ZONE: "z0", BLOCK: "z0-b0", RACK: "z0-b0-r1"}
    assert labels[-1] == {ZONE: "z3", BLOCK: "z3-b7", RACK: "z3-b7-r7"}
    racks = Counter(node[RACK] for node in labels)
    assert len(racks) == 4 * 8 * 8 and set(racks.values()) == {2}
    blocks = Counter(node[BLOCK] for node in labels)
    assert len(blocks) == 32 and set(blocks.values()) == {16}
    assert Counter(node[ZONE] for node in labels) == {f"z{i}": 128 for i in range(4)}


def test_a_value_names_one_domain_whole_fabric_wide() -> None:
    """Rack 5 of block 3 and rack 5 of block 4 are different racks, so their values differ;
    and each rack value lies in exactly one block and one zone."""
    labels = fabric_labels("zone=2,block=2,rack=6")
    parents = {}
    for node in labels:
        parents.setdefault(node[RACK], set()).add((node[ZONE], node[BLOCK]))
    assert len(parents) == 2 * 2 * 6
    assert all(len(found) == 1 for found in parents.values())
    assert "z1-b0-r5" in parents and "z0-b1-r5" in parents


def test_full_keys_are_kept_and_without_host_each_rack_is_one_node() -> None:
    fabric = parse_fabric("topology.kubernetes.io/zone=2, rack=3")
    assert fabric.node_count == 6 and fabric.hosts == 1
    assert fabric.label_keys == ("topology.kubernetes.io/zone", RACK)
    assert fabric.topology_levels() == ("topology.kubernetes.io/zone", RACK)
    assert fabric_labels(fabric)[4] == {"topology.kubernetes.io/zone": "z1", RACK: "z1-r1"}


def test_the_topology_for_a_fabric_is_a_valid_one_ending_in_hostname() -> None:
    fabric = parse_fabric("zone=4,block=8,rack=8,host=2")
    body = fabric.topology("kai")
    assert body["kind"] == c.TOPOLOGY_KIND and body["metadata"] == {"name": "kai"}
    spec = TopologySpec.model_validate(body["spec"])
    assert spec.node_labels == (ZONE, BLOCK, RACK, c.LABEL_HOSTNAME)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "names no level; e.g. zone=4"),
        ("rack", "'rack' must look like LEVEL=COUNT"),
        ("rack=eight", "'eight' is not a whole number"),
        ("rack=0", "at least 1"),
        ("host=2,rack=4", "host (nodes per finest domain) may only be the last level"),
        ("rack=2,rack=3", "level 'example.com/rack' is given twice"),
        ("Rack!=2", "the label key 'example.com/Rack!' has the name part 'Rack!'"),
        ("kubernetes.io/hostname=2", "use host=N for the nodes per finest domain"),
        (",".join(f"l{i}=1" for i in range(17)), "more than 16 levels"),
        (",".join(f"level{i}=1000" for i in range(15)), "longer than a label value may be"),
    ],
)
def test_bad_specs_are_refused_naming_the_item_and_the_fix(spec: str, message: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_fabric(spec)
    assert message in str(refused.value)


def test_a_pool_with_a_fabric_labels_each_node_on_top_of_the_pool_labels() -> None:
    pool = NodePool(labels={"pool": "p"}).with_fabric(parse_fabric("rack=2,host=2"))
    assert pool.count == 4
    assert pool.labels_of(0) == {"pool": "p", RACK: "r0"}
    assert pool.labels_of(3) == {"pool": "p", RACK: "r1"}
    with pytest.raises(ValueError, match="node_labels has 1 entries for 2 nodes"):
        NodePool(count=2, node_labels=({RACK: "r0"},))


def test_sim_nodes_topology_flag_makes_the_main_pool_the_fabric() -> None:
    parser = build_parser()
    (pool,) = pools_from_args(parser.parse_args(["sim-nodes", "--topology", "zone=2,rack=2"]))
    assert pool.count == 4
    assert [pool.labels_of(i)[RACK] for i in range(4)] == ["z0-r0", "z0-r1", "z1-r0", "z1-r1"]
    (plain,) = pools_from_args(parser.parse_args(["sim-nodes"]))
    assert plain.count == 3 and not plain.node_labels
    matching = parser.parse_args(["sim-nodes", "--topology", "rack=2,host=2", "--count", "4"])
    assert pools_from_args(matching)[0].count == 4
    with pytest.raises(ValueError, match="--count 5 but --topology rack=2,host=2 makes 4 nodes"):
        pools_from_args(
            parser.parse_args(["sim-nodes", "--topology", "rack=2,host=2", "--count", "5"])
        )


def test_a_fabric_of_hosts_alone_has_only_hostname_as_its_level() -> None:
    fabric = Fabric((), hosts=3)
    assert fabric.node_labels() == [{}, {}, {}]
    assert fabric.topology_levels() == (c.LABEL_HOSTNAME,)
