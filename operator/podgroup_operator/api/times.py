"""Times as the Kubernetes API writes and reads them: metav1.Time and metav1.MicroTime.

One place for the format, because the apiserver refuses a MicroTime without its microseconds and
writes a Time with whole seconds: a message, an Event and a status all show the same text.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["parse_time", "rfc3339", "rfc3339_micro"]

_TIME = "%Y-%m-%dT%H:%M:%SZ"
_MICRO_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"


def rfc3339(at: datetime) -> str:
    """metav1.Time: `2026-03-01T12:00:30Z`, in UTC with whole seconds."""
    return at.astimezone(UTC).strftime(_TIME)


def rfc3339_micro(at: datetime) -> str:
    """metav1.MicroTime (a Lease's renewTime): `2026-03-01T12:00:30.123456Z`, in UTC."""
    return at.astimezone(UTC).strftime(_MICRO_TIME)


def parse_time(value: object) -> datetime | None:
    """An aware UTC datetime from a Time or MicroTime (any RFC 3339 offset); None when `value`
    is not such a string."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
