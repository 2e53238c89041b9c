"""`kubectl podgroup fabric`: the fabric drawn level by level, with free room and gangs.

Building and rendering are pure (kubectl_fabric.py); `execute` runs against the in-memory API
server. The command runs as a real kubectl plugin on the demo's fabric in
tests/integration/test_kubectl_plugin.py.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator import kubectl_fabric as fabric
from podgroup_operator.adapters.kube import TOPOLOGIES, KubeClient
from podgroup_operator.devcluster.fabric import parse_fabric
from podgroup_operator.kubectl_plugin import PluginError, execute, parse
from tests.builders import node, pod
from tests.fakes import FakeApiServer

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
BLOCK, RACK = "example.com/block", "example.com/rack"


def demo_nodes(**extra: Any) -> list[dict[str, Any]]:
    """The demo's fabric: 2 blocks of 2 racks of one node of 8 cpu and 2 GPUs."""
    return [
        node(
            f"demo-node-{i}",
            cpu=8,
            extended={"nvidia.com/gpu": 2},
            labels={**labels, "pool": "demo"},
            **extra,
        )
        for i, labels in enumerate(parse_fabric("block=2,rack=2").node_labels())
    ]


def gang_on(nodes: list[str], group: str, cpu: str = "4", namespace: str = "team") -> list[Any]:
    return [
        pod(
            f"{group}-{i}",
            namespace,
            group=group,
            node=where,
            requests={"cpu": cpu},
            phase=c.PodPhase.RUNNING,
        )
        for i, where in enumerate(nodes)
    ]


def rows(text: str) -> list[list[str]]:
    """The table's rows as cells, cut at the header's column starts (a node's NODES is empty)."""
    table = text.split("\n\n", 1)[1].splitlines()
    starts = [m.start() for m in re.finditer(r"\S+", table[0])]
    bounds = [*zip(starts, [*starts[1:], None], strict=True)]
    return [[line[a:b].strip() for a, b in bounds] for line in table]


def test_each_domain_shows_free_of_allocatable_and_the_gangs_on_it() -> None:
    pods = gang_on(["demo-node-0", "", "demo-node-0", "demo-node-1", "demo-node-1"], "train")
    drawn = fabric.build((BLOCK, RACK), demo_nodes(), pods)
    text = fabric.render(drawn, fabric.shown_resources(drawn, None), title="Topology demo")
    assert text.splitlines()[0] == f"Topology demo: {BLOCK} > {RACK} > nodes"
    assert rows(text) == [
        ["DOMAIN", "NODES", "CPU", "NVIDIA.COM/GPU", "GANGS"],
        ["block b0", "2", "0/16", "4/4", "team/train x4"],
        ["rack b0-r0", "1", "0/8", "2/2", "team/train x2"],
        ["demo-node-0", "", "0/8", "2/2", "team/train x2"],
        ["rack b0-r1", "1", "0/8", "2/2", "team/train x2"],
        ["demo-node-1", "", "0/8", "2/2", "team/train x2"],
        ["block b1", "2", "16/16", "4/4", "-"],
        ["rack b1-r0", "1", "8/8", "2/2", "-"],
        ["demo-node-2", "", "8/8", "2/2", "-"],
        ["rack b1-r1", "1", "8/8", "2/2", "-"],
        ["demo-node-3", "", "8/8", "2/2", "-"],
    ]
    # Indented by level: blocks, racks, nodes.
    table = text.split("\n\n", 1)[1].splitlines()
    assert table[1].startswith("block b0") and table[2].startswith("  rack b0-r0")
    assert table[3].startswith("    demo-node-0")


def test_fits_counts_the_pods_of_a_shape_each_domain_holds_at_once() -> None:
    """Why `no rack holds 3 x {cpu: 4}`: every rack holds 2."""
    pods = gang_on(["demo-node-2"], "small", cpu="2")
    drawn = fabric.build((BLOCK, RACK), demo_nodes(), pods)
    text = fabric.render(drawn, ("cpu",), pod=fabric.parse_pod("cpu=4"))
    assert "FITS: pods of {cpu: 4} that fit at once" in text
    fits = {row[0]: row[3] for row in rows(text)[1:]}
    assert fits == {
        "block b0": "4",
        "rack b0-r0": "2",
        "demo-node-0": "2",
        "rack b0-r1": "2",
        "demo-node-1": "2",
        "block b1": "3",
        "rack b1-r0": "1",
        "demo-node-2": "1",
        "rack b1-r1": "2",
        "demo-node-3": "2",
    }


def test_a_rack_is_named_by_its_whole_path() -> None:
    """Rack `r1` of block `a` and rack `r1` of block `b` are two racks."""
    nodes = [
        node("n1", labels={BLOCK: "a", RACK: "r1"}),
        node("n2", labels={BLOCK: "b", RACK: "r1"}),
    ]
    drawn = fabric.build((BLOCK, RACK), nodes, [])
    assert [(d.value, [r.value for r in d.children]) for d in drawn.domains] == [
        ("a", ["r1"]),
        ("b", ["r1"]),
    ]
    assert [n.name for n in drawn.domains[1].all_nodes()] == ["n2"]


def test_nodes_lacking_a_label_unusable_nodes_and_terminated_pods() -> None:
    nodes = [
        node("in-rack", labels={BLOCK: "b0", RACK: "r0"}),
        node("no-rack", labels={BLOCK: "b0"}),
        node("cordoned", labels={BLOCK: "b0", RACK: "r0"}, unschedulable=True),
        node("down", labels={BLOCK: "b0", RACK: "r0"}, ready=False),
        node("loose"),
    ]
    pods = [
        pod("done", "team", node="in-rack", requests={"cpu": "8"}, phase=c.PodPhase.SUCCEEDED),
        pod("web", "team", node="in-rack", requests={"cpu": "1"}, phase=c.PodPhase.RUNNING),
    ]
    drawn = fabric.build((BLOCK, RACK, c.LABEL_HOSTNAME), nodes, pods)
    assert drawn.levels == (BLOCK, RACK)
    text = fabric.render(drawn, ("cpu",))
    table = {row[0]: row[1:] for row in rows(text)[1:]}
    # Free counts Ready, schedulable nodes only; allocatable counts every node.
    assert table["block b0"] == ["4", "15/32", "1 other pod(s)"]
    assert table["rack r0"] == ["3", "7/24", "1 other pod(s)"]
    assert table["cordoned (cordoned)"] == ["", "0/8", "-"]
    assert table["down (NotReady)"] == ["", "0/8", "-"]
    assert table[f"no-rack (no {RACK})"] == ["", "8/8", "-"]
    assert table[f"(no {BLOCK})"] == ["1", "8/8", "-"]
    assert table["loose"] == ["", "8/8", "-"]


def test_default_columns_are_cpu_and_gpus_where_offered() -> None:
    plain = fabric.build((RACK,), [node("n", labels={RACK: "r"})], [])
    assert fabric.shown_resources(plain, None) == ("cpu",)
    gpus = fabric.build((RACK,), demo_nodes(), [])
    assert fabric.shown_resources(gpus, None) == ("cpu", "nvidia.com/gpu")
    assert fabric.shown_resources(gpus, ("memory",)) == ("memory",)


def test_domains_sort_naturally() -> None:
    nodes = [node(f"n{i}", labels={RACK: f"r{i}"}) for i in (10, 2, 1)]
    drawn = fabric.build((RACK,), nodes, [])
    assert [d.value for d in drawn.domains] == ["r1", "r2", "r10"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["fabric"], "fabric needs one of --topology NAME or --levels KEY,KEY"),
        (["fabric", "--topology", "t", "--levels", "a"], "fabric needs one of --topology"),
        (["fabric", "x", "--topology", "t"], "fabric takes no NAME (got x)"),
        (["fabric", "--topology", "t", "-o", "yaml"], "fabric does not take -o/--output"),
        (["fabric", "--topology", "t", "-A"], "fabric shows the whole cluster: drop -n/-A"),
        (["fabric", "--levels", "a b"], "--levels: 'a b'"),
        (["fabric", "--levels", "a,a"], "--levels names a key twice"),
        (["fabric", "--levels", "a", "--pod", "cpu"], "--pod item 'cpu' must look like"),
        (["fabric", "--levels", "a", "--pod", "cpu=lots"], "'lots' is not a quantity"),
        (
            ["get", "--levels", "a"],
            "--topology, --levels, --resources, --pod, -l and --no-nodes belong to fabric",
        ),
    ],
)
def test_bad_fabric_arguments_are_one_line_errors(argv: list[str], message: str) -> None:
    with pytest.raises(PluginError) as raised:
        parse(argv, lambda *_: "team")
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_fabric_parses_its_options() -> None:
    invocation = parse(
        ["fabric", "--levels", f"{BLOCK},{RACK}", "--resources", "cpu,memory", "--pod", "cpu=4"],
        lambda *_: "team",
    )
    assert invocation.verb == "fabric"
    assert invocation.fabric is not None
    assert invocation.fabric.levels == (BLOCK, RACK)
    assert invocation.fabric.resources == ("cpu", "memory")
    assert invocation.fabric.pod == {"cpu": 4000, "pods": 1000}


async def test_fabric_reads_the_topology_nodes_and_bound_pods() -> None:
    server = FakeApiServer()
    server.seed(
        *demo_nodes(),
        *gang_on(["demo-node-3", "demo-node-3"], "train"),
        pod("waiting", "team", group="train", requests={"cpu": "4"}),
        node("elsewhere", labels={BLOCK: "b9", RACK: "b9-r0"}),
    )
    kube = KubeClient(server)
    await kube.create(TOPOLOGIES, parse_fabric("block=2,rack=2").topology("demo"))
    outcome = await execute(
        KubeClient(server),
        parse(["fabric", "--topology", "demo", "-l", "pool=demo"], lambda *_: "x"),
        NOW,
    )
    assert outcome.code == 0, outcome.errors
    table = {row[0]: row[1:] for row in rows(outcome.stdout)[1:]}
    assert table["rack b1-r1"] == ["1", "0/8", "2/2", "team/train x2"]
    assert table["block b0"] == ["2", "16/16", "4/4", "-"]
    assert "block b9" not in table  # not selected by -l


async def test_a_missing_topology_is_kubectls_not_found_line() -> None:
    server = FakeApiServer()
    server.seed(*demo_nodes())
    outcome = await execute(
        KubeClient(server), parse(["fabric", "--topology", "nope"], lambda *_: "x"), NOW
    )
    assert outcome.code == 1
    assert outcome.errors == [
        'Error from server (NotFound): topologies.scheduling.x-k8s.io "nope" not found'
    ]


def test_without_nodes_only_the_domains_are_drawn() -> None:
    drawn = fabric.build((BLOCK, RACK), demo_nodes(), [])
    text = fabric.render(drawn, ("cpu",), nodes=False)
    assert text.splitlines()[0] == f"{BLOCK} > {RACK}"
    assert [row[0] for row in rows(text)[1:]] == [
        "block b0",
        "rack b0-r0",
        "rack b0-r1",
        "block b1",
        "rack b1-r0",
        "rack b1-r1",
    ]


def test_a_topology_of_hostnames_only_is_a_flat_list_of_nodes() -> None:
    drawn = fabric.build((c.LABEL_HOSTNAME,), [node("n2"), node("n1")], [])
    text = fabric.render(drawn, ("cpu",), nodes=False)
    assert text.splitlines()[0] == "nodes"
    assert rows(text)[1:] == [["n1", "", "8/8", "-"], ["n2", "", "8/8", "-"]]
