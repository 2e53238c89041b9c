"""Small builders of ledger inputs, so each test states only the amounts it is about."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from podgroup_operator.api.quantity import to_milli
from podgroup_operator.domain.quota import GroupReservation, Ledger, PodUsage

NS = "default"


def milli(amounts: Mapping[str, str | int]) -> dict[str, int]:
    return {name: to_milli(value) for name, value in amounts.items()}


def quota(
    name: str,
    hard: Mapping[str, str | int],
    *,
    used: Mapping[str, str | int] | None = None,
    scopes: list[str] | None = None,
    scope_selector: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A raw ResourceQuota as the apiserver returns it."""
    spec: dict[str, Any] = {"hard": {k: str(v) for k, v in hard.items()}}
    if scopes is not None:
        spec["scopes"] = scopes
    if scope_selector is not None:
        spec["scopeSelector"] = scope_selector
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }
    if used is not None:
        body["status"] = {"hard": dict(spec["hard"]), "used": {k: str(v) for k, v in used.items()}}
    return body


def key(name: str) -> tuple[str, str]:
    return (NS, name)


def group(
    name: str, total: Mapping[str, str | int] | None = None, *, active: bool = True
) -> GroupReservation:
    return GroupReservation(
        key=key(name), total=None if total is None else milli(total), active=active
    )


def pod(
    uid: str,
    requests: Mapping[str, str | int] | None = None,
    *,
    group: str | None = None,
    live: bool = True,
) -> PodUsage:
    return PodUsage(
        uid=uid,
        group_key=None if group is None else key(group),
        requests=milli(requests or {}),
        live=live,
    )


def ledger(
    hard: Mapping[str, str | int],
    groups: list[GroupReservation] | None = None,
    pods: list[PodUsage] | None = None,
) -> Ledger:
    """A namespace with one ResourceQuota named 'compute'."""
    return Ledger.build([quota("compute", hard)], groups or [], pods or [])
