"""The key that signs restart records (domain/restart_records.py), kept in a Secret.

The Secret lives in the operator's own namespace; whichever replica first needs the key and
finds no Secret creates it (create fails on an existing Secret: a replica that loses the race
reads the winner's), and every replica reads the same key, so a restart recorded by one leader
is verified by the next. A Secret that holds no usable key is an error naming the fix, never
overwritten: rewriting the key would refuse every restart in progress.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import secrets

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import JSON, ApiError, KubeClient
from podgroup_operator.adapters.webhook_tls import SECRETS
from podgroup_operator.domain.restart_records import KEY_BYTES

RECORD_KEY_SECRET = f"{c.OPERATOR_NAME}-restart-records"
"""The Secret's name (in the operator's namespace)."""
RECORD_KEY_FIELD = "key"
"""Its data key: KEY_BYTES random bytes, base64 as every Secret's data."""

_RACE_RETRIES = 3


class RecordKeyError(RuntimeError):
    """The Secret exists but holds no usable key."""


def secret_for(key: bytes, namespace: str, name: str) -> JSON:
    """The Secret body holding `key` (type Opaque, labelled as ours)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {c.LABEL_MANAGED_BY: c.OPERATOR_NAME},
        },
        "data": {RECORD_KEY_FIELD: base64.b64encode(key).decode("ascii")},
    }


def key_from_secret(secret: JSON, namespace: str, name: str) -> bytes:
    """The key a Secret holds; RecordKeyError naming the fix when it holds none."""
    raw = (secret.get("data") or {}).get(RECORD_KEY_FIELD)
    try:
        key = base64.b64decode(raw or "", validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if len(key) < KEY_BYTES:
        raise RecordKeyError(
            f"Secret {namespace}/{name}: data.{RECORD_KEY_FIELD} must be at least {KEY_BYTES} "
            "random bytes (base64); delete the Secret and the operator makes a new key (restarts "
            "recorded under the old one are then refused)"
        )
    return key


class SecretRecordKey:
    """The record key of the Secret `namespace/name`, read once and kept (`get`)."""

    def __init__(self, kube: KubeClient, namespace: str, name: str = RECORD_KEY_SECRET) -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self._key: bytes | None = None
        self._lock = asyncio.Lock()

    async def get(self) -> bytes:
        """The key, made and stored first when no Secret holds one; raises (ApiError,
        RecordKeyError) when it can be neither read nor made, and tries again next call."""
        if self._key is not None:
            return self._key
        async with self._lock:
            if self._key is None:
                self._key = await self._read_or_make()
            return self._key

    async def _read_or_make(self) -> bytes:
        for _ in range(_RACE_RETRIES):
            try:
                secret = await self.kube.get(SECRETS, self.name, self.namespace)
            except ApiError as exc:
                if not exc.not_found:
                    raise
            else:
                return key_from_secret(secret, self.namespace, self.name)
            key = secrets.token_bytes(KEY_BYTES)
            try:
                await self.kube.create(
                    SECRETS, secret_for(key, self.namespace, self.name), self.namespace
                )
            except ApiError as exc:
                if exc.already_exists:  # another replica made it first: read theirs
                    continue
                raise
            return key
        raise RecordKeyError(
            f"Secret {self.namespace}/{self.name}: neither read nor created after "
            f"{_RACE_RETRIES} attempts; something keeps deleting it"
        )
