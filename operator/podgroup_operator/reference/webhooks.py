"""docs/reference/webhooks.md: the admission webhooks, from `handlers/webhooks.WEBHOOKS` and the
configurations generated from it (`manifests.cluster_webhooks`, deploy/base/webhooks.yaml)."""

from __future__ import annotations

from typing import Any

from podgroup_operator.handlers.webhooks import WEBHOOKS, WebhookSpec
from podgroup_operator.manifests import OPERATOR_NAMESPACE, cluster_webhooks
from podgroup_operator.reference.markdown import code, table


def _entries() -> dict[str, dict[str, Any]]:
    """The generated configuration entry of each webhook, by its path."""
    found: dict[str, dict[str, Any]] = {}
    for configuration in cluster_webhooks():
        for entry in configuration["webhooks"]:
            found[entry["clientConfig"]["service"]["path"]] = {
                **entry,
                "configuration": configuration["kind"],
            }
    return found


def _resource(spec: WebhookSpec) -> str:
    return code(f"{spec.resource}.{spec.api_group}" if spec.api_group else spec.resource)


def _namespaces(entry: dict[str, Any]) -> str:
    """The namespaceSelector in words."""
    selector = entry.get("namespaceSelector")
    if selector is None:
        return "cluster-scoped: every object"
    parts = []
    for expression in selector["matchExpressions"]:
        if expression["key"] == "kubernetes.io/metadata.name":
            verb = "all but" if expression["operator"] == "NotIn" else "only"
            parts.append(f"{verb} " + ", ".join(code(v) for v in expression["values"]))
        else:
            verb = "labelled" if expression["operator"] == "In" else "not labelled"
            labels = (code(f"{expression['key']}={value}") for value in expression["values"])
            parts.append(f"{verb} " + " or ".join(labels))
    return "; ".join(parts)


def render() -> str:
    """The whole page."""
    entries = _entries()
    rows = []
    details = []
    for spec in WEBHOOKS:
        path = f"/{spec.handler_id}"
        entry = entries[path]
        rows.append(
            (
                code(str(spec.handler_id)),
                code(path),
                entry["configuration"],
                _resource(spec),
                ", ".join(entry["rules"][0]["operations"]),
                _namespaces(entry),
                entry["failurePolicy"],
                entry["sideEffects"],
                f"{entry['timeoutSeconds']} s",
            )
        )
        details.append(
            f"### `{spec.handler_id}`\n\n"
            f"{spec.checks}\n\n"
            f"**Failure policy {entry['failurePolicy']}.** {spec.why}\n"
        )
    headers = (
        "Webhook",
        "Path",
        "Configuration",
        "Resource",
        "Operations",
        "Namespaces",
        "Failure policy",
        "Side effects",
        "Timeout",
    )
    intro = (
        "# Admission webhooks\n\n"
        "The webhooks the operator serves, generated from its webhook table "
        "(`operator/podgroup_operator/handlers/webhooks.py`), from which Kopf's routes and the "
        "configurations in `deploy/base/webhooks.yaml` (`podgroup-operator manifests webhooks`) "
        "are generated too. Each webhook is served at its path, on the operator's Service "
        f"(`deploy/`) or on the URL given to `podgroup-operator webhooks install` (the dev "
        f"cluster). The namespaces listed are those of `deploy/`; it installs into "
        f"{code(OPERATOR_NAMESPACE)}.\n"
    )
    return "\n".join([intro, table(headers, rows), *details])
