"""Requests the API server asks to send again later (429 and 5xx with a Retry-After).

An API server over its limits (max-inflight, or API Priority and Fairness) refuses with 429 and
`Retry-After: 1` before doing anything: `KubeClient` sends the request again after that wait, up
to `RETRY_AFTER_ATTEMPTS` times, as client-go does. The real API server's 429 is checked in
tests/integration/test_priority_and_fairness.py.
"""

from __future__ import annotations

import asyncio

import pytest

from podgroup_operator.adapters import kube as kube_module
from podgroup_operator.adapters.kube import PODS, ApiError, KubeClient, retry_after
from tests.builders import pod
from tests.fakes import FakeApiServer

THROTTLED = {"retryAfterSeconds": 1}


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits asked of asyncio.sleep (none really waited; the fake's own yields, 0 s, are
    not noted)."""
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        if seconds:
            waits.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(kube_module.asyncio, "sleep", sleep)
    return waits


async def test_a_request_refused_with_retry_after_is_sent_again_after_the_wait(
    slept: list[float],
) -> None:
    fake = FakeApiServer()
    kube = KubeClient(fake)
    fake.seed(pod("p"))
    fake.inject_error(
        "GET", "/pods/p", 429, "TooManyRequests", "slow down", times=3, details=THROTTLED
    )

    got = await kube.get(PODS, "p", "default")

    assert got["metadata"]["name"] == "p"
    assert fake.count("GET", "/pods/p") == 4
    assert slept == [1.0, 1.0, 1.0]


async def test_it_gives_up_after_the_last_attempt_with_the_refusal(slept: list[float]) -> None:
    fake = FakeApiServer()
    kube = KubeClient(fake)
    fake.seed(pod("p"))
    attempts = kube_module.RETRY_AFTER_ATTEMPTS + 1
    fake.inject_error(
        "POST", "/binding", 429, "TooManyRequests", "full", times=attempts, details=THROTTLED
    )

    with pytest.raises(ApiError) as refused:
        await kube.bind("default", "p", "n1", None)

    assert refused.value.status == 429
    assert fake.count("POST", "/binding") == attempts
    assert len(slept) == attempts - 1


@pytest.mark.parametrize(
    ("status", "details", "wait"),
    [
        (429, THROTTLED, 1.0),
        (503, {"retryAfterSeconds": 2}, 2.0),
        (429, {"retryAfterSeconds": 3600}, kube_module.RETRY_AFTER_LONGEST_SECONDS),
        (429, {"retryAfterSeconds": 0}, 0.0),
        (429, None, None),  # no Retry-After: a refusal like any other
        (409, {"retryAfterSeconds": 1}, None),  # a conflict is an answer, not a wait
        (429, {"retryAfterSeconds": -1}, None),
        (429, {"retryAfterSeconds": "1"}, None),
        (429, {"retryAfterSeconds": True}, None),
    ],
)
def test_which_answers_are_sent_again_and_after_how_long(
    status: int, details: dict[str, object] | None, wait: float | None
) -> None:
    body = {"kind": "Status", "code": status, **({"details": details} if details else {})}
    assert retry_after(status, body) == wait


@pytest.mark.parametrize(
    ("body", "header", "expected"),
    [
        (
            {"message": "Too many requests"},
            "1",
            {"message": "Too many requests", "details": {"retryAfterSeconds": 1}},
        ),
        (
            {"details": {"retryAfterSeconds": 5, "name": "p"}},
            "1",
            {"details": {"retryAfterSeconds": 5, "name": "p"}},
        ),
        ({"message": "x"}, None, {"message": "x"}),
        ({"message": "x"}, "Wed, 21 Oct 2026 07:28:00 GMT", {"message": "x"}),
    ],
)
def test_the_transport_carries_the_retry_after_header_in_the_status(
    body: dict[str, object], header: str | None, expected: dict[str, object]
) -> None:
    assert kube_module._with_retry_after(body, header) == expected
