"""The PodGroup the operator creates for a gang declared on its pods alone.

Two older conventions declare a gang without a PodGroup object: coscheduling's labels
(`pod-group.scheduling.sigs.k8s.io/name` + `/min-available`) and Koordinator's annotations
(`gang.scheduling.koordinator.sh/name` + `/min-available`, `/waiting-time`, `/mode`,
`/groups`). The operator turns them into a real PodGroup, marked as its own, so that
`kubectl get podgroups` shows the gang and everything else (status, scheduling) works alike.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.domain.membership import lightweight_gang_of

_DURATION = re.compile(r"^\s*(?:(\d+)h)?\s*(?:(\d+)m(?!s))?\s*(?:(\d+)s)?\s*$")


def parse_duration_seconds(text: str) -> int | None:
    """Koordinator's waiting-time ("30s", "5m", "1h30m", or plain seconds); None if malformed."""
    text = text.strip()
    if text.isdecimal():
        return int(text) or None
    match = _DURATION.match(text)
    if not match or not any(match.groups()):
        return None
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    total = hours * 3600 + minutes * 60 + seconds
    return total or None


def _groups(raw: str | None, namespace: str) -> list[str] | None:
    """Koordinator's `/groups`: a JSON list of `namespace/name` (a bare name means this one)."""
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return [v if "/" in v else f"{namespace}/{v}" for v in value]


def podgroup_for(namespace: str, pods: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The PodGroup body to create for these pods' lightweight gang, or None.

    None when no pod declares a lightweight gang, or none gives a usable min-available (a gang
    without a minimum cannot be enforced; the pods then wait with a Warning Event instead).
    """
    for pod in pods:
        gang = lightweight_gang_of(pod)
        if gang is None or gang.min_available is None:
            continue
        spec: dict[str, Any] = {"minMember": gang.min_available}
        waiting = gang.extra.get(c.ANNOTATION_KOORD_WAITING_TIME)
        if waiting and (seconds := parse_duration_seconds(waiting)):
            spec["scheduleTimeoutSeconds"] = seconds
        mode = gang.extra.get(c.ANNOTATION_KOORD_MODE)
        if mode in (c.GangMode.STRICT, c.GangMode.NON_STRICT):
            spec["mode"] = mode
        groups = _groups(gang.extra.get(c.ANNOTATION_KOORD_GROUPS), namespace)
        if groups:
            spec["gangGroup"] = groups
        return {
            "apiVersion": c.API_VERSION,
            "kind": c.KIND,
            "metadata": {
                "name": gang.name,
                "namespace": namespace,
                "labels": {c.LABEL_MANAGED_BY: c.OPERATOR_NAME},
            },
            "spec": spec,
        }
    return None


def is_operator_created(group_body: dict[str, Any]) -> bool:
    """True for PodGroups the operator made for a lightweight gang (it removes them too)."""
    labels = (group_body.get("metadata") or {}).get("labels") or {}
    return labels.get(c.LABEL_MANAGED_BY) == c.OPERATOR_NAME
