"""The restart records' key in its Secret: made once, read by every replica, never rewritten."""

from __future__ import annotations

import asyncio
import base64

import pytest

from podgroup_operator.adapters.kube import KubeClient
from podgroup_operator.adapters.record_key import (
    RECORD_KEY_FIELD,
    RECORD_KEY_SECRET,
    RecordKeyError,
    SecretRecordKey,
    secret_for,
)
from podgroup_operator.adapters.webhook_tls import SECRETS
from podgroup_operator.domain.restart_records import KEY_BYTES
from tests.fakes import FakeApiServer

NS = "podgroup-operator"
SECRET_PATH = SECRETS.path(NS, RECORD_KEY_SECRET)


async def test_the_first_replica_makes_the_key_and_the_next_reads_the_same() -> None:
    fake = FakeApiServer()
    first = await SecretRecordKey(KubeClient(fake), NS).get()
    second = await SecretRecordKey(KubeClient(fake), NS).get()
    assert len(first) == KEY_BYTES
    assert second == first
    assert [r for r in fake.requests if r[0] == "POST"] == [("POST", SECRETS.path(NS))]


async def test_the_key_is_read_once_per_process_even_when_asked_at_once() -> None:
    fake = FakeApiServer()
    keys = SecretRecordKey(KubeClient(fake), NS)
    got = await asyncio.gather(*(keys.get() for _ in range(5)))
    assert len(set(got)) == 1
    assert fake.requests.count(("GET", SECRET_PATH)) == 1


async def test_a_replica_losing_the_race_to_create_reads_the_winners_key() -> None:
    fake = FakeApiServer()
    winner = bytes(range(KEY_BYTES))
    keys = SecretRecordKey(KubeClient(fake), NS)
    # The winner's Secret lands between this replica's read (404) and its create (409).
    fake.inject_error("GET", SECRET_PATH, 404, "NotFound")
    fake.seed(secret_for(winner, NS, RECORD_KEY_SECRET))
    assert await keys.get() == winner


@pytest.mark.parametrize(
    "data", [{}, {RECORD_KEY_FIELD: "not base64!"}, {RECORD_KEY_FIELD: "YQ=="}]
)
async def test_a_secret_without_a_usable_key_is_an_error_naming_the_fix_and_left_alone(
    data: dict[str, str],
) -> None:
    fake = FakeApiServer()
    (stored,) = fake.seed(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": RECORD_KEY_SECRET, "namespace": NS},
            "data": data,
        }
    )
    with pytest.raises(RecordKeyError, match="delete the Secret and the operator makes a new key"):
        await SecretRecordKey(KubeClient(fake), NS).get()
    assert fake.get_object(SECRETS, RECORD_KEY_SECRET, NS) == stored
    assert [r for r in fake.requests if r[0] != "GET"] == []


def test_the_secret_holds_the_key_as_base64() -> None:
    key = bytes(range(KEY_BYTES))
    body = secret_for(key, NS, RECORD_KEY_SECRET)
    assert base64.b64decode(body["data"][RECORD_KEY_FIELD]) == key
    assert body["type"] == "Opaque"
