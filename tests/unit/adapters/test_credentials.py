"""The client's token stays valid: refreshed on a timer by the loader's hook, reloaded on 401.

`Credentials` is driven with fake loaders (time passed in); the transport's 401 path runs
against a local aiohttp server that accepts one token only.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp.web
from kubernetes import client as k8s_client
from kubernetes.config.incluster_config import InClusterConfigLoader

from podgroup_operator.adapters.credentials import Credentials, bearer_token
from podgroup_operator.adapters.kube import AiohttpTransport, Request
from podgroup_operator.local import free_port


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Source:
    """A loader whose token is whatever `token` says when it runs; counts its runs."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.loads = 0
        self.hooks = 0

    def configuration(self) -> Any:
        def hook(configuration: Any) -> None:
            self.hooks += 1
            configuration.api_key["BearerToken"] = f"Bearer {self.token}"

        return SimpleNamespace(
            api_key={"BearerToken": f"Bearer {self.token}"}, refresh_api_key_hook=hook
        )

    def load(self) -> Any:
        self.loads += 1
        return self.configuration()


def test_bearer_token_strips_either_prefix() -> None:
    assert bearer_token(SimpleNamespace(api_key={"authorization": "bearer abc"})) == "abc"
    assert bearer_token(SimpleNamespace(api_key={"BearerToken": "Bearer xyz"})) == "xyz"
    assert bearer_token(SimpleNamespace(api_key={})) is None


async def test_the_hook_runs_only_when_a_check_is_due() -> None:
    source, clock = Source("one"), Clock()
    credentials = Credentials(source.load, source.configuration(), check_every=10, clock=clock)
    assert await credentials.headers() == {"Authorization": "Bearer one"}
    source.token = "two"
    clock.now += 9
    assert await credentials.headers() == {"Authorization": "Bearer one"}  # not due: cached
    assert source.hooks == 0
    clock.now += 1
    assert await credentials.headers() == {"Authorization": "Bearer two"}
    assert source.hooks == 1
    assert source.loads == 0  # a timer check never reloads the kubeconfig


async def test_a_401_reloads_once_for_every_request_that_met_the_stale_token() -> None:
    source = Source("old")
    credentials = Credentials(source.load, source.configuration(), clock=Clock())
    seen = credentials.generation
    source.token = "new"
    await asyncio.gather(*(credentials.unauthorized(seen) for _ in range(5)))
    assert source.loads == 1
    assert await credentials.headers() == {"Authorization": "Bearer new"}


async def test_a_rotated_service_account_token_file_is_read_again(tmp_path: Path) -> None:
    """kubernetes' own in-cluster loader (its hook re-reads the file once its minute is up)."""
    token_file, ca_file = tmp_path / "token", tmp_path / "ca.crt"
    token_file.write_text("first")
    ca_file.write_text("not empty")
    environ = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}

    def load() -> Any:
        configuration = k8s_client.Configuration()
        InClusterConfigLoader(str(token_file), str(ca_file), environ=environ).load_and_set(
            configuration
        )
        return configuration

    clock = Clock()
    credentials = Credentials(load, load(), check_every=10, clock=clock)
    assert await credentials.headers() == {"Authorization": "Bearer first"}
    token_file.write_text("second")
    # The kubelet rotated the file; a forced reload (what a 401 does) reads it at once.
    await credentials.unauthorized(credentials.generation)
    assert await credentials.headers() == {"Authorization": "Bearer second"}


async def test_the_transport_retries_a_401_with_the_refreshed_token() -> None:
    accepted = "fresh"
    seen: list[str] = []

    async def handler(request: aiohttp.web.Request) -> aiohttp.web.Response:
        seen.append(request.headers.get("Authorization", ""))
        if request.headers.get("Authorization") != f"Bearer {accepted}":
            return aiohttp.web.json_response({"reason": "Unauthorized"}, status=401)
        return aiohttp.web.json_response({"kind": "PodList", "items": []})

    app = aiohttp.web.Application()
    app.router.add_get("/api/v1/pods", handler)
    runner = aiohttp.web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await aiohttp.web.TCPSite(runner, "127.0.0.1", port).start()
    source = Source("stale")
    credentials = Credentials(source.load, source.configuration(), clock=Clock())
    transport = AiohttpTransport(f"http://127.0.0.1:{port}", credentials=credentials)
    try:
        source.token = accepted  # what the exec plugin hands out when run again
        status, body = await transport.send(Request("GET", "/api/v1/pods"))
        assert status == 200 and body["kind"] == "PodList"
        assert seen == ["Bearer stale", "Bearer fresh"]
        assert source.loads == 1
        # Without a way to a new token, the 401 is what the caller gets (no loop).
        accepted = "never"
        status, _ = await transport.send(Request("GET", "/api/v1/pods"))
        assert status == 401
        assert source.loads == 2
    finally:
        await transport.close()
        await runner.cleanup()
