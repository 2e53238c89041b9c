"""Operator-level glue: Kopf settings, the runtime, and the admission webhook server.

The one startup handler builds the runtime (`controllers.runtime.build_runtime`: client,
informers, controllers, in order) and starts it; Kopf keeps its run loop, the admission server
and probes. It also chooses how webhooks are served (127.0.0.1 for the dev cluster, a Service in
a real cluster), makes certificates with `cryptography`, and writes the webhook configurations
(see webhooks.py for why we write them).
"""

from __future__ import annotations

import base64
import logging
from pathlib import Path
from typing import Any

import kopf

from podgroup_operator import constants as c
from podgroup_operator import metrics
from podgroup_operator.adapters.kube import (
    MUTATING_WEBHOOKS,
    VALIDATING_WEBHOOKS,
    ApiError,
    KubeClient,
)
from podgroup_operator.controllers import observe
from podgroup_operator.controllers.runtime import Runtime, build_runtime
from podgroup_operator.handlers.webhooks import WebhookKind, configurations
from podgroup_operator.local import free_port
from podgroup_operator.settings import OperatorSettings, WebhookMode
from podgroup_operator.tls import make_serving_cert

logger = logging.getLogger(__name__)

CLUSTER_CERT_DIR = Path("/etc/podgroup-operator/tls")
"""Where deploy/ mounts the webhook Secret (tls.crt, tls.key, ca.crt) in a real cluster."""


def _webhook_server(settings: OperatorSettings) -> tuple[kopf.WebhookServer, dict[str, Any]]:
    """Kopf's server with our own certificates, and the clientConfig the apiserver will use."""
    if settings.webhook_mode is WebhookMode.LOCAL:
        host = settings.webhook_host or "127.0.0.1"
        port = settings.webhook_port or free_port()
        files = make_serving_cert(settings.webhook_cert_dir, "webhook", [host, "localhost"])
        server = kopf.WebhookServer(
            addr="127.0.0.1",
            port=port,
            host=host,
            certfile=str(files.certfile),
            pkeyfile=str(files.pkeyfile),
            cafile=str(files.cafile),
        )
        client_config: dict[str, Any] = {"url": f"https://{host}:{port}"}
        ca = files.cafile.read_bytes()
    else:
        port = settings.webhook_port or 9443
        server = kopf.WebhookServer(
            addr="0.0.0.0",
            port=port,
            certfile=str(CLUSTER_CERT_DIR / "tls.crt"),
            pkeyfile=str(CLUSTER_CERT_DIR / "tls.key"),
            cafile=str(CLUSTER_CERT_DIR / "ca.crt"),
        )
        client_config = {
            "service": {
                "namespace": settings.service_namespace,
                "name": settings.service_name,
                "port": 443,
            }
        }
        ca = (CLUSTER_CERT_DIR / "ca.crt").read_bytes()
    client_config["caBundle"] = base64.b64encode(ca).decode()
    return server, client_config


async def register_webhooks(
    kube: KubeClient, client_config: dict[str, Any], settings: OperatorSettings
) -> None:
    protected = sorted({"kube-system", settings.operator_namespace})
    for kind, body in configurations(client_config, protected).items():
        target = VALIDATING_WEBHOOKS if kind is WebhookKind.VALIDATING else MUTATING_WEBHOOKS
        await kube.apply_json(target, body)


async def unregister_webhooks(kube: KubeClient) -> None:
    from podgroup_operator.handlers.webhooks import MUTATING_CONFIG_NAME, VALIDATING_CONFIG_NAME

    for target, name in (
        (VALIDATING_WEBHOOKS, VALIDATING_CONFIG_NAME),
        (MUTATING_WEBHOOKS, MUTATING_CONFIG_NAME),
    ):
        try:
            await kube.delete(target, name)
        except ApiError as exc:
            if not exc.not_found:
                raise


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    operator_settings: OperatorSettings = memo.settings
    runtime = build_runtime(operator_settings)
    memo.runtime = runtime
    # We post our own Events; Kopf's would land on every pod a handler logs about.
    settings.posting.enabled = False
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.networking.request_timeout = 60
    settings.batching.worker_limit = 2000
    webhooks: tuple[str, int] | None = None
    if operator_settings.webhook_mode is not WebhookMode.OFF:
        server, client_config = _webhook_server(operator_settings)
        webhooks = ("127.0.0.1", int(server.port or 0))
        settings.admission.server = server
        settings.admission.managed = None
        await register_webhooks(runtime.kube, client_config, operator_settings)
        logger.info(
            "admission webhooks served (%s): %s",
            operator_settings.webhook_mode,
            client_config.get("url") or client_config.get("service"),
        )
    await runtime.start()
    metrics.observe(runtime)
    memo.observer = None
    if operator_settings.metrics_address:
        host, _colon, port = operator_settings.metrics_address.rpartition(":")
        memo.observer = await observe.serve(
            runtime, host or "0.0.0.0", int(port), webhooks=webhooks
        )


@kopf.on.cleanup()
async def close(memo: kopf.Memo, **_: Any) -> None:
    operator_settings: OperatorSettings = memo.settings
    runtime: Runtime = memo.runtime
    if operator_settings.webhook_mode is WebhookMode.LOCAL:
        # A local operator that stopped must not leave the apiserver calling a dead port
        # (Fail policies would block every PodGroup write). In a cluster, replicas share it.
        await unregister_webhooks(runtime.kube)
    metrics.observe(None)
    if memo.observer is not None:
        await memo.observer.cleanup()
    await runtime.stop()


@kopf.on.probe(id="podgroups")
def probe(**_: Any) -> str:
    return c.API_VERSION
