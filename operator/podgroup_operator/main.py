"""`podgroup-operator run`: Kopf settings, the handler modules, and the webhook server.

Importing the handler modules registers them with Kopf; this module only decides how the
operator runs (namespaces, webhook serving) and then hands control to `kopf.run`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path

import kopf

from podgroup_operator import constants as c
from podgroup_operator import logs, tuning
from podgroup_operator.adapters import heap
from podgroup_operator.local import is_dev_cluster_kubeconfig
from podgroup_operator.settings import (
    OperatorSettings,
    WebhookCerts,
    WebhookMode,
    max_pd_volumes_from_env,
)


def resolve_webhook_mode(mode: WebhookMode) -> WebhookMode:
    """AUTO means LOCAL on the dev cluster (recognised by its kubeconfig), CLUSTER elsewhere."""
    if mode is not WebhookMode.AUTO:
        return mode

    kubeconfig = os.environ.get("KUBECONFIG", os.path.expanduser("~/.kube/config"))
    paths = [p for p in kubeconfig.split(os.pathsep) if p]
    if paths and is_dev_cluster_kubeconfig(paths[0]):
        return WebhookMode.LOCAL
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return WebhookMode.CLUSTER
    # Outside a cluster and not on the dev cluster: the apiserver cannot reach us.
    return WebhookMode.OFF


def credentials_problem() -> str | None:
    """Why no API client can be made from the current KUBECONFIG (or in-cluster), or None."""
    from podgroup_operator.adapters.kube import KubeClient, KubeconfigError

    try:
        KubeClient.from_kubeconfig()
    except KubeconfigError as exc:
        return str(exc)
    return None


def run(
    *,
    namespaces: list[str],
    webhook_mode: str = "auto",
    webhook_host: str | None = None,
    webhook_port: int | None = None,
    liveness: str | None = None,
    leader_election: bool = True,
    lease_namespace: str | None = None,
    metrics_address: str = "0.0.0.0:8081",
    webhook_certs: str = "mounted",
    cluster_cert_dir: str | None = None,
    log_level: str = "info",
    log_format: str = "text",
    scheduler_names: list[str] | None = None,
    write_process: bool = True,
    bind_concurrency: int | None = None,
    gang_group_trust: list[str] | None = None,
    nonstrict_hold_seconds: float = tuning.NONSTRICT_HOLD_SECONDS,
    provisioning_class: str | None = None,
    dialect_crds: str = c.DialectCRDs.OFF,
    reservation_timeout_seconds: float = tuning.RESERVATION_TIMEOUT_SECONDS,
) -> int:
    settings = OperatorSettings(
        namespaces=namespaces,
        scheduler_names=scheduler_names or [c.SCHEDULER_NAME],
        leader_election=leader_election,
        write_process=write_process,
        bind_concurrency=bind_concurrency,
        nonstrict_hold_seconds=nonstrict_hold_seconds,
        reservation_timeout_seconds=reservation_timeout_seconds,
        metrics_address=metrics_address,
        webhook_mode=resolve_webhook_mode(WebhookMode(webhook_mode)),
        webhook_host=webhook_host,
        webhook_port=webhook_port,
        webhook_certs=WebhookCerts(webhook_certs),
        gang_group_trust=gang_group_trust or [],
        provisioning_class=provisioning_class,
        dialect_crds=c.DialectCRDs(dialect_crds),
    )
    try:
        settings.max_pd_volumes = max_pd_volumes_from_env(os.environ.get(c.MAX_PD_VOLUMES_ENV))
    except ValueError as exc:
        print(f"podgroup-operator: {exc}", file=sys.stderr)
        return 2
    if cluster_cert_dir:
        settings.cluster_cert_dir = Path(cluster_cert_dir)
    if lease_namespace:
        settings.lease_namespace = lease_namespace
    level = logging.getLevelNamesMapping()[log_level.upper()]
    # Every line bounded: no object can flood the log.
    logs.configure(level, log_format=logs.LogFormat(log_format))
    problem = credentials_problem()
    if problem is not None:
        # One line and a distinct exit code, not Kopf retrying a login for ever.
        print(f"podgroup-operator: {problem}", file=sys.stderr)
        return 2
    # Importing the handler modules registers them with Kopf's default registry.
    from podgroup_operator.handlers import startup  # noqa: F401

    if settings.webhook_mode is WebhookMode.OFF:
        logging.getLogger(__name__).info(
            "admission webhooks off (the API server cannot reach this process): PodGroups are "
            "checked by the CRD schema only, and quota reservation and pod routing are not enforced"
        )
    else:
        from podgroup_operator.handlers import admission, quota, routing  # noqa: F401
    # One line per handled event drowns what matters; our own modules log decisions at INFO.
    for noisy in ("kopf.objects", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
    # Modules, Kopf and the clients are loaded: never garbage, so out of every collection.
    heap.configure()
    # SIGTERM hands the Lease over, then raises the stop flag; it is handled so once Kopf is
    # ready (handlers/startup.py).
    stop_flag, ready_flag = asyncio.Event(), asyncio.Event()
    kopf.run(
        clusterwide=not namespaces,
        namespaces=namespaces,
        standalone=True,
        liveness_endpoint=liveness,
        memo=kopf.Memo(settings=settings, stop_flag=stop_flag, ready_flag=ready_flag),
        stop_flag=stop_flag,
        ready_flag=ready_flag,
    )
    return 0
