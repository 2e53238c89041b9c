"""What the operator's controllers still keep about objects that are gone.

A busy cluster creates and deletes PodGroups and pods all day; a map keyed by group or pod that
nothing empties grows for as long as the operator runs. `kept` walks the controllers' attributes
(every dict and set, through the controllers they hold) and names those with a key about the
objects asked for, so a test can create, delete and then ask that nothing is left, without
listing the maps by hand (a map added later is walked too).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from podgroup_operator.adapters.kube import PODGROUPS, PODS, KubeClient

_OURS = "podgroup_operator."


def kept(roots: Iterable[Any], namespace: str, uids: Collection[str] = ()) -> dict[str, int]:
    """`{attribute path: matching keys}` for every dict or set reachable from `roots` (through
    objects of the operator's own classes) with a key in `namespace` (a `(namespace, name)`
    tuple, or a `namespace/name` string) or one of `uids`."""
    found: dict[str, int] = {}
    seen: set[int] = set()

    def about(key: Any) -> bool:
        if isinstance(key, tuple) and key and key[0] == namespace:
            return True
        return isinstance(key, str) and (key in uids or key.startswith(f"{namespace}/"))

    def walk(obj: Any, path: str) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        for name, value in vars(obj).items():
            where = f"{path}.{name}"
            if isinstance(value, dict | set | frozenset):
                matching = sum(1 for key in value if about(key))
                if matching:
                    found[where] = matching
            elif type(value).__module__.startswith(_OURS) and hasattr(value, "__dict__"):
                walk(value, where)

    for root in roots:
        walk(root, type(root).__name__)
    return found


async def delete_all(kube: KubeClient, namespace: str, roots: Iterable[Any]) -> set[str]:
    """Delete every PodGroup and pod of `namespace`, after checking that `kept` sees them (so a
    later empty answer means forgotten, not unseen); return the pods' UIDs."""
    roots = list(roots)
    pods = (await kube.list(PODS, namespace))["items"]
    uids = {pod["metadata"]["uid"] for pod in pods}
    assert kept(roots, namespace, uids), "the walk must see what is kept before the deletes"
    for group in (await kube.list(PODGROUPS, namespace))["items"]:
        await kube.delete(PODGROUPS, group["metadata"]["name"], namespace)
    for pod in pods:
        await kube.delete(PODS, pod["metadata"]["name"], namespace)
    return uids
