"""Sub-groups on the real control plane, with the operator running: each part whole in one
domain inside its parent's, k of n, label fan-out, the first-fit trap, and bad trees refused.

Each test brings its own labelled fabric of sim nodes (`pool=<unique>`, which its pods select),
as tests/integration/test_topology_placement.py does.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import (
    EVENTS,
    PODGROUPS,
    PODS,
    ApiError,
    KubeClient,
)
from podgroup_operator.devcluster.process import OperatorProcess
from tests.builders import podgroup
from tests.conftest import ClusterUnderTest, PriorityClassFactory
from tests.kube_helpers import (
    KUBECTL,
    TOLERATE_5S,
    crash,
    create_group,
    fail_node,
    gang_pods,
    group_status,
    kubectl_ok,
    wait_group,
)
from tests.racks import BLOCK, RACK, rack_of, racks, racks_sim
from tests.tenants import PODGROUP_WRITER, tenant
from tests.waiting import wait_for


def within(topology_name: str, level: str) -> dict[str, str]:
    return {"topology": topology_name, "requiredTopologyLevel": level}


async def members_where(kube: KubeClient, namespace: str, group: str) -> dict[str, list[str]]:
    """Sub-group (label, or `replica` value, or `-`) -> the nodes its bound members are on."""
    items = (await kube.list(PODS, namespace, label_selector=f"{c.LABEL_POD_GROUP}={group}"))[
        "items"
    ]
    out: dict[str, list[str]] = {}
    for pod in items:
        node = pod["spec"].get("nodeName")
        if not node:
            continue
        labels = pod["metadata"].get("labels") or {}
        key = labels.get(c.LABEL_SUB_GROUP) or labels.get("app/replica") or "-"
        out.setdefault(key, []).append(node)
    return out


async def placed(kube: KubeClient, namespace: str, group: str, count: int) -> dict[str, list[str]]:
    """Where the members are once `count` are bound and status.placement is written."""

    async def probe() -> dict[str, list[str]] | None:
        where = await members_where(kube, namespace, group)
        status = await group_status(kube, namespace, group)
        bound = sum(len(nodes) for nodes in where.values())
        return where if bound >= count and status.get("placement") else None

    return await wait_for(probe, 45, f"{namespace}/{group}: {count} members bound, placement")


async def sub_group_pods(
    kube: KubeClient,
    namespace: str,
    group: str,
    pool: str,
    sub: str,
    count: int,
    cpu: str,
    **pod_args: Any,
) -> None:
    await gang_pods(
        kube,
        namespace,
        f"{group}-{sub}",
        count,
        pool,
        group=group,
        requests={"cpu": cpu},
        labels={c.LABEL_SUB_GROUP: sub},
        **pod_args,
    )


async def test_two_levels_sub_groups_in_racks_the_group_in_one_block(
    kube: KubeClient,
    operator: OperatorProcess,
    namespace: str,
    kubeconfig: Path,
    topology: Callable[..., Any],
) -> None:
    fabric = await topology(BLOCK, RACK)
    layout = [(f"b{b}", f"r{r}", 2, "4") for b in range(2) for r in range(2)]
    async with racks(kube, layout) as pool:
        await create_group(
            kube,
            namespace,
            "train",
            min_member=8,
            topologyConstraint=within(fabric, BLOCK),
            subGroups=[
                {"name": "s0", "minMember": 4, "topologyConstraint": within(fabric, RACK)},
                {"name": "s1", "minMember": 4, "topologyConstraint": within(fabric, RACK)},
            ],
        )
        for sub in ("s0", "s1"):
            await sub_group_pods(kube, namespace, "train", pool, sub, 4, "2")
        where = await placed(kube, namespace, "train", 8)
        racks_used = {sub: {rack_of(n) for n in nodes} for sub, nodes in where.items()}
        assert all(len(r) == 1 for r in racks_used.values()), racks_used
        assert racks_used["s0"] != racks_used["s1"], racks_used
        blocks = {r.split("-")[0] for used in racks_used.values() for r in used}
        assert len(blocks) == 1, racks_used
        status = await wait_group(kube, namespace, "train", subGroupsSatisfied="2/2")
        placement = status["placement"]
        assert placement["level"] == BLOCK and placement["domain"] == blocks.pop()
        assert sorted(
            (p["name"], p["level"], f"{placement['domain']}-{p['domain']}")
            for p in placement["subGroups"]
        ) == sorted((sub, RACK, next(iter(used))) for sub, used in racks_used.items())
        assert {s["name"]: (s["minMember"], s["running"]) for s in status["subGroups"]} == {
            "s0": (4, 4),
            "s1": (4, 4),
        }
        wide = kubectl_ok(kubeconfig, "get", "podgroups", "train", "-n", namespace, "-o", "wide")
        header, row = wide.splitlines()
        assert row[header.index("SUBGROUPS") :].split()[0] == "2/2", wide
        described = subprocess.run(
            [str(KUBECTL), "podgroup", "describe", "train", "-n", namespace],
            env={
                **os.environ,
                "KUBECONFIG": str(kubeconfig),
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            },
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
        assert "Sub-Groups:         2/2 satisfied" in described, described
        rack = next(p for p in placement["subGroups"] if p["name"] == "s0")["domain"]
        assert re.search(rf"\n  s0 +4 +4 +0 +0 +{re.escape(RACK)}={rack}\n", described), described


async def test_min_sub_group_k_of_n_runs_with_the_k_that_fit(
    kube: KubeClient,
    operator: OperatorProcess,
    namespace: str,
    topology: Callable[..., Any],
) -> None:
    fabric = await topology(BLOCK, RACK)
    async with racks(kube, [("b0", "r0", 2, "4"), ("b0", "r1", 2, "4")]) as pool:
        await create_group(
            kube,
            namespace,
            "kofn",
            min_member=4,
            minSubGroup=2,
            subGroups=[
                {"name": s, "minMember": 2, "topologyConstraint": within(fabric, RACK)}
                for s in ("s0", "s1", "s2")
            ],
        )
        for sub in ("s0", "s1", "s2"):
            await sub_group_pods(kube, namespace, "kofn", pool, sub, 2, "4")
        where = await placed(kube, namespace, "kofn", 4)
        assert len(where) == 2, where
        assert len({rack_of(n) for nodes in where.values() for n in nodes}) == 2, where
        assert all(len({rack_of(n) for n in nodes}) == 1 for nodes in where.values()), where
        status = await wait_group(kube, namespace, "kofn", phase=c.Phase.RUNNING)
        assert status["subGroupsSatisfied"] == "2/3"


async def test_match_label_keys_forms_one_sub_group_per_value(
    kube: KubeClient,
    operator: OperatorProcess,
    namespace: str,
    topology: Callable[..., Any],
) -> None:
    fabric = await topology(BLOCK, RACK)
    async with racks(kube, [("b0", f"r{r}", 1, "4") for r in range(3)]) as pool:
        await create_group(
            kube,
            namespace,
            "lws",
            min_member=6,
            subGroups=[
                {
                    "name": "replica",
                    "minMember": 2,
                    "matchLabelKeys": ["app/replica"],
                    "topologyConstraint": within(fabric, RACK),
                }
            ],
        )
        for replica in range(3):
            await gang_pods(
                kube,
                namespace,
                f"lws-{replica}",
                2,
                pool,
                group="lws",
                requests={"cpu": "2"},
                labels={"app/replica": str(replica)},
            )
        where = await placed(kube, namespace, "lws", 6)
        assert sorted(where) == ["0", "1", "2"], where
        assert all(len({rack_of(n) for n in nodes}) == 1 for nodes in where.values()), where
        assert len({rack_of(nodes[0]) for nodes in where.values()}) == 3, where
        status = await wait_group(kube, namespace, "lws", subGroupsSatisfied="3/3")
        names = sorted(p["name"] for p in status["placement"]["subGroups"])
        assert names == ["replica-0", "replica-1", "replica-2"]


TRAP_SUBS = {
    "pair": {"name": "pair", "minMember": 2},
    "big": {"name": "big", "minMember": 1},
}


async def test_an_assignment_first_fit_misses_is_placed_in_every_creation_order(
    kube: KubeClient,
    operator: OperatorProcess,
    namespace: str,
    topology: Callable[..., Any],
) -> None:
    """In each block rack r0 is one node of 8 cpu and r1 two of 4: both racks have 8 free, best
    fit takes r0 for whichever sub-group comes first. `pair` (2 x 4 cpu) there leaves `big`
    (1 x 8 cpu) nowhere; the search moves `pair` to r1. One gang per creation order (spec
    order x pod creation order), each filling a block of its own."""
    fabric = await topology(BLOCK, RACK)
    orders = [(spec, pods) for spec in ("pair", "big") for pods in ("pair", "big")]
    layout = []
    for b in range(len(orders)):
        layout += [(f"b{b}", "r0", 1, "8"), (f"b{b}", "r1", 2, "4")]
    async with racks(kube, layout) as pool:
        for index, (spec_first, pods_first) in enumerate(orders):
            name = f"trap-{index}"
            names = [spec_first, "big" if spec_first == "pair" else "pair"]
            await create_group(
                kube,
                namespace,
                name,
                min_member=3,
                topologyConstraint=within(fabric, BLOCK),
                subGroups=[
                    {**TRAP_SUBS[n], "topologyConstraint": within(fabric, RACK)} for n in names
                ],
            )
            sizes = {"pair": (2, "4"), "big": (1, "8")}
            for sub in (pods_first, "big" if pods_first == "pair" else "pair"):
                count, cpu = sizes[sub]
                await sub_group_pods(kube, namespace, name, pool, sub, count, cpu)
            where = await placed(kube, namespace, name, 3)
            racks_used = {
                sub: {rack_of(n).split("-")[1] for n in nodes} for sub, nodes in where.items()
            }
            assert racks_used == {"pair": {"r1"}, "big": {"r0"}}, (spec_first, pods_first, where)


BAD_TREES: list[tuple[str, dict[str, Any], str]] = [
    (
        "unknown-parent",
        {"minMember": 2, "subGroups": [{"name": "a", "parent": "zz", "minMember": 2}]},
        "spec.subGroups[0].parent: 'zz' is not a sub-group of this group",
    ),
    (
        "cycle",
        {
            "minMember": 2,
            "subGroups": [{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}],
        },
        "is a cycle",
    ),
    (
        "too-deep",
        {
            "minMember": 1,
            "subGroups": [
                {"name": "l1"},
                {"name": "l2", "parent": "l1"},
                {"name": "l3", "parent": "l2"},
                {"name": "l4", "parent": "l3"},
                {"name": "l5", "parent": "l4", "minMember": 1},
            ],
        },
        "is 5 levels deep (l1 -> l2 -> l3 -> l4 -> l5); at most 4",
    ),
    (
        "children-above-parent",
        {
            "minMember": 8,
            "subGroups": [
                {"name": "p", "minMember": 3},
                {"name": "a", "parent": "p", "minMember": 2},
                {"name": "b", "parent": "p", "minMember": 2},
            ],
        },
        "spec.subGroups[0].minMember: 3 is below the 4 members",
    ),
    (
        "repeated-name",
        {
            "minMember": 2,
            "subGroups": [{"name": "a", "minMember": 1}, {"name": "a", "minMember": 1}],
        },
        "spec.subGroups[1]: Duplicate value",  # the schema's own list-map check
    ),
    (
        "bad-name",
        {"minMember": 1, "subGroups": [{"name": "Not_A_Label", "minMember": 1}]},
        'spec.subGroups.name: Invalid value: "Not_A_Label"',
    ),
]


@pytest.mark.parametrize(("case", "spec", "expected"), BAD_TREES, ids=[c[0] for c in BAD_TREES])
async def test_each_invalid_tree_is_refused_naming_the_field_and_fix(
    kube: KubeClient,
    operator: OperatorProcess,
    namespace: str,
    case: str,
    spec: dict[str, Any],
    expected: str,
) -> None:
    body = podgroup("bad", namespace)
    body["spec"] = spec
    del body["metadata"]["uid"]
    with pytest.raises(ApiError) as refused:
        await kube.create(PODGROUPS, body, namespace)
    assert refused.value.status in (400, 422), refused.value
    assert expected in refused.value.message, refused.value.message


async def test_a_sub_group_level_coarser_than_the_groups_is_refused(
    kube: KubeClient,
    operator: OperatorProcess,
    namespace: str,
    topology: Callable[..., Any],
) -> None:
    fabric = await topology(BLOCK, RACK)
    body = podgroup(
        "coarse",
        namespace,
        min_member=1,
        topologyConstraint=within(fabric, RACK),
        subGroups=[{"name": "a", "minMember": 1, "topologyConstraint": within(fabric, BLOCK)}],
    )
    del body["metadata"]["uid"]
    with pytest.raises(ApiError) as refused:
        await kube.create(PODGROUPS, body, namespace)
    assert (
        "spec.subGroups[0].topologyConstraint.requiredTopologyLevel: 'example.com/block' is "
        "coarser than the group's level 'example.com/rack'"
    ) in refused.value.message


async def test_sub_groups_naming_no_topology_inherit_the_groups_and_are_placed_in_racks(
    kube: KubeClient,
    operator: OperatorProcess,
    namespace: str,
    topology: Callable[..., Any],
    cluster: ClusterUnderTest,
    tmp_path: Path,
) -> None:
    """The group names the Topology, its sub-groups only `requiredTopologyLevel: rack`: each
    is placed whole in one rack of the group's block, as with `topology` in each. The tenant
    writes the group and its pods; an admin the Topology and the nodes."""
    fabric = await topology(BLOCK, RACK)
    layout = [(f"b{b}", f"r{r}", 2, "8") for b in range(2) for r in range(2)]
    async with (
        racks(kube, layout) as pool,
        tenant(kube, cluster.kubeconfig, namespace, tmp_path, rules=PODGROUP_WRITER) as team,
    ):
        await create_group(
            team,
            namespace,
            "heir",
            min_member=8,
            topologyConstraint=within(fabric, BLOCK),
            subGroups=[
                {"name": s, "minMember": 4, "topologyConstraint": {"requiredTopologyLevel": RACK}}
                for s in ("s0", "s1")
            ],
        )
        for sub in ("s0", "s1"):
            await sub_group_pods(team, namespace, "heir", pool, sub, 4, "4")
        where = await placed(kube, namespace, "heir", 8)
        racks_used = {sub: {rack_of(n) for n in nodes} for sub, nodes in where.items()}
        assert sorted(racks_used) == ["s0", "s1"], racks_used
        assert all(len(r) == 1 for r in racks_used.values()), racks_used
        assert racks_used["s0"] != racks_used["s1"], racks_used
        assert len({r.split("-")[0] for used in racks_used.values() for r in used}) == 1
        status = await wait_group(kube, namespace, "heir", subGroupsSatisfied="2/2")
        assert {(p["name"], p["level"]) for p in status["placement"]["subGroups"]} == {
            ("s0", RACK),
            ("s1", RACK),
        }


async def test_a_sub_group_level_its_inherited_topology_lacks_is_refused(
    kube: KubeClient,
    operator: OperatorProcess,
    namespace: str,
    topology: Callable[..., Any],
    cluster: ClusterUnderTest,
    tmp_path: Path,
) -> None:
    fabric = await topology(BLOCK, RACK)
    body = podgroup(
        "nolevel",
        namespace,
        min_member=1,
        topologyConstraint=within(fabric, BLOCK),
        subGroups=[
            {
                "name": "a",
                "minMember": 1,
                "topologyConstraint": {"requiredTopologyLevel": "example.com/row"},
            }
        ],
    )
    del body["metadata"]["uid"]
    async with tenant(kube, cluster.kubeconfig, namespace, tmp_path, rules=PODGROUP_WRITER) as team:
        with pytest.raises(ApiError) as refused:
            await team.create(PODGROUPS, body, namespace)
    assert refused.value.status in (400, 422), refused.value
    assert (
        "spec.subGroups[0].topologyConstraint.requiredTopologyLevel: 'example.com/row' is not a "
        f"level of Topology '{fabric}', which this sub-group inherits from the group"
    ) in refused.value.message, refused.value.message
    assert f"add 'example.com/row' to Topology '{fabric}'" in refused.value.message


async def test_a_pod_naming_no_sub_group_gets_a_warning(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    async with racks(kube, [("b0", "r0", 1, "4")]) as pool:
        await create_group(
            kube, namespace, "warn", min_member=1, subGroups=[{"name": "a", "minMember": 1}]
        )
        await sub_group_pods(kube, namespace, "warn", pool, "nope", 1, "1")

        async def warning() -> dict[str, Any] | None:
            items = (await kube.list(EVENTS, namespace))["items"]
            return next((e for e in items if e["reason"] == c.Reason.MISSING_SUB_GROUP), None)

        event = await wait_for(warning, 30, "a MissingSubGroup Event")
        assert event["type"] == c.EventType.WARNING
        assert event["involvedObject"]["name"] == "warn-nope-0"
        assert (
            "'nope' is not a leaf sub-group of this pod's PodGroup (leaves: a)" in event["message"]
        )


async def repairable(
    kube: KubeClient,
    namespace: str,
    name: str,
    pool: str,
    fabric: str,
    backoff: int,
    **pod_args: Any,
) -> dict[str, dict[str, str]]:
    """A running gang of three sub-groups of two bare members, one per rack, two of three
    enough, repaired by sub-group; returns sub-group -> member name -> uid."""
    await create_group(
        kube,
        namespace,
        name,
        min_member=4,
        minSubGroup=2,
        policy={"action": "RestartGang", "scope": "SubGroup", "backoffSeconds": backoff},
        subGroups=[
            {"name": s, "minMember": 2, "topologyConstraint": within(fabric, RACK)}
            for s in ("s0", "s1", "s2")
        ],
    )
    for sub in ("s0", "s1", "s2"):
        await sub_group_pods(kube, namespace, name, pool, sub, 2, "2", **pod_args)
    await wait_group(kube, namespace, name, phase=c.Phase.RUNNING, subGroupsSatisfied="3/3")
    return await uids_by_sub_group(kube, namespace, name)


async def uids_by_sub_group(
    kube: KubeClient, namespace: str, name: str
) -> dict[str, dict[str, str]]:
    items = (await kube.list(PODS, namespace, label_selector=f"{c.LABEL_POD_GROUP}={name}"))[
        "items"
    ]
    out: dict[str, dict[str, str]] = {}
    for pod in items:
        if pod["status"].get("phase") != c.PodPhase.RUNNING or pod["metadata"].get(
            "deletionTimestamp"
        ):
            continue
        sub = pod["metadata"]["labels"][c.LABEL_SUB_GROUP]
        out.setdefault(sub, {})[pod["metadata"]["name"]] = pod["metadata"]["uid"]
    return out


async def test_a_broken_sub_group_is_repaired_alone_back_in_its_rack(
    kube: KubeClient,
    operator: OperatorProcess,
    namespace: str,
    topology: Callable[..., Any],
) -> None:
    fabric = await topology(BLOCK, RACK)
    async with racks(kube, [("b0", f"r{r}", 1, "4") for r in range(3)]) as pool:
        before = await repairable(kube, namespace, "rep", pool, fabric, 0)
        where = await members_where(kube, namespace, "rep")
        pod = await kube.get(PODS, "rep-s1-0", namespace)
        await crash(kube, namespace, pod)

        async def repaired() -> dict[str, dict[str, str]] | None:
            now = await uids_by_sub_group(kube, namespace, "rep")
            whole = all(len(now.get(s, {})) == 2 for s in ("s0", "s1", "s2"))
            return now if whole and now["s1"] != before["s1"] else None

        after = await wait_for(repaired, 45, "sub-group s1 running again with new members")
        assert after["s0"] == before["s0"] and after["s2"] == before["s2"]
        assert not set(after["s1"].values()) & set(before["s1"].values())
        again = await members_where(kube, namespace, "rep")
        assert {rack_of(n) for n in again["s1"]} == {rack_of(n) for n in where["s1"]}
        status = await wait_group(kube, namespace, "rep", subGroupsSatisfied="3/3", restarts=1)
        assert status["phase"] == c.Phase.RUNNING

        async def event() -> dict[str, Any] | None:
            items = (await kube.list(EVENTS, namespace))["items"]
            return next((e for e in items if e["reason"] == c.Reason.SUB_GROUP_RESTARTED), None)

        found = await wait_for(event, 30, "a SubGroupRestarted Event")
        assert "sub-group s1: rep-s1-0 failed" in found["message"], found["message"]


async def test_the_whole_group_restarts_when_its_own_minimum_breaks(
    kube: KubeClient,
    operator: OperatorProcess,
    namespace: str,
    topology: Callable[..., Any],
) -> None:
    fabric = await topology(BLOCK, RACK)
    async with racks(kube, [("b0", f"r{r}", 1, "4") for r in range(3)]) as pool:
        before = await repairable(kube, namespace, "all", pool, fabric, 3)
        old = {uid for members in before.values() for uid in members.values()}
        first = await kube.get(PODS, "all-s0-0", namespace)
        second = await kube.get(PODS, "all-s1-0", namespace)
        # Two of three sub-groups broken: minSubGroup 2 no longer holds.
        await asyncio.gather(crash(kube, namespace, first), crash(kube, namespace, second))

        async def restarted() -> dict[str, dict[str, str]] | None:
            now = await uids_by_sub_group(kube, namespace, "all")
            fresh = {uid for members in now.values() for uid in members.values()}
            return now if len(fresh) == 6 and not fresh & old else None

        await wait_for(restarted, 60, "every member replaced by a whole-group restart")
        # The phase follows minMember alone, so Running may be written while the new members'
        # sub-groups are still starting: wait for the count too.
        await wait_group(
            kube, namespace, "all", restarts=1, phase=c.Phase.RUNNING, subGroupsSatisfied="3/3"
        )


async def test_preemption_takes_one_sub_group_which_is_repaired_uncounted_back_in_its_rack(
    kube: KubeClient,
    operator: OperatorProcess,
    namespace: str,
    topology: Callable[..., Any],
    priority_class: PriorityClassFactory,
) -> None:
    """A higher-priority gang needs one rack's node of a gang repaired by sub-group (two of
    three sub-groups enough): only that sub-group is evicted, the others keep running, and
    the sub-group is repaired at once (a backoff of 300 s and no restart counted), then
    placed back in its rack once the room is free again."""
    fabric = await topology(BLOCK, RACK)
    low, high = [await priority_class(v) for v in (100, 1000)]
    async with racks(kube, [("b0", f"r{r}", 1, "4") for r in range(3)]) as pool:
        before = await repairable(kube, namespace, "vic", pool, fabric, 300, priorityClassName=low)
        where = await members_where(kube, namespace, "vic")
        await create_group(kube, namespace, "urgent", min_member=2)
        await gang_pods(
            kube,
            namespace,
            "urgent",
            2,
            pool,
            group="urgent",
            requests={"cpu": "2"},
            priorityClassName=high,
        )
        await wait_group(kube, namespace, "urgent", 60, phase=c.Phase.RUNNING)
        taken_over = {rack_of(n) for n in (await members_where(kube, namespace, "urgent"))["-"]}
        [taken] = [s for s in before if {rack_of(n) for n in where[s]} == taken_over]

        status = await wait_group(kube, namespace, "vic", 60, subGroupsSatisfied="2/3")
        assert status["phase"] == c.Phase.RUNNING and not status.get("restarts")
        now = await uids_by_sub_group(kube, namespace, "vic")
        assert {s: now[s] for s in before if s != taken} == {
            s: uids for s, uids in before.items() if s != taken
        }

        async def event(involved: str, reason: str, text: str) -> dict[str, Any] | None:
            items = (await kube.list(EVENTS, namespace))["items"]
            return next(
                (
                    e
                    for e in items
                    if e["involvedObject"].get("name") == involved
                    and e["reason"] == reason
                    and text in e["message"]
                ),
                None,
            )

        preempted = await wait_for(
            lambda: event("vic", c.Reason.PREEMPTED, f"sub-group {taken} of {namespace}/vic"),
            30,
            "a Preempted Event naming the sub-group",
        )
        assert f"{namespace}/urgent" in preempted["message"]
        await wait_for(
            lambda: event("vic", c.Reason.SUB_GROUP_RESTARTED, "preempted, not counted"),
            30,
            "the sub-group's uncounted repair",
        )

        async def recreated() -> list[dict[str, Any]] | None:
            items = (
                await kube.list(PODS, namespace, label_selector=f"{c.LABEL_SUB_GROUP}={taken}")
            )["items"]
            fresh = [
                p
                for p in items
                if p["metadata"]["uid"] not in before[taken].values()
                and not p["metadata"].get("deletionTimestamp")
            ]
            return fresh if len(fresh) == 2 else None

        fresh = await wait_for(recreated, 30, f"sub-group {taken}'s bare members recreated")
        assert not any(p["spec"].get("nodeName") for p in fresh), "no room: they wait"

        # The room comes back: the sub-group returns to its own rack, still uncounted.
        for name in ("urgent-0", "urgent-1"):
            await kube.delete(PODS, name, namespace)
        status = await wait_group(
            kube, namespace, "vic", 60, phase=c.Phase.RUNNING, subGroupsSatisfied="3/3"
        )
        assert not status.get("restarts")
        again = await members_where(kube, namespace, "vic")
        assert {rack_of(n) for n in again[taken]} == taken_over
        after = await uids_by_sub_group(kube, namespace, "vic")
        assert {s: after[s] for s in before if s != taken} == {
            s: uids for s, uids in before.items() if s != taken
        }


async def test_a_sub_group_whose_rack_fails_is_repaired_alone_in_a_free_rack(
    kube: KubeClient,
    operator: OperatorProcess,
    namespace: str,
    topology: Callable[..., Any],
) -> None:
    """Three sub-groups, one per rack, two enough, and a fourth rack free; the node of one
    sub-group's rack dies. That sub-group alone is restarted, into the free rack; the other two
    keep their members and their racks."""
    fabric = await topology(BLOCK, RACK)
    async with racks_sim(kube, [("b0", f"r{r}", 1, "4") for r in range(4)]) as (sim, pool):
        before = await repairable(kube, namespace, "rep", pool, fabric, 1, tolerations=TOLERATE_5S)
        where = await members_where(kube, namespace, "rep")
        await fail_node(kube, sim, namespace, where["s1"][0])

        async def repaired() -> dict[str, dict[str, str]] | None:
            now = await uids_by_sub_group(kube, namespace, "rep")
            whole = all(len(now.get(s, {})) == 2 for s in ("s0", "s1", "s2"))
            return now if whole and now["s1"] != before["s1"] else None

        after = await wait_for(repaired, 150, "sub-group s1 running again, elsewhere")
        assert after["s0"] == before["s0"] and after["s2"] == before["s2"]
        again = await members_where(kube, namespace, "rep")
        used = {rack_of(where[s][0]) for s in ("s0", "s1", "s2")}
        [moved] = {rack_of(n) for n in again["s1"]}
        assert moved not in used, (moved, used)
        for s in ("s0", "s2"):
            assert {rack_of(n) for n in again[s]} == {rack_of(n) for n in where[s]}
        status = await wait_group(
            kube, namespace, "rep", phase=c.Phase.RUNNING, subGroupsSatisfied="3/3", restarts=1
        )
        placement = {p["name"]: p["domain"] for p in status["placement"]["subGroups"]}
        assert placement["s1"] == moved.split("-")[1], status["placement"]


async def test_a_parent_over_a_template_needs_every_instance_in_status_restart_and_scheduler(
    kube: KubeClient, operator: OperatorProcess, namespace: str
) -> None:
    """`stage` has no minMember and one template leaf, `replica` (minMember 2), whose members
    form three instances: it needs 6 members (each instance a sub-group of its own). With room
    for fewer, the scheduler binds the group by `coord` alone (minSubGroup 1) and none of
    stage's; the status says stage needs 6; a lost member of one instance is repaired alone
    (`scope: SubGroup`) while the status counts stage short of its 6, then whole again."""
    subs = [
        {"name": "stage"},
        {"name": "replica", "parent": "stage", "minMember": 2, "matchLabelKeys": ["app/replica"]},
        {"name": "coord", "minMember": 1},
    ]
    async with racks(kube, [("b0", "r0", 4, "4")]) as pool:
        blockers = await gang_pods(kube, namespace, "blocker", 2, pool, requests={"cpu": "4"})

        async def blocking() -> bool:
            pods = [await kube.get(PODS, p["metadata"]["name"], namespace) for p in blockers]
            return all(p["spec"].get("nodeName") for p in pods)

        await wait_for(blocking, 30, "two blockers holding two of the four nodes")
        # Every member exists before the group: no decision sees fewer instances.
        for replica in range(3):
            await gang_pods(
                kube,
                namespace,
                f"tp-r{replica}",
                2,
                pool,
                group="tp",
                requests={"cpu": "2"},
                labels={"app/replica": str(replica)},
            )
        await sub_group_pods(kube, namespace, "tp", pool, "coord", 1, "2")
        await create_group(
            kube,
            namespace,
            "tp",
            min_member=1,
            minSubGroup=1,
            policy={"action": "RestartGang", "scope": "SubGroup", "backoffSeconds": 5},
            subGroups=subs,
        )

        def needs(status: dict[str, Any]) -> dict[str, tuple[int, int]]:
            return {s["name"]: (s["minMember"], s["running"]) for s in status["subGroups"]}

        # Room for coord and 3 of stage's 6: the scheduler binds coord alone.
        status = await wait_group(kube, namespace, "tp", phase=c.Phase.RUNNING)
        where = await members_where(kube, namespace, "tp")
        assert sorted(where) == ["coord"], where
        assert needs(status) == {
            "stage": (6, 0),
            "replica-0": (2, 0),
            "replica-1": (2, 0),
            "replica-2": (2, 0),
            "coord": (1, 1),
        }, status["subGroups"]
        assert status["subGroupsSatisfied"] == "1/5"

        # Room for all: stage is bound whole.
        for blocker in blockers:
            await kube.delete(PODS, blocker["metadata"]["name"], namespace)
        status = await wait_group(kube, namespace, "tp", 60, subGroupsSatisfied="5/5")
        assert needs(status)["stage"] == (6, 6), status["subGroups"]
        before = await members_where(kube, namespace, "tp")
        assert sorted(before) == ["0", "1", "2", "coord"], before
        uids = {
            p["metadata"]["name"]: p["metadata"]["uid"]
            for p in (await kube.list(PODS, namespace, label_selector=f"{c.LABEL_POD_GROUP}=tp"))[
                "items"
            ]
        }

        # One member of replica-1 lost: stage has 5 of its 6 until replica-1 is repaired alone.
        await crash(kube, namespace, await kube.get(PODS, "tp-r1-0", namespace))

        async def short() -> dict[str, Any] | None:
            status = await group_status(kube, namespace, "tp")
            stage = needs(status).get("stage", (0, 0)) if status.get("subGroups") else (0, 0)
            return status if stage[0] == 6 and stage[1] < 6 else None

        status = await wait_for(short, 30, "stage short of its 6 members")
        assert status["subGroupsSatisfied"] == "3/5", status["subGroups"]

        async def event() -> dict[str, Any] | None:
            items = (await kube.list(EVENTS, namespace))["items"]
            return next((e for e in items if e["reason"] == c.Reason.SUB_GROUP_RESTARTED), None)

        found = await wait_for(event, 30, "a SubGroupRestarted Event")
        assert "sub-group replica-1: tp-r1-0 failed" in found["message"], found["message"]
        status = await wait_group(kube, namespace, "tp", 60, subGroupsSatisfied="5/5", restarts=1)
        assert needs(status)["stage"] == (6, 6), status["subGroups"]
        after = {
            p["metadata"]["name"]: p["metadata"]["uid"]
            for p in (await kube.list(PODS, namespace, label_selector=f"{c.LABEL_POD_GROUP}=tp"))[
                "items"
            ]
        }
        kept = [name for name in uids if not name.startswith("tp-r1-")]
        assert {n: after[n] for n in kept} == {n: uids[n] for n in kept}
        assert all(after[n] != uids[n] for n in ("tp-r1-0", "tp-r1-1"))
