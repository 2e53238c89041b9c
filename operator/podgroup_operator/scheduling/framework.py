"""The placement seam: where a gang may go, tried in the order a scorer ranks it.

One gang's placement runs in three steps, as kube-scheduler's placement generators and scorers
do for a pod group (`Framework.place`):

1. a **generator** (the first of the registry's `GENERATORS` whose `applies` holds) yields
   rounds of candidate node sets inside the parent's node set (`within`: the whole cluster for
   a gang, its parent's domain for a sub-group);
2. the **filters** judge each candidate: the members are placed on the snapshot restricted to
   it (`Framework.place_members`, the assume/undo snapshot), through a **member step** (the
   registry's `MEMBER_STEPS`) when the gang's members are not one flat set;
3. a **scorer** (`best_fit`) orders a round's candidates and drops those that cannot hold the
   gang by capacity alone; the first candidate placed wins, and the first round with one ends
   the search.

This module knows the steps only by their protocols: which generators and member steps exist
is the registry's (scheduling/registry.py), handed in through a `Framework`. A member step gets
the `Framework` too, so a search inside a candidate (a sub-group's) asks the same generators
for its own candidates, run inside its parent's domain.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from podgroup_operator.constants import GangMode, Reason
from podgroup_operator.scheduling.gang import GangRequest, Placement, Refusal
from podgroup_operator.scheduling.resources import copies_that_fit
from podgroup_operator.scheduling.snapshot import Feasibility, Snapshot
from podgroup_operator.scheduling.topology import (
    Domain,
    DomainNodes,
    TopologyRequest,
    domains_at,
    level_name,
)

__all__ = [
    "Candidate",
    "Framework",
    "GangView",
    "MemberStep",
    "PlaceMembers",
    "PlacementGenerator",
    "Round",
    "Scorer",
    "ViewFacts",
    "best_fit",
    "smallest_request",
]

PlaceMembers = Callable[[GangRequest, Snapshot], Placement | Refusal]
"""Places a gang's members on the snapshot within `gang.within` (the filters' step)."""


@dataclass(frozen=True)
class ViewFacts:
    """What the generators and scorer read of a gang's members.

    `feasibilities` are the static filters' verdicts of each member shape; `smallest` is the
    least each member asks of every resource, and `needed` how many members must fit now, so
    that `needed` copies of `smallest` is a lower bound of what the gang takes; `wanted` says
    it in messages (`12 x {cpu: 4}`)."""

    feasibilities: tuple[Feasibility, ...]
    smallest: tuple[tuple[str, int], ...]
    needed: int
    wanted: str


Describe = Callable[[GangRequest, Snapshot], ViewFacts]


class GangView:
    """A gang as the generators and scorer see it: the request, and its members' facts
    (`ViewFacts`), worked out on first use, since a generator that offers the parent's node set
    whole reads none of them.

    `memo` is what generators may keep while one search runs (the nodes a domain holds do not
    change meanwhile, their free capacity does); None keeps nothing."""

    __slots__ = ("_describe", "_facts", "_snapshot", "gang", "memo")

    def __init__(
        self,
        gang: GangRequest,
        snapshot: Snapshot,
        describe: Describe,
        memo: dict[Any, Any] | None = None,
    ) -> None:
        self.gang = gang
        self.memo = memo
        self._snapshot = snapshot
        self._describe = describe
        self._facts: ViewFacts | None = None

    @property
    def facts(self) -> ViewFacts:
        facts = self._facts
        if facts is None:
            facts = self._facts = self._describe(self.gang, self._snapshot)
        return facts

    @property
    def feasibilities(self) -> tuple[Feasibility, ...]:
        return self.facts.feasibilities

    @property
    def smallest(self) -> tuple[tuple[str, int], ...]:
        return self.facts.smallest

    @property
    def needed(self) -> int:
        return self.facts.needed

    @property
    def wanted(self) -> str:
        return self.facts.wanted


@dataclass(frozen=True)
class Candidate:
    """One node set to try: a domain with its nodes, or the whole snapshot (`domain` None)."""

    domain: Domain | None
    nodes: DomainNodes = field(default_factory=DomainNodes)


@dataclass(frozen=True)
class Round:
    """The candidates of one level, with `first` tried before the scorer's order (the domain
    a gang's bound members already hold).

    A `whole` round has one candidate, the parent's node set itself (the whole cluster, or the
    `within` a generator was given): it is tried as it is, never scored; `level` is None when
    it stands for no level of the gang's (the cluster-wide fallback)."""

    level: str | None
    candidates: Sequence[Candidate]
    first: Domain | None = None
    whole: bool = False


_WHOLE_CLUSTER = Round(None, (Candidate(None),), whole=True)


def whole_round(within: Domain | None, level: str | None = None) -> Round:
    """The round whose one candidate is the parent's node set (`within`, or the cluster)."""
    if within is None and level is None:
        return _WHOLE_CLUSTER  # the round of nearly every gang: built once
    return Round(level, (Candidate(within),), whole=True)


class PlacementGenerator(Protocol):
    """Yields the rounds of candidate node sets for a gang inside its parent's node set
    (step 1 of the module docstring)."""

    def applies(self, gang: GangRequest) -> bool:
        """Whether this generator decides where `gang` may go (the first that applies does)."""
        ...

    def problem(self, gang: GangRequest) -> str | None:
        """Why the gang's candidates cannot be known (a constraint that does not resolve): the
        gang waits with this message. None when they can."""
        ...

    def rounds(
        self, view: GangView, snapshot: Snapshot, within: Domain | None = None
    ) -> Iterable[Round]:
        """The rounds, tried in order (lazily: a round placed ends the search); every candidate
        lies inside `within` (None: anywhere)."""
        ...


class MemberStep(Protocol):
    """How a gang's members are placed in one candidate (step 2 of the module docstring),
    for gangs whose members are not one flat set."""

    def applies(self, gang: GangRequest) -> bool: ...

    def members(self, framework: Framework) -> PlaceMembers:
        """The step for one gang's placement: called once per gang, the step it returns once
        per candidate the generator offers."""
        ...


Scorer = Callable[
    [GangView, Snapshot, Sequence[Candidate]], tuple[list[Candidate], list[Candidate]]
]
"""Step 3: a round's candidates that may hold the gang, best first, and those that cannot."""


def best_fit(
    view: GangView, snapshot: Snapshot, candidates: Sequence[Candidate]
) -> tuple[list[Candidate], list[Candidate]]:
    """The scorer (step 3): the candidates that may hold the gang, the one left with the least
    free capacity first (ties by domain name), and those that cannot by capacity alone, so
    that whole racks stay free for the big gangs.

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


@dataclass(frozen=True)
class Framework:
    """The steps of one placement, as the registry lists them: the filters' step
    (`place_members`), what generators and scorer read of members (`describe`), the generator
    and member step of a gang (the registry's lookups, asked at each placement), and the
    scorer."""

    place_members: PlaceMembers
    describe: Describe
    generator_for: Callable[[GangRequest], PlacementGenerator]
    member_step_for: Callable[[GangRequest], MemberStep | None]
    score: Scorer = best_fit

    def view(
        self, gang: GangRequest, snapshot: Snapshot, memo: dict[Any, Any] | None = None
    ) -> GangView:
        return GangView(gang, snapshot, self.describe, memo)

    def place(self, gang: GangRequest, snapshot: Snapshot) -> Placement | Refusal:
        """Run the generator's rounds inside `gang.within` until one places the gang (left
        assumed), else refuse.

        With a generator that offers the parent's node set whole and no member step, this is
        one call of `place_members`, its answer unchanged."""
        generator = self.generator_for(gang)
        problem = generator.problem(gang)
        if problem is not None:
            return Refusal(gang.key, Reason.INVALID_TOPOLOGY, f"{gang.label}: {problem}")
        step = self.member_step_for(gang)
        place_members = self.place_members if step is None else step.members(self)
        view = GangView(gang, snapshot, self.describe)
        search: _Search | None = None  # for rounds of domains: most gangs have none
        last: Refusal | None = None
        for round_ in generator.rounds(view, snapshot, gang.within):
            if round_.whole:
                # The parent's node set as it is: the gang, `within` and mode unchanged.
                outcome = place_members(gang, snapshot)
                if isinstance(outcome, Placement):
                    return _in(outcome, round_.candidates[0].domain)
                last = outcome
                continue
            if search is None:
                search = _Search(view, snapshot, place_members, self.score, step is not None)
            found = search.round(round_)
            if found is not None:
                return found
        if search is None:
            if last is None:
                return Refusal(
                    gang.key,
                    Reason.NOT_ENOUGH_RESOURCES,
                    f"{gang.label}: its placement generator offers no node set",
                )
            return last
        message = search.message()
        unsupported = search.reasons == {Reason.UNSUPPORTED_CONSTRAINT}
        reason = Reason.UNSUPPORTED_CONSTRAINT if unsupported else Reason.NOT_ENOUGH_RESOURCES
        if last is None:
            return Refusal(gang.key, reason, message, fit=max(_fits(search.tried), default=0))
        return dataclasses.replace(last, message=f"{message}; cluster-wide: {last.message}")


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


def _copies(smallest: tuple[tuple[str, int], ...], snapshot: Snapshot, candidate: Candidate) -> int:
    """At most how many members the candidate's nodes hold (copies of `smallest`, the members'
    smallest request)."""
    copies = 0
    for node in candidate.nodes.node_states(snapshot):
        if node.usable:
            copies += copies_that_fit(smallest, node.free)
    return copies


def _count_domains(snapshot: Snapshot, request: TopologyRequest, level: str) -> int:
    """Domains of `level` in the whole snapshot, whatever a gang's filters say."""
    return len(domains_at(snapshot, request, level, (snapshot.classes.every_node(),)))


@dataclass
class _Search:
    """One run of the three steps for one gang (`Framework.place`)."""

    view: GangView
    snapshot: Snapshot
    place_members: PlaceMembers
    score: Scorer
    stepped: bool
    """A member step places the members: its refusals say why a domain came short."""
    tried: list[_Tried] = field(default_factory=list)
    reasons: set[Reason] = field(default_factory=set)

    def attempt(self, candidate: Candidate) -> Placement | Refusal:
        # Inside a domain a gang is all or nothing: a NonStrict gang's partial members would
        # hold room in a domain it may never fit in.
        gang = dataclasses.replace(self.view.gang, within=candidate.domain, mode=GangMode.STRICT)
        outcome = self.place_members(gang, self.snapshot)
        if isinstance(outcome, Placement):
            return _in(outcome, candidate.domain)
        self.reasons.add(outcome.reason)
        return outcome

    def round(self, round_: Round) -> Placement | None:
        """The placement of the first candidate of a round of domains that fits, or None."""
        tried = _Tried(round_)
        self.tried.append(tried)
        ordered, ruled_out = self.score(self.view, self.snapshot, round_.candidates)
        if round_.first is not None:
            first = [c for c in ordered if c.domain == round_.first]
            ordered = first + [c for c in ordered if c.domain != round_.first]
        for candidate in ordered:
            outcome = self.attempt(candidate)
            if isinstance(outcome, Placement):
                return outcome
            assert candidate.domain is not None
            tried.saw(outcome.fit, candidate.domain, outcome.message if self.stepped else "")
        smallest = self.view.smallest if ruled_out else ()
        for candidate in ruled_out:
            assert candidate.domain is not None
            tried.saw(_copies(smallest, self.snapshot, candidate), candidate.domain)
        return None

    def message(self) -> str:
        view = self.view
        request = view.gang.topology
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
            of = (
                f" of {_count_domains(self.snapshot, request, level)}"
                if request is not None and level in request.chain
                else ""
            )
            parts.append(
                f"{head}: {tried.judged}{of} {name}s tried; best {domain} holds "
                f"{fit}, short {max(view.needed - fit, 0)} pods"
                + (f" ({tried.why.removeprefix(view.gang.label + ': ')})" if tried.why else "")
            )
        where = f" of Topology {request.topology}" if request and request.topology else ""
        return f"{view.gang.label}{where}: " + "; ".join(parts)


def _in(placement: Placement, domain: Domain | None) -> Placement:
    """`placement`, its `domain` the candidate's it was made in (None: as it says)."""
    if domain is None or placement.domain == domain:
        return placement
    return dataclasses.replace(placement, domain=domain)


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
