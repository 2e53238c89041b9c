"""A restart's record in the status, signed by the operator, and checked before it is acted on.

A restart writes what it will do to the PodGroup's status before doing it (domain/restart.py):
the members to delete (`restartingUIDs`) and the bare pods to recreate (`restartPods` or
`restartPodsPacked`), so that a crash at any point can finish it. The operator then creates
those pods as itself. A status is not only the operator's to write (a cluster may grant a team
`podgroups/status`), so a record is acted on only when:

* every recorded pod is in the PodGroup's own namespace, and
* `restartPodsDigest` is the HMAC-SHA256, under the operator's key, of the record's canonical
  form bound to the group (its namespace, name and uid): a changed body, a body added, a record
  copied from another group or one the operator never wrote does not match.

Pure: the key is passed in (adapters/record_key.py keeps it in a Secret every replica reads).
Why a MAC over the status rather than the bodies kept elsewhere:
docs/decisions/019-restart-records-signed.md.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

RESTART_PODS_DIGEST = "restartPodsDigest"
"""Status field: the record's signature (`record_digest`)."""
DIGEST_PREFIX = "hmac-sha256:"
"""What every digest starts with, so that a later scheme can be told apart."""
KEY_BYTES = 32
"""The length of a signing key: SHA-256's block is 64 bytes, its output 32."""


class RecordOwner(NamedTuple):
    """The PodGroup a record belongs to: its signature binds the record to it."""

    namespace: str
    name: str
    uid: str


def _without_nulls(value: Any) -> Any:
    """`value` with null object members dropped: a stored object may lose them (a merge patch
    deletes a key set to null), and a pod created with one is the pod created without."""
    if isinstance(value, Mapping):
        return {str(k): _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_without_nulls(item) for item in value]
    return value


def canonical_record(
    owner: RecordOwner, uids: Iterable[str], bodies: Sequence[Mapping[str, Any]]
) -> bytes:
    """The bytes a record's signature covers: the owner, the sorted UIDs and the bodies in
    order, as JSON with sorted keys and no spaces (a body read back equals the body written)."""
    document = {
        "podGroup": {"namespace": owner.namespace, "name": owner.name, "uid": owner.uid},
        "restartingUIDs": sorted(set(uids)),
        "restartPods": [_without_nulls(body) for body in bodies],
    }
    return json.dumps(
        document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode()


def record_digest(
    key: bytes, owner: RecordOwner, uids: Iterable[str], bodies: Sequence[Mapping[str, Any]]
) -> str:
    """The signature the operator writes with a record (`restartPodsDigest`)."""
    if len(key) < KEY_BYTES:
        raise ValueError(f"a record key must be at least {KEY_BYTES} bytes, got {len(key)}")
    mac = hmac.new(key, canonical_record(owner, uids, bodies), hashlib.sha256)
    return DIGEST_PREFIX + mac.hexdigest()


def record_problems(
    key: bytes,
    owner: RecordOwner,
    uids: Iterable[str],
    bodies: Sequence[Mapping[str, Any]],
    digest: str | None,
) -> list[str]:
    """Why the record may not be acted on, every reason with the field it is in; empty when
    it is the operator's own record of this group."""
    problems: list[str] = []
    for index, body in enumerate(bodies):
        metadata = body.get("metadata")
        metadata = metadata if isinstance(metadata, Mapping) else {}
        namespace, name = metadata.get("namespace"), metadata.get("name")
        if namespace != owner.namespace:
            problems.append(
                f"restartPods[{index}] ({name or '?'}) is in namespace {namespace!r}, not the "
                f"PodGroup's namespace {owner.namespace!r}: a restart only recreates the "
                "group's own members"
            )
    if not digest:
        problems.append(
            f"status.{RESTART_PODS_DIGEST} is missing: the operator signs every restart it "
            "records, so this record is not one of its own"
        )
    else:
        try:
            expected = record_digest(key, owner, uids, bodies)
        except (TypeError, ValueError) as exc:
            problems.append(f"the recorded pods cannot be read as JSON: {exc}")
        else:
            if not hmac.compare_digest(digest.encode(), expected.encode()):
                problems.append(
                    f"status.{RESTART_PODS_DIGEST} does not match the recorded UIDs and pods of "
                    f"PodGroup {owner.namespace}/{owner.name}: the record was changed after the "
                    "operator wrote it, or copied from another group"
                )
    return problems
