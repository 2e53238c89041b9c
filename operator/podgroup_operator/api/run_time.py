"""How long a gang may run: `spec.maxRunSeconds`, else what its members declare.

Read by the scheduler (a gang with a limit may backfill nodes reserved for an older gang,
scheduling/reservation.py) and by the status reconciler, which stops a gang past its limit
(domain/run_limit.py): both must read the same limit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from podgroup_operator.constants import LABEL_KUEUE_MAX_EXEC_TIME


def declared_run_seconds(spec_value: int | None, pods: Iterable[Mapping[str, Any]]) -> int | None:
    """The most seconds a gang may run: `spec.maxRunSeconds`, else the longest limit its members
    declare (`spec.activeDeadlineSeconds`, else the label `kueue.x-k8s.io/max-exec-time-seconds`),
    provided every member declares one; None when unknown (the gang may run for ever).

    Every member must declare one: a member without a limit may outlive the others."""
    if spec_value is not None:
        return spec_value
    longest: int | None = None
    for pod in pods:
        limit = pod_run_seconds(pod)
        if limit is None:
            return None
        longest = limit if longest is None else max(longest, limit)
    return longest


def pod_run_seconds(pod: Mapping[str, Any]) -> int | None:
    """The pod's own limit: `spec.activeDeadlineSeconds`, else Kueue's max-exec-time label."""
    deadline = (pod.get("spec") or {}).get("activeDeadlineSeconds")
    if isinstance(deadline, int) and not isinstance(deadline, bool) and deadline > 0:
        return deadline
    label = ((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_KUEUE_MAX_EXEC_TIME)
    if isinstance(label, str) and label.isdigit() and int(label) > 0:
        return int(label)
    return None
