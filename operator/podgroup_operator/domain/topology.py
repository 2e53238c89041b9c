"""A Topology's status as a pure function of its levels and the nodes.

For each level (a node label key): how many domains it has (distinct values among the nodes that
carry the label, Ready or not) and how many Ready nodes lack the label (no gang constrained to
that level is placed on them). The controller (controllers/topology.py) writes the result only
when it differs from what is stored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from podgroup_operator.api.models import TopologyLevelStatus, TopologyStatus


@dataclass(frozen=True)
class NodeLabels:
    """What the status reads of one node: its labels and whether it is Ready."""

    labels: Mapping[str, str]
    ready: bool


def stored_levels(body: Mapping[str, Any]) -> tuple[str, ...]:
    """The node label keys of a stored Topology's `spec.levels`, in order; entries without a
    string `nodeLabel` (a spec stored before the schema refused them) are left out."""
    levels = (body.get("spec") or {}).get("levels")
    if not isinstance(levels, list):
        return ()
    return tuple(
        level["nodeLabel"]
        for level in levels
        if isinstance(level, Mapping) and isinstance(level.get("nodeLabel"), str)
    )


def topology_status(
    levels: Sequence[str], nodes: Iterable[NodeLabels], generation: int | None = None
) -> TopologyStatus:
    """The status of a Topology with `levels` (node label keys) over `nodes`."""
    domains: list[set[str]] = [set() for _ in levels]
    without = [0] * len(levels)
    for node in nodes:
        labels = node.labels
        for index, key in enumerate(levels):
            value = labels.get(key)
            if value is not None:
                domains[index].add(value)
            elif node.ready:
                without[index] += 1
    return TopologyStatus(
        levels=[
            TopologyLevelStatus(
                node_label=key, domains=len(domains[index]), nodes_without_label=without[index]
            )
            for index, key in enumerate(levels)
        ],
        observed_generation=generation,
    )


def status_differs(stored: Any, computed: TopologyStatus) -> bool:
    """Whether the stored status (raw, as read) says something else than `computed`."""
    if not isinstance(stored, Mapping):
        return True
    try:
        current = TopologyStatus.model_validate(stored)
    except ValueError:
        return True
    return current.to_api() != computed.to_api()
