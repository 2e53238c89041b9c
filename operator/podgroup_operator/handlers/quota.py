"""Quota reservation webhooks: PodGroups reserve `spec.totalResources`, pods stay within it.

Two validating webhooks (declared in webhooks.py, only for namespaces labelled
`scheduling.x-k8s.io/quota-reservation: enabled`, never kube-system or the operator's own):

* `quota-podgroup` (PodGroup CREATE, UPDATE): totalResources is admitted only when the
  namespace's free quota covers it (an increase like a create; a decrease not below what live
  members request), and the reservation is recorded durably before the answer.
* `quota-pod` (pod CREATE): a member of a reserving group must fit in the reservation; any other
  pod must not eat quota that active groups reserved but do not use yet.

Both deny with every message at once (each names the field or resource, the amounts and the fix)
and pass the ledger's warnings to the client as admission warnings. Dry-run requests are decided
but never recorded (the PodGroup webhook declares sideEffects NoneOnDryRun).

The handlers are `async` on purpose: Kopf runs sync handlers in a thread pool, and the ledgers
they touch belong to the event loop. Watch events reach the ledgers through the informers
(controllers/runtime.py), never through Kopf. The state, the durable record, release and status
live in `controllers.quota.QuotaService` (see its docstring).
"""

from __future__ import annotations

from typing import Any

import kopf

from podgroup_operator.domain.quota import Decision
from podgroup_operator.handlers.webhooks import WebhookId, serve


def _answer(decision: Decision, warnings: list[str]) -> None:
    warnings.extend(decision.warnings)
    if not decision.allowed:
        raise kopf.AdmissionError("; ".join(decision.errors), code=403)


@serve(WebhookId.QUOTA_PODGROUP)
async def validate_podgroup_quota(
    body: kopf.Body, dryrun: bool, warnings: list[str], memo: kopf.Memo, **kwargs: Any
) -> None:
    """Admit a PodGroup's reservation only when the namespace's free quota covers it."""
    old = kwargs.get("old")  # Kopf passes `old` and `operation`; its protocol does not list them
    previous = dict(old) if kwargs.get("operation") == "UPDATE" and old is not None else None
    decision = await memo.runtime.quota.admit_podgroup(dict(body), previous, dry_run=dryrun)
    _answer(decision, warnings)


@serve(WebhookId.QUOTA_POD)
async def validate_pod_quota(
    body: kopf.Body, dryrun: bool, warnings: list[str], memo: kopf.Memo, **_: Any
) -> None:
    """Keep members within their group's reservation and everyone else out of reserved quota."""
    decision = await memo.runtime.quota.admit_pod(dict(body), dry_run=dryrun)
    _answer(decision, warnings)
