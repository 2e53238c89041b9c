"""A gang's ProvisioningRequest, as the operator reads it and as the PodGroup shows it. Pure.

cluster-autoscaler answers a ProvisioningRequest with conditions (`Accepted`, `Provisioned`,
`Failed`, `BookingExpired`, `CapacityRevoked`); `request_state` reduces them to the one state
the operator acts on. The PodGroup says what its gang waits for in a `Provisioning` condition
(`apply_provisioning`), folded in by the status reconciler, the one writer of PodGroup status.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from podgroup_operator.api.models import PodGroupStatus
from podgroup_operator.constants import (
    ANNOTATION_PROVISIONING_CLASS,
    PROVISIONING_OFF,
    ConditionStatus,
    ConditionType,
    Phase,
    ProvisioningConditionType,
    Reason,
)
from podgroup_operator.domain.conditions import set_condition

NAME_LIMIT = 253
"""Object names are DNS subdomains: at most 253 characters."""


class RequestState(enum.Enum):
    """Where a ProvisioningRequest stands, from its conditions (later states win)."""

    PENDING = "Pending"
    """Created; the autoscaler has not answered yet."""
    ACCEPTED = "Accepted"
    PROVISIONED = "Provisioned"
    FAILED = "Failed"
    EXPIRED = "BookingExpired"
    """The booking expired or the capacity was revoked: the request is spent."""

    @property
    def in_flight(self) -> bool:
        return self in (RequestState.PENDING, RequestState.ACCEPTED, RequestState.PROVISIONED)


def _true(
    conditions: list[Mapping[str, Any]], kind: ProvisioningConditionType
) -> Mapping[str, Any] | None:
    return next(
        (
            cond
            for cond in conditions
            if cond.get("type") == kind and cond.get("status") == ConditionStatus.TRUE
        ),
        None,
    )


def request_state(body: Mapping[str, Any]) -> tuple[RequestState, str]:
    """The request's state and the autoscaler's message for it (empty when it said none)."""
    conditions = list((body.get("status") or {}).get("conditions") or ())
    for kind, state in (
        (ProvisioningConditionType.FAILED, RequestState.FAILED),
        (ProvisioningConditionType.CAPACITY_REVOKED, RequestState.EXPIRED),
        (ProvisioningConditionType.BOOKING_EXPIRED, RequestState.EXPIRED),
        (ProvisioningConditionType.PROVISIONED, RequestState.PROVISIONED),
        (ProvisioningConditionType.ACCEPTED, RequestState.ACCEPTED),
    ):
        found = _true(conditions, kind)
        if found is not None:
            return state, str(found.get("message") or found.get("reason") or "")
    return RequestState.PENDING, ""


def provisioning_class(annotations: Mapping[str, str] | None, default: str | None) -> str | None:
    """The class a gang's request names: its PodGroup's annotation, else the operator's
    default (`run --provisioning-class`); None (off) for `none` or when neither is set."""
    chosen = (annotations or {}).get(ANNOTATION_PROVISIONING_CLASS, default)
    if not chosen or chosen.strip() == PROVISIONING_OFF:
        return None
    return chosen.strip()


def request_name(group: str, attempt: int) -> str:
    """The name of a gang's `attempt`-th request (its PodTemplates add `-N`): `<group>-pr<n>`,
    shortened with a digest of the group's name when that would be too long."""
    suffix = f"-pr{attempt}"
    room = NAME_LIMIT - len(suffix) - 4  # the templates' "-NN"
    if len(group) > room:
        digest = hashlib.sha256(group.encode()).hexdigest()[:10]
        group = f"{group[: room - 11]}-{digest}"
    return f"{group}{suffix}"


@dataclass(frozen=True)
class ProvisioningView:
    """What the PodGroup's `Provisioning` condition says (the provisioning controller's word)."""

    active: bool
    """True while a request is in flight for the gang."""
    reason: Reason
    message: str


def apply_provisioning(
    status: PodGroupStatus, view: ProvisioningView | None, now: datetime, *, id_seed: str
) -> PodGroupStatus:
    """Set the `Provisioning` condition from `view` (None: left as it is). Terminal groups are
    left alone."""
    phase = Phase(status.phase) if status.phase else None
    if view is None or (phase is not None and phase.terminal):
        return status
    conditions = set_condition(
        status.conditions,
        ConditionType.PROVISIONING,
        ConditionStatus.TRUE if view.active else ConditionStatus.FALSE,
        view.reason,
        view.message,
        now,
        id_seed=id_seed,
    )
    return status.model_copy(update={"conditions": conditions})
