"""A gang's ProvisioningRequest as the operator reads it and the PodGroup shows it
(domain/provisioning.py)."""

from __future__ import annotations

import pytest

from podgroup_operator import constants as c
from podgroup_operator.api.models import PodGroupStatus
from podgroup_operator.domain.conditions import find_condition
from podgroup_operator.domain.provisioning import (
    NAME_LIMIT,
    ProvisioningView,
    RequestState,
    apply_provisioning,
    provisioning_class,
    request_name,
    request_state,
)
from tests.clock import T0


def body(*conditions: tuple[str, str, str]) -> dict[str, object]:
    return {
        "status": {
            "conditions": [
                {"type": kind, "status": status, "message": message}
                for kind, status, message in conditions
            ]
        }
    }


@pytest.mark.parametrize(
    ("conditions", "state", "message"),
    [
        ((), RequestState.PENDING, ""),
        ((("Accepted", "True", "ok"),), RequestState.ACCEPTED, "ok"),
        (
            (("Accepted", "True", ""), ("Provisioned", "False", "not yet")),
            RequestState.ACCEPTED,
            "",
        ),
        (
            (("Accepted", "True", ""), ("Provisioned", "True", "3 nodes")),
            RequestState.PROVISIONED,
            "3 nodes",
        ),
        (
            (("Provisioned", "True", ""), ("BookingExpired", "True", "late")),
            RequestState.EXPIRED,
            "late",
        ),
        (
            (("Provisioned", "True", ""), ("CapacityRevoked", "True", "gone")),
            RequestState.EXPIRED,
            "gone",
        ),
        (
            (("Accepted", "True", ""), ("Failed", "True", "max size")),
            RequestState.FAILED,
            "max size",
        ),
    ],
)
def test_the_state_is_the_latest_condition_that_holds(
    conditions: tuple[tuple[str, str, str], ...], state: RequestState, message: str
) -> None:
    assert request_state(body(*conditions)) == (state, message)


def test_only_pending_accepted_and_provisioned_requests_are_in_flight() -> None:
    assert {s for s in RequestState if s.in_flight} == {
        RequestState.PENDING,
        RequestState.ACCEPTED,
        RequestState.PROVISIONED,
    }


def test_the_annotation_wins_over_the_default_and_none_turns_it_off() -> None:
    key = c.ANNOTATION_PROVISIONING_CLASS
    assert provisioning_class({}, "a") == "a"
    assert provisioning_class({key: "b"}, "a") == "b"
    assert provisioning_class({key: " none "}, "a") is None
    assert provisioning_class(None, None) is None


def test_request_names_fit_the_limit_with_their_templates_and_stay_distinct() -> None:
    assert request_name("train", 3) == "train-pr3"
    long_a, long_b = "a" * 253, "a" * 252 + "b"
    for name in (request_name(long_a, 12), request_name(long_b, 12)):
        assert len(f"{name}-31") <= NAME_LIMIT
    assert request_name(long_a, 1) != request_name(long_b, 1)


def test_the_provisioning_condition_carries_the_view_and_leaves_terminal_groups_alone() -> None:
    view = ProvisioningView(True, c.Reason.WAITING_FOR_PROVISIONING, "ProvisioningRequest g-pr1")
    status = apply_provisioning(PodGroupStatus(phase=c.Phase.PENDING), view, T0, id_seed="s")
    condition = find_condition(status.conditions, c.ConditionType.PROVISIONING)
    assert condition is not None
    assert (condition.status, condition.reason, condition.message) == (
        c.ConditionStatus.TRUE,
        c.Reason.WAITING_FOR_PROVISIONING,
        "ProvisioningRequest g-pr1",
    )
    finished = PodGroupStatus(phase=c.Phase.FINISHED)
    assert apply_provisioning(finished, view, T0, id_seed="s") == finished
    assert apply_provisioning(status, None, T0, id_seed="s") == status
