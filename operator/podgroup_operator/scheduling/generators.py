"""The placement generators: the candidate node sets of a gang, inside its parent's.

Each is one class and one line of the registry's `GENERATORS` (scheduling/registry.py); the
gang's placement, the sub-group search and preemption's per-domain plans all ask the registry,
so a new kind of candidate set (an NVLink clique, a zone) needs no edit of any of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from podgroup_operator.scheduling.framework import Candidate, GangView, Round, whole_round
from podgroup_operator.scheduling.gang import GangRequest
from podgroup_operator.scheduling.snapshot import Snapshot
from podgroup_operator.scheduling.topology import (
    Domain,
    DomainNodes,
    TopologyRequest,
    domain_of,
    domains_at,
)

__all__ = ["TopologyDomains", "WholeCluster", "covers", "inside"]


class WholeCluster:
    """The default: one round whose one candidate is the parent's node set, whole."""

    def applies(self, gang: GangRequest) -> bool:
        return True

    def problem(self, gang: GangRequest) -> str | None:
        return None

    def rounds(
        self, view: GangView, snapshot: Snapshot, within: Domain | None = None
    ) -> Iterable[Round]:
        return (whole_round(within),)


class TopologyDomains:
    """`spec.topologyConstraint`: one round per level from the preferred level to the required
    one (finest first), then, with no required level, the parent's node set whole.

    Inside `within`, a level that `within` already lies in one domain of (`covers`) offers
    `within` whole; the others offer their domains inside it. Replacements of a gang with bound
    members go where those members are: with a required level only inside their domain of it
    (that domain alone when none is pending), and at every level their own domain is tried
    first."""

    def applies(self, gang: GangRequest) -> bool:
        return gang.topology is not None

    def problem(self, gang: GangRequest) -> str | None:
        return gang.topology.problem if gang.topology is not None else None

    def rounds(
        self, view: GangView, snapshot: Snapshot, within: Domain | None = None
    ) -> Iterator[Round]:
        gang = view.gang
        request = gang.topology
        assert request is not None
        bound = gang.bound_uids if gang.already_bound else frozenset()
        held = (
            domain_of(snapshot, request, request.required, set(bound))
            if bound and request.required is not None
            else None
        )
        for level in request.levels:
            if within is not None and covers(within, request, level):
                yield whole_round(within, level)
                continue
            first = domain_of(snapshot, request, level, set(bound)) if bound else None
            candidates = _candidates(view, snapshot, request, level, within, held)
            if held is not None and level == request.required and not gang.pending:
                # Nothing left to place (a sub-group whose members all hold nodes): no member
                # passes a filter anywhere, and the domain they hold is still where it is.
                candidates = (Candidate(held),) if inside(held, within) else ()
            yield Round(level, candidates, first)
        if request.cluster_wide:
            yield whole_round(within)


def _candidates(
    view: GangView,
    snapshot: Snapshot,
    request: TopologyRequest,
    level: str,
    within: Domain | None,
    held: Domain | None,
) -> Sequence[Candidate]:
    """The domains of `level` inside `within` and `held` holding a node the members may use;
    kept in `view.memo` when there is one (siblings share their parent's domain)."""
    memo = view.memo
    if memo is None:
        domains = domains_at(snapshot, request, level, view.feasibilities)
        return _inside_both(domains, within, held)
    shapes = tuple((tuple(c.id for c in f.classes), f.allowed) for f in view.feasibilities)
    every = (request.chain, level, shapes)
    key = (every, within, held)
    found: Sequence[Candidate] | None = memo.get(key)
    if found is None:
        kept: dict[Domain, DomainNodes] | None = memo.get(every)
        if kept is None:
            kept = memo[every] = domains_at(snapshot, request, level, view.feasibilities)
        found = memo[key] = _inside_both(kept, within, held)
    return found


def _inside_both(
    domains: dict[Domain, DomainNodes], within: Domain | None, held: Domain | None
) -> tuple[Candidate, ...]:
    """The candidates of `domains` that lie in `within` and in `held` (None: anywhere)."""
    paths = [d.path for d in (within, held) if d is not None]
    if not paths:
        return tuple(Candidate(domain, nodes) for domain, nodes in domains.items())
    if len(paths) == 1:
        path = paths[0]
        depth = len(path)
        return tuple(
            Candidate(domain, nodes)
            for domain, nodes in domains.items()
            if domain.path[:depth] == path
        )
    return tuple(
        Candidate(domain, nodes)
        for domain, nodes in domains.items()
        if all(domain.path[: len(path)] == path for path in paths)
    )


def inside(domain: Domain | None, within: Domain | None) -> bool:
    """`domain` lies in `within` (anything lies in None, the whole cluster)."""
    if within is None:
        return True
    if domain is None:
        return False
    return domain.path[: len(within.path)] == within.path


def covers(within: Domain, request: TopologyRequest, level: str) -> bool:
    """`within` is a domain of `level` or of a finer level of the same chain."""
    depth = request.chain.index(level) + 1
    return len(within.path) >= depth and tuple(k for k, _ in within.path[:depth]) == tuple(
        request.chain[:depth]
    )
