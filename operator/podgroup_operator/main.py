"""`podgroup-operator run`: Kopf settings, the handler modules, and the webhook server.

Importing the handler modules registers them with Kopf; this module only decides how the
operator runs (namespaces, webhook serving) and then hands control to `kopf.run`.
"""

from __future__ import annotations

import logging
import os

import kopf

from podgroup_operator import logs
from podgroup_operator.settings import OperatorSettings, WebhookMode


def resolve_webhook_mode(mode: WebhookMode) -> WebhookMode:
    """AUTO means LOCAL on the dev cluster (recognised by its kubeconfig), CLUSTER elsewhere."""
    if mode is not WebhookMode.AUTO:
        return mode
    from podgroup_operator.devcluster.cluster import is_dev_cluster_kubeconfig

    kubeconfig = os.environ.get("KUBECONFIG", os.path.expanduser("~/.kube/config"))
    paths = [p for p in kubeconfig.split(os.pathsep) if p]
    if paths and is_dev_cluster_kubeconfig(paths[0]):
        return WebhookMode.LOCAL
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return WebhookMode.CLUSTER
    # Outside a cluster and not on the dev cluster: the apiserver cannot reach us.
    return WebhookMode.OFF


def run(
    *,
    namespaces: list[str],
    webhook_mode: str = "auto",
    webhook_host: str | None = None,
    webhook_port: int | None = None,
    liveness: str | None = None,
) -> int:
    # Registers every handler with Kopf's default registry.
    from podgroup_operator import handlers  # noqa: F401

    settings = OperatorSettings(
        namespaces=namespaces,
        webhook_mode=resolve_webhook_mode(WebhookMode(webhook_mode)),
        webhook_host=webhook_host,
        webhook_port=webhook_port,
    )
    logs.configure(logging.INFO)  # every line bounded: no object can flood the log
    # One line per handled event drowns what matters; our own modules log decisions at INFO.
    for noisy in ("kopf.objects", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    kopf.run(
        clusterwide=not namespaces,
        namespaces=namespaces,
        standalone=True,
        liveness_endpoint=liveness,
        memo=kopf.Memo(settings=settings),
    )
    return 0
