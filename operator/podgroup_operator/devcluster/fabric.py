"""A labelled fabric: nested node labels for sim nodes, benches and tests, built in memory.

`zone=4,block=8,rack=8,host=2` is 4 zones of 8 blocks of 8 racks of 2 nodes: 512 nodes, each
with one label per level but the last. A level named without a `/` gets FABRIC_LABEL_PREFIX
(`zone` -> `example.com/zone`); a full key (`topology.kubernetes.io/zone=2`) is kept as is. The
last level may be `host`: the nodes per domain of the level before it, which carry no label of
their own beyond `kubernetes.io/hostname` (their node name); without it, each finest domain has
one node. A value names its domain's whole path, the first letter of each level then its index
(`z0`, `z0-b3`, `z0-b3-r5`), so one value names exactly one rack in the whole fabric.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.api.limits import MAX_TOPOLOGY_LEVELS
from podgroup_operator.api.names import is_label_value, label_key_problem

FABRIC_LABEL_PREFIX = "example.com/"
"""Prefixed to a level named without one: `rack` -> `example.com/rack`."""
HOST_LEVEL = "host"
"""The last level's name for the nodes of each finest domain (no label of its own)."""
SPEC_EXAMPLE = "zone=4,block=8,rack=8,host=2"


@dataclass(frozen=True)
class FabricLevel:
    """One labelled tier: its node label key, the letter its values start with, and how many
    domains each domain of the tier above holds."""

    label: str
    letter: str
    count: int


@dataclass(frozen=True)
class Fabric:
    """Labelled tiers coarse to fine, and the nodes in each finest domain."""

    levels: tuple[FabricLevel, ...]
    hosts: int = 1

    @property
    def node_count(self) -> int:
        return math.prod(level.count for level in self.levels) * self.hosts

    @property
    def label_keys(self) -> tuple[str, ...]:
        """The labelled levels' keys, coarse to fine."""
        return tuple(level.label for level in self.levels)

    def topology_levels(self) -> tuple[str, ...]:
        """The levels of a Topology describing this fabric: the label keys, then
        kubernetes.io/hostname when each finest domain holds several nodes."""
        return self.label_keys + ((c.LABEL_HOSTNAME,) if self.hosts > 1 else ())

    def topology(self, name: str) -> dict[str, Any]:
        """A Topology object for this fabric."""
        return {
            "apiVersion": c.API_VERSION,
            "kind": c.TOPOLOGY_KIND,
            "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": key} for key in self.topology_levels()]},
        }

    def node_labels(self) -> list[dict[str, str]]:
        """One label dict per node, node i in domain order: nodes 0 and 1 of
        `zone=1,rack=2,host=2` share rack z0-r0, nodes 2 and 3 rack z0-r1."""
        rows: list[dict[str, str]] = [{}]
        parent: str | None = None
        for level in self.levels:
            rows = [
                {**row, level.label: _value(row.get(parent or ""), level, index)}
                for row in rows
                for index in range(level.count)
            ]
            parent = level.label
        return [dict(row) for row in rows for _ in range(self.hosts)]


def _value(parent: str | None, level: FabricLevel, index: int) -> str:
    """`z0-b3-r5`: the parent domain's value, then this level's letter and index."""
    own = f"{level.letter}{index}"
    return f"{parent}-{own}" if parent else own


def parse_fabric(spec: str) -> Fabric:
    """`zone=4,block=8,rack=8,host=2` as a Fabric; ValueError naming the item and the fix."""
    items = [item.strip() for item in spec.split(",") if item.strip()]
    if not items:
        raise ValueError(f"topology {spec!r} names no level; e.g. {SPEC_EXAMPLE}")
    levels: list[FabricLevel] = []
    hosts = 1
    for position, item in enumerate(items):
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ValueError(f"topology item {item!r} must look like LEVEL=COUNT, e.g. rack=8")
        try:
            count = int(text)
        except ValueError:
            raise ValueError(
                f"topology item {item!r}: {text!r} is not a whole number of domains"
            ) from None
        if count < 1:
            raise ValueError(f"topology item {item!r}: the count must be at least 1")
        if name == HOST_LEVEL:
            if position != len(items) - 1:
                raise ValueError(
                    f"topology item {item!r}: {HOST_LEVEL} (nodes per finest domain) may only "
                    "be the last level"
                )
            hosts = count
            continue
        label = name if "/" in name else FABRIC_LABEL_PREFIX + name
        problem = label_key_problem(label)
        if problem is not None:
            raise ValueError(f"topology item {item!r}: the label key {label!r} {problem}")
        if label in (level.label for level in levels):
            raise ValueError(f"topology item {item!r}: level {label!r} is given twice")
        if label == c.LABEL_HOSTNAME:
            raise ValueError(
                f"topology item {item!r}: the node names are the hostnames; use "
                f"{HOST_LEVEL}=N for the nodes per finest domain"
            )
        letter = label.rpartition("/")[2][0].lower()
        levels.append(FabricLevel(label, letter, count))
    if len(levels) + (hosts > 1) > MAX_TOPOLOGY_LEVELS:
        raise ValueError(
            f"topology {spec!r} has more than {MAX_TOPOLOGY_LEVELS} levels, more than a Topology "
            "may have"
        )
    fabric = Fabric(tuple(levels), hosts)
    longest = "-".join(f"{level.letter}{level.count - 1}" for level in levels)
    if not is_label_value(longest):
        raise ValueError(
            f"topology {spec!r}: a finest domain's value ({longest[:80]!r}) is longer than a "
            "label value may be (63 characters); use fewer levels or fewer domains"
        )
    return fabric


def fabric_labels(spec: str | Fabric) -> list[dict[str, str]]:
    """One label dict per node of the fabric `spec` (a Fabric or its `parse_fabric` text); the
    node count is the product of the counts."""
    fabric = parse_fabric(spec) if isinstance(spec, str) else spec
    return fabric.node_labels()
