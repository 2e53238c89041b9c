"""The placement seam: where a gang may go, tried in the order a scorer ranks it.

One gang's placement runs in three steps, as kube-scheduler's placement generators and scorers
do for a pod group:

1. a **generator** (`GENERATORS`: the first whose `applies` holds) yields rounds of candidate
   node sets: `WholeCluster` one round of one candidate, the whole snapshot; `TopologyDomains`
   one round per level of the gang's topology constraint, finest first, each of that level's
   domains a candidate;
2. the **filters** judge each candidate: the members are placed on the snapshot restricted to
   it (`place_members`, the existing filters and the assume/undo snapshot), through a **member
   step** (`MEMBER_STEPS`) when the gang's members are not one flat set: `SubGroupStep` gives
   each sub-group a domain of its own inside the candidate;
3. a **scorer** orders a round's candidates (`best_fit`: the domain left with the least free
   capacity first, so whole racks stay free for the big gangs) and drops those that cannot hold
   the gang by capacity alone; the first candidate placed wins, and the first round with one
   ends the search.

A new rule for where gangs live is a generator and a line in `GENERATORS`, not an edit of the
placement steps. Preemption asks the same generator where victims would help.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from podgroup_operator.constants import GangMode, Reason
from podgroup_operator.scheduling.gang import GangRequest, Placement, Refusal
from podgroup_operator.scheduling.resources import copies_that_fit
from podgroup_operator.scheduling.snapshot import Feasibility, Snapshot
from podgroup_operator.scheduling.topology import (
    Domain,
    DomainNodes,
    TopologyRequest,
    domain_of,
    domains_at,
    level_name,
)

__all__ = [
    "GENERATORS",
    "MEMBER_STEPS",
    "Candidate",
    "GangView",
    "MemberStep",
    "PlacementGenerator",
    "Round",
    "SubGroupStep",
    "TopologyDomains",
    "WholeCluster",
    "best_fit",
    "generator_for",
    "place",
]

PlaceMembers = Callable[[GangRequest, Snapshot], Placement | Refusal]
"""Places a gang's members on the snapshot within `gang.within` (the filters' step)."""


@dataclass(frozen=True)
class GangView:
    """What the generator and scorer need of a gang besides the request itself.

    `feasibilities` are the static filters' verdicts of each member shape; `smallest` is the
    least each member asks of every resource, and `needed` how many members must fit now, so
    that `needed` copies of `smallest` is a lower bound of what the gang takes; `wanted` says
    it in messages (`12 x {cpu: 4}`)."""

    gang: GangRequest
    feasibilities: tuple[Feasibility, ...]
    smallest: tuple[tuple[str, int], ...]
    needed: int
    wanted: str


@dataclass(frozen=True)
class Candidate:
    """One node set to try: a domain with its nodes, or the whole snapshot (`domain` None)."""

    domain: Domain | None
    nodes: DomainNodes = field(default_factory=DomainNodes)


@dataclass(frozen=True)
class Round:
    """The candidates of one level (None: the whole cluster), with `first` tried before the
    scorer's order (the domain a gang's bound members already hold)."""

    level: str | None
    candidates: Sequence[Candidate]
    first: Domain | None = None


@dataclass
class _Tried:
    """What one round of domains found, for the refusal's message."""

    round: Round
    judged: int = 0
    best: tuple[int, str] | None = None
    """(members that fit, domain) of the domain that came closest; ties go to the first name."""
    why: str = ""
    """The refusal of the domain that came closest, when a member step said why."""

    def saw(self, fit: int, domain: Domain, why: str = "") -> None:
        self.judged += 1
        best = self.best
        if best is None or fit > best[0] or (fit == best[0] and domain.value < best[1]):
            self.best = (fit, domain.value)
            self.why = why


class PlacementGenerator(Protocol):
    """Yields the rounds of candidate node sets for a gang (step 1 of the module docstring)."""

    def applies(self, gang: GangRequest) -> bool: ...

    def rounds(self, view: GangView, snapshot: Snapshot) -> Iterator[Round]: ...


class WholeCluster:
    """The default: one round whose one candidate is the whole snapshot."""

    def applies(self, gang: GangRequest) -> bool:
        return True

    def rounds(self, view: GangView, snapshot: Snapshot) -> Iterator[Round]:
        yield Round(None, (Candidate(None),))


class TopologyDomains:
    """`spec.topologyConstraint`: one round per level from the preferred level to the required
    one (finest first), then, with no required level, the whole cluster.

    Replacements of a gang with bound members go where those members are: with a required
    level only inside their domain of it, and at every level their own domain is tried first.
    """

    def applies(self, gang: GangRequest) -> bool:
        return gang.topology is not None and gang.within is None

    def rounds(self, view: GangView, snapshot: Snapshot) -> Iterator[Round]:
        gang = view.gang
        request = gang.topology
        assert request is not None
        bound = gang.bound_uids if gang.already_bound else frozenset()
        inside = (
            domain_of(snapshot, request, request.required, set(bound))
            if bound and request.required is not None
            else None
        )
        for level in request.levels:
            domains = domains_at(snapshot, request, level, view.feasibilities)
            candidates = tuple(
                Candidate(domain, nodes)
                for domain, nodes in domains.items()
                if inside is None or domain.path[: len(inside.path)] == inside.path
            )
            first = domain_of(snapshot, request, level, set(bound)) if bound else None
            yield Round(level, candidates, first)
        if request.cluster_wide:
            yield Round(None, (Candidate(None),))


def _count_domains(snapshot: Snapshot, request: TopologyRequest, level: str) -> int:
    """Domains of `level` in the whole snapshot, whatever a gang's filters say."""
    return len(domains_at(snapshot, request, level, (snapshot.classes.every_node(),)))


GENERATORS: tuple[PlacementGenerator, ...] = (TopologyDomains(), WholeCluster())
"""The placement generators, most specific first: the first that applies to a gang is used."""


def generator_for(gang: GangRequest) -> PlacementGenerator:
    return next(g for g in GENERATORS if g.applies(gang))


ViewOf = Callable[[GangRequest, Snapshot], GangView]


class MemberStep(Protocol):
    """How a gang's members are placed in one candidate (step 2 of the module docstring),
    for gangs whose members are not one flat set."""

    def applies(self, gang: GangRequest) -> bool: ...

    def members(self, place_members: PlaceMembers, view_of: ViewOf) -> PlaceMembers: ...


class SubGroupStep:
    """`spec.subGroups`: each sub-group in one domain of its level inside its parent's, by a
    bounded backtracking search (scheduling/subgroups.py)."""

    def applies(self, gang: GangRequest) -> bool:
        return gang.sub_groups is not None

    def members(self, place_members: PlaceMembers, view_of: ViewOf) -> PlaceMembers:
        # Imported here: the search ranks domains with this module's scorer.
        from podgroup_operator.scheduling.subgroups import Budget, place_sub_groups

        budget = Budget()  # one gang's, over every candidate the generator offers

        def step(gang: GangRequest, snapshot: Snapshot) -> Placement | Refusal:
            return place_sub_groups(gang, snapshot, place_members, view_of, budget)

        return step


MEMBER_STEPS: tuple[MemberStep, ...] = (SubGroupStep(),)
"""The member steps: the first that applies to a gang places its members in each candidate;
with none, the filters place them as one set."""


def best_fit(
    view: GangView, snapshot: Snapshot, candidates: Sequence[Candidate]
) -> tuple[list[Candidate], list[Candidate]]:
    """The scorer (step 3): the candidates that may hold the gang, the one left with the least
    free capacity first (ties by domain name), and those that cannot by capacity alone.

    Free capacity is the domain's free amount of each resource the gang asks for, as a share of
    the snapshot's free amount, summed. A domain whose free amounts are short of `needed` times
    the members' smallest request cannot hold the gang, and is not attempted."""
    if len(candidates) == 1 and candidates[0].domain is None:
        return list(candidates), []
    smallest = view.smallest
    total = snapshot.total_free()
    names = [name for name, _ in smallest]
    wanted = [(name, amount * view.needed) for name, amount in smallest]
    ranked: list[tuple[float, str, Candidate]] = []
    ruled_out: list[Candidate] = []
    for candidate in candidates:
        free = candidate.nodes.free(names)
        if any(free[name] < amount for name, amount in wanted):
            ruled_out.append(candidate)
            continue
        share = sum(free[name] / total[name] for name in names if total.get(name, 0) > 0)
        assert candidate.domain is not None
        ranked.append((share, candidate.domain.value, candidate))
    ranked.sort(key=lambda item: (item[0], item[1]))
    return [candidate for _, _, candidate in ranked], ruled_out


def _copies(view: GangView, snapshot: Snapshot, candidate: Candidate) -> int:
    """At most how many members the candidate's nodes hold (copies of the smallest request)."""
    copies = 0
    for node in candidate.nodes.node_states(snapshot):
        if node.usable:
            copies += copies_that_fit(view.smallest, node.free)
    return copies


@dataclass
class _Search:
    """One run of the three steps for one gang (`place`)."""

    view: GangView
    snapshot: Snapshot
    place_members: PlaceMembers
    tried: list[_Tried] = field(default_factory=list)
    reasons: set[Reason] = field(default_factory=set)

    def attempt(self, candidate: Candidate) -> Placement | Refusal:
        gang = self.view.gang
        if candidate.domain is not None:
            # Inside a domain a gang is all or nothing: a NonStrict gang's partial members would
            # hold room in a domain it may never fit in.
            gang = dataclasses.replace(gang, within=candidate.domain, mode=GangMode.STRICT)
        outcome = self.place_members(gang, self.snapshot)
        if isinstance(outcome, Placement):
            return dataclasses.replace(outcome, domain=candidate.domain)
        self.reasons.add(outcome.reason)
        return outcome

    def round(self, round_: Round) -> Placement | Refusal | None:
        """The placement of the first candidate that fits, the last refusal of a whole-cluster
        round, or None when no domain of the round fits."""
        if round_.level is None:
            return self.attempt(round_.candidates[0])
        tried = _Tried(round_)
        self.tried.append(tried)
        ordered, ruled_out = best_fit(self.view, self.snapshot, round_.candidates)
        if round_.first is not None:
            first = [c for c in ordered if c.domain == round_.first]
            ordered = first + [c for c in ordered if c.domain != round_.first]
        stepped = self.view.gang.sub_groups is not None
        for candidate in ordered:
            outcome = self.attempt(candidate)
            if isinstance(outcome, Placement):
                return outcome
            assert candidate.domain is not None
            tried.saw(outcome.fit, candidate.domain, outcome.message if stepped else "")
        for candidate in ruled_out:
            assert candidate.domain is not None
            tried.saw(_copies(self.view, self.snapshot, candidate), candidate.domain)
        return None

    def message(self) -> str:
        view = self.view
        request = view.gang.topology
        assert request is not None
        parts = []
        for tried in self.tried:
            level = tried.round.level
            assert level is not None
            name = level_name(level)
            head = f"no {name} ({level}) holds {view.wanted}"
            if tried.best is None:
                parts.append(f"{head}: no {name} has a node the members may use")
                continue
            fit, domain = tried.best
            parts.append(
                f"{head}: {tried.judged} of {_count_domains(self.snapshot, request, level)} "
                f"{name}s tried; best {domain} holds "
                f"{fit}, short {max(view.needed - fit, 0)} pods"
                + (f" ({tried.why.removeprefix(view.gang.label + ': ')})" if tried.why else "")
            )
        where = f" of Topology {request.topology}" if request.topology else ""
        return f"{view.gang.label}{where}: " + "; ".join(parts)


def place(
    view: GangView,
    snapshot: Snapshot,
    place_members: PlaceMembers,
    view_of: ViewOf | None = None,
) -> Placement | Refusal:
    """Run the generator's rounds until one places the gang (left assumed), else refuse.

    Without a topology constraint or a member step this is one call of `place_members` on the
    whole snapshot, its answer unchanged. `view_of` gives member steps the view of a part."""
    step = next((s for s in MEMBER_STEPS if s.applies(view.gang)), None)
    if step is not None:
        assert view_of is not None, "a member step needs view_of"
        place_members = step.members(place_members, view_of)
    search = _Search(view, snapshot, place_members)
    last: Refusal | None = None
    for round_ in generator_for(view.gang).rounds(view, snapshot):
        outcome = search.round(round_)
        if isinstance(outcome, Placement):
            return outcome
        if outcome is not None:
            last = outcome
    if not search.tried:
        assert last is not None
        return last
    message = search.message()
    unsupported = search.reasons == {Reason.UNSUPPORTED_CONSTRAINT}
    reason = Reason.UNSUPPORTED_CONSTRAINT if unsupported else Reason.NOT_ENOUGH_RESOURCES
    if last is None:
        return Refusal(view.gang.key, reason, message, fit=max(_fits(search.tried), default=0))
    return dataclasses.replace(last, message=f"{message}; cluster-wide: {last.message}")


def _fits(tried: Sequence[_Tried]) -> Iterator[int]:
    for each in tried:
        if each.best is not None:
            yield each.best[0]


def smallest_request(requests: Sequence[Mapping[str, int]]) -> tuple[tuple[str, int], ...]:
    """The least of each resource any of `requests` asks for (a lower bound of every member)."""
    if not requests:
        return ()
    least = dict(requests[0])
    for request in requests[1:]:
        least = {name: min(amount, request.get(name, 0)) for name, amount in least.items()}
    return tuple(sorted((name, amount) for name, amount in least.items() if amount > 0))
