"""Scheduling gates (`spec.schedulingGates`): a gated pod is never bound, nor is its gang.

kube-scheduler never binds a pod with a gate: it waits outside the queue until whoever set the
gates (Kueue's `kueue.x-k8s.io/admission`, an autoscaler, a quota controller) has removed the
last one. A gang scheduler must do the same for the whole gang: binding the ungated members
alone would split it, so a gang with a gated member waits, saying which gates hold it back, with
kube-scheduler's reason `SchedulingGated`. The API server lets gates be removed, never added, so
a pod that is not gated when placed stays so until it is bound.

Pure: it reads pod bodies only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

SHOWN_PODS = 5
"""Gated pods named in a message; the rest are counted."""


def scheduling_gates(pod: Mapping[str, Any]) -> tuple[str, ...]:
    """The names of the pod's scheduling gates, in order (empty: not gated).

    A gate without a name still gates (the API server would refuse it; the name is shown as
    '?')."""
    gates = (pod.get("spec") or {}).get("schedulingGates") or ()
    if not isinstance(gates, list):
        return ()
    return tuple(
        str(gate.get("name") or "?") if isinstance(gate, Mapping) else "?" for gate in gates
    )


def gated_message(pods: Iterable[Mapping[str, Any]]) -> str | None:
    """Why a gang with these waiting members is not placed, naming each gated pod and its
    gates; None when none is gated."""
    gated = [
        ((pod.get("metadata") or {}).get("name") or "?", gates)
        for pod in pods
        if (gates := scheduling_gates(pod))
    ]
    if not gated:
        return None
    gated.sort()
    shown = "; ".join(f"pod {name}: {', '.join(gates)}" for name, gates in gated[:SHOWN_PODS])
    more = f"; and {len(gated) - SHOWN_PODS} more gated pods" if len(gated) > SHOWN_PODS else ""
    return (
        f"waiting for scheduling gates ({shown}{more}); the gang is placed whole once the last "
        "gate is removed"
    )
