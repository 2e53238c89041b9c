"""Admission handlers: Kopf routes each webhook (see webhooks.py) to one of these by its id."""

from __future__ import annotations

from typing import Any

import kopf

from podgroup_operator.api.validation import update_errors
from podgroup_operator.handlers.webhooks import WebhookId, serve


@serve(WebhookId.VALIDATE_PODGROUP)
def validate_podgroup(body: kopf.Body, old: kopf.Body | None = None, **_: Any) -> None:
    """Refuse a PodGroup with every problem listed, each naming its field and the fix; an
    update that leaves the spec as stored passes (`update_errors`)."""
    errors = update_errors(None if old is None else dict(old), dict(body))
    if errors:
        raise kopf.AdmissionError("; ".join(errors), code=422)
