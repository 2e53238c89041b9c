"""The mutating webhook that routes gang members to the bundled scheduler.

In namespaces labelled `scheduling.x-k8s.io/gang-scheduling: enabled`, a new pod that carries a
membership key and still names the default scheduler gets `schedulerName: podgroup-scheduler`,
so existing workloads (Kubeflow, Jobs, ReplicaSets) need no change. Every other pod is left as
it is: no patch at all.
"""

from __future__ import annotations

from typing import Any

import kopf

from podgroup_operator import constants as c
from podgroup_operator.domain.membership import declares_membership
from podgroup_operator.handlers.webhooks import WebhookId, serve


@serve(WebhookId.ROUTE_GANG_PODS)
def route_gang_pods(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
    scheduler = (body.get("spec") or {}).get("schedulerName")
    if declares_membership(dict(body)) and scheduler in (None, "", c.DEFAULT_SCHEDULER_NAME):
        patch.spec["schedulerName"] = c.SCHEDULER_NAME
