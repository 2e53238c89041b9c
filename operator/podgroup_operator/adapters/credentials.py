"""The API client's bearer token, kept valid for a process that runs for months.

A token read once expires: bound service-account tokens are rotated by the kubelet (the file
changes, the old token stops working after about an hour), and exec plugins (EKS, GKE, OIDC
helpers) hand out tokens valid for minutes. The `kubernetes` package's config loaders already
know how to refresh both: they set `Configuration.refresh_api_key_hook`, which re-reads the
service-account token file once a minute and re-runs an exec plugin whose credential has
expired. `Credentials` drives those loaders for our aiohttp transport:

* the hot path (every request, binds included) reads a cached header and compares one
  monotonic time; the hook runs at most every `check_every` seconds, in a thread (an exec plugin
  is a blocking subprocess), one refresh at a time;
* a 401 reloads the kubeconfig from scratch (`force`), which re-runs an exec plugin even when
  its credential claimed to be valid; requests that met the same stale token share that one
  reload (the generation tells them apart).

Client certificates (the dev cluster's kind of kubeconfig) carry no token: then there is nothing
to refresh and the header is empty.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

Loader = Callable[[], Any]
"""Builds a filled-in `kubernetes.client.Configuration` (reads kubeconfig or in-cluster files)."""


def bearer_token(configuration: Any) -> str | None:
    """The token a loaded Configuration holds, without its `Bearer ` prefix, or None."""
    auth = configuration.api_key.get("authorization") or configuration.api_key.get("BearerToken")
    if not auth:
        return None
    token: str = auth.split(" ", 1)[1] if auth.lower().startswith("bearer ") else auth
    return token


class Credentials:
    """The Authorization header of every request, refreshed before and after it expires."""

    def __init__(
        self,
        load: Loader,
        configuration: Any,
        *,
        check_every: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._load = load
        self._configuration = configuration
        self._check_every = check_every
        self._clock = clock
        self._next_check = clock() + check_every
        self._lock: asyncio.Lock | None = None
        self.generation = 0
        """Bumped each time the header changes; a request that got 401 passes the generation
        it was sent with, so only the first of many such requests reloads."""
        self._headers = self._headers_of(configuration)

    @staticmethod
    def _headers_of(configuration: Any) -> dict[str, str]:
        token = bearer_token(configuration)
        return {"Authorization": f"Bearer {token}"} if token else {}

    @property
    def refreshable(self) -> bool:
        """Whether there is a token at all (client certificates need no refresh)."""
        return bool(self._headers) or self._configuration.refresh_api_key_hook is not None

    async def headers(self) -> dict[str, str]:
        """The header to send now; refreshes first when a check is due (cheap otherwise)."""
        if self._clock() >= self._next_check:
            await self._refresh(force=False, seen=self.generation)
        return self._headers

    async def unauthorized(self, seen: int) -> None:
        """A request sent with generation `seen` got 401: reload, unless another already did."""
        await self._refresh(force=True, seen=seen)

    async def _refresh(self, *, force: bool, seen: int) -> None:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if seen != self.generation:
                return  # refreshed while we waited for the lock
            if not force and self._clock() < self._next_check:
                return
            before = self._headers
            await asyncio.to_thread(self._reload if force else self._run_hook)
            self._next_check = self._clock() + self._check_every
            if self._headers != before or force:
                self.generation += 1

    def _run_hook(self) -> None:
        hook = self._configuration.refresh_api_key_hook
        if hook is not None:
            hook(self._configuration)
            self._headers = self._headers_of(self._configuration)

    def _reload(self) -> None:
        self._configuration = self._load()
        self._headers = self._headers_of(self._configuration)
