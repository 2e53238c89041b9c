"""The admission webhooks we serve, declared once, and their configuration objects.

Kopf can manage webhook configurations itself, but not `namespaceSelector`, which we need to
intercept only opted-in namespaces and never kube-system or our own namespace. So Kopf serves
(one route per handler id) and the configurations are generated from this table, pointing each
at its route: deploy/base/webhooks.yaml for a cluster, `podgroup-operator webhooks install` for
the dev cluster (manifests.py). The running operator never writes them.

`WEBHOOKS` is the one declaration: `serve` builds each handler's Kopf decorator from its entry
(kind, resource, operations, id), so the route Kopf serves and the configuration that points at
it cannot drift apart; an entry without a handler fails `tests/unit/test_webhook_table.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

import kopf

from podgroup_operator import constants as c
from podgroup_operator.handlers.instrument import Handler, timed

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
"""An admission operation, as Kopf's decorators and the configurations spell it."""
Scope = Literal["Namespaced", "Cluster"]
"""The scope of the resources a webhook's rule matches."""


class WebhookKind(StrEnum):
    VALIDATING = "validating"
    MUTATING = "mutating"


class WebhookId(StrEnum):
    """Kopf handler ids, which are also the webhooks' URL paths."""

    VALIDATE_PODGROUP = "validate-podgroup"
    VALIDATE_TOPOLOGY = "validate-topology"
    ROUTE_GANG_PODS = "route-gang-pods"
    QUOTA_PODGROUP = "quota-podgroup"
    QUOTA_POD = "quota-pod"
    VALIDATE_ELASTIC_QUOTA = "validate-elasticquota"
    VALIDATE_KOORD_ELASTIC_QUOTA = "validate-koordinator-elasticquota"


class FailurePolicy(StrEnum):
    FAIL = "Fail"
    IGNORE = "Ignore"


@dataclass(frozen=True)
class WebhookSpec:
    """One webhook: which Kopf handler id serves it, what it intercepts, and how it fails."""

    handler_id: WebhookId
    kind: WebhookKind
    api_group: str
    resource: str
    operations: tuple[Operation, ...]
    failure_policy: FailurePolicy
    checks: str
    """What the webhook checks or changes, in a sentence (docs/reference/webhooks.md)."""
    why: str
    """Why this failure policy: written into the docs and kept next to the decision."""
    opt_in_label: str | None = None
    """Namespace label that must be `enabled`; None intercepts every namespace but ours."""
    scope: Scope = "Namespaced"
    """Cluster: a cluster-scoped resource, intercepted whatever its name (no namespace to
    select by)."""
    extra: dict[str, Any] = field(default_factory=dict)


VALIDATING_CONFIG_NAME = f"{c.OPERATOR_NAME}.{c.GROUP}"
MUTATING_CONFIG_NAME = f"{c.OPERATOR_NAME}.{c.GROUP}"

WEBHOOKS: list[WebhookSpec] = [
    WebhookSpec(
        handler_id=WebhookId.VALIDATE_PODGROUP,
        kind=WebhookKind.VALIDATING,
        api_group=c.GROUP,
        resource=c.PLURAL,
        operations=("CREATE", "UPDATE"),
        failure_policy=FailurePolicy.FAIL,
        checks="Refuses a PodGroup whose spec does not validate (bounds, quantities, resource "
        "names, totalResources covering minResources, a topologyConstraint's levels among its "
        "Topology's, a sub-group's among the one it inherits) with every problem listed, each "
        "naming its field and the fix; an update that leaves the spec as stored passes. A "
        "topologyConstraint naming a Topology that does not exist is admitted with a warning.",
        why="An invalid PodGroup admitted while the operator is down would wedge its gang; "
        "refusing writes for that time is the smaller harm (the CRD schema still covers most).",
    ),
    WebhookSpec(
        handler_id=WebhookId.VALIDATE_TOPOLOGY,
        kind=WebhookKind.VALIDATING,
        api_group=c.GROUP,
        resource=c.TOPOLOGY_PLURAL,
        operations=("CREATE", "UPDATE"),
        failure_policy=FailurePolicy.FAIL,
        scope="Cluster",
        checks="Refuses a Topology whose levels break the rules (a repeated node label, "
        "kubernetes.io/hostname before the last level), each naming its field and the fix; an "
        "update that leaves the spec as stored passes.",
        why="A Topology admitted with rules the schema cannot check broken (hostname before the "
        "last level) would keep every gang constrained to it waiting; Topologies are written "
        "rarely, by administrators, so refusing them while the operator is down costs little.",
    ),
    WebhookSpec(
        handler_id=WebhookId.ROUTE_GANG_PODS,
        kind=WebhookKind.MUTATING,
        api_group="",
        resource="pods",
        operations=("CREATE",),
        failure_policy=FailurePolicy.FAIL,
        opt_in_label=c.NAMESPACE_LABEL_GANG_SCHEDULING,
        checks="Gives a new pod that carries a membership key and names the default scheduler the "
        "first of the operator's scheduler names (`run --scheduler-name`); every other pod is "
        "left unpatched.",
        why="Only namespaces that opted in are intercepted. There, a member pod admitted "
        "unrouted would be placed alone by the default scheduler: the partial-gang deadlock the "
        "namespace opted out of. Refusing pod creation while the operator is down is safer.",
    ),
    WebhookSpec(
        handler_id=WebhookId.QUOTA_PODGROUP,
        kind=WebhookKind.VALIDATING,
        api_group=c.GROUP,
        resource=c.PLURAL,
        operations=("CREATE", "UPDATE"),
        failure_policy=FailurePolicy.FAIL,
        opt_in_label=c.NAMESPACE_LABEL_QUOTA_RESERVATION,
        checks="Admits a PodGroup's totalResources only when the namespace's free ResourceQuota "
        "covers it, and records the reservation (not for dry-run requests).",
        why="A PodGroup admitted while the operator is down would carry totalResources that no "
        "record holds: it would believe in a reservation that other pods may take. Only opted-in "
        "namespaces wait; the record makes the webhook safe to retry.",
        # Admission writes the durable reservation record, except for dry-run requests.
        extra={"sideEffects": "NoneOnDryRun"},
    ),
    WebhookSpec(
        handler_id=WebhookId.QUOTA_POD,
        kind=WebhookKind.VALIDATING,
        api_group="",
        resource="pods",
        operations=("CREATE",),
        failure_policy=FailurePolicy.FAIL,
        opt_in_label=c.NAMESPACE_LABEL_QUOTA_RESERVATION,
        checks="Keeps members within their group's reservation and every other pod out of reserved "
        "quota.",
        why="Ignoring failures would let any pod created while the operator is down eat quota "
        "that gangs reserved: the partial-gang deadlock the namespace opted in to prevent. "
        "Only opted-in namespaces are intercepted, never kube-system or the operator's own.",
    ),
    WebhookSpec(
        handler_id=WebhookId.VALIDATE_ELASTIC_QUOTA,
        kind=WebhookKind.VALIDATING,
        api_group=c.GROUP,
        resource=c.ELASTIC_QUOTA_PLURAL,
        operations=("CREATE", "UPDATE"),
        failure_policy=FailurePolicy.FAIL,
        checks="Refuses an ElasticQuota whose spec or Koordinator quota keys do not validate "
        "(guarantee above min, min above max, a weight or minRunSeconds out of bounds, a parent "
        "that is not a quota name or is the quota itself, an alias disagreeing with its spec "
        "field) with every problem listed, each naming its field and the fix; an update that "
        "leaves them as stored passes.",
        why="A quota admitted with min above max or a guarantee above min would be left out of "
        "its tree, and its gangs would wait unexplained; quotas are written rarely, by "
        "administrators, so refusing them while the operator is down costs little.",
    ),
    WebhookSpec(
        handler_id=WebhookId.VALIDATE_KOORD_ELASTIC_QUOTA,
        kind=WebhookKind.VALIDATING,
        api_group=c.KOORD_QUOTA_GROUP,
        resource=c.ELASTIC_QUOTA_PLURAL,
        operations=("CREATE", "UPDATE"),
        failure_policy=FailurePolicy.FAIL,
        checks="The same checks for an ElasticQuota of Koordinator's group "
        "(scheduling.sigs.k8s.io), which the operator reads as one of its own; Koordinator's "
        "internal quotas (its root, system and default quotas) and updates of Koordinator "
        "annotations the operator does not read always pass.",
        why="The same as for our group: the operator schedules by these quotas too.",
    ),
]


def serve(handler_id: WebhookId) -> Callable[[Handler], Any]:
    """The Kopf decorator for the webhook `WEBHOOKS` declares under `handler_id`, with every
    answer timed (handlers/instrument.py)."""
    spec = next(w for w in WEBHOOKS if w.handler_id is handler_id)
    on = kopf.on.validate if spec.kind is WebhookKind.VALIDATING else kopf.on.mutate
    version = c.VERSION if spec.api_group else "v1"
    register = on(
        spec.api_group, version, spec.resource, id=handler_id, operations=list(spec.operations)
    )

    def decorate(handler: Handler) -> Any:
        return register(timed(handler_id)(handler))

    return decorate


def _namespace_selector(spec: WebhookSpec, protected: list[str]) -> dict[str, Any]:
    expressions: list[dict[str, Any]] = [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": protected}
    ]
    if spec.opt_in_label:
        expressions.append({"key": spec.opt_in_label, "operator": "In", "values": [c.OPT_IN_VALUE]})
    return {"matchExpressions": expressions}


def configurations(
    client_config: dict[str, Any], protected_namespaces: list[str]
) -> dict[WebhookKind, dict[str, Any]]:
    """Validating and mutating configurations for WEBHOOKS, routed to Kopf's handler paths.

    `client_config` is either {"url": base} or {"service": {...}} plus "caBundle"; each webhook
    gets the handler id appended to its URL or service path, as Kopf's server routes them.
    """
    result: dict[WebhookKind, dict[str, Any]] = {}
    for kind in WebhookKind:
        entries = []
        for spec in (w for w in WEBHOOKS if w.kind is kind):
            config = dict(client_config)
            if "url" in config:
                config["url"] = f"{config['url'].rstrip('/')}/{spec.handler_id}"
            else:
                config["service"] = {**config["service"], "path": f"/{spec.handler_id}"}
            entries.append(
                {
                    "name": f"{spec.handler_id}.{c.GROUP}",
                    "clientConfig": config,
                    "rules": [
                        {
                            "apiGroups": [spec.api_group],
                            "apiVersions": ["*"],
                            "resources": [spec.resource],
                            "operations": list(spec.operations),
                            "scope": spec.scope,
                        }
                    ],
                    "failurePolicy": spec.failure_policy.value,
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": 10,
                    "matchPolicy": "Equivalent",
                    **(
                        {"namespaceSelector": _namespace_selector(spec, protected_namespaces)}
                        if spec.scope == "Namespaced"
                        else {}
                    ),
                    **spec.extra,
                }
            )
        if entries:
            api_kind = (
                "ValidatingWebhookConfiguration"
                if kind is WebhookKind.VALIDATING
                else "MutatingWebhookConfiguration"
            )
            result[kind] = {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": api_kind,
                "metadata": {
                    "name": VALIDATING_CONFIG_NAME
                    if kind is WebhookKind.VALIDATING
                    else MUTATING_CONFIG_NAME,
                    "labels": {c.LABEL_MANAGED_BY: c.OPERATOR_NAME},
                },
                "webhooks": entries,
            }
    return result
