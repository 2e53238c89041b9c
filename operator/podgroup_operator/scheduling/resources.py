"""A pod's resource request and a node's allocatable, computed the way kube-scheduler does.

The gang scheduler must agree with kube-scheduler about what a pod costs, or it would bind pods
that the kubelet then rejects (or leave room kube-scheduler thinks is taken). The rules mirror
`k8s.io/component-helpers/resource.PodRequests`: containers are summed, every init container
must fit on its own (plus the restartable "sidecar" init containers started before it), and the
RuntimeClass overhead is added on top. Every pod also costs one unit of the `pods` resource.

All amounts are integer milli-units (kube-scheduler's MilliValue), so sums never drift and a
"fits" check is exact integer arithmetic.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from podgroup_operator.api.limits import MAX_MILLI, MAX_RESOURCE_NAMES, summarize
from podgroup_operator.api.quantity import format_milli, to_milli

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
GPU = "nvidia.com/gpu"
"""The usual extended resource; named here only to render it as "GPUs" in messages."""

ONE_POD = 1000
"""One pod in milli-units: every pod consumes this much of the node's `pods` allocatable."""

Resources = dict[str, int]
"""Resource name -> amount in milli-units."""


@lru_cache(maxsize=8192)
def _milli(value: str | int | float) -> int:
    """Quantities repeat endlessly ("1", "2Gi"); parse each distinct spelling once."""
    return to_milli(value)


def resource_list(raw: Mapping[str, Any] | None) -> Resources:
    """A raw ResourceList (`{"cpu": "500m"}`) as milli-units, dropping zero amounts."""
    if not raw:
        return {}
    out: Resources = {}
    for name, value in raw.items():
        amount = _milli(value)
        if amount:
            out[name] = amount
    return out


def _container_requests(container: Mapping[str, Any]) -> Resources:
    return resource_list((container.get("resources") or {}).get("requests"))


def _add(into: Resources, extra: Mapping[str, int]) -> None:
    for name, amount in extra.items():
        into[name] = into.get(name, 0) + amount


def _max_into(into: Resources, other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        if amount > into.get(name, 0):
            into[name] = amount


def pod_requests(pod: Mapping[str, Any]) -> Resources:
    """What the pod takes from a node, as kube-scheduler's NodeResourcesFit computes it.

    `max(sum(containers) + sum(sidecars), max_i(init_i + sidecars started before i))
    + overhead`, plus one `pods`. Sidecars are init containers with `restartPolicy: Always`;
    they keep running, so they add to everything after them instead of being maxed.
    """
    spec = pod.get("spec") or {}
    total: Resources = {}
    for container in spec.get("containers") or ():
        _add(total, _container_requests(container))

    sidecars: Resources = {}
    init_peak: Resources = {}
    for container in spec.get("initContainers") or ():
        requests = _container_requests(container)
        if container.get("restartPolicy") == "Always":
            _add(sidecars, requests)
            # A sidecar starting must fit next to the sidecars already running.
            _max_into(init_peak, sidecars)
        else:
            during = dict(sidecars)
            _add(during, requests)
            _max_into(init_peak, during)
    _add(total, sidecars)
    _max_into(total, init_peak)

    _add(total, resource_list(spec.get("overhead")))
    total[PODS] = total.get(PODS, 0) + ONE_POD
    return {name: amount for name, amount in total.items() if amount}


def node_allocatable(node: Mapping[str, Any]) -> Resources:
    """What the node offers to pods: `status.allocatable`, else `status.capacity`."""
    status = node.get("status") or {}
    return resource_list(status.get("allocatable") or status.get("capacity"))


def add_resources(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    """Sum of two resource vectors (new dict)."""
    out = dict(a)
    _add(out, b)
    return out


def scale(resources: Mapping[str, int], times: int) -> Resources:
    """`times` copies of one request."""
    return {name: amount * times for name, amount in resources.items()}


def shortfall(need: Mapping[str, int], have: Mapping[str, int]) -> Resources:
    """Per resource, how much `have` lacks to cover `need` (only the positive gaps)."""
    return {
        name: amount - have.get(name, 0)
        for name, amount in need.items()
        if amount > have.get(name, 0)
    }


def copies_that_fit(request: Iterable[tuple[str, int]], free: Mapping[str, int]) -> int:
    """How many copies of `request` fit into `free` at once (0 when any resource is short).

    `request` holds (name, positive amount) pairs; the answer is min over resources of
    free // amount, so one integer division per resource decides a whole node.
    """
    best = -1
    for name, amount in request:
        copies = free.get(name, 0) // amount
        if copies <= 0:
            return 0
        if best < 0 or copies < best:
            best = copies
    # A pod requesting nothing at all is impossible (every pod costs one `pods`); be safe.
    return best if best > 0 else 0


def format_resources(resources: Mapping[str, int], *, include_pods: bool = False) -> str:
    """`{cpu: 8, memory: 32Gi, nvidia.com/gpu: 8}` for messages; `pods` omitted by default.

    At most MAX_RESOURCE_NAMES are named, the rest counted: a PodGroup stored before the schema
    bounded its resource lists could hold thousands, and each refusal names its lists."""
    order = {CPU: 0, MEMORY: 1, EPHEMERAL_STORAGE: 2, PODS: 3}
    names = sorted(
        (n for n in resources if include_pods or n != PODS),
        key=lambda n: (order.get(n, 4), n),
    )
    shown = (f"{n}: {_amount(resources[n], n)}" for n in names)
    return "{" + summarize(shown, MAX_RESOURCE_NAMES) + "}"


def _amount(milli: int, resource: str) -> str:
    """An amount for people; one `to_milli` saturated (a pod stored asking for `9Ei` of memory)
    says so, instead of showing 2^63-1 milli-units as if someone had asked for them."""
    if milli >= MAX_MILLI:
        return f"more than {format_milli(MAX_MILLI - MAX_MILLI % 1000, resource)} (too large)"
    return format_milli(milli, resource)
