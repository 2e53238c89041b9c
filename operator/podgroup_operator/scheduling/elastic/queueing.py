"""The order of the gangs waiting in one ElasticQuota, and which of them may be tried now.

`Priority` (the default): priority, then creation, then key; every waiting gang may be tried in
that order, so a gang that does not fit never holds back a smaller one behind it. `StrictFIFO`:
creation, then key; only the head may be tried, so nothing overtakes it inside its quota. In
both, a quota's blocked head holds back only its own quota: other quotas still borrow (the
scheduler asks `borrow_order` across quotas, and each quota's `candidates` within it).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from podgroup_operator.constants import QueueingStrategy


@dataclass(frozen=True)
class WaitingGang:
    """A gang waiting in a quota: its key, priority and creation time (any ordered stamp)."""

    key: Hashable
    priority: int
    created: str
    """An RFC 3339 timestamp as the apiserver writes it: ordered as text."""


def quota_queue(strategy: QueueingStrategy, gangs: Iterable[WaitingGang]) -> list[WaitingGang]:
    """The quota's waiting gangs in its order; ties broken by key, so the order never flips."""
    if strategy is QueueingStrategy.STRICT_FIFO:
        return sorted(gangs, key=lambda g: (g.created, str(g.key)))
    return sorted(gangs, key=lambda g: (-g.priority, g.created, str(g.key)))


def candidates(strategy: QueueingStrategy, queue: list[WaitingGang]) -> list[WaitingGang]:
    """The gangs of an ordered queue that may be tried now, in order."""
    if strategy is QueueingStrategy.STRICT_FIFO:
        return queue[:1]
    return list(queue)


def position(queue: list[WaitingGang], key: Hashable) -> tuple[int, int] | None:
    """A gang's place in its quota's queue, from 1, and the queue's length: `position 3 of 7`."""
    for index, gang in enumerate(queue):
        if gang.key == key:
            return index + 1, len(queue)
    return None
