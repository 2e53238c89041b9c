"""Admission handlers: Kopf routes each webhook (see webhooks.py) to one of these by its id."""

from __future__ import annotations

from typing import Any

import kopf

from podgroup_operator.api.validation import podgroup_errors
from podgroup_operator.handlers.webhooks import WebhookId, serve


@serve(WebhookId.VALIDATE_PODGROUP)
def validate_podgroup(body: kopf.Body, **_: Any) -> None:
    """Refuse a PodGroup with every problem listed, each naming its field and the fix."""
    errors = podgroup_errors(dict(body))
    if errors:
        raise kopf.AdmissionError("; ".join(errors), code=422)
