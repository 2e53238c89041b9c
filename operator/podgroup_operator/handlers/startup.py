"""Operator-level glue: Kopf settings, the runtime, and the admission webhook server.

The one startup handler builds the runtime (`controllers.runtime.build_runtime`: client,
informers, controllers, in order) and starts it; Kopf keeps its run loop, the admission server
and probes. It also chooses how webhooks are served (127.0.0.1 for the dev cluster, a Service in
a real cluster) and with which certificate.

It never creates or deletes the webhook configurations: starting or stopping a process must not
change what the apiserver enforces (a graceful stop that deleted them let writes bypass quota; a
kill -9 that left them pointing at a dead port blocked every write). They are part of the
install (deploy/, `kubectl delete -k` removes them) or, on the dev cluster, written by
`podgroup-operator webhooks install|uninstall`. A self-managed operator only keeps their
caBundle in step with its CA.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from typing import Any

import kopf

from podgroup_operator import constants as c
from podgroup_operator import metrics
from podgroup_operator.adapters.kube import ApiError, KubeClient
from podgroup_operator.adapters.webhook_tls import ensure_webhook_certificate
from podgroup_operator.controllers import observe
from podgroup_operator.controllers.runtime import Runtime, build_runtime
from podgroup_operator.handlers.webhooks import MUTATING_CONFIG_NAME, VALIDATING_CONFIG_NAME
from podgroup_operator.local import free_port
from podgroup_operator.settings import OperatorSettings, WebhookCerts, WebhookMode
from podgroup_operator.tls import CertFiles, make_serving_cert

logger = logging.getLogger(__name__)

CONFIG_NAMES = tuple(sorted({VALIDATING_CONFIG_NAME, MUTATING_CONFIG_NAME}))


def _webhook_server(settings: OperatorSettings) -> tuple[kopf.WebhookServer, str]:
    """Kopf's server with our own certificates, and where the apiserver reaches it (for logs).

    Kopf re-reads the certificate files every minute and restarts the server when they change,
    so a rotated Secret (cert-manager's, or our own) is picked up without a restart.
    """
    if settings.webhook_mode is WebhookMode.LOCAL:
        host = settings.webhook_host or "127.0.0.1"
        port = settings.webhook_port or free_port()
        # A name of its own: replicas on one machine share the directory (`make_serving_cert`).
        name = f"webhook-{os.getpid()}"
        files = make_serving_cert(settings.webhook_cert_dir, name, [host, "localhost"])
        server = kopf.WebhookServer(
            addr="127.0.0.1",
            port=port,
            host=host,
            certfile=str(files.certfile),
            pkeyfile=str(files.pkeyfile),
            cafile=str(files.cafile),
        )
        return server, f"https://{host}:{port}"
    port = settings.webhook_port or 9443
    directory = settings.cluster_cert_dir
    server = kopf.WebhookServer(
        addr="0.0.0.0",
        port=port,
        certfile=str(directory / "tls.crt"),
        pkeyfile=str(directory / "tls.key"),
        cafile=str(directory / "ca.crt"),
    )
    return server, f"service {settings.service_namespace}/{settings.service_name}, port {port}"


async def _keep_certificate(kube: KubeClient, settings: OperatorSettings) -> CertFiles:
    """Self-managed: the Secret's certificate (made or rotated when due), as files, trusted."""
    return await ensure_webhook_certificate(
        kube,
        settings.service_namespace,
        settings.webhook_secret_name,
        settings.service_name,
        CONFIG_NAMES,
        cert_dir=settings.cluster_cert_dir,
    )


async def _rotate_periodically(kube: KubeClient, settings: OperatorSettings) -> None:
    """Re-check the self-managed certificate for ever; Kopf reloads when the files change.

    A failed check is logged and retried next period: the certificate in use stays valid for
    months after it becomes due, so one failure must not stop the operator.
    """
    while True:
        await asyncio.sleep(settings.webhook_cert_check_seconds)
        try:
            await _keep_certificate(kube, settings)
        except (ApiError, OSError, RuntimeError) as exc:
            logger.warning("webhook certificate not checked, retrying later: %s", exc)


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
        if operator_settings.webhook_mode is WebhookMode.CLUSTER and (
            operator_settings.webhook_certs is WebhookCerts.SELF_MANAGED
        ):
            await _keep_certificate(runtime.kube, operator_settings)
            memo.rotation = asyncio.create_task(
                _rotate_periodically(runtime.kube, operator_settings)
            )
        server, where = _webhook_server(operator_settings)
        webhooks = ("127.0.0.1", int(server.port or 0))
        settings.admission.server = server
        # Kopf must not write configurations either (see the module docstring).
        settings.admission.managed = None
        logger.info(
            "admission webhooks served (%s): %s; their configurations are the install's "
            "(on the dev cluster: podgroup-operator webhooks install)",
            operator_settings.webhook_mode,
            where,
        )
    await runtime.start()
    memo.sigterm = asyncio.create_task(_hand_over_on_sigterm(runtime, memo))
    metrics.observe(runtime)
    memo.observer = None
    if operator_settings.metrics_address:
        host, _colon, port = operator_settings.metrics_address.rpartition(":")
        memo.observer = await observe.serve(
            runtime, host or "0.0.0.0", int(port), webhooks=webhooks
        )


async def _hand_over_on_sigterm(runtime: Runtime, memo: kopf.Memo) -> None:
    """On SIGTERM, hand the Lease over at once, and stop Kopf through its stop flag.

    Kopf runs cleanup handlers only once it has stopped its own tasks (a worker per PodGroup
    among them), too late for a quick hand-over (docs/decisions/009-leader-hand-over.md). Kopf's
    own handler is kept where there are no flags to use (an embedding without `main.run`,
    `KopfRunner`'s thread) and for SIGINT.

    Installed once Kopf is ready (its `ready_flag`, raised after the startup handlers): Kopf
    installs its own signal handlers as it starts, and the last one installed is the one
    called; installed from the startup handler, ours came first and was replaced."""
    stop: asyncio.Event | None = memo.get("stop_flag")
    ready: asyncio.Event | None = memo.get("ready_flag")
    if stop is None or ready is None or threading.current_thread() is not threading.main_thread():
        return
    await ready.wait()

    def on_sigterm() -> None:
        logger.info("SIGTERM: handing the Lease over, then stopping")
        memo.hand_over = asyncio.ensure_future(runtime.hand_over())
        stop.set()

    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, on_sigterm)


@kopf.on.cleanup()
async def close(memo: kopf.Memo, **_: Any) -> None:
    runtime: Runtime = memo.runtime
    for task in (memo.get("rotation"), memo.get("sigterm")):
        if task is not None:
            task.cancel()  # the second still waiting for Kopf to be ready, if it stops first
    metrics.observe(None)
    if memo.observer is not None:
        await memo.observer.cleanup()
    await runtime.stop()


@kopf.on.probe(id="podgroups")
def probe(**_: Any) -> str:
    return c.API_VERSION
