"""The webhook table and the handlers Kopf serves agree: one route per entry, nothing else.

`handlers/webhooks.serve` builds the decorators from the table; this checks the result in
Kopf's own registry (it has no public listing of handlers, hence `_webhooks`)."""

from __future__ import annotations

import kopf

import podgroup_operator.handlers.admission
import podgroup_operator.handlers.quota
import podgroup_operator.handlers.routing  # noqa: F401  (importing registers the handlers)
from podgroup_operator.handlers.webhooks import WEBHOOKS


def _served() -> dict[str, kopf.WebhookHandler]:
    return {str(h.id): h for h in kopf.get_default_registry()._webhooks.get_all_handlers()}


def test_every_declared_webhook_has_exactly_one_kopf_handler() -> None:
    handlers = list(kopf.get_default_registry()._webhooks.get_all_handlers())
    assert sorted(str(h.id) for h in handlers) == sorted(str(w.handler_id) for w in WEBHOOKS)


def test_each_handler_intercepts_what_its_entry_declares() -> None:
    served = _served()
    for spec in WEBHOOKS:
        handler = served[str(spec.handler_id)]
        assert str(handler.reason) == spec.kind.value
        assert set(handler.operations or ()) == set(spec.operations)
        assert (handler.selector.group or "") == spec.api_group
        assert handler.selector.any_name == spec.resource
