"""Setting a status condition so that its transition fields only move on real transitions.

Clients key on `lastTransitionTime` ("since when is the gang unschedulable?") and on
`transitionID` ("is this a verdict I have already seen?"). If every reconcile rewrote them, both
would be noise and every reconcile would write to the apiserver. The rules, as documented for
users:

* A new condition gets `lastTransitionTime = now` and a new `transitionID`.
* `status` flips: new `lastTransitionTime` and new `transitionID`.
* `reason` changes while `status` stays: new `transitionID` (a new verdict), same
  `lastTransitionTime` (the condition has held since then).
* Only `message` changes: the message is updated, `transitionID` and `lastTransitionTime` stay.
  Messages carry live counts ("2 of minMember 3 ..."), and a count is not a transition.
* Nothing changes: an equal list comes back, so no status patch is written.

Transition IDs are UUIDs derived (uuid5, no randomness) from a caller-chosen seed (the group's
uid), the condition's previous transition ID, its type, status, reason and `now`. Chaining the
previous ID keeps IDs unique within a condition's history even if `now` repeats; the seed keeps
them distinct between groups; and the same inputs always give the same ID, which keeps
`compute_status` a pure, repeatable function.
"""

import uuid
from collections.abc import Sequence
from datetime import datetime

from podgroup_operator.api.models import Condition
from podgroup_operator.constants import ConditionStatus, ConditionType

_TRANSITION_ID_NAMESPACE = uuid.UUID("5b0c6a52-8f3e-4c1d-9a57-2f6d3f0c9e11")
"""Fixed uuid5 namespace of transition IDs; changing it would change every ID ever derived."""


def find_condition(
    conditions: Sequence[Condition], condition_type: ConditionType | str
) -> Condition | None:
    """The condition of this type, or None."""
    return next((cond for cond in conditions if cond.type == condition_type), None)


def transition_id(
    *,
    seed: str,
    previous_id: str | None,
    condition_type: ConditionType | str,
    status: ConditionStatus,
    reason: str | None,
    now: datetime,
) -> str:
    """A deterministic, practically unique ID for one transition of one condition."""
    parts = (seed, previous_id or "", condition_type, status, reason or "", now.isoformat())
    return str(uuid.uuid5(_TRANSITION_ID_NAMESPACE, "\x1f".join(parts)))


def set_condition(
    conditions: Sequence[Condition],
    condition_type: ConditionType | str,
    status: ConditionStatus,
    reason: str | None,
    message: str | None,
    now: datetime,
    *,
    id_seed: str = "",
) -> list[Condition]:
    """A new list with the condition set by the rules above; the input is not modified.

    The condition keeps its place in the list; a new one is appended. Should the list hold the
    same type more than once (a hand-edited status), the first is updated and the others are
    dropped, since a type names one fact.
    """
    existing = find_condition(conditions, condition_type)
    updated = _next_condition(
        existing,
        condition_type=condition_type,
        status=status,
        reason=reason,
        message=message,
        now=now,
        id_seed=id_seed,
    )
    result: list[Condition] = []
    placed = False
    for cond in conditions:
        if cond.type != condition_type:
            result.append(cond)
        elif not placed:
            result.append(updated)
            placed = True
    if not placed:
        result.append(updated)
    return result


def _next_condition(
    existing: Condition | None,
    *,
    condition_type: ConditionType | str,
    status: ConditionStatus,
    reason: str | None,
    message: str | None,
    now: datetime,
    id_seed: str,
) -> Condition:
    if existing is not None and existing.status == status and existing.reason == reason:
        if existing.message == message:
            return existing
        return existing.model_copy(update={"message": message})
    new_id = transition_id(
        seed=id_seed,
        previous_id=existing.transition_id if existing else None,
        condition_type=condition_type,
        status=status,
        reason=reason,
        now=now,
    )
    if existing is None or existing.status != status:
        last_transition_time = now
    else:
        # Same status, new reason: the condition has held since its last flip. A condition
        # written without a time (by hand, or an older writer) gets one now rather than never.
        last_transition_time = existing.last_transition_time or now
    return Condition(
        type=condition_type,
        status=status,
        transition_id=new_id,
        last_transition_time=last_transition_time,
        reason=reason,
        message=message,
    )
