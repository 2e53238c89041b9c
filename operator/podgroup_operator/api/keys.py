"""The one key of a PodGroup, and so of a gang: (namespace, name).

It lives in `api/`, the layer every other one may import, so that the pure core (`scheduling/`,
`domain/`), the controllers and the adapters' indexes all key groups by the same type.
"""

from collections.abc import Mapping
from typing import Any

GroupKey = tuple[str, str]
"""(namespace, name) of a PodGroup."""

_LONE_POD = "pod:"


def lone_pod_key(namespace: str, pod_name: str) -> GroupKey:
    """The key of a gang of one: a pod in no PodGroup, queued under its own name. The prefix
    holds a colon, which no PodGroup name may, so it never meets a PodGroup's key."""
    return namespace, f"{_LONE_POD}{pod_name}"


def is_lone_pod(key: GroupKey) -> bool:
    """Is `key` a gang of one (`lone_pod_key`)?"""
    return key[1].startswith(_LONE_POD)


def gang_group_key(entry: str) -> GroupKey:
    """The key a `gangGroup` entry names. The spec's pattern admits only `namespace/name`,
    and every reader of a joined list parses it here, so that the entry and the key can never
    be read two ways."""
    namespace, name = entry.split("/", 1)
    return namespace, name


def server_uid(obj: Mapping[str, Any]) -> str | None:
    """The UID the apiserver assigned, or None for an object built by hand that has none yet.

    What a UID precondition (a delete, a binding) and a restart's record of the members it
    replaced need: a made-up identity there would match nothing, or the wrong object."""
    uid = (obj.get("metadata") or {}).get("uid")
    return str(uid) if uid else None


def pod_uid(obj: Mapping[str, Any]) -> str:
    """The object's identity across its versions: its UID, or namespace/name for an object
    built by hand (tests, benchmarks) that has none yet. Pods are what it names most, but the
    quota cache keys PodGroups and ResourceQuotas by it too."""
    meta = obj.get("metadata") or {}
    return server_uid(obj) or f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"
