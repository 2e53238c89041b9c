"""An async Kubernetes API client over one aiohttp session, with a swappable transport.

One aiohttp session keeps connections alive and lets the scheduler bind a whole gang
concurrently; the `kubernetes` package's client is synchronous and opens a TLS connection per
call (docs/decisions/002-own-async-client.md). The `kubernetes` package reads kubeconfigs and
in-cluster credentials. JSON goes through orjson, the cheapest decoder of watch events and list
pages.

Testing follows httpx's MockTransport: `KubeClient` talks through a `Transport`, and
`tests/fakes.py` provides an in-memory one. The real control plane proves the behaviour; the fake
keeps unit tests of the glue fast.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

import aiohttp
import orjson

from podgroup_operator import constants as c
from podgroup_operator.adapters import heap
from podgroup_operator.adapters.credentials import Credentials
from podgroup_operator.api.times import rfc3339

logger = logging.getLogger(__name__)

JSON = dict[str, Any]

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"


class KubeconfigError(Exception):
    """No client can be made: the kubeconfig is missing or broken and we are not in a cluster."""


class ApiError(Exception):
    """A non-2xx answer of the API server, with its Status reason and message."""

    def __init__(self, status: int, body: Any, method: str = "", path: str = "") -> None:
        self.status = status
        self.body = body if isinstance(body, dict) else {"message": str(body)}
        self.reason = str(self.body.get("reason", ""))
        self.message = str(self.body.get("message", body))
        super().__init__(f"{method} {path}: HTTP {status} {self.reason}: {self.message}")

    @property
    def not_found(self) -> bool:
        return self.status == 404 or self.reason == c.StatusReason.NOT_FOUND

    @property
    def forbidden(self) -> bool:
        """403: the credentials may not do this (RBAC)."""
        return self.status == 403

    @property
    def conflict(self) -> bool:
        """409: a precondition or resourceVersion that no longer holds, a pod already bound
        (the binding subresource), or a name taken (`already_exists`)."""
        return self.status == 409

    @property
    def invalid(self) -> bool:
        """422: the object does not validate (for a custom resource, against its CRD's schema,
        which a status write checks the whole object against)."""
        return self.status == 422 or self.reason == c.StatusReason.INVALID

    @property
    def already_exists(self) -> bool:
        return self.reason == c.StatusReason.ALREADY_EXISTS

    @property
    def gone(self) -> bool:
        """410: the resourceVersion (of a watch, or of a list's continue token) is too old."""
        return self.status == 410 or self.reason in (c.StatusReason.EXPIRED, c.StatusReason.GONE)

    @property
    def namespace_terminating(self) -> bool:
        """The namespace is being deleted and refuses new objects (nothing left to do there)."""
        details = self.body.get("details")
        causes = details.get("causes") if isinstance(details, dict) else None
        return any(
            # metav1.StatusCause's Go field `Type` travels as "reason" in JSON.
            isinstance(cause, dict) and cause.get("reason") == c.StatusCause.NAMESPACE_TERMINATING
            for cause in causes or ()
        )


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    params: Mapping[str, str] | None = None
    body: Any = None
    content_type: str = "application/json"


class Transport(Protocol):
    """How requests reach an API server: aiohttp for real, a dict store in tests."""

    async def send(self, request: Request) -> tuple[int, Any]:
        """Return (HTTP status, decoded JSON body)."""
        ...

    def stream(self, request: Request) -> AsyncIterator[JSON]:
        """Yield decoded JSON lines of a watch until the server ends the stream."""
        ...

    async def close(self) -> None: ...


class FencedError(Exception):
    """A write not sent: the replica that asked may no longer write (see `FencedTransport`)."""


READ_METHODS = frozenset({"GET", "HEAD"})


class FencedTransport:
    """Another transport's requests, with writes sent only while `allowed()` says so.

    The leader's controllers write only while their replica holds the Lease. A replica whose
    process stood still (SIGSTOP, a paused VM, a long swap-in) for longer than the lease wakes
    up with work decided before the pause; the elector notices only after an attempt to renew,
    so this check is made as each write goes out (docs/decisions/009-leader-hand-over.md).
    Reads and watches are not fenced: a follower reads as much as a leader.
    """

    def __init__(self, inner: Transport, allowed: Callable[[], bool], why: str) -> None:
        self.inner = inner
        self.allowed = allowed
        self.why = why
        self.refused = 0
        """Writes refused so far."""

    async def send(self, request: Request) -> tuple[int, Any]:
        if request.method not in READ_METHODS and not self.allowed():
            self.refused += 1
            raise FencedError(f"{request.method} {request.path} not sent: {self.why}")
        return await self.inner.send(request)

    def stream(self, request: Request) -> AsyncIterator[JSON]:
        return self.inner.stream(request)

    async def close(self) -> None:
        """Nothing: the inner transport is its owner's to close."""


class AiohttpTransport:
    """The real transport: one keep-alive aiohttp session with the kubeconfig's credentials."""

    def __init__(
        self,
        server: str,
        *,
        token: str | None = None,
        ssl_context: ssl.SSLContext | bool = True,
        limit: int = 64,
        credentials: Credentials | None = None,
    ) -> None:
        self._server = server.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._credentials = credentials
        """When set, the Authorization header of each request (refreshed; see credentials.py)
        instead of the fixed `token`."""
        self._ssl = ssl_context
        self._limit = limit
        self._session: aiohttp.ClientSession | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        # Created lazily, inside the event loop that will use it.
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                headers=self._headers,
                connector=aiohttp.TCPConnector(ssl=self._ssl, limit=self._limit),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            )
        return self._session

    async def send(self, request: Request) -> tuple[int, Any]:
        """One request; a keep-alive connection the server closed meanwhile is retried once.

        Retrying is safe for what the operator sends: writes carry resourceVersion or UID
        preconditions, bindings answer 409 when already done, and creates answer AlreadyExists
        (at worst an Event, made with generateName, is posted twice).
        """
        credentials = self._credentials
        generation = credentials.generation if credentials is not None else 0
        try:
            status, body = await self._send_once(request)
        except aiohttp.ServerDisconnectedError:
            status, body = await self._send_once(request)
        if status == 401 and credentials is not None and credentials.refreshable:
            # Expired or revoked: fetch a new token (re-running an exec plugin) and retry once.
            try:
                await credentials.unauthorized(generation)
            except Exception as exc:  # the plugin or the file failed: report the 401 we have
                logger.warning("credentials not refreshed after 401: %s", exc)
                return status, body
            status, body = await self._send_once(request)
        return status, body

    async def _auth_headers(self) -> dict[str, str]:
        if self._credentials is None:
            return {}
        return await self._credentials.headers()

    async def _send_once(self, request: Request) -> tuple[int, Any]:
        data = None if request.body is None else orjson.dumps(request.body)
        async with self._get_session().request(
            request.method,
            self._server + request.path,
            params=request.params,
            data=data,
            headers={
                "Content-Type": request.content_type,
                "Accept": "application/json",
                **await self._auth_headers(),
            },
            timeout=aiohttp.ClientTimeout(total=60),
        ) as response:
            body = _decode(await response.read())
            if response.status >= 300:
                body = _with_retry_after(body, response.headers.get("Retry-After"))
            return response.status, body

    async def stream(self, request: Request) -> AsyncIterator[JSON]:
        credentials = self._credentials
        generation = credentials.generation if credentials is not None else 0
        async with self._get_session().get(
            self._server + request.path,
            params=request.params,
            headers=await self._auth_headers(),
            timeout=aiohttp.ClientTimeout(total=None, sock_read=None),
        ) as response:
            if response.status == 401 and credentials is not None:
                # The caller (an informer) retries the watch; it then carries the new token.
                try:
                    await credentials.unauthorized(generation)
                except Exception as exc:
                    logger.warning("credentials not refreshed after 401: %s", exc)
            if response.status >= 300:
                # Not always JSON: a kind nobody serves (a CRD deleted) answers "404 page not
                # found", which once surfaced as a JSONDecodeError naming no status.
                raise ApiError(
                    response.status, _decode(await response.read()), "WATCH", request.path
                )
            connection = response.connection
            if (
                connection is not None
                and heap.widen_tls_buffer(connection.transport)
                and connection.protocol is not None
            ):
                # A watch reads a wide buffer per turn of the loop; its connection is closed
                # when the watch ends instead of pooled, so no request inherits the buffer.
                connection.protocol.force_close()
            buffer = b""
            handed = 0
            async for chunk in response.content.iter_any():
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        handed += 1
                        if handed % heap.WATCH_EVENTS_PER_TURN == 0:
                            await asyncio.sleep(0)  # a wide read's events share the loop's turns
                        yield orjson.loads(line)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


RETRY_AFTER_ATTEMPTS = 10
"""Times a request refused with a Retry-After is sent again (client-go's `maxRetries`)."""
RETRY_AFTER_LONGEST_SECONDS = 10
"""The longest wait a Retry-After gets (the API server asks for 1 s)."""


def retry_after(status: int, body: Any) -> float | None:
    """Seconds to wait before sending a refused request again, or None if it must not be.

    An API server over its limits refuses requests with 429 (max-inflight, or API Priority and
    Fairness rejecting from a full queue) and a Retry-After, before doing anything with them,
    so sending them again is safe for any verb; client-go retries 429 and 5xx answers that
    carry Retry-After, and so does this. The transport puts the header into the Status's
    `details.retryAfterSeconds`, where the API server puts it too when it answers with a Status.
    """
    if status != 429 and status < 500:
        return None
    details = body.get("details") if isinstance(body, dict) else None
    seconds = details.get("retryAfterSeconds") if isinstance(details, dict) else None
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
        return None
    return float(min(seconds, RETRY_AFTER_LONGEST_SECONDS))


def _with_retry_after(body: Any, header: str | None) -> Any:
    """An error's body with the Retry-After header's seconds in `details.retryAfterSeconds`."""
    if header is None or not header.strip().isdigit():
        return body  # absent, or an HTTP date (the API server sends seconds)
    body = dict(body) if isinstance(body, dict) else {"message": str(body)}
    details = body.get("details")
    details = dict(details) if isinstance(details, dict) else {}
    details.setdefault("retryAfterSeconds", int(header))
    body["details"] = details
    return body


def _decode(raw: bytes) -> Any:
    """An answer's JSON, or its text as a Status message (the API server answers a path it
    does not serve with "404 page not found\n")."""
    try:
        return orjson.loads(raw) if raw else {}
    except orjson.JSONDecodeError:
        return {"message": raw.decode(errors="replace").strip()}


class InvalidNameError(ValueError):
    """A name or namespace that no API path can hold; raised before any request is sent."""


def _segment(what: str, value: str) -> str:
    """`value` as one segment of an API path, or InvalidNameError saying why it cannot be one.

    The rule is the API server's for names (client-go checks it before sending, as here): not
    "." or "..", no "/" and no "%". Checked here because a name from a pod's annotation is free
    text, and aiohttp's URL library resolves "." and ".." segments (escaped or not), so "../../x"
    would send the request to another path with the operator's credentials.
    """
    if value in (".", ".."):
        raise InvalidNameError(f"invalid {what} {value!r}: may not be '.' or '..'")
    for forbidden in ("/", "%"):
        if forbidden in value:
            raise InvalidNameError(f"invalid {what} {value!r}: may not contain {forbidden!r}")
    return quote(value)


def _path(
    group: str, version: str, plural: str, namespace: str | None, name: str | None, sub: str | None
) -> str:
    base = f"/api/{version}" if not group else f"/apis/{group}/{version}"
    if namespace is not None:
        base += f"/namespaces/{_segment('namespace', namespace)}"
    base += f"/{plural}"
    if name is not None:
        base += f"/{_segment('resource name', name)}"
    if sub is not None:
        base += f"/{sub}"
    return base


@dataclass(frozen=True)
class Kind:
    """Where a resource lives in the API."""

    group: str
    version: str
    plural: str

    def path(
        self, namespace: str | None = None, name: str | None = None, sub: str | None = None
    ) -> str:
        return _path(self.group, self.version, self.plural, namespace, name, sub)


PODS = Kind("", "v1", "pods")
NODES = Kind("", "v1", "nodes")
NAMESPACES = Kind("", "v1", "namespaces")
EVENTS = Kind("", "v1", "events")
RESOURCE_QUOTAS = Kind("", "v1", "resourcequotas")
LEASES = Kind("coordination.k8s.io", "v1", "leases")
PERSISTENT_VOLUMES = Kind("", "v1", "persistentvolumes")
PERSISTENT_VOLUME_CLAIMS = Kind("", "v1", "persistentvolumeclaims")
STORAGE_CLASSES = Kind("storage.k8s.io", "v1", "storageclasses")
CSI_NODES = Kind("storage.k8s.io", "v1", "csinodes")
PDBS = Kind("policy", "v1", "poddisruptionbudgets")
PDBS_V1BETA1 = Kind("policy", "v1beta1", "poddisruptionbudgets")
"""Before Kubernetes 1.21 PodDisruptionBudgets are served only here."""
PODGROUPS = Kind(c.GROUP, c.VERSION, c.PLURAL)
TOPOLOGIES = Kind(c.GROUP, c.VERSION, c.TOPOLOGY_PLURAL)
ELASTIC_QUOTAS = Kind(c.GROUP, c.VERSION, c.ELASTIC_QUOTA_PLURAL)
KOORD_ELASTIC_QUOTAS = Kind(c.KOORD_QUOTA_GROUP, c.VERSION, c.ELASTIC_QUOTA_PLURAL)
"""Koordinator's ElasticQuota (`scheduling.sigs.k8s.io/v1alpha1`), read where it is served."""
CRDS = Kind("apiextensions.k8s.io", "v1", "customresourcedefinitions")
VALIDATING_WEBHOOKS = Kind("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations")
MUTATING_WEBHOOKS = Kind("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations")


def _load_configuration(path: str | None, context: str | None) -> Any:
    """A `kubernetes` Configuration from the kubeconfig, else in-cluster; its loaders also set
    the refresh hook that Credentials runs (token file re-read, exec plugin re-run).

    Raises ConfigException when neither works (with the kubeconfig's reason), or whatever a
    broken file makes the loader raise.
    """
    from kubernetes import client as k8s_client  # only for reading credentials
    from kubernetes import config as k8s_config

    configuration = k8s_client.Configuration()
    try:
        k8s_config.load_kube_config(
            config_file=path, context=context, client_configuration=configuration
        )
    except k8s_config.ConfigException as outside:
        if context is not None:
            raise
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)
        except k8s_config.ConfigException:
            raise k8s_config.ConfigException(
                f"{outside}; and not running in a cluster. Set KUBECONFIG to a valid kubeconfig."
            ) from outside
    return configuration


class KubeClient:
    """The operations the operator needs, each one HTTP call, all async."""

    def __init__(self, transport: Transport, field_manager: str = c.OPERATOR_NAME) -> None:
        self.transport = transport
        self.field_manager = field_manager

    @classmethod
    def from_kubeconfig(
        cls, path: str | None = None, *, context: str | None = None, limit: int = 128
    ) -> KubeClient:
        """Credentials from a kubeconfig (or in-cluster when none is found).

        `path` None means kubectl's search: $KUBECONFIG (several files joined by the path
        separator are merged) or ~/.kube/config. `context` None means its current-context; a
        named context that does not exist is an error, never a silent in-cluster fallback.
        """
        from kubernetes import config as k8s_config

        def load() -> Any:
            return _load_configuration(path, context)

        try:
            configuration = load()
        except k8s_config.ConfigException as outside:
            where = path or os.environ.get("KUBECONFIG") or "~/.kube/config"
            raise KubeconfigError(
                f"no usable credentials: kubeconfig {where}: {outside}"
            ) from outside
        except Exception as broken:  # the loader raises yaml, key and type errors for bad files
            where = path or os.environ.get("KUBECONFIG") or "~/.kube/config"
            text = " ".join(str(broken).split())[:300]
            raise KubeconfigError(f"kubeconfig {where} is not usable: {text}") from broken
        tls: ssl.SSLContext | bool
        if configuration.verify_ssl:
            tls = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
            if configuration.cert_file:
                tls.load_cert_chain(configuration.cert_file, configuration.key_file)
        else:
            tls = False
        credentials = Credentials(load, configuration)
        return cls(
            AiohttpTransport(
                configuration.host, ssl_context=tls, limit=limit, credentials=credentials
            )
        )

    async def close(self) -> None:
        await self.transport.close()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _call(self, request: Request) -> JSON:
        """One request, sent again while the API server asks to be asked later (see
        `retry_after`), as client-go's REST client does: up to `RETRY_AFTER_ATTEMPTS` more
        times, each after the wait it names."""
        for attempt in range(RETRY_AFTER_ATTEMPTS + 1):
            status, body = await self.transport.send(request)
            if status < 300:
                return body if isinstance(body, dict) else {}
            wait = retry_after(status, body)
            if wait is None or attempt == RETRY_AFTER_ATTEMPTS:
                break
            logger.debug(
                "%s %s: HTTP %d, sent again in %ss", request.method, request.path, status, wait
            )
            await asyncio.sleep(wait)
        raise ApiError(status, body, request.method, request.path)

    # --- generic verbs --------------------------------------------------------------------------
    async def get(self, kind: Kind, name: str, namespace: str | None = None) -> JSON:
        return await self._call(Request("GET", kind.path(namespace, name)))

    async def list(
        self,
        kind: Kind,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> JSON:
        params = {}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        return await self._call(Request("GET", kind.path(namespace), params=params or None))

    async def list_page(
        self,
        kind: Kind,
        namespace: str | None = None,
        *,
        limit: int,
        continue_token: str | None = None,
    ) -> JSON:
        """One page of a paginated LIST; `metadata.continue` of the answer asks for the next."""
        params = {"limit": str(limit)}
        if continue_token:
            params["continue"] = continue_token
        return await self._call(Request("GET", kind.path(namespace), params=params))

    async def create(self, kind: Kind, body: JSON, namespace: str | None = None) -> JSON:
        return await self._call(
            Request(
                "POST", kind.path(namespace), params={"fieldManager": self.field_manager}, body=body
            )
        )

    async def replace(
        self, kind: Kind, name: str, body: JSON, namespace: str | None = None
    ) -> JSON:
        """PUT the whole object; `metadata.resourceVersion` in `body` makes it conditional (409)."""
        return await self._call(
            Request(
                "PUT",
                kind.path(namespace, name),
                params={"fieldManager": self.field_manager},
                body=body,
            )
        )

    async def patch(
        self,
        kind: Kind,
        name: str,
        body: Any,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        content_type: str = MERGE_PATCH,
    ) -> JSON:
        return await self._call(
            Request(
                "PATCH",
                kind.path(namespace, name, subresource),
                params={"fieldManager": self.field_manager},
                body=body,
                content_type=content_type,
            )
        )

    async def delete(
        self,
        kind: Kind,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
        propagation: str | None = None,
    ) -> JSON:
        """Delete; with `uid`, only that incarnation (a recreated namesake is left alone)."""
        body: JSON = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if uid:
            body["preconditions"] = {"uid": uid}
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        if propagation:
            body["propagationPolicy"] = propagation
        return await self._call(Request("DELETE", kind.path(namespace, name), body=body))

    async def watch(
        self,
        kind: Kind,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncGenerator[tuple[str, JSON], None]:
        """Yield (event type, object) until the server closes the watch; the caller re-lists."""
        params = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        if resource_version:
            params["resourceVersion"] = resource_version
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        async for line in self.transport.stream(
            Request("GET", kind.path(namespace), params=params)
        ):
            yield str(line.get("type", "")), line.get("object") or {}

    # --- specific operations ---------------------------------------------------------------------
    async def bind(self, namespace: str, name: str, node: str, uid: str | None = None) -> None:
        """POST a Binding: the pod lands on `node`. The answer is a Status, not the pod."""
        body: JSON = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        if uid:
            body["metadata"]["uid"] = uid
        await self._call(Request("POST", PODS.path(namespace, name, "binding"), body=body))

    async def patch_status(
        self, kind: Kind, name: str, namespace: str | None, status: JSON
    ) -> JSON:
        """Merge-patch only `status` (never a full update: concurrent writers keep their fields)."""
        return await self.patch(kind, name, {"status": status}, namespace, subresource="status")

    async def create_event(
        self,
        involved: JSON,
        *,
        event_type: str,
        reason: str,
        message: str,
        timestamp: str,
        component: str = c.OPERATOR_NAME,
    ) -> JSON:
        """A core/v1 Event about `involved` (a raw object), as `kubectl describe` shows them."""
        meta = involved.get("metadata", {})
        namespace = meta.get("namespace") or "default"
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta.get('name', 'object')}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": involved.get("apiVersion"),
                "kind": involved.get("kind"),
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "type": event_type,
            "reason": reason,
            "message": message[: c.EVENT_MESSAGE_LIMIT],
            "source": {"component": component},
            "firstTimestamp": timestamp,
            "lastTimestamp": timestamp,
            "count": 1,
            "reportingComponent": component,
        }
        return await self.create(EVENTS, body, namespace)

    async def narrate(
        self, involved: JSON, *, event_type: str, reason: str, message: str, now: dt.datetime
    ) -> None:
        """`create_event`, best effort: an Event only narrates what a status or a pod already
        records, so a refusal is logged, not raised; retrying the decision for it would only
        repeat writes that succeeded. A namespace being deleted (403) only at debug level: the
        Event would have gone with it, and a big namespace's deletion logged dozens."""
        try:
            await self.create_event(
                involved,
                event_type=event_type,
                reason=reason,
                message=message,
                timestamp=rfc3339(now),
            )
        except ApiError as exc:
            logger.log(
                logging.DEBUG if exc.namespace_terminating else logging.WARNING,
                "Event %s on %s not posted: %s",
                reason,
                (involved.get("metadata") or {}).get("name"),
                exc.message,
            )
        except FencedError:
            pass  # the replica stopped leading: its count is logged once (controllers/runtime.py)

    async def apply_json(self, kind: Kind, body: JSON, namespace: str | None = None) -> JSON:
        """Create, or replace the spec-like content of, a cluster object we own (CRD, webhooks)."""
        name = body["metadata"]["name"]
        try:
            current = await self.get(kind, name, namespace)
        except ApiError as exc:
            if not exc.not_found:
                raise
            return await self.create(kind, body, namespace)
        body = {
            **body,
            "metadata": {
                **body["metadata"],
                "resourceVersion": current["metadata"]["resourceVersion"],
            },
        }
        return await self.replace(kind, name, body, namespace)


async def gather_limited(limit: int, *coros: Any) -> list[Any]:
    """Run coroutines with at most `limit` in flight; exceptions are returned, not raised."""
    semaphore = asyncio.Semaphore(limit)

    async def one(coro: Any) -> Any:
        async with semaphore:
            return await coro

    return await asyncio.gather(*(one(coro) for coro in coros), return_exceptions=True)
