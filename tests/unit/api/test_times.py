"""Times written and read as the Kubernetes API does: one format for messages, Events, status
and Leases."""

from __future__ import annotations

import datetime as dt

import pytest

from podgroup_operator.api.keys import is_lone_pod, lone_pod_key
from podgroup_operator.api.times import parse_time, rfc3339, rfc3339_micro

AT = dt.datetime(2026, 3, 1, 12, 0, 30, 123456, tzinfo=dt.UTC)


def test_a_time_is_written_in_utc_with_whole_seconds_and_a_micro_time_with_its_microseconds() -> (
    None
):
    east = AT.astimezone(dt.timezone(dt.timedelta(hours=2)))
    assert rfc3339(east) == "2026-03-01T12:00:30Z"
    assert rfc3339_micro(east) == "2026-03-01T12:00:30.123456Z"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-03-01T12:00:30Z", AT.replace(microsecond=0)),
        ("2026-03-01T12:00:30.123456Z", AT),
        ("2026-03-01T14:00:30.123456+02:00", AT),
        ("2026-03-01T12:00:30", AT.replace(microsecond=0)),
    ],
)
def test_what_is_written_reads_back_as_an_aware_utc_time(text: str, expected: dt.datetime) -> None:
    parsed = parse_time(text)
    assert parsed == expected
    assert parsed is not None and parsed.utcoffset() == dt.timedelta(0)


@pytest.mark.parametrize("value", [None, "", "yesterday", 1_700_000_000])
def test_what_is_not_a_time_reads_as_none(value: object) -> None:
    assert parse_time(value) is None


def test_a_lone_pods_key_never_meets_a_podgroups() -> None:
    key = lone_pod_key("team-a", "server")
    assert key == ("team-a", "pod:server")
    assert is_lone_pod(key)
    assert not is_lone_pod(("team-a", "server"))
