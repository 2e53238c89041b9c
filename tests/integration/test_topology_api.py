"""Topologies and topology constraints on the real control plane.

Each invalid Topology and each invalid `spec.topologyConstraint` is refused, by the CRD schema
(the apiserver's own words) or by the operator's webhook (ours, with the fix), and the message
names the field; valid ones are stored. A PodGroup naming a Topology that does not exist yet is
admitted with a warning naming it. The leader keeps each Topology's status true for sim nodes
registered as a labelled fabric (`sim-nodes --topology`), and kubectl shows the columns.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import NODES, PODGROUPS, TOPOLOGIES, ApiError, KubeClient
from podgroup_operator.scheduling.filters import node_ready
from tests.builders import podgroup
from tests.kube_helpers import gone, kubectl, kubectl_ok, sim_nodes
from tests.waiting import wait_for

HOSTNAME = c.LABEL_HOSTNAME


@pytest.fixture
async def names(kube: KubeClient) -> AsyncIterator[Callable[[], str]]:
    """Unique Topology names for one test; every Topology made with one is deleted after it
    (they are cluster-scoped: no namespace takes them along)."""
    made: list[str] = []

    def new() -> str:
        made.append(f"t-{uuid.uuid4().hex[:8]}")
        return made[-1]

    yield new
    for name in made:
        try:
            await kube.delete(TOPOLOGIES, name)
        except ApiError as exc:
            if not exc.not_found:
                raise


def columns(out: str) -> dict[str, str]:
    """kubectl's one-row table as {header: value}, read by the headers' positions (an empty
    cell leaves no word, so splitting on blanks would shift the cells after it)."""
    header, row = out.splitlines()
    starts = [i for i, ch in enumerate(header) if ch != " " and (i == 0 or header[i - 1] == " ")]
    ends = [*starts[1:], None]
    return {
        header[start:end].strip(): row[start:end].strip()
        for start, end in zip(starts, ends, strict=True)
    }


def topology(name: str, *labels: Any) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.TOPOLOGY_KIND,
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": label} for label in labels]},
    }


ZONE, BLOCK, RACK = "example.com/zone", "example.com/block", "example.com/rack"

BAD_TOPOLOGIES: list[tuple[str, list[Any], str]] = [
    # (case, levels, the field the message must name)
    ("no levels", [], "spec.levels"),
    ("17 levels", [f"example.com/l{i}" for i in range(17)], "spec.levels"),
    # The schema's pattern: v1.20 names a list item's field by its list (`spec.levels.nodeLabel`).
    ("a key of the wrong shape", [ZONE, "rack!"], "spec.levels.nodeLabel"),
    ("a key with two slashes", ["a/b/c"], "spec.levels.nodeLabel"),
    ("a level twice", [ZONE, RACK, ZONE], "spec.levels[2]"),
    ("hostname before the last level", [ZONE, HOSTNAME, RACK], "spec.levels[1].nodeLabel"),
    ("a prefix too long", [f"{'a' * 254}/rack"], "spec.levels[0].nodeLabel"),
]


@pytest.mark.parametrize(
    ("case", "levels", "field"), BAD_TOPOLOGIES, ids=[case for case, _, _ in BAD_TOPOLOGIES]
)
async def test_an_invalid_topology_is_refused_naming_the_field(
    kube: KubeClient,
    operator: Any,
    names: Callable[[], str],
    case: str,
    levels: list[Any],
    field: str,
) -> None:
    name = names()
    with pytest.raises(ApiError) as refused:
        await kube.create(TOPOLOGIES, topology(name, *levels))
    assert refused.value.status in (400, 422), refused.value
    assert field in refused.value.message, f"{case}: {refused.value.message}"
    assert await gone(kube, TOPOLOGIES, name)


async def test_the_webhook_says_what_to_do_about_a_misplaced_hostname(
    kube: KubeClient, operator: Any, names: Callable[[], str]
) -> None:
    with pytest.raises(ApiError) as refused:
        await kube.create(TOPOLOGIES, topology(names(), HOSTNAME, ZONE, RACK))
    message = refused.value.message
    assert "spec.levels[0].nodeLabel: kubernetes.io/hostname may only be the last level" in message
    assert "move it to the end or remove it" in message


async def test_a_valid_topology_is_stored_and_listed_with_its_levels(
    kube: KubeClient, operator: Any, kubeconfig: Path, names: Callable[[], str]
) -> None:
    name = names()
    await kube.create(TOPOLOGIES, topology(name, ZONE, BLOCK, RACK, HOSTNAME))
    stored = await kube.get(TOPOLOGIES, name)
    assert [level["nodeLabel"] for level in stored["spec"]["levels"]] == [
        ZONE,
        BLOCK,
        RACK,
        HOSTNAME,
    ]
    assert "namespace" not in stored["metadata"]  # cluster-scoped
    out = kubectl_ok(kubeconfig, "get", "topologies", name)
    assert columns(out) == {"NAME": name, "COARSEST": ZONE, "FINEST": HOSTNAME, "AGE": ANY}
    await kube.create(TOPOLOGIES, topology(single := names(), RACK))
    out = kubectl_ok(kubeconfig, "get", "topologies", single)
    assert columns(out) == {"NAME": single, "COARSEST": RACK, "FINEST": RACK, "AGE": ANY}


async def test_an_update_breaking_the_rules_is_refused_a_relabel_is_not(
    kube: KubeClient, operator: Any, names: Callable[[], str]
) -> None:
    name = names()
    await kube.create(TOPOLOGIES, topology(name, ZONE, RACK))
    with pytest.raises(ApiError) as refused:
        await kube.patch(
            TOPOLOGIES,
            name,
            {"spec": {"levels": [{"nodeLabel": HOSTNAME}, {"nodeLabel": RACK}]}},
        )
    assert "spec.levels[0].nodeLabel: kubernetes.io/hostname may only be the last level" in (
        refused.value.message
    )
    relabelled = await kube.patch(TOPOLOGIES, name, {"metadata": {"labels": {"team": "a"}}})
    assert relabelled["metadata"]["labels"] == {"team": "a"}
    stored = await kube.get(TOPOLOGIES, name)
    assert [level["nodeLabel"] for level in stored["spec"]["levels"]] == [ZONE, RACK]


CONSTRAINT = "spec.topologyConstraint"
BAD_CONSTRAINTS: list[tuple[str, Any, str]] = [
    ("no level", {"topology": "fabric"}, CONSTRAINT),
    ("not an object", RACK, CONSTRAINT),
    (
        "a required level of the wrong shape",
        {"requiredTopologyLevel": "rack rack"},
        f"{CONSTRAINT}.requiredTopologyLevel",
    ),
    (
        "a preferred level with two slashes",
        {"preferredTopologyLevel": "a/b/c"},
        f"{CONSTRAINT}.preferredTopologyLevel",
    ),
    (
        "a topology name of the wrong shape",
        {"topology": "My Fabric", "requiredTopologyLevel": RACK},
        f"{CONSTRAINT}.topology",
    ),
]


@pytest.mark.parametrize(
    ("case", "constraint", "field"),
    BAD_CONSTRAINTS,
    ids=[case for case, _, _ in BAD_CONSTRAINTS],
)
async def test_an_invalid_constraint_is_refused_naming_the_field(
    kube: KubeClient, operator: Any, namespace: str, case: str, constraint: Any, field: str
) -> None:
    body = podgroup("bad", namespace, min_member=2)
    body["spec"]["topologyConstraint"] = constraint
    del body["metadata"]["uid"]
    with pytest.raises(ApiError) as refused:
        await kube.create(PODGROUPS, body, namespace)
    assert refused.value.status in (400, 422), refused.value
    assert field in refused.value.message, f"{case}: {refused.value.message}"
    assert await gone(kube, PODGROUPS, "bad", namespace)


async def test_a_constraint_is_checked_against_the_topology_it_names(
    kube: KubeClient, operator: Any, namespace: str, names: Callable[[], str]
) -> None:
    """Levels not of the Topology, and a preferred level coarser than the required one, are
    the webhook's to refuse (the schema cannot read another object); a valid one is stored."""
    name = names()
    await kube.create(TOPOLOGIES, topology(name, ZONE, BLOCK, RACK, HOSTNAME))
    cases = [
        (
            {"topology": name, "requiredTopologyLevel": "example.com/row"},
            "spec.topologyConstraint.requiredTopologyLevel: 'example.com/row' is not a level of "
            f"Topology '{name}'",
        ),
        (
            {"topology": name, "requiredTopologyLevel": RACK, "preferredTopologyLevel": ZONE},
            f"spec.topologyConstraint.preferredTopologyLevel: '{ZONE}' is coarser than "
            f"requiredTopologyLevel '{RACK}'",
        ),
    ]

    async def refused_with(constraint: dict[str, Any], words: str) -> None:
        body = podgroup("bad", namespace, min_member=2)
        body["spec"]["topologyConstraint"] = constraint
        del body["metadata"]["uid"]
        with pytest.raises(ApiError) as refused:
            await kube.create(PODGROUPS, body, namespace)
        assert refused.value.status == 422, refused.value
        assert words in refused.value.message, refused.value.message

    # The webhook's informer may not have seen the Topology at once: wait until it refuses.
    first_constraint, first_words = cases[0]

    async def webhook_knows_it() -> bool:
        try:
            await refused_with(first_constraint, first_words)
        except AssertionError:
            return False
        return True

    await wait_for(webhook_knows_it, 45, f"the webhook to know Topology {name}")
    for constraint, words in cases:
        await refused_with(constraint, words)

    good = podgroup("good", namespace, min_member=2)
    good["spec"]["topologyConstraint"] = {
        "topology": name,
        "requiredTopologyLevel": BLOCK,
        "preferredTopologyLevel": RACK,
    }
    del good["metadata"]["uid"]
    await kube.create(PODGROUPS, good, namespace)
    stored = await kube.get(PODGROUPS, "good", namespace)
    assert stored["spec"]["topologyConstraint"] == good["spec"]["topologyConstraint"]


async def test_a_constraint_without_a_topology_takes_any_label(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    constraint = {"requiredTopologyLevel": "nvidia.com/gpu.clique"}
    body = podgroup("native", namespace, min_member=2, topologyConstraint=constraint)
    del body["metadata"]["uid"]
    await kube.create(PODGROUPS, body, namespace)
    stored = await kube.get(PODGROUPS, "native", namespace)
    assert stored["spec"]["topologyConstraint"] == constraint


async def test_a_podgroup_naming_a_missing_topology_is_admitted_with_a_warning(
    kubeconfig: Path, operator: Any, namespace: str, kube: KubeClient
) -> None:
    missing = f"later-{uuid.uuid4().hex[:6]}"
    body = podgroup("early", namespace, min_member=2)
    body["spec"]["topologyConstraint"] = {"topology": missing, "requiredTopologyLevel": RACK}
    del body["metadata"]["uid"]
    done = kubectl(kubeconfig, "create", "-f", "-", stdin=json.dumps(body))
    assert done.returncode == 0, done.stderr
    assert (
        f"Warning: spec.topologyConstraint.topology: Topology '{missing}' does not exist; the "
        "gang waits until it does" in done.stderr
    ), done.stderr
    stored = await kube.get(PODGROUPS, "early", namespace)
    assert stored["spec"]["topologyConstraint"]["topology"] == missing


async def test_wide_podgroup_columns_show_the_placement_domain(
    kube: KubeClient, kubeconfig: Path, operator: Any, namespace: str
) -> None:
    body = podgroup("placed", namespace, min_member=2)
    body["spec"]["topologyConstraint"] = {"requiredTopologyLevel": RACK}
    del body["metadata"]["uid"]
    await kube.create(PODGROUPS, body, namespace)
    await kube.patch(
        PODGROUPS,
        "placed",
        {"status": {"placement": {"level": RACK, "domain": "z0-b3-r5"}}},
        namespace,
        subresource="status",
    )
    out = kubectl_ok(kubeconfig, "get", "podgroups", "placed", "-n", namespace, "-o", "wide")
    assert columns(out)["DOMAIN"] == "z0-b3-r5"
    assert "DOMAIN" not in columns(kubectl_ok(kubeconfig, "get", "podgroups", "-n", namespace))


# --- status on the real control plane --------------------------------------------------------


def ready_without(nodes: list[dict[str, Any]], label: str) -> int:
    return sum(1 for node in nodes if node_ready(node) and label not in node["metadata"]["labels"])


async def test_status_counts_the_domains_of_a_sim_fabric_and_ready_nodes_without_the_labels(
    kube: KubeClient, kubeconfig: Path, operator: Any, names: Callable[[], str]
) -> None:
    """`sim-nodes --topology` registers 2 zones x 2 racks x 2 nodes; three more sim nodes carry
    no fabric label. Label keys of this test's own keep other tests' nodes out of the domains."""
    prefix = f"f{uuid.uuid4().hex[:6]}"
    zone, rack = f"{prefix}.example.com/zone", f"{prefix}.example.com/rack"
    name = names()
    await kube.create(TOPOLOGIES, topology(name, zone, rack, HOSTNAME))
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("podgroup-operator")),
        "sim-nodes",
        f"--topology={zone}=2,{rack}=2,host=2",
        f"--name-prefix={prefix}",
        "--lease-interval=1",
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with sim_nodes(kube, count=3) as plain:
            await plain.wait_ready(30)

            async def status_matches_the_nodes() -> dict[str, Any] | None:
                nodes = (await kube.list(NODES))["items"]
                status = (await kube.get(TOPOLOGIES, name)).get("status") or {}
                fabric = [n for n in nodes if n["metadata"]["name"].startswith(f"{prefix}-")]
                if len(fabric) < 8 or not all(node_ready(n) for n in fabric):
                    return None
                hosts = {n["metadata"]["labels"].get(HOSTNAME) for n in nodes} - {None}
                expected = [
                    {"nodeLabel": key, "domains": domains, "nodesWithoutLabel": missing}
                    for key, domains, missing in (
                        (zone, 2, ready_without(nodes, zone)),
                        (rack, 4, ready_without(nodes, rack)),
                        (HOSTNAME, len(hosts), ready_without(nodes, HOSTNAME)),
                    )
                ]
                return status if status.get("levels") == expected else None

            status = await wait_for(status_matches_the_nodes, 60, "the Topology's status")
            assert status["observedGeneration"] == 1
            without = status["levels"][1]["nodesWithoutLabel"]
            assert without >= 3  # at least the three plain nodes
            racks = {
                n["metadata"]["labels"][rack]
                for n in (await kube.list(NODES, label_selector=rack))["items"]
            }
            assert racks == {"z0-r0", "z0-r1", "z1-r0", "z1-r1"}

        async def plain_nodes_gone_from_the_count() -> bool:
            levels = ((await kube.get(TOPOLOGIES, name)).get("status") or {}).get("levels") or []
            return bool(levels) and levels[1]["nodesWithoutLabel"] == without - 3

        await wait_for(plain_nodes_gone_from_the_count, 30, "3 fewer nodes without the rack label")
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, stderr.decode()


async def test_kubectl_explain_documents_topology_levels(kubeconfig: Path, crds: None) -> None:
    """The apiserver publishes a new CRD's OpenAPI a moment after it is Established."""

    async def explained(field: str) -> str:
        done = kubectl(kubeconfig, "explain", field)
        return " ".join(done.stdout.split()) if done.returncode == 0 else ""

    out = await wait_for(lambda: explained("topology.spec.levels.nodeLabel"), 60, "explain")
    assert "FIELD: nodeLabel <string>" in out
    assert "kubernetes.io/hostname only as the last level" in out
    constraint = await wait_for(
        lambda: explained("podgroup.spec.topologyConstraint"), 60, "explain"
    )
    for field in ("topology", "requiredTopologyLevel", "preferredTopologyLevel"):
        assert f"{field} <string>" in constraint
