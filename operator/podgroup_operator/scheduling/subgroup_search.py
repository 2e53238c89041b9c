"""The sub-group search: a gang of gangs, each part placed whole in one domain inside its parent's.

The framework's member step for gangs with `spec.subGroups` (`SubGroupStep`): given the
candidate the generator offers the whole gang (a domain, or the whole cluster), it assigns each
sub-group a domain of its own inside its parent's, and places each leaf's members there with
the filters. A sub-group's domains are its own generator's rounds run inside its parent's
domain (`Framework.generator_for`, the registry's): the search re-implements none of it.

The search is bounded but not greedy. For each sub-group it ranks each round's domains with the
framework's scorer on the snapshot as the siblings before it left it, keeps the
`DOMAINS_PER_SUB_GROUP` best of each round, and tries them depth first, undoing a placement (the
snapshot's assume/undo) when a later sibling finds no room, so that an assignment the first
choices miss is still found, within `ATTEMPTS` leaf placements for the gang, over every
candidate domain of the whole gang. A parent's `minSubGroup` lets children that do not fit be
left out while enough others fit; every other sub-group must reach its minimum, and the members
placed at all must reach the group's own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from podgroup_operator.constants import GangMode, Reason
from podgroup_operator.scheduling.framework import Framework, PlaceMembers
from podgroup_operator.scheduling.gang import (
    GangRequest,
    Placement,
    Refusal,
    SubGroupNode,
    SubGroupTree,
)
from podgroup_operator.scheduling.snapshot import Snapshot, Undo
from podgroup_operator.scheduling.topology import Domain, level_name

__all__ = [
    "ATTEMPTS",
    "DOMAINS_PER_SUB_GROUP",
    "Budget",
    "SubGroupStep",
    "place_sub_groups",
]

DOMAINS_PER_SUB_GROUP = 4
"""Domains of each round kept per sub-group, best fit first."""
ATTEMPTS = 512
"""Leaf placements tried for one gang (over every candidate of the whole gang) before the
search gives up."""


@dataclass
class Budget:
    """The leaf placements one gang's search may still try (`ATTEMPTS`), shared by the
    searches in each candidate domain of the gang."""

    left: int = field(default_factory=lambda: ATTEMPTS)


class SubGroupStep:
    """`spec.subGroups`: each sub-group in one domain of its own inside its parent's, by the
    bounded backtracking search of the module docstring."""

    def applies(self, gang: GangRequest) -> bool:
        return gang.sub_groups is not None

    def members(self, framework: Framework) -> PlaceMembers:
        budget = Budget()  # one gang's, over every candidate the generator offers

        def step(gang: GangRequest, snapshot: Snapshot) -> Placement | Refusal:
            return place_sub_groups(gang, snapshot, framework, budget)

        return step


class _OutOfAttemptsError(Exception):
    """The search spent its `ATTEMPTS`."""


@dataclass
class _Search:
    """One search of the tree within one candidate domain of the whole gang."""

    gang: GangRequest
    tree: SubGroupTree
    snapshot: Snapshot
    framework: Framework
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
    memo: dict[Any, Any] = field(default_factory=dict)
    """The generators' memo for the search (`GangView.memo`)."""

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
        outcome = self.framework.place_members(leaf, self.snapshot)
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
        """The domains to try for `node` inside `within`: its generator's rounds run inside
        `within`, the `DOMAINS_PER_SUB_GROUP` best of each round by the scorer (a round's
        `first` ahead), where it was last placed first of all."""
        gang = self.sub_gang(node, None)
        generator = self.framework.generator_for(gang)
        problem = generator.problem(gang)
        if problem is not None:
            self.problems.setdefault(node.name, f"sub-group {node.name}: {problem}")
            return []
        view = self.framework.view(gang, self.snapshot, self.memo)
        out: list[Domain | None] = []
        levels: list[str] = []
        short = 0  # domains ruled out by capacity: the only ones said to have no room
        for round_ in generator.rounds(view, self.snapshot, within):
            if round_.level is not None:
                levels.append(round_.level)
            if round_.whole:
                out.append(round_.candidates[0].domain)
                continue
            ranked, ruled_out = self.framework.score(view, self.snapshot, round_.candidates)
            short += len(ruled_out)
            first = round_.first
            if first is not None:
                ranked = [c for c in ranked if c.domain == first] + [
                    c for c in ranked if c.domain != first
                ]
            out.extend(c.domain for c in ranked[:DOMAINS_PER_SUB_GROUP])
        if node.placed is not None:
            # Where the sub-group was last placed goes first (replacements go back there).
            level, value = node.placed
            back: list[Domain | None] = [
                d for d in out if d is not None and (d.level, d.value) == (level, value)
            ]
            out = back + [d for d in out if d not in back]
        if not out:
            names = " or ".join(dict.fromkeys(level_name(level) for level in levels))
            of = f" of {within.level} {within.value}" if within is not None else ""
            said = f"has room for {view.wanted}" if short else "has a node its members may use"
            self.problems.setdefault(node.name, f"sub-group {node.name}: no {names}{of} {said}")
        return list(dict.fromkeys(out))

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
            outcome = self.framework.place_members(rest, self.snapshot)
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
    framework: Framework,
    budget: Budget | None = None,
) -> Placement | Refusal:
    """Place a gang with sub-groups within `gang.within` (the module docstring's search); on
    success every member placed is left assumed, and `Placement.sub_domains` names each
    constrained sub-group's domain; a refusal leaves the snapshot as it was."""
    assert gang.sub_groups is not None
    search = _Search(gang, gang.sub_groups, snapshot, framework)
    if budget is not None:
        search.budget = budget
    return search.run()
