"""The mutating webhook that routes gang members to the bundled scheduler.

In namespaces labelled `scheduling.x-k8s.io/gang-scheduling: enabled`, a new pod that carries a
membership key and still names the default scheduler gets the first of the operator's scheduler
names (`run --scheduler-name`, default `podgroup-scheduler`), so existing workloads (Kubeflow,
Jobs, ReplicaSets) need no change. Every other pod is left as it is: no patch at all.
"""

from __future__ import annotations

from typing import Any

import kopf

from podgroup_operator.domain.membership import routed_scheduler
from podgroup_operator.handlers.webhooks import WebhookId, serve


@serve(WebhookId.ROUTE_GANG_PODS)
def route_gang_pods(body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, **_: Any) -> None:
    scheduler = routed_scheduler(dict(body), memo.settings.scheduler_names)
    if scheduler is not None:
        patch.spec["schedulerName"] = scheduler
