"""The pure gang-scheduling core: requests, snapshot, filters, queue order and placement.

Nothing here talks to the API server or reads a clock, so every decision can be replayed in a
unit test or a benchmark from raw Node and Pod dicts. The live scheduler feeds a `Snapshot` from
watch events and asks `place_group` / `place_gang_group` for decisions.
"""

from podgroup_operator.scheduling.gang import (
    Binding,
    GangGroupPlacement,
    GangKey,
    GangRequest,
    Placement,
    Refusal,
)
from podgroup_operator.scheduling.placement import place_gang_group, place_group
from podgroup_operator.scheduling.snapshot import Snapshot

__all__ = [
    "Binding",
    "GangGroupPlacement",
    "GangKey",
    "GangRequest",
    "Placement",
    "Refusal",
    "Snapshot",
    "place_gang_group",
    "place_group",
]
