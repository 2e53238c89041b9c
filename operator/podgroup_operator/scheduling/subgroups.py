"""Sub-groups: a gang of gangs, each part placed whole in one domain inside its parent's.

The framework's member step for gangs with `spec.subGroups` (`SubGroupTree`): given the domain
the generator offers the whole gang (or the whole cluster), it assigns each sub-group a domain
of its own level inside its parent's, and places each leaf's members there with the filters.

The search is bounded but not greedy. For each sub-group it ranks the domains by best fit on the
snapshot as the siblings before it left it, keeps the `DOMAINS_PER_SUB_GROUP` best of each
level, and tries them depth first, undoing a placement (the snapshot's assume/undo) when a later
sibling finds no room, so that an assignment the first choices miss is still found, within
`ATTEMPTS` leaf placements for the gang, over every candidate domain of the whole gang. A
parent's `minSubGroup` lets
children that do not fit be left out while enough others fit; every other sub-group must reach
its minimum, and the members placed at all must reach the group's own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from podgroup_operator.api.keys import pod_uid
from podgroup_operator.api.models import (
    PodGroupSpec,
    TopologyPlacement,
    constraint_in_effect,
)
from podgroup_operator.api.subgroups import TreeNode, build_tree, pod_labels
from podgroup_operator.constants import GangMode, Reason
from podgroup_operator.scheduling.framework import Candidate, GangView, best_fit
from podgroup_operator.scheduling.gang import (
    GangRequest,
    Placement,
    Refusal,
    SubGroupNode,
    SubGroupTree,
)
from podgroup_operator.scheduling.snapshot import Snapshot, Undo
from podgroup_operator.scheduling.topology import (
    Domain,
    DomainNodes,
    TopologyRequest,
    domain_of,
    domains_at,
    level_name,
    topology_of,
)

__all__ = [
    "ATTEMPTS",
    "DOMAINS_PER_SUB_GROUP",
    "Budget",
    "place_sub_groups",
    "sub_group_tree",
]

DOMAINS_PER_SUB_GROUP = 4
"""Domains of each level kept per sub-group, best fit first."""
ATTEMPTS = 512
"""Leaf placements tried for one gang (over every candidate of the whole gang) before the
search gives up."""


@dataclass
class Budget:
    """The leaf placements one gang's search may still try (`ATTEMPTS`), shared by the
    searches in each candidate domain of the gang."""

    left: int = field(default_factory=lambda: ATTEMPTS)


Pod = Mapping[str, Any]
PlaceMembers = Callable[[GangRequest, Snapshot], Placement | Refusal]
ViewOf = Callable[[GangRequest, Snapshot], GangView]


def sub_group_tree(
    spec: PodGroupSpec,
    pending: Sequence[Pod],
    bound: Sequence[Pod],
    levels_of: Callable[[str], tuple[str, ...] | None],
    placement: TopologyPlacement | None = None,
) -> SubGroupTree | None:
    """The tree of `spec.subGroups` with the group's pending and bound members in their leaves
    (`api.subgroups.build_tree`, the tree the status and the restart policy read: a template
    leaf has one node per instance its members form), or None without sub-groups.
    Members whose label names no leaf count as members of no sub-group; `placement` is the
    group's `status.placement`, whose sub-group domains are tried first again.

    Each sub-group's constraint is read in the Topology it uses (`models.constraint_in_effect`:
    its own, else its ancestors', else the group's); one in no Topology has its levels under
    its ancestors' chain, so that its domains are named inside its parent's."""
    subs = spec.sub_groups or []
    if not subs:
        return None
    held = {id(pod) for pod in bound}
    tree = build_tree(subs, [*pending, *bound], pod_labels)
    placed = {p.name: (p.level, p.domain) for p in (placement and placement.sub_groups) or ()}
    by_name = {sub.name: sub for sub in subs}
    group = spec.topology_constraint
    resolved: dict[str, tuple[TopologyRequest | None, tuple[str, ...]]] = {}

    def build(node: TreeNode[Pod], above: tuple[str, ...]) -> SubGroupNode:
        sub = node.spec
        found = resolved.get(sub.name)
        if found is None:  # once per spec entry: a template's instances share it
            topology = topology_of(constraint_in_effect(sub, by_name, group), levels_of, above)
            chain = above if topology is None or topology.problem is not None else topology.chain
            found = resolved[sub.name] = (topology, chain)
        topology, chain = found
        return SubGroupNode(
            node.name,
            node.min_member,
            sub.min_sub_group,
            topology,
            tuple(build(kid, chain) for kid in node.children),
            tuple(pod for pod in node.members if id(pod) not in held),
            frozenset(pod_uid(pod) for pod in node.members if id(pod) in held),
            placed.get(node.name),
        )

    top = topology_of(group, levels_of)
    chain = () if top is None or top.problem is not None else top.chain
    roots = tuple(build(node, chain) for node in tree.roots)
    loose = tuple(pod for pod in tree.loose if id(pod) not in held)
    return SubGroupTree(roots, spec.min_sub_group, loose)


class _OutOfAttemptsError(Exception):
    """The search spent its `ATTEMPTS`."""


@dataclass
class _Search:
    """One search of the tree within one candidate domain of the whole gang."""

    gang: GangRequest
    tree: SubGroupTree
    snapshot: Snapshot
    place_members: PlaceMembers
    view_of: ViewOf
    budget: Budget = field(default_factory=Budget)
    attempts: int = 0
    most: int = 0
    """The most members placed at once, for the refusal's `fit`."""
    placed: list[tuple[SubGroupNode, Domain | None, Placement]] = field(default_factory=list)
    parents: list[tuple[SubGroupNode, Domain | None]] = field(default_factory=list)
    """The domain of each parent whose children are placed (or being tried)."""
    refusals: dict[str, Refusal] = field(default_factory=dict)
    """The first refusal of each sub-group, for the message."""
    problems: dict[str, str] = field(default_factory=dict)
    domain_cache: dict[Any, dict[Domain, DomainNodes]] = field(default_factory=dict)
    candidate_cache: dict[Any, list[Candidate]] = field(default_factory=dict)

    # --- the tree ---------------------------------------------------------------------------
    def siblings(
        self,
        nodes: Sequence[SubGroupNode],
        need: int,
        within: Domain | None,
        then: Callable[[], bool],
        index: int = 0,
    ) -> bool:
        """Place `nodes[index:]` inside `within`, at least `need` of them satisfied, then call
        `then`; True when `then` held (everything left assumed), else everything undone."""
        if len(nodes) - index < need:
            return False
        if index == len(nodes):
            return then()
        node = nodes[index]
        rest = lambda: self.siblings(nodes, need - 1, within, then, index + 1)  # noqa: E731
        for domain in self.candidates(node, within):
            if self.one(node, domain, rest):
                return True
        if len(nodes) - index - 1 >= need:
            return self.siblings(nodes, need, within, then, index + 1)
        return False

    def one(self, node: SubGroupNode, domain: Domain | None, then: Callable[[], bool]) -> bool:
        """Place `node` in `domain` (its children inside it), then `then`."""
        if node.children:
            need = node.min_sub_group or len(node.children)
            floor = len(self.placed)
            self.parents.append((node, domain))
            if self.siblings(
                node.children, need, domain, lambda: self.enough(node, floor) and then()
            ):
                return True
            self.parents.pop()
            return False
        self.attempts += 1
        self.budget.left -= 1
        if self.budget.left < 0:
            raise _OutOfAttemptsError
        leaf = self.sub_gang(node, domain)
        outcome = self.place_members(leaf, self.snapshot)
        if isinstance(outcome, Refusal):
            self.refusals.setdefault(node.name, outcome)
            return False
        self.placed.append((node, domain, outcome))
        self.most = max(self.most, sum(len(p.bindings) for _, _, p in self.placed))
        if then():
            return True
        self.placed.pop()
        outcome.undo()
        return False

    def enough(self, parent: SubGroupNode, floor: int) -> bool:
        """A parent's own minMember holds over what its subtree has bound and placed."""
        members = len(parent.subtree_bound()) + sum(
            len(p.bindings) for _, _, p in self.placed[floor:]
        )
        if members >= parent.min_member:
            return True
        self.problems.setdefault(
            parent.name,
            f"sub-group {parent.name}: {members} members fit in its children, minMember "
            f"{parent.min_member}",
        )
        return False

    def sub_gang(self, node: SubGroupNode, domain: Domain | None) -> GangRequest:
        """The request of one sub-group: its members, its minimum, strict, within `domain`."""
        bound = node.subtree_bound()
        return dataclasses.replace(
            self.gang,
            min_member=max(node.min_member, 1),
            pending=tuple(node.subtree_pending()),
            already_bound=len(bound),
            bound_uids=bound,
            satisfied_before=False,
            mode=GangMode.STRICT,
            min_resources=None,
            topology=node.topology,
            within=domain,
            sub_groups=None,
        )

    # --- where each sub-group may go --------------------------------------------------------
    def candidates(self, node: SubGroupNode, within: Domain | None) -> list[Domain | None]:
        """The domains to try for `node` inside `within`: with no constraint `within` itself;
        where its members are bound, that domain alone; else the `DOMAINS_PER_SUB_GROUP` best
        fits of each level, finest first, then `within` when no level is required."""
        request = node.topology
        if request is None:
            return [within]
        if request.problem is not None:
            self.problems.setdefault(node.name, f"sub-group {node.name}: {request.problem}")
            return []
        bound = node.subtree_bound()
        if bound and request.required is not None:
            held = domain_of(self.snapshot, request, request.required, set(bound))
            if held is not None and _inside(held, within):
                return [held]
        view = self.view_of(self.sub_gang(node, None), self.snapshot)
        out: list[Domain | None] = []
        short = 0  # domains ruled out by capacity: the only ones said to have no room
        for level in request.levels:
            if within is not None and _covers(within, request, level):
                out.append(within)  # `within` lies in one domain of this level already
                continue
            inside = self.domains(request, level, view, within)
            ranked, ruled_out = best_fit(view, self.snapshot, inside)
            short += len(ruled_out)
            out.extend(c.domain for c in ranked[:DOMAINS_PER_SUB_GROUP])
        if request.cluster_wide:
            out.append(within)
        if node.placed is not None:
            # Where the sub-group was last placed goes first (replacements go back there).
            level, value = node.placed
            back: list[Domain | None] = [
                d for d in out if d is not None and (d.level, d.value) == (level, value)
            ]
            out = back + [d for d in out if d not in back]
        if not out:
            names = " or ".join(level_name(level) for level in request.levels)
            of = f" of {within.level} {within.value}" if within is not None else ""
            said = f"has room for {view.wanted}" if short else "has a node its members may use"
            self.problems.setdefault(node.name, f"sub-group {node.name}: no {names}{of} {said}")
        return list(dict.fromkeys(out))

    def domains(
        self, request: TopologyRequest, level: str, view: GangView, within: Domain | None
    ) -> list[Candidate]:
        """The domains of `level` inside `within` holding a node the members may use.

        Kept for the search: which nodes a domain holds does not change while it runs (their
        free capacity, read by the scorer, does), and siblings share their parent's domain."""
        shapes = tuple((tuple(c.id for c in f.classes), f.allowed) for f in view.feasibilities)
        key = (request.chain, level, shapes, None if within is None else within.path)
        found = self.candidate_cache.get(key)
        if found is None:
            every = (request.chain, level, shapes)
            domains = self.domain_cache.get(every)
            if domains is None:
                domains = domains_at(self.snapshot, request, level, view.feasibilities)
                self.domain_cache[every] = domains
            found = [
                Candidate(domain, nodes)
                for domain, nodes in domains.items()
                if _inside(domain, within)
            ]
            self.candidate_cache[key] = found
        return found

    # --- the whole gang ---------------------------------------------------------------------
    def run(self) -> Placement | Refusal:
        gang, tree = self.gang, self.tree
        need = tree.min_sub_group or len(tree.roots)
        loose: list[Placement] = []

        def group_minimum() -> bool:
            placed = sum(len(p.bindings) for _, _, p in self.placed)
            short = gang.min_member - gang.already_bound - placed
            rest = dataclasses.replace(
                gang,
                pending=tree.loose,
                min_member=max(short, 0),
                already_bound=0,
                satisfied_before=False,
                mode=GangMode.STRICT,
                sub_groups=None,
            )
            outcome = self.place_members(rest, self.snapshot)
            if isinstance(outcome, Refusal):
                self.problems.setdefault(
                    "", f"the group's minMember {gang.min_member} is not reached: {outcome.message}"
                )
                return False
            loose.append(outcome)
            return True

        try:
            found = self.siblings(tree.roots, need, gang.within, group_minimum)
        except _OutOfAttemptsError:
            found = False
            for _, _, placement in reversed(self.placed):
                placement.undo()
            self.placed.clear()
            self.problems.setdefault(
                "", f"the search stopped after {ATTEMPTS} placements in all for this gang"
            )
        if not found:
            return self.refusal()
        parts = [p for _, _, p in self.placed] + loose
        undos: list[Undo] = [p.undo for p in parts]

        def undo() -> None:
            for step in reversed(undos):
                step()

        bindings = tuple(b for p in parts for b in p.bindings)
        if not bindings and gang.pending and gang.satisfied_before:
            # Replacements of a gang that ran whole: none fits, so there is nothing to bind.
            undo()
            self.problems.setdefault("", "none of its pending members fits now")
            return self.refusal()
        bound = {b.pod for b in bindings}
        names = (str((pod.get("metadata") or {}).get("name", "")) for pod in gang.pending)
        return Placement(
            gang.key,
            bindings,
            tuple(name for name in names if name not in bound),
            undo,
            domain=gang.within,
            sub_domains=tuple(
                (node.name, domain)
                for node, domain in [*self.parents, *((n, d) for n, d, _ in self.placed)]
                if domain is not None and node.topology is not None
            ),
        )

    def refusal(self) -> Refusal:
        gang = self.gang
        parts = list(self.problems.values())
        parts += [
            f"sub-group {name}: {refusal.message.removeprefix(gang.label + ': ')}"
            for name, refusal in self.refusals.items()
        ]
        reasons = {r.reason for r in self.refusals.values()}
        reason = (
            Reason.UNSUPPORTED_CONSTRAINT
            if reasons == {Reason.UNSUPPORTED_CONSTRAINT}
            else Reason.NOT_ENOUGH_RESOURCES
        )
        where = f" in {gang.within.level} {gang.within.value}" if gang.within else ""
        head = (
            f"{gang.label}: no assignment of its sub-groups to domains fits{where} "
            f"({self.attempts} placements tried)"
        )
        fit = max([self.most, *(r.fit for r in self.refusals.values())])
        return Refusal(gang.key, reason, "; ".join([head, *parts[:4]]), fit=fit)


def place_sub_groups(
    gang: GangRequest,
    snapshot: Snapshot,
    place_members: PlaceMembers,
    view_of: ViewOf,
    budget: Budget | None = None,
) -> Placement | Refusal:
    """Place a gang with sub-groups within `gang.within` (the module docstring's search); on
    success every member placed is left assumed, and `Placement.sub_domains` names each
    constrained sub-group's domain; a refusal leaves the snapshot as it was."""
    assert gang.sub_groups is not None
    search = _Search(gang, gang.sub_groups, snapshot, place_members, view_of)
    if budget is not None:
        search.budget = budget
    return search.run()


def _inside(domain: Domain | None, within: Domain | None) -> bool:
    if within is None:
        return True
    if domain is None:
        return False
    return domain.path[: len(within.path)] == within.path


def _covers(within: Domain, request: TopologyRequest, level: str) -> bool:
    """`within` is a domain of `level` or of a finer level of the same chain."""
    depth = request.chain.index(level) + 1
    return len(within.path) >= depth and tuple(k for k, _ in within.path[:depth]) == tuple(
        request.chain[:depth]
    )
