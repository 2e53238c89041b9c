"""The durable record: round-trips, which reservation holds, when an entry is released."""

from datetime import UTC, datetime, timedelta

from podgroup_operator import constants as c
from podgroup_operator.adapters.quota_record import RECORD_KEY, Record
from podgroup_operator.domain.quota import (
    GroupReservation,
    ObservedGroup,
    RecordEntry,
    effective_reservation,
    parse_record,
    release_reason,
    render_record,
    reservation_condition,
)
from tests import builders
from tests.unit.quota.helpers import key, ledger, milli, pod

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def entry(uid: str | None = "u1", deadline: datetime = NOW, **total: str | int) -> RecordEntry:
    return RecordEntry(uid=uid, total=milli(total or {"cpu": 4}), deadline=deadline)


def observed(uid: str | None = "u1", total: dict | None = None, **kwargs: object) -> ObservedGroup:
    return ObservedGroup(uid=uid, total=milli(total or {"cpu": 4}), **kwargs)


def test_entries_round_trip_through_readable_json() -> None:
    entries = {
        "a": entry(cpu="1500m", memory="8Gi", **{"nvidia.com/gpu": 2}),
        "b": entry(uid=None, cpu=1),
    }
    rendered = render_record(entries)
    assert rendered["a"] == {
        "uid": "u1",
        "total": {"cpu": "1500m", "memory": "8Gi", "nvidia.com/gpu": "2"},
        "deadline": "2026-01-01T12:00:00Z",
    }
    assert parse_record(rendered) == entries


def test_malformed_entries_are_skipped_not_fatal() -> None:
    raw = {
        "ok": entry().to_json(),
        "no-deadline": {"uid": "x", "total": {"cpu": "1"}},
        "bad-quantity": {"uid": "x", "total": {"cpu": "lots"}, "deadline": "2026-01-01T00:00:00Z"},
        "not-a-dict": 3,
    }
    assert set(parse_record(raw)) == {"ok"}


def test_observed_group_reads_uid_total_phase_and_deletion() -> None:
    body = builders.podgroup("a", totalResources={"cpu": 2}, status={"phase": c.Phase.RUNNING})
    seen = ObservedGroup.from_podgroup(body)
    assert (seen.uid, seen.total, seen.active) == (body["metadata"]["uid"], {"cpu": 2000}, True)
    done = builders.podgroup("a", totalResources={"cpu": 2}, status={"phase": c.Phase.FAILED})
    assert not ObservedGroup.from_podgroup(done).active
    assert not ObservedGroup.from_podgroup(body, deleted=True).active
    assert ObservedGroup.from_podgroup(builders.podgroup("a")).total is None


def test_the_record_decides_what_is_reserved() -> None:
    k = key("a")
    # Admitted, not yet visible: reserves.
    assert effective_reservation(k, entry(), None) == GroupReservation(k, milli({"cpu": 4}))
    # Visible and active: the record's amount, even if the spec says otherwise.
    assert effective_reservation(k, entry(), observed(total={"cpu": 9})) == GroupReservation(
        k, milli({"cpu": 4})
    )
    # Finished: held no more.
    finished = effective_reservation(k, entry(), observed(phase=c.Phase.FINISHED))
    assert finished is not None and not finished.reserves
    # A namesake of another uid does not end the admitted reservation.
    assert effective_reservation(k, entry(), observed(uid="old", deleting=True)).reserves
    # No entry: totalResources alone reserves nothing.
    assert effective_reservation(k, None, observed()) == GroupReservation(k, None)
    assert effective_reservation(k, None, observed(deleted=True)) is None
    assert effective_reservation(k, None, None) is None


def test_release_reasons() -> None:
    later = NOW + timedelta(seconds=30)
    assert release_reason("a", entry(deadline=later), observed(), NOW) is None
    assert "Finished" in release_reason(
        "a", entry(deadline=later), observed(phase=c.Phase.FINISHED), NOW
    )
    assert "Failed" in release_reason(
        "a", entry(deadline=later), observed(phase=c.Phase.FAILED), NOW
    )
    assert "deleted" in release_reason("a", entry(), observed(deleted=True), NOW)
    assert "being deleted" in release_reason("a", entry(), observed(deleting=True), NOW)
    no_total = ObservedGroup(uid="u1", total=None)
    assert "totalResources" in release_reason("a", entry(), no_total, NOW)
    # Not visible: held until the deadline, then dropped as never stored.
    assert release_reason("a", entry(deadline=later), None, NOW) is None
    assert "never stored" in release_reason("a", entry(deadline=later), None, later)
    # A namesake with another uid is not this entry's group.
    assert release_reason("a", entry(deadline=later), observed(uid="x", deleted=True), NOW) is None


def test_condition_shows_reservation_then_release() -> None:
    book = ledger(
        {"requests.cpu": 10},
        groups=[GroupReservation(key("a"), milli({"cpu": 4}))],
        pods=[pod("p1", {"cpu": 1}, group="a")],
    )
    status, reason, message = reservation_condition(book, key("a"), None)
    assert (status, reason) == (c.ConditionStatus.TRUE, c.Reason.QUOTA_RESERVED)
    assert "{cpu: 4} reserved" in message and "members use {cpu: 1}" in message
    book.release(key("a"))
    status, reason, message = reservation_condition(book, key("a"), "PodGroup a is Finished")
    assert (status, reason) == (c.ConditionStatus.FALSE, c.Reason.QUOTA_RELEASED)
    assert "PodGroup a is Finished" in message
    assert reservation_condition(book, key("a"), None) is None


def test_a_ledger_configmap_of_deeply_nested_json_reads_as_empty_not_raising() -> None:
    """The ConfigMap is in the user's namespace; 100,000 '[' made `json` raise
    RecursionError on every read of that namespace's record."""
    body = {
        "metadata": {"resourceVersion": "7"},
        "data": {RECORD_KEY: "[" * 100_000 + "]" * 100_000},
    }
    record = Record.from_config_map(body)
    assert record.entries == {} and record.resource_version == "7"
