"""Reading a stored status that this operator did not write (models.salvage_status).

A cluster moving over from scheduler-plugins holds groups in its phases, and any client with
access to the status subresource can leave values the models refuse. Such a status once made
the whole group unreadable: its status was left alone and its gang never scheduled.
"""

from __future__ import annotations

import base64
import zlib
from typing import Any

import pytest
from pydantic import ValidationError

from podgroup_operator.api.models import (
    PACKED_PODS_MAX_BYTES,
    PodGroup,
    PodGroupStatus,
    pack_pods,
    salvage_status,
    unpack_pods,
    unreadable_fields,
)
from podgroup_operator.api.validation import MAX_ERRORS, SHOWN_INPUT, status_errors
from podgroup_operator.constants import Phase
from tests.builders import podgroup


@pytest.mark.parametrize("phase", ["PreScheduling", "Scheduling", "Scheduled"])
def test_scheduler_plugins_phases_read_as_no_phase_and_the_rest_is_kept(phase: str) -> None:
    status, errors = salvage_status(
        {"phase": phase, "occupiedBy": "team/job", "running": 2, "scheduled": 3}
    )
    assert status.phase is None
    assert (status.occupied_by, status.running, status.scheduled) == ("team/job", 2, 3)
    assert unreadable_fields(errors) == {"phase"}
    assert status_errors(errors) == [
        "status.phase: must be one of 'Pending', 'Running', 'Unknown', 'Finished' or 'Failed', "
        f"not {phase!r}"
    ]


def test_a_readable_status_reports_nothing() -> None:
    raw = {"phase": "Running", "running": 3, "conditions": [{"type": "X", "status": "True"}]}
    status, errors = salvage_status(raw)
    assert errors == []
    assert status == PodGroupStatus.model_validate(raw)


@pytest.mark.parametrize(
    ("raw", "unreadable", "message"),
    [
        (
            {"phase": "Running", "reservation": {"reserved": {"cpu": "1e30"}}},
            {"reservation"},
            "status.reservation.reserved.cpu: '1e30' is too large",
        ),
        (
            {"conditions": [{"type": "A", "status": "True"}, {"type": "B", "status": "Maybe"}]},
            {"conditions"},
            "status.conditions[1].status: must be one of 'True', 'False' or 'Unknown'",
        ),
        ({"restartingUIDs": "abc"}, {"restartingUIDs"}, "status.restartingUIDs: must be a list"),
    ],
)
def test_an_unreadable_field_is_dropped_whole_and_named(
    raw: dict[str, Any], unreadable: set[str], message: str
) -> None:
    status, errors = salvage_status(raw)
    assert unreadable_fields(errors) == unreadable
    assert all(status.to_api().get(key) in (None, []) for key in unreadable)  # as if absent
    assert status.phase == (Phase.RUNNING if "phase" in raw else None)
    (line,) = status_errors(errors)
    assert line.startswith(message)


def test_a_status_that_is_not_an_object_reads_as_empty_and_names_every_field() -> None:
    status, errors = salvage_status(["not", "a", "status"])
    assert status == PodGroupStatus()
    assert {"phase", "conditions", "reservation"} <= unreadable_fields(errors)


def test_a_huge_value_is_shown_cut_and_many_errors_are_bounded() -> None:
    _, errors = salvage_status({"phase": "x" * 100_000})
    (line,) = status_errors(errors)
    assert f"{'x' * SHOWN_INPUT}... (100000 chars)" in line
    assert len(line) < 300
    _, errors = salvage_status(
        {"conditions": [{"type": str(i), "status": "Maybe"} for i in range(50)]}
    )
    lines = status_errors(errors)
    assert len(lines) == MAX_ERRORS + 1
    assert lines[-1] == f"... and {50 - MAX_ERRORS} more errors"


def test_a_podgroup_reads_whatever_its_status_holds_but_not_a_bad_spec() -> None:
    group = PodGroup.model_validate(podgroup("g", status={"phase": "Bogus", "running": 1}))
    assert (group.status.phase, group.status.running) == (None, 1)
    assert unreadable_fields(group.unreadable_status) == {"phase"}
    assert (
        PodGroup.model_validate(podgroup("g", status={"phase": "Running"})).unreadable_status == []
    )
    with pytest.raises(ValidationError, match="minMember"):
        PodGroup.model_validate(podgroup("g", min_member=0, status={"phase": "Bogus"}))


def test_packed_pods_round_trip_and_what_did_not_come_from_pack_pods_is_unreadable() -> None:
    bodies = [{"metadata": {"name": f"m{i}"}, "spec": {"containers": []}} for i in range(3)]
    assert unpack_pods(pack_pods(bodies)) == bodies
    bomb = base64.b64encode(zlib.compress(b" " * (PACKED_PODS_MAX_BYTES + 1))).decode()
    deep = base64.b64encode(zlib.compress(b"[" * 100_000 + b"]" * 100_000)).decode()
    for packed in ("not base64!", base64.b64encode(b"not zlib").decode(), bomb, deep):
        status, errors = salvage_status({"phase": "Pending", "restartPodsPacked": packed})
        assert unreadable_fields(errors) == {"restartPodsPacked"}
        assert status.restart_pods_packed is None and status.phase == Phase.PENDING
