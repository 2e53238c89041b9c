"""Admission handlers: Kopf routes each webhook (see webhooks.py) to one of these by its id."""

from __future__ import annotations

from typing import Any

import kopf

from podgroup_operator.api.elastic_quota import elastic_quota_update_errors
from podgroup_operator.api.validation import podgroup_findings, topology_update_errors
from podgroup_operator.domain.gang_groups import GangGroupTrust, unconsented_warnings
from podgroup_operator.handlers.webhooks import WebhookId, serve

TOPOLOGY_SYNC_SECONDS = 5.0
"""How long a PodGroup's admission waits for a starting replica's first list of Topologies."""


@serve(WebhookId.VALIDATE_PODGROUP)
async def validate_podgroup(
    body: kopf.Body, warnings: list[str], memo: kopf.Memo, old: kopf.Body | None = None, **_: Any
) -> None:
    """Refuse a PodGroup with every problem listed, each naming its field and the fix; an
    update that leaves the spec as stored passes. A topologyConstraint naming a Topology that
    does not exist is admitted with a warning (`podgroup_findings`), and so is a gangGroup entry
    of another namespace (`unconsented_warnings`).

    `async`: the Topology store belongs to the event loop (Kopf runs sync handlers in threads)."""
    informers = memo.runtime.informers
    await informers.topologies_synced(TOPOLOGY_SYNC_SECONDS)
    errors, warned = podgroup_findings(
        None if old is None else dict(old), dict(body), informers.levels_of
    )
    warnings.extend(warned)
    trust = GangGroupTrust.of(memo.settings.gang_group_trust)
    warnings.extend(unconsented_warnings(None if old is None else dict(old), dict(body), trust))
    if errors:
        raise kopf.AdmissionError("; ".join(errors), code=422)


@serve(WebhookId.VALIDATE_TOPOLOGY)
def validate_topology(body: kopf.Body, old: kopf.Body | None = None, **_: Any) -> None:
    """Refuse a Topology whose levels break the rules, each naming its field and the fix."""
    errors = topology_update_errors(None if old is None else dict(old), dict(body))
    if errors:
        raise kopf.AdmissionError("; ".join(errors), code=422)


def _validate_elastic_quota(
    body: kopf.Body, old: kopf.Body | None, name: str | None, namespace: str | None
) -> None:
    obj = dict(body)
    meta = dict(obj.get("metadata") or {})
    meta.setdefault("name", name)
    meta.setdefault("namespace", namespace)
    errors = elastic_quota_update_errors(
        None if old is None else dict(old), {**obj, "metadata": meta}
    )
    if errors:
        raise kopf.AdmissionError("; ".join(errors), code=422)


@serve(WebhookId.VALIDATE_ELASTIC_QUOTA)
def validate_elastic_quota(
    body: kopf.Body,
    old: kopf.Body | None = None,
    name: str | None = None,
    namespace: str | None = None,
    **_: Any,
) -> None:
    """Refuse an ElasticQuota with every problem listed, each naming its field and the fix;
    an update that leaves its spec and Koordinator keys as stored passes."""
    _validate_elastic_quota(body, old, name, namespace)


@serve(WebhookId.VALIDATE_KOORD_ELASTIC_QUOTA)
def validate_koordinator_elastic_quota(
    body: kopf.Body,
    old: kopf.Body | None = None,
    name: str | None = None,
    namespace: str | None = None,
    **_: Any,
) -> None:
    """The same, for an ElasticQuota of Koordinator's group."""
    _validate_elastic_quota(body, old, name, namespace)
