"""The PodGroup the operator creates for a gang declared on its pods alone.

Three conventions declare a gang without a PodGroup object: coscheduling's labels
(`pod-group.scheduling.sigs.k8s.io/name` + `/min-available`), Koordinator's annotations
(`gang.scheduling.koordinator.sh/name` + `/min-available`, `/waiting-time`, `/mode`,
`/groups`) and Kueue's plain-pod groups (label `kueue.x-k8s.io/pod-group-name` + annotation
`kueue.x-k8s.io/pod-group-total-count`, which becomes minMember: Kueue admits the group whole,
and its admission gate holds the pods until then; the scheduler waits for gates,
controllers/scheduler.py). The operator turns them into a real PodGroup, marked as its own, so that
`kubectl get podgroups` shows the gang and everything else (status, scheduling) works alike.

The values on the pod are checked with the CRD's own rules and messages (`spec_errors`), each
error naming the label or annotation to fix (`lightweight_errors`). A pod with a bad value gets
no PodGroup: `min-available: "99999999999999999999"` once made the operator try to create an
invalid PodGroup every second, forever, without a word to the pod's owner.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, NamedTuple

import orjson

from podgroup_operator import constants as c
from podgroup_operator.api.limits import MAX_MIN_MEMBER, MAX_NAME_LENGTH
from podgroup_operator.api.names import is_dns_subdomain
from podgroup_operator.api.validation import spec_errors
from podgroup_operator.domain.membership import (
    Pod,
    lightweight_gang_of,
    lightweight_keys_of,
)

_DURATION = re.compile(r"^\s*(?:(\d+)h)?\s*(?:(\d+)m(?!s))?\s*(?:(\d+)s)?\s*$")
_FIELD = re.compile(r"^spec\.([A-Za-z]+)(.*)$")
_MAX_DIGITS = 64
"""Longer numbers are refused before int(): Python refuses to parse over 4,300 digits."""
_SHOWN = 60
"""Characters of a raw value quoted in a message (annotations may hold 256 kB)."""


def parse_duration_seconds(text: str) -> int | None:
    """Koordinator's waiting-time ("30s", "5m", "1h30m", or plain seconds); None if malformed."""
    text = text.strip()
    if len(text) > _MAX_DIGITS:
        return None
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
        # orjson: past 1,024 levels of nesting a ValueError, where `json` raised RecursionError
        # (an annotation of 100,000 '[' made every reconcile of its gang raise).
        value = orjson.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return [v if "/" in v else f"{namespace}/{v}" for v in value]


def parse_gang_groups(raw: str, namespace: str) -> list[str] | None:
    """Koordinator's `/groups` (on a pod or a PodGroup) as `namespace/name` entries; None when
    it is not a JSON list of strings."""
    return _groups(raw, namespace)


def _shown(value: str) -> str:
    return repr(value if len(value) <= _SHOWN else value[:_SHOWN] + "...")


class _Declared(NamedTuple):
    name: str
    spec: dict[str, Any]
    errors: list[str]
    """Each as `key: message`, the key being the label or annotation to fix."""


def _declared(pod: Pod, namespace: str) -> _Declared | None:
    """The gang the pod's keys declare, and every error in them; None if they declare none."""
    gang = lightweight_gang_of(pod)
    keys = lightweight_keys_of(pod)
    if gang is None or keys is None:
        return None
    name_key, min_key = keys
    errors: list[str] = []
    spec: dict[str, Any] = {}
    source: dict[str, str] = {}  # spec field -> the label or annotation it came from
    # A PodGroup name is a DNS subdomain; a label value may hold capitals and underscores too.
    if not is_dns_subdomain(gang.name):
        errors.append(
            f"{name_key}: {_shown(gang.name)} is not a valid PodGroup name; use at most "
            f"{MAX_NAME_LENGTH} lowercase letters, digits, '-' and '.', starting and ending "
            "with a letter or digit"
        )
    minimum = gang.extra.get(min_key)
    digits = (minimum or "").strip()
    if minimum is None:
        what = (
            "the number of pods in the group"
            if min_key == c.ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT
            else "the number of members that must run at the same time"
        )
        errors.append(f"{min_key}: is required; set it to {what}")
    elif not (digits.isascii() and digits.isdecimal()):
        errors.append(f"{min_key}: must be an integer, not {_shown(minimum)}")
    elif len(digits) > _MAX_DIGITS:
        errors.append(f"{min_key}: {_shown(digits)} is too large: must be at most {MAX_MIN_MEMBER}")
    else:
        spec["minMember"] = int(digits)
        source["minMember"] = min_key
    waiting = gang.extra.get(c.ANNOTATION_KOORD_WAITING_TIME)
    if waiting:
        seconds = parse_duration_seconds(waiting)
        if seconds is None:
            errors.append(
                f"{c.ANNOTATION_KOORD_WAITING_TIME}: {_shown(waiting)} is not a duration; use "
                "a positive duration like '30s', '5m' or '1h30m'"
            )
        else:
            spec["scheduleTimeoutSeconds"] = seconds
            source["scheduleTimeoutSeconds"] = c.ANNOTATION_KOORD_WAITING_TIME
    mode = gang.extra.get(c.ANNOTATION_KOORD_MODE)
    if mode:
        spec["mode"] = mode if len(mode) <= _SHOWN else mode[:_SHOWN] + "..."
        source["mode"] = c.ANNOTATION_KOORD_MODE
    raw_groups = gang.extra.get(c.ANNOTATION_KOORD_GROUPS)
    if raw_groups:
        groups = _groups(raw_groups, namespace)
        if groups is None:
            errors.append(
                f"{c.ANNOTATION_KOORD_GROUPS}: must be a JSON list of 'namespace/name' or "
                f'\'name\' strings, like ["team/a", "b"], not {_shown(raw_groups)}'
            )
        else:
            spec["gangGroup"] = groups
            source["gangGroup"] = c.ANNOTATION_KOORD_GROUPS
    for error in spec_errors(spec):
        path, sep, message = error.partition(": ")
        match = _FIELD.match(path)
        if not sep or match is None:
            errors.append(error)  # "... and N more errors"
        elif match.group(1) in source:
            errors.append(f"{source[match.group(1)]}{match.group(2)}: {message}")
        # else: a field the pod does not set (minMember when min-available is bad): said above
    return _Declared(gang.name, spec, errors)


def lightweight_errors(pod: Pod) -> list[str]:
    """Every problem of the lightweight gang the pod declares, each as `key: what is wrong and
    how to fix it` with the label or annotation as the field; empty when it declares none or a
    valid one. The rules and messages are the CRD's (minMember 1 to 1,000,000, ...)."""
    namespace = (pod.get("metadata") or {}).get("namespace") or ""
    declared = _declared(pod, namespace)
    return [] if declared is None else declared.errors


def podgroup_for(namespace: str, pods: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The PodGroup body to create for these pods' lightweight gang, or None.

    Made from the first pod whose declaration is valid; None when no pod declares a lightweight
    gang or none declares a valid one (`lightweight_errors` says what to fix on each).
    """
    for pod in pods:
        declared = _declared(pod, namespace)
        if declared is None or declared.errors:
            continue
        return {
            "apiVersion": c.API_VERSION,
            "kind": c.KIND,
            "metadata": {
                "name": declared.name,
                "namespace": namespace,
                "labels": {c.LABEL_MANAGED_BY: c.OPERATOR_NAME},
            },
            "spec": declared.spec,
        }
    return None


def is_operator_created(group_body: dict[str, Any]) -> bool:
    """True for PodGroups the operator made for a lightweight gang (it removes them too)."""
    labels = (group_body.get("metadata") or {}).get("labels") or {}
    return labels.get(c.LABEL_MANAGED_BY) == c.OPERATOR_NAME
