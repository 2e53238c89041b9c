"""The operator's Kopf handlers, run in this process through `kopf.testing.KopfRunner`.

A smoke test of the glue users never call directly: `kopf run -m podgroup_operator.handlers.
startup` in a thread against the dev cluster. The startup handler builds the runtime from
KUBECONFIG and starts it (its /readyz answers, it campaigns for and holds its Lease), the probe
handler answers on Kopf's liveness endpoint, and the cleanup handler releases the Lease when the
runner stops. Running in-process, the test sees what the child process hides: the Lease's
holder is this very process.

The operator's behaviour is tested with the operator as users run it, a child process (the
`operator` fixture, tests/integration/test_*.py); this copy serves one namespace with its own
Lease there and no admission webhooks, so it never competes with that one for the cluster's
webhook configurations or its Lease.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import socket
from pathlib import Path
from typing import Any

import kopf
import pytest
from kopf.testing import KopfRunner

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import KubeClient
from podgroup_operator.controllers.runtime import LEASE_CONNECTIONS, Informers, Runtime
from podgroup_operator.devcluster.process import lease_holder
from podgroup_operator.local import free_port
from podgroup_operator.settings import OperatorSettings, WebhookMode
from tests.conftest import ClusterUnderTest
from tests.kube_helpers import (
    http_get,
    kopf_registry,
    kopf_run_env,
    wait_lease_renewed,
    wait_serving,
)
from tests.waiting import until, wait_for

_SPEC = importlib.util.find_spec("podgroup_operator.handlers.startup")
assert _SPEC is not None and _SPEC.origin is not None
STARTUP = _SPEC.origin
"""The handler module as a file: `kopf run <file>` executes it afresh into the runner's registry,
where `-m` would register nothing if this process had imported the module before."""


def operator_registry(settings: OperatorSettings) -> kopf.OperatorRegistry:
    """A registry whose first startup handler hands the operator its settings, as
    `podgroup-operator run` does through `kopf.run(memo=...)`; the operator's own handlers are
    added to it when `kopf run -m` imports them."""
    registry = kopf_registry()

    @kopf.on.startup(registry=registry)
    def settle(memo: kopf.Memo, **_: Any) -> None:
        memo.settings = settings

    return registry


async def test_the_handlers_start_probe_and_clean_up_the_operator(
    cluster: ClusterUnderTest, kube: KubeClient, namespace: str, crds: None
) -> None:
    metrics_port, health_port = free_port(), free_port()
    settings = OperatorSettings(
        namespaces=[namespace],
        webhook_mode=WebhookMode.OFF,
        metrics_address=f"127.0.0.1:{metrics_port}",
        lease_namespace=namespace,
    )
    health = f"http://127.0.0.1:{health_port}/healthz"
    args = ["run", "--standalone", "--namespace", namespace, f"--liveness={health}"]
    this_process = f"{socket.gethostname()}_{os.getpid()}_"
    with pytest.MonkeyPatch.context() as env:
        kopf_run_env(env, cluster.kubeconfig)
        with KopfRunner(
            [*args, STARTUP],
            registry=operator_registry(settings),
            timeout=60,
        ) as runner:
            await asyncio.to_thread(wait_serving, f"http://127.0.0.1:{metrics_port}/readyz")
            status, probes = await asyncio.to_thread(http_get, health)
            assert status == 200 and json.loads(probes)["podgroups"] == c.API_VERSION

            async def leading() -> bool:
                return (await lease_holder(kube, namespace)).startswith(this_process)

            await wait_for(leading, 30, "this process to hold the Lease")
    assert runner.exit_code == 0 and runner.exception is None, runner.output
    assert await lease_holder(kube, namespace) == "", "the cleanup handler releases the Lease"


async def test_the_lease_is_renewed_while_the_operators_own_connections_are_all_busy(
    kubeconfig: Path, kube: KubeClient, namespace: str, crds: None
) -> None:
    """The election has a client of its own: a leader whose pool is full keeps its Lease.

    The operator's client here has exactly one connection per informer, and once synced every
    one is held by a watch, as they are held by binds and status writes in a flood. A Lease
    request sent through that pool would wait for ever: this replica would never lead.
    """
    settings = OperatorSettings(
        namespaces=[namespace],
        webhook_mode=WebhookMode.OFF,
        metrics_address="",
        lease_namespace=namespace,
    )
    watches = len(Informers.build(kube).all())
    full = KubeClient.from_kubeconfig(str(kubeconfig), limit=watches)
    lease_kube = KubeClient.from_kubeconfig(str(kubeconfig), limit=LEASE_CONNECTIONS)
    runtime = Runtime(settings, full, lease_kube=lease_kube)
    await runtime.start()
    try:
        assert runtime.elector is not None
        await until(lambda: runtime.leading is not None, "this replica to lead", 30)
        await wait_lease_renewed(kube, c.LEADER_LEASE_NAME, namespace, 10)
        assert await lease_holder(kube, namespace) == runtime.elector.identity
    finally:
        await runtime.stop()  # closes both clients
    assert await lease_holder(kube, namespace) == ""  # handed over on the way out
