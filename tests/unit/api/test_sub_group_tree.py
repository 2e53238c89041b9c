"""One sub-group tree (`api.subgroups.build_tree`), one minimum: the status, the restart policy
and the scheduler read a parent over a template leaf alike, each instance a sub-group of its
own. Hypothesis draws trees with templates and members; an oracle written from the spec's
words (here, from the raw dicts) says what each sub-group needs."""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from podgroup_operator.api.models import PodGroupSpec, PodGroupStatus
from podgroup_operator.api.subgroups import (
    TreeNode,
    build_tree,
    group_minimum_holds,
    pod_labels,
    spec_tree,
    sub_group_of,
    top_part,
)
from podgroup_operator.api.validation import spec_errors
from podgroup_operator.constants import LABEL_SUB_GROUP, Phase, Reason
from podgroup_operator.domain.lifecycle import compute_status
from podgroup_operator.domain.restart import Nothing, Restart
from podgroup_operator.scheduling.gang import SubGroupNode
from podgroup_operator.scheduling.subgroups import sub_group_tree
from tests.clock import T0
from tests.unit.restart.helpers import NO_BACKOFF, at, gang, iso, member, plan_restart

VALUES = ("a", "b", "c")
SCOPED = {**NO_BACKOFF, "scope": "SubGroup"}

TEMPLATE_PARENT = [
    {"name": "stage"},
    {"name": "replica", "parent": "stage", "minMember": 2, "matchLabelKeys": ["app/replica"]},
]


def replicas(letters: str) -> list[dict[str, Any]]:
    """Members m0.. in the states their letters name, two per replica 0, 1, 2."""
    return [
        member(i, letter, labels={"app/replica": str(i // 2)}) for i, letter in enumerate(letters)
    ]


def scheduler_minimums(spec: PodGroupSpec, pods: list[dict[str, Any]]) -> dict[str, int]:
    tree = sub_group_tree(spec, pods, [], lambda _: None)
    assert tree is not None

    def walk(node: SubGroupNode) -> list[tuple[str, int]]:
        return [(node.name, node.min_member), *(p for kid in node.children for p in walk(kid))]

    return dict(p for root in tree.roots for p in walk(root))


def test_a_parent_over_a_template_needs_each_instances_minimum() -> None:
    """Three instances of minMember 2: the parent needs 6 in the status and the scheduler."""
    group = gang(2, policy=None, subGroups=TEMPLATE_PARENT)
    pods = replicas("RRRRRR")
    status = compute_status(group, pods, PodGroupStatus(), T0).status
    assert status.sub_groups is not None
    rows = {s.name: (s.min_member, s.running) for s in status.sub_groups}
    assert rows == {"stage": (6, 6), **{f"replica-{r}": (2, 2) for r in range(3)}}
    assert scheduler_minimums(group.spec, pods) == {s: m for s, (m, _) in rows.items()}
    short = compute_status(group, replicas("RRRRRF"), PodGroupStatus(), T0).status
    assert short.sub_groups_satisfied == "2/4"  # stage (5 of 6) and replica-2 (1 of 2)


def test_min_sub_group_on_the_parent_counts_instances() -> None:
    subs = [{**TEMPLATE_PARENT[0], "minSubGroup": 2}, TEMPLATE_PARENT[1]]
    group = gang(2, policy=None, subGroups=subs)
    status = compute_status(group, replicas("RRRRPP"), PodGroupStatus(), T0).status
    assert status.sub_groups is not None
    assert status.sub_groups[0].name == "stage" and status.sub_groups[0].min_member == 4
    assert status.sub_groups_satisfied == "3/4"  # stage runs 4 of its 4; replica-2 none


def test_a_template_that_formed_no_instance_leaves_its_parent_needing_nothing() -> None:
    tree = build_tree(
        PodGroupSpec.model_validate({"minMember": 2, "subGroups": TEMPLATE_PARENT}).sub_groups
        or [],
        [],
        pod_labels,
    )
    [stage] = tree.roots
    assert (stage.name, stage.min_member, stage.children, stage.leaf) == ("stage", 0, (), False)
    assert tree.by_spec["replica"] == ()


def test_admission_reads_each_template_as_one_sub_group() -> None:
    """The spec alone cannot know how many instances will form: admission checks the least,
    one each, as before the tree was shared."""
    spec = {
        "minMember": 3,
        "subGroups": [*TEMPLATE_PARENT, {"name": "coord", "minMember": 1}],
    }
    assert spec_errors(spec) == []
    parsed = PodGroupSpec.model_validate(spec)
    tree = spec_tree(parsed.sub_groups or [])
    assert [(n.name, n.min_member) for n in tree.roots] == [("stage", 2), ("coord", 1)]
    assert spec_errors({**spec, "minMember": 2}) == [
        "spec.minMember: 2 is below the 3 members its 2 counted sub-groups need at least; "
        "raise it to 3 or lower the sub-groups' minMember"
    ]


def test_a_lost_member_of_one_instance_is_repaired_alone_while_the_group_holds() -> None:
    subs = [*TEMPLATE_PARENT, {"name": "coord", "minMember": 1}]
    status = {"phase": Phase.RUNNING, "running": 7, "runningTime": iso(at(0))}
    group = gang(2, policy=SCOPED, status=status, minSubGroup=1, subGroups=subs)
    pods = [*replicas("RRFRRR"), member(6, "R", labels={LABEL_SUB_GROUP: "coord"})]
    plan = plan_restart(group, pods, at(60))
    assert isinstance(plan, Restart), plan
    assert plan.event.reason == Reason.SUB_GROUP_RESTARTED
    assert "sub-group replica-1: m2 failed; 1 of minMember 2 members" in plan.event.message


# --- the property ------------------------------------------------------------------------------


@dataclass
class Drawn:
    """A valid spec with sub-groups and its members, each with the node it should land in."""

    spec: dict[str, Any]
    pods: list[dict[str, Any]]
    home: list[tuple[str, str] | None]
    """The sub-group each pod belongs to (its name, and its spec entry's: a template's for an
    instance), None outside every one."""


@st.composite
def drawn_trees(draw: st.DrawFn, letters: str = "RRPFS") -> Drawn:
    names = (f"s{i}" for i in itertools.count())
    specs: list[dict[str, Any]] = []

    def grow(parent: str | None, depth: int) -> None:
        entry: dict[str, Any] = {"name": next(names)}
        if parent is not None:
            entry["parent"] = parent
        specs.append(entry)
        kind = draw(st.sampled_from(("leaf", "template", "parent")[: 3 if depth < 3 else 2]))
        if kind == "parent":
            count = draw(st.integers(1, 3))
            for _ in range(count):
                grow(entry["name"], depth + 1)
            if draw(st.booleans()):
                entry["minSubGroup"] = draw(st.integers(1, count))
            return
        entry["minMember"] = draw(st.integers(1, 3))
        if kind == "template":
            entry["matchLabelKeys"] = [f"example.com/key-{entry['name']}"]

    tops = draw(st.integers(1, 3))
    for _ in range(tops):
        grow(None, 1)
    spec: dict[str, Any] = {"subGroups": specs}
    if draw(st.booleans()):
        spec["minSubGroup"] = draw(st.integers(1, tops))
    least = oracle(spec, {e["name"]: {e["name"]} for e in specs})
    top_needs = sorted(least[e["name"]] for e in specs if "parent" not in e)
    floor = sum(top_needs[: spec.get("minSubGroup") or len(top_needs)])
    spec["minMember"] = max(floor, 1) + draw(st.integers(0, 3))

    pods: list[dict[str, Any]] = []
    home: list[tuple[str, str] | None] = []
    parents = {e.get("parent") for e in specs}
    for entry in specs:
        if entry["name"] in parents:
            continue
        keys = entry.get("matchLabelKeys")
        for _ in range(draw(st.integers(0, 3))):
            if keys:
                value = draw(st.sampled_from(VALUES))
                labels = {keys[0]: value}
                if draw(st.booleans()):
                    labels[LABEL_SUB_GROUP] = entry["name"]
                where = f"{entry['name']}-{value}"
            else:
                labels, where = {LABEL_SUB_GROUP: entry["name"]}, entry["name"]
            pods.append(member(len(pods), draw(st.sampled_from(letters)), labels=labels))
            home.append((where, entry["name"]))
    for labels in draw(st.lists(st.sampled_from(({}, {LABEL_SUB_GROUP: "nope"})), max_size=2)):
        pods.append(member(len(pods), draw(st.sampled_from(letters)), labels=labels))
        home.append(None)
    return Drawn(spec, pods, home)


def oracle(spec: dict[str, Any], instances: dict[str, set[str]]) -> dict[str, int]:
    """Each sub-group's minimum by the spec's words: its minMember, else the sum of its counted
    children's (minSubGroup of them, smallest first, or all), a template's instances each a
    child; `instances` names those formed (a template without an entry forms none)."""
    kids: dict[str | None, list[dict[str, Any]]] = defaultdict(list)
    for entry in spec["subGroups"]:
        kids[entry.get("parent")].append(entry)
    out: dict[str, int] = {}

    def needs(entry: dict[str, Any]) -> list[int]:
        below = [need for kid in kids[entry["name"]] for need in needs(kid)]
        least = entry.get("minMember") or sum(
            sorted(below)[: entry.get("minSubGroup") or len(below)]
        )
        formed = (
            sorted(instances.get(entry["name"], ()))
            if "matchLabelKeys" in entry
            else [entry["name"]]
        )
        out.update(dict.fromkeys(formed, least))
        return [least] * len(formed)

    for entry in kids[None]:
        needs(entry)
    return out


def formed(drawn: Drawn) -> dict[str, set[str]]:
    """Spec entry -> the sub-groups its members form."""
    out: dict[str, set[str]] = defaultdict(set)
    for home in drawn.home:
        if home is not None:
            out[home[1]].add(home[0])
    return out


def live_members(drawn: Drawn) -> dict[str, int]:
    """Sub-group -> its members running or succeeded, a parent's over its subtree."""
    parent = {e["name"]: e.get("parent") for e in drawn.spec["subGroups"]}
    live: dict[str, int] = defaultdict(int)
    for pod, home in zip(drawn.pods, drawn.home, strict=True):
        if home is None or pod["status"]["phase"] not in ("Running", "Succeeded"):
            continue
        live[home[0]] += 1
        above = parent[home[1]]
        while above is not None:
            live[above] += 1
            above = parent[above]
    return live


@settings(max_examples=300, deadline=None)
@given(drawn_trees())
def test_the_status_and_the_scheduler_compute_the_same_minimum_for_every_sub_group(
    drawn: Drawn,
) -> None:
    group = gang(drawn.spec["minMember"], policy=None, **_fields(drawn.spec))
    expected = oracle(drawn.spec, formed(drawn))
    status = compute_status(group, drawn.pods, PodGroupStatus(), T0).status
    assert {s.name: s.min_member for s in status.sub_groups or ()} == expected
    assert scheduler_minimums(group.spec, drawn.pods) == expected
    live = live_members(drawn)
    satisfied = sum(live[name] >= least for name, least in expected.items())
    if expected:
        assert status.sub_groups_satisfied == f"{satisfied}/{len(expected)}"
    else:  # a lone template that formed no instance: no entries at all
        assert status.sub_groups is None and status.sub_groups_satisfied is None


@settings(max_examples=300, deadline=None)
@given(drawn_trees(letters="R"), st.data())
def test_the_restart_policy_reads_each_lost_members_sub_group_as_the_scheduler_does(
    drawn: Drawn, data: st.DataObject
) -> None:
    """One member of a sub-group fails: the policy repairs that sub-group alone exactly when
    the scheduler's tree says it is short of its minimum and the group's own minimum holds
    over the scheduler's direct parts without it; a repair names the same minimum."""
    inside = [i for i, home in enumerate(drawn.home) if home is not None]
    if not inside:
        return
    lost = data.draw(st.sampled_from(inside))
    drawn.pods[lost]["status"]["phase"] = "Failed"
    running = len(drawn.pods) - 1
    status = {"phase": Phase.RUNNING, "running": running, "runningTime": iso(at(0))}
    group = gang(drawn.spec["minMember"], policy=SCOPED, status=status, **_fields(drawn.spec))

    tree = sub_group_tree(group.spec, drawn.pods, [], lambda _: None)
    assert tree is not None
    # The status says Running: the group met its own minimum before the loss (a tree whose
    # parts never reach its minSubGroup never ran, and any failure restarts it whole).
    parts = len(tree.roots)
    assume(
        group_minimum_holds(
            group.spec.min_member,
            group.spec.min_sub_group,
            live=running + 1,
            parts=parts,
            whole=parts,
        )
    )
    pod = drawn.pods[lost]

    def holding(node: SubGroupNode) -> bool:
        return any(p is pod for p in node.subtree_pending())

    root = next(node for node in tree.roots if holding(node))
    leaf = root
    while leaf.children:
        leaf = next(kid for kid in leaf.children if holding(kid))
    left = len(leaf.pending) - 1
    plan = plan_restart(group, drawn.pods, at(60))
    if left < leaf.min_member and group_minimum_holds(
        group.spec.min_member,
        group.spec.min_sub_group,
        live=running - left,
        parts=len(tree.roots),
        whole=len(tree.roots) - 1,
    ):
        assert isinstance(plan, Restart) and plan.event.reason == Reason.SUB_GROUP_RESTARTED
        assert f"sub-group {leaf.name}: " in plan.event.message
        assert f"{left} of minMember {leaf.min_member} members" in plan.event.message
    elif running < group.spec.min_member or left < leaf.min_member:
        assert isinstance(plan, Restart) and plan.event.reason == Reason.GANG_RESTARTED
    else:
        assert isinstance(plan, Nothing), plan


@settings(max_examples=200, deadline=None)
@given(drawn_trees())
def test_preemption_reads_each_pods_sub_group_and_part_off_the_same_tree(drawn: Drawn) -> None:
    """Preemption (`_Split`) asks `sub_group_of` and `top_part` per pod and counts as the
    group's parts the top entries without a template and each member's part: the tree's
    leaves and roots."""
    subs = PodGroupSpec.model_validate(drawn.spec).sub_groups or []
    tree = build_tree(subs, drawn.pods, pod_labels)

    def below(node: TreeNode[dict[str, Any]]) -> list[TreeNode[dict[str, Any]]]:
        return [node, *(n for kid in node.children for n in below(kid))]

    seen = 0
    for root in tree.roots:
        for node in below(root):
            for pod in node.members:
                seen += 1
                assert sub_group_of(pod_labels(pod), subs).name == node.name
                assert top_part(pod_labels(pod), subs) == root.name
    assert seen == sum(home is not None for home in drawn.home)
    assert all(top_part(pod_labels(pod), subs) is None for pod in tree.loose)
    parts = {s.name for s in subs if s.parent is None and not s.match_label_keys}
    parts |= {part for pod in drawn.pods if (part := top_part(pod_labels(pod), subs))}
    assert parts == {root.name for root in tree.roots}
    homes = {id(p): home[0] for p, home in zip(drawn.pods, drawn.home, strict=True) if home}
    assert {id(p): n.name for n in tree.nodes() for p in n.members} == homes


def _fields(spec: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in spec.items() if k != "minMember"}
