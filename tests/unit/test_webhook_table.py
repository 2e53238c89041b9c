"""The webhook table and the handlers Kopf serves agree: one route per entry, nothing else.

`handlers/webhooks.serve` builds the decorators from the table; this checks the result in
Kopf's own registry (it has no public listing of handlers, hence `_webhooks`)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator

import kopf
import pytest

import podgroup_operator.handlers.admission
import podgroup_operator.handlers.quota
import podgroup_operator.handlers.routing
from podgroup_operator.handlers.webhooks import WEBHOOKS

HANDLER_MODULES = (
    podgroup_operator.handlers.admission,
    podgroup_operator.handlers.quota,
    podgroup_operator.handlers.routing,
)


@pytest.fixture
def registry() -> Iterator[kopf.OperatorRegistry]:
    """A fresh registry with only the handler modules registered in it: other tests (Kopf
    runners) replace Kopf's default registry, so the one filled at import may be gone."""
    previous = kopf.get_default_registry()
    fresh = kopf.OperatorRegistry()
    kopf.set_default_registry(fresh)
    try:
        for module in HANDLER_MODULES:
            importlib.reload(module)
        yield fresh
    finally:
        kopf.set_default_registry(previous)


def _served(registry: kopf.OperatorRegistry) -> dict[str, kopf.WebhookHandler]:
    return {str(h.id): h for h in registry._webhooks.get_all_handlers()}


def test_every_declared_webhook_has_exactly_one_kopf_handler(
    registry: kopf.OperatorRegistry,
) -> None:
    handlers = list(registry._webhooks.get_all_handlers())
    assert sorted(str(h.id) for h in handlers) == sorted(str(w.handler_id) for w in WEBHOOKS)


def test_each_handler_intercepts_what_its_entry_declares(registry: kopf.OperatorRegistry) -> None:
    served = _served(registry)
    for spec in WEBHOOKS:
        handler = served[str(spec.handler_id)]
        assert str(handler.reason) == spec.kind.value
        assert set(handler.operations or ()) == set(spec.operations)
        assert (handler.selector.group or "") == spec.api_group
        assert handler.selector.any_name == spec.resource
