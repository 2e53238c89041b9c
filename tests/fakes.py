"""In-memory fakes of the operator's seams: an API server behind `Transport`, and an index view.

`FakeApiServer` plays the part httpx's `MockTransport` plays for httpx: hand it to
`KubeClient(FakeApiServer())` and the whole client runs against a dict store, with the
apiserver's answers where the operator relies on them:

* objects keyed by (collection, namespace, name); one global resourceVersion counter, bumped by
  every write; uid, creationTimestamp and generation assigned on create; generateName;
* GET one, LIST with label selectors (`a=b`, `a!=b`, `a`, `!a`, `a in (x,y)`, `a notin (x)`)
  and field selectors (`=`, `==`, `!=`) on the field labels the apiserver supports for the kind
  (`FIELD_LABELS`: `metadata.name`, pods' `spec.nodeName`, events' `involvedObject.name`, ...);
  any other path is refused with 400 BadRequest, in a LIST and in a watch, as the apiserver does;
* POST (409 AlreadyExists; a pod without a phase becomes Pending), PUT (409 Conflict on a stale
  resourceVersion), PATCH as JSON merge patch (RFC 7386), and as strategic merge patch with the
  one list merge the operator relies on: `conditions` merge by `type` (the scheduler's
  PodScheduled on pods/status); other patch types are 415; `metadata.resourceVersion` in a
  patch body is a precondition (409), another `metadata.uid` is refused (422, the field is
  immutable);
* custom resources checked by their CRD's schema (`schemas`; the CRDs in crds/ by default): every
  create, update and patch, `/status` too, is pruned of undeclared fields and refused with 422
  Invalid naming each field it breaks, as v1.20 does (tests/crd_schema.py); `seed` stores
  unchecked, as an object stored before its CRD was tightened;
* the `status` subresource: writes to `/status` change only `status`, writes to the main
  resource leave `status` alone, for the kinds in `status_subresources`;
* generation bumps when anything outside metadata and status changes;
* DELETE with `preconditions.uid` / `preconditions.resourceVersion` (409); immediate removal,
  or `deletionTimestamp` while `metadata.finalizers` remain (removed with the last finalizer);
* POST `pods/{name}/binding` (spec.nodeName + PodScheduled; 409 when already bound or being
  deleted; the answer is a Status);
* watches: `stream()` yields ADDED/MODIFIED/DELETED after the requested resourceVersion (the
  current state as ADDED when none is given), with selector transitions turned into
  ADDED/DELETED as the watch cache does, until `close_watches()`, `close()` or timeoutSeconds;
  `inject_error("WATCH", ...)` gives the ERROR event of an expired resourceVersion (410);
* a namespace being deleted (`terminate_namespace()`): every create in it, a binding or an
  Event too, is refused with 403 Forbidden and the NamespaceTerminating cause;
* errors as Status bodies; `inject_error()` makes the next matching request fail, and `hold()`
  keeps matching requests in flight until the test releases them (overlapping writers).

Deliberate differences, so tests stay short: no namespaces are required to exist, no admission,
no schema for built-in kinds, no defaulting beyond a new pod's phase, no kubelet (a bound pod is
deleted at once); POST keeps a given `creationTimestamp` and the `status` of built-in kinds
(pods can be created Running, in queue order), only custom resources (`status_reset_on_create`)
lose it, as on a cluster; writes to a built-in kind's `/status` keep only `status` (the
apiserver also keeps label changes there); a binding's uid is a precondition (v1.20 ignores it).

`tests/api_contract.py` holds the behaviour checked against a real apiserver:
`tests/integration/test_api_contract.py` runs it on the dev cluster.

Every request is logged in `requests` as (method, path) — watches as ("WATCH", path) — so a
test can say "exactly one PATCH" or "no write at all".
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import datetime as dt
import enum
import functools
import itertools
import json
import re
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import unquote

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import MERGE_PATCH, STRATEGIC_PATCH, ApiError, Kind, Request
from tests.crd_schema import CrdSchema, crd_schemas, project_crds

JSON = dict[str, Any]

_KINDS = {
    "pods": "Pod",
    "nodes": "Node",
    "namespaces": "Namespace",
    "events": "Event",
    "resourcequotas": "ResourceQuota",
    "leases": "Lease",
    "persistentvolumes": "PersistentVolume",
    "persistentvolumeclaims": "PersistentVolumeClaim",
    "storageclasses": "StorageClass",
    "csinodes": "CSINode",
    "customresourcedefinitions": "CustomResourceDefinition",
    "validatingwebhookconfigurations": "ValidatingWebhookConfiguration",
    "mutatingwebhookconfigurations": "MutatingWebhookConfiguration",
    c.PLURAL: c.KIND,
}
"""List kinds for empty collections (a LIST answer is `<Kind>List`)."""

_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""The apiserver's alphabet for generateName suffixes (no vowels, no look-alikes)."""


@dataclass(frozen=True)
class Locator:
    """A request path taken apart: `/api/v1/namespaces/ns/pods/name/binding`."""

    api: str
    """`/api/v1` or `/apis/<group>/<version>`."""
    plural: str
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None

    @property
    def collection(self) -> str:
        return f"{self.api}/{self.plural}"

    @property
    def group(self) -> str:
        """The API group ("" for the core group)."""
        return self.api.split("/")[2] if self.api.startswith("/apis/") else ""

    @property
    def custom(self) -> bool:
        """A resource outside the built-in API groups: field selectors by name only."""
        return "." in self.group and not self.group.endswith(".k8s.io")

    @classmethod
    def parse(cls, path: str) -> Locator:
        parts = [unquote(p) for p in path.strip("/").split("/")]
        if parts[:1] == ["api"] and len(parts) >= 3:
            api, rest = f"/api/{parts[1]}", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 4:
            api, rest = f"/apis/{parts[1]}/{parts[2]}", parts[3:]
        else:
            raise ValueError(f"not an API path: {path}")
        namespace = None
        # `namespaces/x/status` is a subresource of a Namespace, `namespaces/x/pods` a collection.
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        if not 1 <= len(rest) <= 3:
            raise ValueError(f"not an API path: {path}")
        return cls(
            api=api,
            plural=rest[0],
            namespace=namespace,
            name=rest[1] if len(rest) > 1 else None,
            subresource=rest[2] if len(rest) > 2 else None,
        )


class StatusError(Exception):
    """Raised inside the fake and turned into a (code, Status) answer."""

    def __init__(self, code: int, reason: str, message: str, details: JSON | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details or {}

    def status(self) -> JSON:
        return status_body(self.code, self.reason, self.message, self.details)


def status_body(code: int, reason: str, message: str, details: JSON | None = None) -> JSON:
    """A metav1.Status as the apiserver sends it with every error."""
    body: JSON = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure" if code >= 300 else "Success",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


# --- selectors ---------------------------------------------------------------------------------


def _split_requirements(selector: str) -> list[str]:
    """Split on commas outside parentheses (`a in (x,y),b` is two requirements)."""
    parts, depth, current = [], 0, ""
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [part.strip() for part in parts if part.strip()]


_SET_REQUIREMENT = re.compile(r"^(\S+)\s+(in|notin)\s+\((.*)\)$")


def label_selector_matches(selector: str | None, labels: Mapping[str, str] | None) -> bool:
    """Whether labels satisfy a label selector in the apiserver's string syntax."""
    labels = labels or {}
    for requirement in _split_requirements(selector or ""):
        found = _SET_REQUIREMENT.match(requirement)
        if found:
            key, operator, values = found.groups()
            allowed = {v.strip() for v in values.split(",") if v.strip()}
            if operator == "in" and labels.get(key) not in allowed:
                return False
            if operator == "notin" and key in labels and labels[key] in allowed:
                return False
        elif "!=" in requirement:
            key, value = (s.strip() for s in requirement.split("!=", 1))
            if labels.get(key) == value:
                return False
        elif "=" in requirement:
            key, value = (s.strip() for s in requirement.replace("==", "=").split("=", 1))
            if labels.get(key) != value:
                return False
        elif requirement.startswith("!"):
            if requirement[1:].strip() in labels:
                return False
        elif requirement not in labels:
            return False
    return True


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, Mapping):
            return ""
        current = current.get(part)
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    return str(current)


FIELD_LABELS: dict[str, frozenset[str]] = {
    "pods": frozenset(
        {
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        }
    ),
    "nodes": frozenset({"spec.unschedulable"}),
    "namespaces": frozenset({"status.phase"}),
    "events": frozenset(
        {
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        }
    ),
}
"""Field labels beyond metadata.name (and metadata.namespace, for namespaced kinds) that the
apiserver (v1.20) accepts in field selectors, per built-in kind; custom resources have none."""

_FIELD_ALIASES = {"source": "source.component"}
"""Field labels that name another path of the object."""

_CLUSTER_SCOPED = frozenset(
    {
        "nodes",
        "namespaces",
        "customresourcedefinitions",
        "validatingwebhookconfigurations",
        "mutatingwebhookconfigurations",
        "persistentvolumes",
        "storageclasses",
        "csinodes",
    }
)


def _requirements(selector: str | None) -> list[tuple[str, bool, str]]:
    """(field label, equal?, value) of each requirement of a field selector."""
    parsed = []
    for requirement in _split_requirements(selector or ""):
        if "!=" in requirement:
            path, value = requirement.split("!=", 1)
            parsed.append((path.strip(), False, value.strip()))
        else:
            path, value = requirement.replace("==", "=").split("=", 1)
            parsed.append((path.strip(), True, value.strip()))
    return parsed


def _check_field_selector(where: Locator, selector: str | None) -> None:
    """Refuse field labels the apiserver does not index for this kind (400, its message)."""
    supported = {"metadata.name"} | FIELD_LABELS.get(where.plural, frozenset())
    if where.plural not in _CLUSTER_SCOPED:
        supported.add("metadata.namespace")
    for path, _, _ in _requirements(selector):
        if path not in supported:
            raise StatusError(400, "BadRequest", f"field label not supported: {path}")


def field_selector_matches(selector: str | None, obj: Mapping[str, Any]) -> bool:
    """Whether the object satisfies a (checked) field selector; a missing field reads as ""."""
    for path, equal, value in _requirements(selector):
        if (_field_value(obj, _FIELD_ALIASES.get(path, path)) == value) != equal:
            return False
    return True


# --- patches -----------------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge recursively, null removes, the rest replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


MERGED_BY_TYPE = frozenset({"conditions"})
"""Lists a strategic merge patch merges item by item on their `type` (patchMergeKey)."""


def strategic_merge_patch(target: Any, patch: Any, key: str | None = None) -> Any:
    """A strategic merge patch, as far as the fake serves it: a merge patch whose `conditions`
    lists merge on `type` (an item merges into the one of its type, or is appended); every
    other list is replaced, as for the built-in fields without a merge strategy."""
    if key in MERGED_BY_TYPE and isinstance(patch, list) and isinstance(target, list):
        merged = [copy.deepcopy(item) for item in target]
        for item in patch:
            index = next(
                (i for i, old in enumerate(merged) if old.get("type") == item.get("type")), None
            )
            if index is None:
                merged.append(strategic_merge_patch({}, item))
            else:
                merged[index] = strategic_merge_patch(merged[index], item)
        return merged
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for name, value in patch.items():
        if value is None:
            result.pop(name, None)
        else:
            result[name] = strategic_merge_patch(result.get(name), value, name)
    return result


# --- the server --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Change:
    """One write, kept for watches: what the object looked like before and after."""

    resource_version: int
    collection: str
    namespace: str | None
    type: str
    old: JSON | None
    new: JSON


_CLOSED = object()


@dataclass
class _Watch:
    collection: str
    namespace: str | None
    label_selector: str | None
    field_selector: str | None
    bookmarks: bool = False
    queue: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)

    def _matches(self, obj: JSON | None) -> bool:
        return (
            obj is not None
            and label_selector_matches(self.label_selector, obj["metadata"].get("labels"))
            and field_selector_matches(self.field_selector, obj)
        )

    def event(self, change: _Change) -> JSON | None:
        """The watch event this change makes for this watcher, or None."""
        if change.collection != self.collection:
            return None
        if self.namespace is not None and change.namespace != self.namespace:
            return None
        now, before = self._matches(change.new), self._matches(change.old)
        if change.type == "MODIFIED" and now != before:
            # The watch cache reports an object leaving or entering the selection.
            kind = "ADDED" if now else "DELETED"
        elif now or (change.type == "DELETED" and before):
            kind = change.type
        else:
            return None
        return {"type": kind, "object": copy.deepcopy(change.new)}


@dataclass
class _InjectedError:
    method: str
    path: str | Callable[[Request], bool]
    code: int
    reason: str
    message: str
    times: int
    details: JSON | None = None

    def matches(self, method: str, request: Request) -> bool:
        if self.method not in ("*", method):
            return False
        if callable(self.path):
            return self.path(request)
        return request.path == self.path or request.path.endswith(self.path)


@dataclass
class _Hold:
    method: str
    path: str | Callable[[Request], bool]
    released: asyncio.Event

    def matches(self, method: str, request: Request) -> bool:
        if self.released.is_set() or self.method not in ("*", method):
            return False
        if callable(self.path):
            return self.path(request)
        return request.path == self.path or request.path.endswith(self.path)


def _default_clock() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class FakeApiServer:
    """An in-memory API server, usable wherever `KubeClient` wants a `Transport`."""

    def __init__(
        self,
        *,
        clock: Callable[[], dt.datetime] = _default_clock,
        status_subresources: Iterable[str] = (
            "pods",
            "nodes",
            "namespaces",
            "resourcequotas",
            "customresourcedefinitions",
            c.PLURAL,
            c.TOPOLOGY_PLURAL,
        ),
        status_reset_on_create: Iterable[str] = (c.PLURAL, c.TOPOLOGY_PLURAL),
        schemas: Mapping[str, CrdSchema] | None = None,
    ) -> None:
        self.clock = clock
        self.schemas = dict(project_schemas() if schemas is None else schemas)
        """Structural schemas by plural (the CRDs in crds/ unless given): every write of such a
        kind is pruned and checked, as the apiserver does; `seed` stores unchecked."""
        self.status_subresources = frozenset(status_subresources)
        self.status_reset_on_create = frozenset(status_reset_on_create)
        self.requests: list[tuple[str, str]] = []
        """(method, path) of every request in order; watches are logged as ("WATCH", path)."""
        self.request_log: list[Request] = []
        """The full requests, for assertions on bodies and parameters."""
        self._objects: dict[tuple[str, str | None, str], JSON] = {}
        self._resource_version = 0
        self._uids = itertools.count(1)
        self._names = itertools.count(1)
        self._history: list[_Change] = []
        self._watches: list[_Watch] = []
        self._errors: list[_InjectedError] = []
        self._holds: list[_Hold] = []
        self._terminating: set[str] = set()
        self.closed = False

    # --- Transport ------------------------------------------------------------------------------
    async def send(self, request: Request) -> tuple[int, Any]:
        # Bodies travel as JSON, as on the wire: enums become strings, tuples lists, and a body
        # the real transport could not serialise fails here too (TypeError from json.dumps).
        if request.body is not None:
            request = dataclasses.replace(request, body=_through_json(request.body))
        self.requests.append((request.method, request.path))
        self.request_log.append(request)
        # A real request is a scheduling point; keep that, so races show up in unit tests too.
        await asyncio.sleep(0)
        for hold in [h for h in self._holds if h.matches(request.method, request)]:
            await hold.released.wait()
        try:
            self._raise_injected(request.method, request)
            return self._handle(request)
        except StatusError as failure:
            return failure.code, failure.status()

    async def stream(self, request: Request) -> AsyncIterator[JSON]:
        self.requests.append(("WATCH", request.path))
        self.request_log.append(request)
        try:
            self._raise_injected("WATCH", request)
        except StatusError as failure:
            yield {"type": "ERROR", "object": failure.status()}
            return
        params = dict(request.params or {})
        where = Locator.parse(request.path)
        watch = _Watch(
            collection=where.collection,
            namespace=where.namespace,
            label_selector=params.get("labelSelector"),
            field_selector=params.get("fieldSelector"),
            bookmarks=params.get("allowWatchBookmarks") == "true",
        )
        try:
            _check_field_selector(where, watch.field_selector)
        except StatusError as refused:
            raise ApiError(refused.code, refused.status(), "WATCH", request.path) from None
        since = params.get("resourceVersion") or "0"
        if int(since):
            backlog = [change for change in self._history if change.resource_version > int(since)]
        else:
            backlog = [
                _Change(self._rv_of(obj), where.collection, ns, "ADDED", None, obj)
                for (collection, ns, _), obj in sorted(self._objects.items(), key=_sort_key)
                if collection == where.collection
            ]
        for change in backlog:
            event = watch.event(change)
            if event is not None:
                watch.queue.put_nowait(event)
        if self.closed:
            watch.queue.put_nowait(_CLOSED)
        self._watches.append(watch)
        timeout = float(params.get("timeoutSeconds", 0)) or None
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        try:
            while True:
                remaining = None if deadline is None else max(0.0, deadline - loop.time())
                # Not asyncio.wait_for: on 3.11 it swallows a cancel that comes as the queue
                # hands over an item, and the watcher that cancelled this watch waited for ever.
                try:
                    async with asyncio.timeout(remaining):
                        item = await watch.queue.get()
                except TimeoutError:
                    return
                if item is _CLOSED:
                    return
                yield item
        finally:
            self._watches.remove(watch)

    async def close(self) -> None:
        self.closed = True
        self.close_watches()

    # --- test controls --------------------------------------------------------------------------
    def close_watches(self) -> None:
        """End every open watch, as the apiserver does now and then; clients must re-watch."""
        for watch in self._watches:
            watch.queue.put_nowait(_CLOSED)

    @property
    def open_watches(self) -> int:
        """Watches currently streaming (a test can yield until its watcher is in place)."""
        return len(self._watches)

    def bookmark(self) -> None:
        """Send a BOOKMARK with the current resourceVersion to every watch that allows them."""
        for watch in self._watches:
            if watch.bookmarks:
                watch.queue.put_nowait(
                    {
                        "type": "BOOKMARK",
                        "object": {"metadata": {"resourceVersion": str(self._resource_version)}},
                    }
                )

    def inject_error(
        self,
        method: str,
        path: str | Callable[[Request], bool],
        code: int,
        reason: str = "InternalError",
        message: str = "injected by the test",
        *,
        times: int = 1,
        details: JSON | None = None,
    ) -> None:
        """Fail the next `times` requests of `method` ("*" for any, "WATCH" for watches) whose
        path equals or ends with `path` (or satisfies a predicate) with a Status `code` (and
        `details`: a 429's `retryAfterSeconds`, say)."""
        self._errors.append(_InjectedError(method, path, code, reason, message, times, details))

    def hold(self, method: str, path: str | Callable[[Request], bool]) -> asyncio.Event:
        """Keep matching requests in flight — logged, not yet applied — until the returned
        event is set: the way to make two writers overlap deterministically."""
        hold = _Hold(method, path, asyncio.Event())
        self._holds.append(hold)
        return hold.released

    def terminate_namespace(self, namespace: str) -> None:
        """The namespace is being deleted: from now on it refuses every create, as the
        apiserver's NamespaceLifecycle admission does (its objects stay until deleted)."""
        self._terminating.add(namespace)

    def recreate_namespace(self, namespace: str) -> None:
        """The namespace is gone and was created again: it takes creates again (what it held
        is the test's to delete)."""
        self._terminating.discard(namespace)

    def seed(self, *bodies: JSON) -> list[JSON]:
        """Store objects directly (unlogged), as if created earlier; uids given are kept.

        No schema checks them: a seeded object may be one stored before its CRD was tightened
        (every later write of it is then refused, as on a v1.20 apiserver).

        Custom resources and built-in kinds alike keep their `status`, so any state can be set
        up in one call. Returns the stored copies (with resourceVersions).
        """
        stored = []
        for body in bodies:
            where = self._locator_of(body)
            obj = _through_json(body)
            self._fill_metadata(obj, where)
            key = (where.collection, where.namespace, obj["metadata"]["name"])
            old = self._objects.get(key)
            if old is not None:
                obj["metadata"]["uid"] = body["metadata"].get("uid") or old["metadata"]["uid"]
            self._commit(key, "MODIFIED" if old else "ADDED", old, obj)
            stored.append(copy.deepcopy(obj))
        return stored

    def get_object(self, kind: Kind, name: str, namespace: str | None = None) -> JSON | None:
        """A copy of a stored object, or None (unlogged; for assertions)."""
        where = Locator.parse(kind.path(namespace, name))
        obj = self._objects.get((where.collection, namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def objects(self, kind: Kind, namespace: str | None = None) -> list[JSON]:
        """Copies of the stored objects of a kind (all namespaces when None), in LIST order."""
        collection = Locator.parse(kind.path()).collection
        return [
            copy.deepcopy(obj)
            for (coll, ns, _), obj in sorted(self._objects.items(), key=_sort_key)
            if coll == collection and (namespace is None or ns == namespace)
        ]

    def events(self, *, involved: str | None = None, reason: str | None = None) -> list[JSON]:
        """Stored core/v1 Events, optionally about one object name and with one reason."""
        return [
            event
            for event in self.objects(Kind("", "v1", "events"))
            if (involved is None or event.get("involvedObject", {}).get("name") == involved)
            and (reason is None or event.get("reason") == reason)
        ]

    def count(self, method: str, path_suffix: str = "") -> int:
        """How many requests of `method` went to a path ending with `path_suffix`."""
        return sum(1 for m, p in self.requests if m == method and p.endswith(path_suffix))

    @property
    def writes(self) -> list[tuple[str, str]]:
        """The logged requests that may change state (everything but GET and WATCH)."""
        return [(m, p) for m, p in self.requests if m not in ("GET", "WATCH")]

    @property
    def resource_version(self) -> str:
        """The newest resourceVersion handed out."""
        return str(self._resource_version)

    def clear_requests(self) -> None:
        self.requests.clear()
        self.request_log.clear()

    # --- request handling -----------------------------------------------------------------------
    def _raise_injected(self, method: str, request: Request) -> None:
        for error in self._errors:
            if error.times > 0 and error.matches(method, request):
                error.times -= 1
                raise StatusError(error.code, error.reason, error.message, error.details)

    def _handle(self, request: Request) -> tuple[int, Any]:
        try:
            where = Locator.parse(request.path)
        except ValueError as exc:
            raise StatusError(404, "NotFound", str(exc)) from None
        params = dict(request.params or {})
        dry_run = bool(params.get("dryRun"))
        method = request.method
        if method == "POST" and where.namespace in self._terminating:
            raise self._namespace_terminating(where, request.body)
        if where.name is None:
            if method == "GET":
                return 200, self._list(where, params)
            if method == "POST":
                return 201, self._create(where, request.body, dry_run)
        elif where.subresource is None or where.subresource == "status":
            if method == "GET":
                return 200, copy.deepcopy(self._stored(where))
            if method == "PUT":
                return 200, self._replace(where, request.body, dry_run)
            if method == "PATCH":
                return 200, self._patch(where, request.body, request.content_type, dry_run)
            if method == "DELETE" and where.subresource is None:
                return 200, self._delete(where, request.body or {}, dry_run)
        elif where.subresource == "binding" and where.plural == "pods" and method == "POST":
            return 201, self._bind(where, request.body or {}, dry_run)
        raise StatusError(405, "MethodNotAllowed", f"{method} is not supported on {request.path}")

    def _list(self, where: Locator, params: Mapping[str, str]) -> JSON:
        _check_field_selector(where, params.get("fieldSelector"))
        items = [
            copy.deepcopy(obj)
            for (collection, ns, _), obj in sorted(self._objects.items(), key=_sort_key)
            if collection == where.collection
            and (where.namespace is None or ns == where.namespace)
            and label_selector_matches(params.get("labelSelector"), obj["metadata"].get("labels"))
            and field_selector_matches(params.get("fieldSelector"), obj)
        ]
        kind = _KINDS.get(where.plural) or next(
            (item.get("kind") for item in items if item.get("kind")), ""
        )
        metadata: JSON = {"resourceVersion": str(self._resource_version)}
        limit = int(params.get("limit") or 0)
        if limit:
            # Pages carry a token that pins the list's resourceVersion as the apiserver's do;
            # unlike the apiserver, later pages show the current items, not a snapshot (tests do
            # not write between pages).
            start, pinned = 0, self._resource_version
            if params.get("continue"):
                pinned_text, _, start_text = params["continue"].partition(":")
                pinned, start = int(pinned_text), int(start_text)
                metadata["resourceVersion"] = str(pinned)
            if start + limit < len(items):
                metadata["continue"] = f"{pinned}:{start + limit}"
            items = items[start : start + limit]
        return {
            "apiVersion": where.api.split("/", 2)[-1],
            "kind": f"{kind}List",
            "metadata": metadata,
            "items": items,
        }

    def _create(self, where: Locator, body: Any, dry_run: bool) -> JSON:
        if not isinstance(body, dict):
            raise StatusError(400, "BadRequest", "the body of a create must be an object")
        obj = copy.deepcopy(body)
        metadata = obj.setdefault("metadata", {})
        if where.namespace is not None and metadata.get("namespace") not in (
            None,
            "",
            where.namespace,
        ):
            raise StatusError(
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace sent "
                "on the request",
            )
        if not metadata.get("name"):
            if not metadata.get("generateName"):
                raise StatusError(
                    422,
                    "Invalid",
                    "metadata.name: Required value: name or generateName is required",
                )
            metadata["name"] = metadata["generateName"] + self._suffix()
        name = metadata["name"]
        key = (where.collection, where.namespace, name)
        if key in self._objects:
            raise StatusError(
                409,
                "AlreadyExists",
                f'{self._resource(where)} "{name}" already exists',
                self._details(where, name),
            )
        for server_field in ("uid", "resourceVersion", "deletionTimestamp"):
            metadata.pop(server_field, None)
        self._fill_metadata(obj, where)
        if where.plural in self.status_reset_on_create:
            obj.pop("status", None)
        if where.plural == "pods" and not (obj.get("status") or {}).get("phase"):
            obj.setdefault("status", {})["phase"] = c.PodPhase.PENDING.value
        obj = self._checked(where, obj, name)
        if not dry_run:
            self._commit(key, "ADDED", None, obj)
        return copy.deepcopy(obj)

    def _replace(self, where: Locator, body: Any, dry_run: bool) -> JSON:
        current = self._stored(where)
        if not isinstance(body, dict):
            raise StatusError(400, "BadRequest", "the body of an update must be an object")
        wanted = body.get("metadata", {}).get("resourceVersion")
        if wanted not in (None, "") and str(wanted) != current["metadata"]["resourceVersion"]:
            raise self._conflict(where)
        return self._update(where, current, copy.deepcopy(body), dry_run)

    def _patch(self, where: Locator, body: Any, content_type: str, dry_run: bool) -> JSON:
        current = self._stored(where)
        media = content_type.split(";", 1)[0].strip()
        if media not in (MERGE_PATCH, STRATEGIC_PATCH):
            # The apiserver also takes JSON patches; nothing under test sends them, so the fake
            # refuses them rather than pretend.
            raise StatusError(
                415,
                "UnsupportedMediaType",
                f"the fake serves only {MERGE_PATCH} and {STRATEGIC_PATCH}, not {media}",
            )
        patched = (merge_patch if media == MERGE_PATCH else strategic_merge_patch)(current, body)
        if not isinstance(patched, dict):
            raise StatusError(422, "Invalid", "the patched object is not an object")
        # What the patch left in metadata.resourceVersion must match: the precondition clients
        # use for optimistic locking (a patch that removes it is unconditional).
        wanted_rv = (patched.get("metadata") or {}).get("resourceVersion")
        if wanted_rv is not None and str(wanted_rv) != current["metadata"]["resourceVersion"]:
            raise self._conflict(where)
        return self._update(where, current, patched, dry_run)

    def _update(self, where: Locator, current: JSON, new: JSON, dry_run: bool) -> JSON:
        """Store `new` in place of `current` under the rules of the main or status resource."""
        uid = (new.get("metadata") or {}).get("uid")
        if uid not in (None, "", current["metadata"]["uid"]):
            reason = f'metadata.uid: Invalid value: "{uid}": field is immutable'
            raise StatusError(
                422,
                "Invalid",
                f'{self._kind(where, current)} "{where.name}" is invalid: {reason}',
                self._details(where),
            )
        if where.subresource == "status":
            obj = copy.deepcopy(current)
            if "status" in new:
                obj["status"] = new["status"]
            else:
                obj.pop("status", None)
        else:
            obj = new
            if where.plural in self.status_subresources:
                if "status" in current:
                    obj["status"] = copy.deepcopy(current["status"])
                else:
                    obj.pop("status", None)
        metadata = obj.setdefault("metadata", {})
        for kept in ("name", "uid", "creationTimestamp", "deletionTimestamp", "generation"):
            if kept in current["metadata"]:
                metadata[kept] = current["metadata"][kept]
            else:
                metadata.pop(kept, None)
        if where.namespace is not None:
            metadata["namespace"] = where.namespace
        obj = self._checked(where, obj, current["metadata"]["name"])
        metadata = obj["metadata"]
        if where.subresource is None and _spec_like(obj) != _spec_like(current):
            metadata["generation"] = int(current["metadata"].get("generation", 0)) + 1
        if obj == current:
            return copy.deepcopy(current)  # a no-op write does not bump the resourceVersion
        key = (where.collection, where.namespace, current["metadata"]["name"])
        if metadata.get("deletionTimestamp") and not metadata.get("finalizers"):
            if not dry_run:
                self._commit(key, "DELETED", current, obj)
            return copy.deepcopy(obj)
        if not dry_run:
            self._commit(key, "MODIFIED", current, obj)
        return copy.deepcopy(obj)

    def _delete(self, where: Locator, options: Mapping[str, Any], dry_run: bool) -> JSON:
        current = self._stored(where)
        preconditions = options.get("preconditions") or {}
        uid = preconditions.get("uid")
        if uid and uid != current["metadata"]["uid"]:
            raise StatusError(
                409,
                "Conflict",
                f"Operation cannot be fulfilled on {self._kind(where, current)} "
                f'"{where.name}": the UID in the precondition ({uid}) does not match the UID '
                f"in record ({current['metadata']['uid']}). The object might have been deleted "
                "and then recreated",
            )
        rv = preconditions.get("resourceVersion")
        if rv and str(rv) != current["metadata"]["resourceVersion"]:
            raise self._conflict(where)
        key = (where.collection, where.namespace, current["metadata"]["name"])
        if current["metadata"].get("finalizers"):
            if current["metadata"].get("deletionTimestamp"):
                return copy.deepcopy(current)
            obj = copy.deepcopy(current)
            obj["metadata"]["deletionTimestamp"] = self._now()
            obj["metadata"]["deletionGracePeriodSeconds"] = 0
            if not dry_run:
                self._commit(key, "MODIFIED", current, obj)
            return copy.deepcopy(obj)
        obj = copy.deepcopy(current)
        if where.plural == "pods":
            # Pods are deleted gracefully: the apiserver first stores the deletionTimestamp
            # (watchers see MODIFIED), then, with no kubelet to wait for, removes the pod.
            obj["metadata"]["deletionTimestamp"] = self._now()
            obj["metadata"]["deletionGracePeriodSeconds"] = 0
            if not dry_run:
                self._commit(key, "MODIFIED", current, obj)
                current, obj = obj, copy.deepcopy(obj)
        if not dry_run:
            self._commit(key, "DELETED", current, obj)
        return copy.deepcopy(obj)

    def _bind(self, where: Locator, binding: Mapping[str, Any], dry_run: bool) -> JSON:
        pod = self._stored(Locator(where.api, where.plural, where.namespace, where.name))
        name = pod["metadata"]["name"]
        wanted_uid = (binding.get("metadata") or {}).get("uid")
        if wanted_uid and wanted_uid != pod["metadata"]["uid"]:
            raise StatusError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on pods/binding "{name}": Precondition failed: '
                f"UID in precondition: {wanted_uid}, UID in object meta: {pod['metadata']['uid']}",
            )
        if pod["metadata"].get("deletionTimestamp"):
            raise StatusError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is being '
                "deleted, cannot be assigned to a host",
            )
        bound = (pod.get("spec") or {}).get("nodeName")
        if bound:
            raise StatusError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is '
                f'already assigned to node "{bound}"',
            )
        node = (binding.get("target") or {}).get("name")
        if not node:
            raise StatusError(422, "Invalid", "target.name: Required value")
        obj = copy.deepcopy(pod)
        obj.setdefault("spec", {})["nodeName"] = node
        conditions = [
            cond
            for cond in (obj.setdefault("status", {}).get("conditions") or [])
            if cond.get("type") != "PodScheduled"
        ]
        conditions.append(
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": self._now()}
        )
        obj["status"]["conditions"] = conditions
        if not dry_run:
            self._commit((where.collection, where.namespace, name), "MODIFIED", pod, obj)
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "code": 201,
        }

    # --- storage --------------------------------------------------------------------------------
    def _stored(self, where: Locator) -> JSON:
        assert where.name is not None
        obj = self._objects.get((where.collection, where.namespace, where.name))
        if obj is None:
            raise StatusError(
                404,
                "NotFound",
                f'{self._resource(where)} "{where.name}" not found',
                self._details(where),
            )
        return obj

    def _commit(
        self, key: tuple[str, str | None, str], kind: str, old: JSON | None, new: JSON
    ) -> None:
        self._resource_version += 1
        new["metadata"]["resourceVersion"] = str(self._resource_version)
        if kind == "DELETED":
            self._objects.pop(key, None)
        else:
            self._objects[key] = new
        change = _Change(
            self._resource_version,
            key[0],
            key[1],
            kind,
            copy.deepcopy(old),
            copy.deepcopy(new),
        )
        self._history.append(change)
        for watch in self._watches:
            event = watch.event(change)
            if event is not None:
                watch.queue.put_nowait(event)

    def _fill_metadata(self, obj: JSON, where: Locator) -> None:
        metadata = obj.setdefault("metadata", {})
        if where.namespace is not None:
            metadata["namespace"] = where.namespace
        metadata.setdefault("uid", f"fake-{next(self._uids):08d}-0000-4000-8000-000000000000")
        metadata.setdefault("creationTimestamp", self._now())
        metadata.setdefault("generation", 1)

    def _locator_of(self, body: JSON) -> Locator:
        api_version = body.get("apiVersion", "v1")
        api = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        kind = body.get("kind", "")
        plural = next((p for p, k in _KINDS.items() if k == kind), kind.lower() + "s")
        namespace = (
            None if plural in _CLUSTER_SCOPED else body["metadata"].get("namespace") or "default"
        )
        return Locator(api, plural, namespace, body["metadata"]["name"])

    def _namespace_terminating(self, where: Locator, body: Any) -> StatusError:
        meta = (body.get("metadata") if isinstance(body, dict) else None) or {}
        name = where.name or meta.get("name") or meta.get("generateName") or ""
        namespace = where.namespace
        return StatusError(
            403,
            "Forbidden",
            f'{where.plural} "{name}" is forbidden: unable to create new content in namespace '
            f"{namespace} because it is being terminated",
            {
                "name": name,
                "kind": where.plural,
                "causes": [
                    {
                        "reason": c.StatusCause.NAMESPACE_TERMINATING,
                        "message": f"namespace {namespace} is being terminated",
                        "field": "metadata.namespace",
                    }
                ],
            },
        )

    def _conflict(self, where: Locator) -> StatusError:
        return StatusError(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {self._resource(where)} "{where.name}": the '
            "object has been modified; please apply your changes to the latest version and try "
            "again",
            self._details(where),
        )

    def _checked(self, where: Locator, obj: JSON, name: str) -> JSON:
        """`obj` pruned by its kind's schema; 422 Invalid naming every field it breaks."""
        schema = self.schemas.get(where.plural)
        if schema is None:
            return obj
        obj = schema.prune(obj)
        errors = schema.errors(obj)
        if not errors:
            return obj
        causes = [
            {"reason": "FieldValueInvalid", "message": why, "field": path} for path, why in errors
        ]
        said = [f"{path}: {why}" for path, why in errors]
        listed = said[0] if len(said) == 1 else f"[{', '.join(said)}]"
        kind = self._kind(where, obj)
        raise StatusError(
            422,
            "Invalid",
            f'{kind}.{where.group} "{name}" is invalid: {listed}',
            # An Invalid answer names the Kind in its details, where NotFound names the plural.
            {**self._details(where, name), "kind": kind, "causes": causes},
        )

    @staticmethod
    def _resource(where: Locator) -> str:
        return f"{where.plural}.{where.group}" if where.group else where.plural

    @staticmethod
    def _kind(where: Locator, obj: JSON) -> str:
        return str(obj.get("kind") or _KINDS.get(where.plural, where.plural))

    @staticmethod
    def _details(where: Locator, name: str | None = None) -> JSON:
        """A Status's `details`: the object's name, its group (outside the core) and plural."""
        details = {"name": name or where.name or ""}
        if where.group:
            details["group"] = where.group
        details["kind"] = where.plural
        return details

    @staticmethod
    def _rv_of(obj: JSON) -> int:
        return int(obj["metadata"]["resourceVersion"])

    def _suffix(self) -> str:
        number, letters = next(self._names), ""
        for _ in range(5):
            number, digit = divmod(number, len(_NAME_ALPHABET))
            letters += _NAME_ALPHABET[digit]
        return letters

    def _now(self) -> str:
        return self.clock().astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


FakeTransport = FakeApiServer
"""The name by the seam it fakes."""


@functools.cache
def project_schemas() -> dict[str, CrdSchema]:
    """The schemas of the CRDs in crds/, read once per test run."""
    return crd_schemas(*project_crds())


def _through_json(body: Any) -> Any:
    return json.loads(json.dumps(body))


def _sort_key(item: tuple[tuple[str, str | None, str], JSON]) -> tuple[str, str, str]:
    (collection, namespace, name), _ = item
    return (collection, namespace or "", name)


def _spec_like(obj: Mapping[str, Any]) -> str:
    """Everything but metadata and status: what `metadata.generation` counts changes of."""
    return json.dumps(
        {k: v for k, v in obj.items() if k not in ("metadata", "status")}, sort_keys=True
    )


# --- a transport that fails on demand ----------------------------------------------------------


class Fault(enum.Enum):
    """What `FaultyTransport` does to the requests it matches."""

    HANG = "hang"
    """No answer, ever (an overloaded API server)."""
    REFUSE = "refuse"
    """No HTTP answer: the connection is refused (a restarting API server)."""


class FaultyTransport:
    """The fake API server behind a connection that fails on demand: while `fault` is set, the
    requests `matching` selects hang or are refused in the transport, and everything else goes
    through. Clients see what aiohttp would give them, not an API Status."""

    def __init__(
        self,
        api: FakeApiServer,
        matching: Callable[[Request], bool] = lambda request: True,
        fault: Fault | None = None,
    ) -> None:
        self.api = api
        self.matching = matching
        self.fault = fault
        self.hung = 0
        self.refused = 0

    async def send(self, request: Request) -> tuple[int, Any]:
        if self.fault is Fault.HANG and self.matching(request):
            self.hung += 1
            await asyncio.Event().wait()
        if self.fault is Fault.REFUSE and self.matching(request):
            self.refused += 1
            raise ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 6443)")
        return await self.api.send(request)

    def stream(self, request: Request) -> AsyncIterator[JSON]:
        return self.api.stream(request)

    async def close(self) -> None:
        await self.api.close()


# --- an informer's index view ------------------------------------------------------------------

K = TypeVar("K")
V = TypeVar("V")


class FakeIndex(Mapping[K, tuple[V, ...]], Generic[K, V]):
    """A stand-in for an informer's `IndexView`: key -> the values indexed under it.

    Like the informers' views, `get(key, default)` and `index[key]` give an iterable of values,
    a key whose last value is removed disappears, and one object (by uid, else namespace/name)
    has one value per key: `put` of a newer body replaces the older one. Tests write with
    `put`/`remove`, and can leave the index stale on purpose, as a lagging watch would.
    """

    def __init__(self, initial: Mapping[K, Iterable[V]] | None = None) -> None:
        self._items: dict[K, dict[Any, V]] = {}
        for key, values in (initial or {}).items():
            for value in values:
                self.put(key, value)

    def put(self, key: K, value: V) -> None:
        """Index `value` under `key`, replacing the same object's previous value there."""
        self._items.setdefault(key, {})[_identity(value)] = value

    def remove(self, key: K, value: V) -> None:
        """Forget the object's value under `key` (the object was deleted or moved)."""
        store = self._items.get(key, {})
        store.pop(_identity(value), None)
        if not store:
            self._items.pop(key, None)

    def __getitem__(self, key: K) -> tuple[V, ...]:
        return tuple(self._items[key].values())

    def __iter__(self) -> Iterator[K]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"FakeIndex({dict(self.items())!r})"


def _identity(value: Any) -> Any:
    if isinstance(value, Mapping):
        metadata = value.get("metadata") or {}
        if metadata.get("uid"):
            return ("uid", metadata["uid"])
        if metadata.get("name"):
            return ("name", metadata.get("namespace"), metadata["name"])
    return ("value", id(value))
