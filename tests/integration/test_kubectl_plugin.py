"""`kubectl podgroup` as users run it: a kubectl plugin on PATH, against the dev cluster.

The kubeconfig has two contexts on the same cluster: `team`, the current one, sets the test's
namespace; `plain` sets none (so: `default`). The plugin must follow them as kubectl does, and
fail in one line with exit code 1.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import NODES, PODGROUPS, PODS, ApiError, KubeClient
from podgroup_operator.devcluster.fabric import parse_fabric
from podgroup_operator.devcluster.process import OperatorProcess
from podgroup_operator.devcluster.simnodes import NodePool, SimCluster
from tests.builders import podgroup
from tests.deploy_helpers import KUBECTL
from tests.kube_helpers import create_group, create_pod, gang_pods, group_status, unique_prefix
from tests.waiting import wait_for

BIN = Path(sys.executable).parent


def two_contexts(admin: Path, target: Path, namespace: str) -> Path:
    """A copy of the admin kubeconfig with contexts `team` (namespace set, current) and `plain`."""
    config = yaml.safe_load(admin.read_text())
    (context,) = config["contexts"]
    config["contexts"] = [
        {"name": "team", "context": {**context["context"], "namespace": namespace}},
        {"name": "plain", "context": dict(context["context"])},
    ]
    config["current-context"] = "team"
    target.write_text(yaml.safe_dump(config))
    return target


WAITING = r"NotEnoughTasks: 1 .*minMember 2"
"""Why the gang waits: the fixture writes it, and the session operator may rewrite the message
in its own words at any moment (same reason and counts), so both wordings must match."""


def plugin(*args: str, kubeconfig: Path | None) -> subprocess.CompletedProcess[str]:
    """`kubectl podgroup ARGS`: kubectl finds `kubectl-podgroup` on PATH, as after pip install."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("KUBECONFIG", None)
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    return subprocess.run(
        [str(KUBECTL), "podgroup", *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


@pytest.fixture
async def gang(kube: KubeClient, crds: None, namespace: str) -> Any:
    """A waiting PodGroup with one member bound to a node, and an Event about it."""
    name = f"gang-{uuid.uuid4().hex[:8]}"
    node = f"plugin-node-{uuid.uuid4().hex[:6]}"
    await kube.create(
        NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}, "spec": {}}
    )
    # The member exists before its group, so an operator that sees the group sees it too (the
    # wait below covers a watch that lags behind).
    await create_pod(kube, namespace, f"{name}-0", group=name, node=node)
    body = podgroup(name, namespace, min_member=2)
    for field in ("uid", "creationTimestamp"):
        body["metadata"].pop(field)
    group = await kube.create(PODGROUPS, body, namespace)
    group = await kube.patch_status(
        PODGROUPS,
        name,
        namespace,
        {
            "phase": c.Phase.PENDING,
            "conditions": [
                {
                    "type": c.ConditionType.UNSCHEDULABLE,
                    "status": c.ConditionStatus.TRUE,
                    "reason": c.Reason.NOT_ENOUGH_TASKS,
                    "message": "1 of minMember 2 member pods exist",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
        },
    )

    async def settled() -> bool | None:
        # The session operator (if started) rewrites the status in its own words; the listing
        # is checked once a status counting the bound member is in place.
        status = await group_status(kube, namespace, name)
        messages = [cond.get("message", "") for cond in status.get("conditions", [])]
        return any(re.search(WAITING, f"NotEnoughTasks: {m}") for m in messages) or None

    await wait_for(settled, 30, f"{namespace}/{name} counts its bound member")
    await kube.create_event(
        group,
        event_type=c.EventType.NORMAL,
        reason=c.Reason.PHASE_CHANGED,
        message="new -> Pending: waiting for members",
        timestamp="2026-01-01T00:00:00Z",
    )
    yield name, node
    try:
        await kube.delete(NODES, node)
    except ApiError as exc:
        if not exc.not_found:
            raise


async def test_lists_in_the_contexts_namespace_and_follows_context_and_flags(
    kubeconfig: Path, namespace: str, gang: tuple[str, str], tmp_path: Path
) -> None:
    name, _ = gang
    config = two_contexts(kubeconfig, tmp_path / "config", namespace)

    listed = plugin(kubeconfig=config)
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert header.split()[:2] == ["NAME", "PHASE"]
    assert row.split()[:3] == [name, "Pending", "2"]
    assert re.search(WAITING, row), row

    # `plain` sets no namespace: the group is not in `default`.
    elsewhere = plugin("--context", "plain", name, kubeconfig=config)
    assert elsewhere.returncode == 1
    assert elsewhere.stdout == ""
    assert elsewhere.stderr == (
        f'Error from server (NotFound): podgroups.scheduling.x-k8s.io "{name}" not found\n'
    )
    # ... unless told with -n; and --kubeconfig works without $KUBECONFIG.
    named = plugin(
        "--kubeconfig",
        str(config),
        "--context",
        "plain",
        "-n",
        namespace,
        name,
        "-o",
        "name",
        kubeconfig=None,
    )
    assert (named.returncode, named.stdout) == (0, f"podgroup.scheduling.x-k8s.io/{name}\n")

    everywhere = plugin("-A", "-o", "wide", kubeconfig=config)
    assert everywhere.returncode == 0, everywhere.stderr
    assert [namespace, name] in [line.split()[:2] for line in everywhere.stdout.splitlines()]

    as_json = plugin(name, "-o", "json", kubeconfig=config)
    assert json.loads(as_json.stdout)["metadata"]["name"] == name


async def test_describe_shows_members_nodes_why_it_waits_and_events(
    kubeconfig: Path, namespace: str, gang: tuple[str, str], tmp_path: Path
) -> None:
    name, node = gang
    config = two_contexts(kubeconfig, tmp_path / "config", namespace)
    described = plugin("describe", name, kubeconfig=config)
    assert described.returncode == 0, described.stderr
    text = described.stdout
    assert f"Name:               {name}" in text
    assert f"Namespace:          {namespace}" in text
    assert re.search(r"Waiting For: +" + WAITING, text), text
    members = text.split("Member Pods:\n")[1].split("Events:")[0].splitlines()
    assert members[1].split()[:3] == [f"{name}-0", "Pending", node]
    assert "new -> Pending: waiting for members" in text.split("Events:\n")[1]


def test_errors_are_one_line_with_exit_code_1(kubeconfig: Path, crds: None, tmp_path: Path) -> None:
    config = two_contexts(kubeconfig, tmp_path / "config", "default")
    missing = plugin("describe", "no-such-gang", kubeconfig=config)
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr == (
        'Error from server (NotFound): podgroups.scheduling.x-k8s.io "no-such-gang" not found\n'
    )
    no_context = plugin("--context", "nope", kubeconfig=config)
    assert (no_context.returncode, no_context.stderr) == (
        1,
        'error: context "nope" does not exist\n',
    )
    unreachable = tmp_path / "unreachable"
    down = yaml.safe_load(config.read_text())
    down["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:1"
    unreachable.write_text(yaml.safe_dump(down))
    refused = plugin(kubeconfig=unreachable)
    assert refused.returncode == 1
    assert len(refused.stderr.splitlines()) == 1
    assert refused.stderr.startswith("Unable to connect to the server: ")


async def test_fabric_draws_the_demos_fabric_with_the_gangs_on_it(
    kubeconfig: Path,
    kube: KubeClient,
    operator: OperatorProcess,
    namespace: str,
    topology: Callable[..., Any],
    tmp_path: Path,
) -> None:
    """The demo's sim nodes (2 blocks of 2 racks of one node of 8 cpu and 2 GPUs,
    examples/demo.sh) with examples/gang-topology.yaml's gang in one block and a small gang in
    one rack of the other: `fabric` shows each domain's free cpu, its GPUs and its gangs."""
    demo = parse_fabric("block=2,rack=2")
    pool = unique_prefix()
    nodes = NodePool(
        count=demo.node_count,
        cpu="8",
        memory="32Gi",
        gpu=2,
        name_prefix=f"{pool}-node",
        labels={"pool": pool},
    ).with_fabric(demo)
    fabric_name = await topology(*demo.topology_levels())
    block, rack = demo.label_keys
    async with SimCluster(kube, [nodes], start_delay=0.1, lease_interval=2.0) as sim:
        await sim.wait_ready(30)
        wants_block = {"topology": fabric_name, "requiredTopologyLevel": block}
        await create_group(
            kube,
            namespace,
            "train-block",
            min_member=4,
            topologyConstraint={**wants_block, "preferredTopologyLevel": rack},
        )
        await gang_pods(
            kube, namespace, "train-block", 4, pool, group="train-block", requests={"cpu": "4"}
        )
        train = await placed_in(kube, namespace, "train-block", 4)
        assert train["level"] == block, train
        wants_rack = {"topology": fabric_name, "requiredTopologyLevel": rack}
        await create_group(kube, namespace, "infer", min_member=2, topologyConstraint=wants_rack)
        await gang_pods(kube, namespace, "infer", 2, pool, group="infer", requests={"cpu": "2"})
        infer = await placed_in(kube, namespace, "infer", 2)
        assert infer["level"] == rack, infer

        names = sim.node_names
        config = two_contexts(kubeconfig, tmp_path / "config", namespace)
        fabric_of_pool = ("fabric", "--topology", fabric_name, "--pod", "cpu=4")
        shown = plugin(*fabric_of_pool, "-l", f"pool={pool}", kubeconfig=config)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == f"Topology {fabric_name}: {block} > {rack} > nodes"
    table = {row[0]: row[1:] for row in cells(lines[lines.index("") + 1 :])}
    assert table["DOMAIN"] == ["NODES", "CPU", "NVIDIA.COM/GPU", "FITS", "GANGS"]
    full, other = train["domain"], "b1" if train["domain"] == "b0" else "b0"
    infer_rack = infer["domain"]
    assert infer_rack.startswith(f"{other}-"), (train, infer)
    assert table[f"block {full}"] == ["2", "0/16", "4/4", "0", f"{namespace}/train-block x4"]
    for each in (f"{full}-r0", f"{full}-r1"):
        assert table[f"  rack {each}"] == ["1", "0/8", "2/2", "0", f"{namespace}/train-block x2"]
    assert table[f"block {other}"] == ["2", "12/16", "4/4", "3", f"{namespace}/infer x2"]
    assert table[f"  rack {infer_rack}"] == ["1", "4/8", "2/2", "1", f"{namespace}/infer x2"]
    free_rack = ({f"{other}-r0", f"{other}-r1"} - {infer_rack}).pop()
    assert table[f"  rack {free_rack}"] == ["1", "8/8", "2/2", "2", "-"]
    node_rows = [name.strip() for name in table if name.startswith("    ")]
    assert sorted(node_rows) == sorted(names), node_rows


def cells(table: list[str]) -> list[list[str]]:
    """Rows cut at the header's column starts (a node's NODES cell is empty); the first cell
    keeps its indent, which is the level."""
    starts = [m.start() for m in re.finditer(r"\S+", table[0])]
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    return [
        [line[a:b].rstrip() if i == 0 else line[a:b].strip() for i, (a, b) in enumerate(bounds)]
        for line in table
    ]


async def placed_in(kube: KubeClient, namespace: str, group: str, count: int) -> dict[str, Any]:
    """The group's `status.placement` once `count` members are bound."""

    async def probe() -> dict[str, Any] | None:
        pods = await kube.list(PODS, namespace, label_selector=f"{c.LABEL_POD_GROUP}={group}")
        bound = [p for p in pods["items"] if p["spec"].get("nodeName")]
        placement = (await group_status(kube, namespace, group)).get("placement")
        return placement if len(bound) >= count and placement else None

    return dict(await wait_for(probe, 30, f"{namespace}/{group}: {count} bound and placed"))
