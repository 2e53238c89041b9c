"""`kubectl podgroup fabric`: a fabric drawn level by level, with its free room and its gangs.

The picture a user wants when a gang waits with `no rack holds 8`: every domain of every level
(blocks, racks, then the nodes), each with free/allocatable of the resources asked about and the
gangs whose members sit in it. A domain is named by its whole path, as the scheduler names it
(rack `r1` of block `b0` and rack `r1` of block `b1` are two racks).

Pure: nodes and pods (as the API returns them) and the level keys in, text out; the plugin reads
them (kubectl_plugin.py).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.api.names import label_key_problem
from podgroup_operator.api.quantity import format_milli, to_milli
from podgroup_operator.domain.membership import group_name_of
from podgroup_operator.scheduling.resources import (
    CPU,
    GPU,
    ONE_POD,
    PODS,
    Resources,
    copies_that_fit,
    node_allocatable,
    pod_requests,
)

DEFAULT_RESOURCES = (CPU, GPU)
"""Shown unless `--resources` names others; a resource no node offers is left out."""
INDENT = "  "
_TERMINATED = (c.PodPhase.SUCCEEDED, c.PodPhase.FAILED)


class FabricError(ValueError):
    """A level list, resource list or pod shape that cannot be used; the message names the fix."""


@dataclass
class NodeView:
    """One node: what it offers, what its pods request, whether the scheduler may use it."""

    name: str
    allocatable: Resources
    used: Resources
    note: str = ""
    """Why the scheduler passes it by (`NotReady`, `cordoned`), or empty."""
    gangs: Counter[str] = field(default_factory=Counter)
    """`namespace/group` -> members bound here."""
    others: int = 0
    """Pods bound here that belong to no gang."""

    @property
    def usable(self) -> bool:
        return not self.note

    @property
    def free(self) -> Resources:
        """Allocatable less requests; nothing on a node the scheduler passes by."""
        if not self.usable:
            return {}
        return {k: max(0, v - self.used.get(k, 0)) for k, v in self.allocatable.items()}


@dataclass
class Domain:
    """One domain of one level: the nodes directly in it (those lacking the next level's label)
    and its child domains."""

    level: str
    value: str
    children: list[Domain] = field(default_factory=list)
    nodes: list[NodeView] = field(default_factory=list)

    def all_nodes(self) -> list[NodeView]:
        return [*self.nodes, *(n for child in self.children for n in child.all_nodes())]


@dataclass(frozen=True)
class Fabric:
    """The domains of the first level, and the nodes lacking its label."""

    levels: tuple[str, ...]
    domains: list[Domain]
    outside: list[NodeView]


def parse_levels(text: str) -> tuple[str, ...]:
    """`--levels example.com/block,example.com/rack`: label keys, coarse to fine."""
    keys = tuple(k.strip() for k in text.split(",") if k.strip())
    if not keys:
        raise FabricError(
            "--levels names no label key; e.g. --levels example.com/block,example.com/rack"
        )
    problems = [f"{k!r} {p}" for k in keys if (p := label_key_problem(k)) is not None]
    if problems:
        raise FabricError(f"--levels: {'; '.join(problems)}: each must be a node label key")
    if len(set(keys)) != len(keys):
        raise FabricError(f"--levels names a key twice: {text}")
    return keys


def parse_resources(text: str) -> tuple[str, ...]:
    """`--resources cpu,memory`: the resource columns."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise FabricError("--resources names no resource; e.g. --resources cpu,nvidia.com/gpu")
    return names


def parse_pod(text: str) -> Resources:
    """`--pod cpu=4,nvidia.com/gpu=1`: one member's request, for the FITS column."""
    request: Resources = {}
    for item in (i.strip() for i in text.split(",") if i.strip()):
        name, sep, amount = item.partition("=")
        if not sep or not name.strip():
            raise FabricError(f"--pod item {item!r} must look like RESOURCE=QUANTITY, e.g. cpu=4")
        try:
            milli = to_milli(amount.strip())
        except ValueError:
            raise FabricError(f"--pod item {item!r}: {amount!r} is not a quantity") from None
        if milli < 0:
            raise FabricError(f"--pod item {item!r}: the quantity must not be negative")
        request[name.strip()] = milli
    if not request:
        raise FabricError("--pod names no resource; e.g. --pod cpu=4,nvidia.com/gpu=1")
    request[PODS] = request.get(PODS, 0) + ONE_POD
    return request


def topology_levels(topology: Mapping[str, Any]) -> tuple[str, ...]:
    """A Topology's level keys, coarse to fine."""
    levels = ((topology.get("spec") or {}).get("levels")) or []
    return tuple(str(level.get("nodeLabel")) for level in levels if level.get("nodeLabel"))


def _note(node: Mapping[str, Any]) -> str:
    if (node.get("spec") or {}).get("unschedulable"):
        return "cordoned"
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = any(
        cond.get("type") == "Ready" and cond.get("status") == c.ConditionStatus.TRUE
        for cond in conditions
    )
    return "" if ready else "NotReady"


def node_views(
    nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]
) -> list[NodeView]:
    """Each node with its bound, unterminated pods' requests and gangs."""
    views = {
        str(node["metadata"]["name"]): NodeView(
            name=str(node["metadata"]["name"]),
            allocatable=node_allocatable(node),
            used={},
            note=_note(node),
        )
        for node in nodes
    }
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        view = views.get(str(node_name)) if node_name else None
        if view is None or (pod.get("status") or {}).get("phase") in _TERMINATED:
            continue
        for name, amount in pod_requests(pod).items():
            view.used[name] = view.used.get(name, 0) + amount
        group = group_name_of(pod)
        if group is None:
            view.others += 1
        else:
            view.gangs[f"{pod['metadata'].get('namespace', '')}/{group}"] += 1
    return list(views.values())


def build(
    levels: Sequence[str],
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
) -> Fabric:
    """The fabric's tree. A last level `kubernetes.io/hostname` is the nodes themselves."""
    keys = tuple(levels)
    if keys and keys[-1] == c.LABEL_HOSTNAME:
        keys = keys[:-1]
    labels = {str(n["metadata"]["name"]): (n["metadata"].get("labels") or {}) for n in nodes}
    top: dict[str, Domain] = {}
    outside: list[NodeView] = []
    for view in node_views(nodes, pods):
        node_labels = labels[view.name]
        siblings, parent = top, None
        for key in keys:
            value = node_labels.get(key)
            if value is None:
                break
            domain = siblings.get(str(value))
            if domain is None:
                domain = siblings[str(value)] = Domain(key, str(value))
                if parent is not None:
                    parent.children.append(domain)
            parent = domain
            siblings = {d.value: d for d in domain.children}
        if parent is None:
            outside.append(view)
        else:
            parent.nodes.append(view)
    domains = list(top.values())
    _sort(domains)
    outside.sort(key=lambda v: _natural(v.name))
    return Fabric(keys, domains, outside)


def _natural(text: str) -> list[Any]:
    """`b2` before `b10`."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def _sort(domains: list[Domain]) -> None:
    domains.sort(key=lambda d: _natural(d.value))
    for domain in domains:
        domain.nodes.sort(key=lambda v: _natural(v.name))
        _sort(domain.children)


def shown_resources(fabric: Fabric, asked: Sequence[str] | None) -> tuple[str, ...]:
    """The resources asked for, or cpu and nvidia.com/gpu where some node offers it."""
    if asked:
        return tuple(asked)
    offered = {name for d in fabric.domains for n in d.all_nodes() for name in n.allocatable}
    offered |= {name for n in fabric.outside for name in n.allocatable}
    return tuple(r for r in DEFAULT_RESOURCES if r == CPU or r in offered)


def _short(key: str) -> str:
    """`example.com/rack` -> `rack`: the level's word in the DOMAIN column."""
    return key.rsplit("/", 1)[-1]


def _gangs(nodes: Sequence[NodeView]) -> str:
    total: Counter[str] = Counter()
    others = 0
    for node in nodes:
        total.update(node.gangs)
        others += node.others
    parts = [
        f"{name} x{count}" for name, count in sorted(total.items(), key=lambda i: (-i[1], i[0]))
    ]
    if others:
        parts.append(f"{others} other pod(s)")
    return ", ".join(parts) or "-"


def _cells(nodes: Sequence[NodeView], resources: Sequence[str], pod: Resources | None) -> list[str]:
    cells = []
    for name in resources:
        free = sum(n.free.get(name, 0) for n in nodes)
        offered = sum(n.allocatable.get(name, 0) for n in nodes)
        cells.append(f"{format_milli(free, name)}/{format_milli(offered, name)}")
    if pod is not None:
        request = [(k, v) for k, v in pod.items() if v > 0]
        cells.append(str(sum(copies_that_fit(request, n.free) for n in nodes if n.usable)))
    return cells


def render(
    fabric: Fabric,
    resources: Sequence[str],
    *,
    pod: Resources | None = None,
    title: str = "",
    nodes: bool = True,
) -> str:
    """The fabric as a table indented by level: each domain, then its nodes (unless `nodes` is
    False: a fabric of thousands), with free/allocatable of each resource (free on Ready,
    schedulable nodes only), how many copies of `pod` fit (when given) and the gangs on it
    (`namespace/group xMEMBERS`)."""
    chain = " > ".join([*fabric.levels, "nodes"] if nodes or not fabric.levels else fabric.levels)
    lines = [f"{title}: {chain}" if title else chain]
    legend = "each resource: free/allocatable (free counts Ready, schedulable nodes only)"
    if pod is not None:
        shape = ", ".join(
            f"{k}: {format_milli(v, k)}" for k, v in pod.items() if k != PODS or v != ONE_POD
        )
        legend += f"; FITS: pods of {{{shape}}} that fit at once"
    lines.append(legend)
    header = ["DOMAIN", "NODES", *(r.upper() for r in resources)]
    if pod is not None:
        header.append("FITS")
    header.append("GANGS")
    rows = [header]

    def node_row(node: NodeView, depth: int, lacking: str | None) -> None:
        notes = [node.note] if node.note else []
        if lacking is not None:
            notes.append(f"no {lacking}")
        name = INDENT * depth + node.name + (f" ({', '.join(notes)})" if notes else "")
        if nodes or not fabric.levels:
            rows.append([name, "", *_cells([node], resources, pod), _gangs([node])])

    def walk(domain: Domain, depth: int) -> None:
        held = domain.all_nodes()
        label = f"{INDENT * depth}{_short(domain.level)} {domain.value}"
        rows.append([label, str(len(held)), *_cells(held, resources, pod), _gangs(held)])
        for child in domain.children:
            walk(child, depth + 1)
        finer = fabric.levels[depth + 1] if depth + 1 < len(fabric.levels) else None
        for node in domain.nodes:
            node_row(node, depth + 1, finer)

    for domain in fabric.domains:
        walk(domain, 0)
    if fabric.outside and fabric.levels:
        loose = fabric.outside
        rows.append(
            [
                f"(no {fabric.levels[0]})",
                str(len(loose)),
                *_cells(loose, resources, pod),
                _gangs(loose),
            ]
        )
        for node in loose:
            node_row(node, 1, None)
    elif fabric.outside:  # no level but the nodes: a flat list
        for node in fabric.outside:
            node_row(node, 0, None)
    return "\n".join([*lines, "", _table(rows)])


def _table(rows: list[list[str]]) -> str:
    """Columns padded to the widest cell, three spaces apart; the last (gangs) unpadded."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(
        "   ".join([*(cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])), row[-1]]).rstrip()
        for row in rows
    )
