"""`kubectl podgroup queues`: the ElasticQuota tree, each quota with its numbers.

The picture behind "why is my queue starved?": every quota of both dialects (our group and
Koordinator's) placed under its parent as `spec.parent` (or Koordinator's label) resolves it
(`scheduling.elastic.tree.build_tree` on the normalized specs, so the drawing is the tree the
scheduler reads), one row per resource: min, max and guarantee (its own, or its children's where
that is more) from the specs; used, fair share, borrowed, lent and gangs waiting from the status
the operator writes. A quota that does not validate is listed below the tree with its errors,
and so is each problem of the tree.

Pure: ElasticQuota objects (as the API returns them) in, text out; the plugin reads them
(kubectl_plugin.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from podgroup_operator.api.elastic_quota import (
    ElasticQuotaError,
    Milli,
    QuotaKey,
    QuotaSpec,
    koordinator_internal,
    normalize,
)
from podgroup_operator.api.quantity import QuantityError, format_milli, to_milli
from podgroup_operator.scheduling.elastic.tree import QuotaTree, build_tree

HEADER = (
    "QUOTA",
    "RESOURCE",
    "USED",
    "MIN",
    "MAX",
    "GUARANTEE",
    "FAIR SHARE",
    "BORROWED",
    "LENT",
    "WAITING",
)
UNSET = "-"
"""A number the status does not hold (yet): the operator has not written it."""
UNLIMITED = "unlimited"


@dataclass(frozen=True)
class Quota:
    """One ElasticQuota as drawn: its normalized spec and the numbers of its status."""

    spec: QuotaSpec
    status: Mapping[str, Any]


@dataclass(frozen=True)
class Queues:
    """The tree, the quotas in it, and what could not be placed in it."""

    tree: QuotaTree
    quotas: dict[QuotaKey, Quota]
    invalid: list[str]
    """`namespace/name: error; error` of each object `normalize` refuses."""


def build(objects: Iterable[Mapping[str, Any]]) -> Queues:
    """Normalize every object and build their tree; an object of a key already seen (the same
    namespace and name in both groups) is reported, not drawn twice, and Koordinator's internal
    quotas are left out (they are its bookkeeping, not part of a tree anyone wrote)."""
    quotas: dict[QuotaKey, Quota] = {}
    invalid: list[str] = []
    for obj in objects:
        if koordinator_internal(obj):
            continue  # Koordinator's own bookkeeping (its root, system and default quotas)
        meta = obj.get("metadata") or {}
        where = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        try:
            spec = normalize(obj)
        except ElasticQuotaError as exc:
            invalid.append(f"{where} ({_group(obj)}): {'; '.join(exc.errors)}")
            continue
        if spec.key in quotas:
            invalid.append(
                f"{where} ({_group(obj)}): a quota of the same namespace and name exists in the "
                "other group; delete one of the two"
            )
            continue
        quotas[spec.key] = Quota(spec, obj.get("status") or {})
    tree = build_tree(quota.spec for quota in quotas.values())
    return Queues(tree, quotas, sorted(invalid))


def _group(obj: Mapping[str, Any]) -> str:
    return str(obj.get("apiVersion") or "").partition("/")[0]


def _status_amounts(status: Mapping[str, Any], field: str) -> Milli | None:
    """A resource list of the status in milli-units; None when the status has no such field."""
    raw = status.get(field)
    if not isinstance(raw, Mapping):
        return None
    amounts: Milli = {}
    for name, value in raw.items():
        try:
            amounts[str(name)] = to_milli(value)
        except (QuantityError, ValueError, TypeError):
            continue
    return amounts


def _amount(amounts: Mapping[str, int] | None, resource: str, absent: str) -> str:
    if amounts is None:
        return UNSET
    if resource not in amounts:
        return absent
    return format_milli(amounts[resource], resource)


def _rows(quota: Quota, name: str, guarantee: Milli) -> list[list[str]]:
    """One row per resource the quota names or uses; `guarantee` is what the tree never lets it
    lend (its own, or its children's where that is more)."""
    spec, status = quota.spec, quota.status
    used = _status_amounts(status, "used")
    fair = _status_amounts(status, "fairShare")
    borrowed = _status_amounts(status, "borrowed")
    lent = _status_amounts(status, "lent")
    waiting = status.get("gangsWaiting")
    resources = sorted({*spec.min, *spec.max, *guarantee, *(used or {}), *(fair or {})}) or [""]
    rows = []
    for index, resource in enumerate(resources):
        rows.append(
            [
                name if index == 0 else "",
                resource or UNSET,
                _amount(used, resource, "0"),
                _amount(spec.min, resource, "0"),
                _amount(spec.max, resource, UNLIMITED),
                _amount(guarantee, resource, "0"),
                _amount(fair, resource, "0"),
                _amount(borrowed, resource, "0"),
                _amount(lent, resource, "0"),
                (str(waiting) if isinstance(waiting, int) else UNSET) if index == 0 else "",
            ]
        )
    return rows


def _names(tree: QuotaTree) -> list[tuple[QuotaKey, str]]:
    """Each quota in tree order with its drawn name: `├─ `/`└─ ` under its parent."""
    out: list[tuple[QuotaKey, str]] = []

    def visit(key: QuotaKey, prefix: str, branch: str) -> None:
        out.append((key, f"{prefix}{branch}{key[0]}/{key[1]}"))
        children = tree.nodes[key].children
        below = prefix + ("" if not branch else ("│  " if branch == "├─ " else "   "))
        for index, child in enumerate(children):
            visit(child, below, "└─ " if index == len(children) - 1 else "├─ ")

    for root in tree.roots:
        visit(root, "", "")
    return out


def table(rows: list[list[str]]) -> str:
    """Columns padded as kubectl pads them (three spaces), trailing blanks trimmed."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def render(queues: Queues) -> str:
    """The tree as a table, then the quotas left out of it and the tree's problems."""
    lines: list[str] = []
    if queues.quotas:
        rows = [list(HEADER)]
        for key, name in _names(queues.tree):
            rows += _rows(queues.quotas[key], name, queues.tree.nodes[key].guarantee)
        lines.append(table(rows))
    if queues.invalid:
        lines.append("")
        lines.append("Not in the tree (the webhook would refuse them as they are):")
        lines += [f"  {entry}" for entry in queues.invalid]
    if queues.tree.problems:
        lines.append("")
        lines.append("Problems of the tree:")
        lines += [f"  {problem}" for problem in queues.tree.problems]
    return "\n".join(lines).strip("\n")
