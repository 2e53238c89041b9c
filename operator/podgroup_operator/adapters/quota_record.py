"""The durable record of quota reservations: one ConfigMap per namespace, written conditionally.

A ConfigMap, because an admission webhook must remember what it admitted before it answers, in a way
that survives kill -9 and that several replicas can share. A ConfigMap
`{c.QUOTA_LEDGER_CONFIG_MAP}` (key `reservations`, JSON of group name -> entry) written with a
resourceVersion precondition serialises every writer: a stale writer gets `RecordConflictError`,
re-reads and decides again. The deciding lives in `controllers.quota`; this module only reads and
writes the record.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import ApiError, Kind, KubeClient
from podgroup_operator.domain.quota import RecordEntry, parse_record, render_record

CONFIG_MAPS = Kind("", "v1", "configmaps")
RECORD_KEY = "reservations"


@dataclass
class Record:
    """The durable record as last read or written: entries and the ConfigMap's resourceVersion."""

    entries: dict[str, RecordEntry] = field(default_factory=dict)
    resource_version: str | None = None
    """None while the ConfigMap does not exist."""

    @classmethod
    def from_config_map(cls, body: Mapping[str, Any]) -> Record:
        raw = (body.get("data") or {}).get(RECORD_KEY) or "{}"
        try:
            # orjson: past 1,024 levels of nesting a ValueError, where `json` raises
            # RecursionError (the ConfigMap is in the user's namespace, theirs to edit).
            parsed = orjson.loads(raw)
        except ValueError:
            parsed = {}
        return cls(
            entries=parse_record(parsed if isinstance(parsed, dict) else {}),
            resource_version=(body.get("metadata") or {}).get("resourceVersion"),
        )


class RecordConflictError(Exception):
    """Another writer changed the record since we read it: re-read and decide again."""


class RecordStore:
    """Reads and conditionally writes the per-namespace record ConfigMap."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube

    async def read(self, namespace: str) -> Record:
        try:
            body = await self.kube.get(CONFIG_MAPS, c.QUOTA_LEDGER_CONFIG_MAP, namespace)
        except ApiError as exc:
            if exc.not_found:
                return Record()
            raise
        return Record.from_config_map(body)

    async def write(
        self, namespace: str, base: Record, entries: Mapping[str, RecordEntry]
    ) -> Record:
        """Replace the entries if the record is still `base`; RecordConflictError otherwise."""
        data = {RECORD_KEY: json.dumps(render_record(entries), sort_keys=True)}
        try:
            if base.resource_version is None:
                body = await self.kube.create(
                    CONFIG_MAPS,
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {
                            "name": c.QUOTA_LEDGER_CONFIG_MAP,
                            "namespace": namespace,
                            "labels": {c.LABEL_MANAGED_BY: c.OPERATOR_NAME},
                        },
                        "data": data,
                    },
                    namespace,
                )
            else:
                body = await self.kube.patch(
                    CONFIG_MAPS,
                    c.QUOTA_LEDGER_CONFIG_MAP,
                    {"metadata": {"resourceVersion": base.resource_version}, "data": data},
                    namespace,
                )
        except ApiError as exc:
            if exc.conflict or (exc.not_found and base.resource_version is not None):
                raise RecordConflictError(str(exc)) from exc
            raise
        return Record(dict(entries), (body.get("metadata") or {}).get("resourceVersion"))
