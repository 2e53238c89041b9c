"""Informers: one list+watch per resource kind, a store of slim objects, events fanned out.

An informer is one task per kind whatever the object count, as in client-go's `tools/cache`
(Reflector -> Store/Indexer -> handlers), which this follows in shape; Kopf's per-object workers
and index barrier do not scale to a cluster's pods
(docs/decisions/001-informers-for-pods-and-nodes.md):

* **List** in pages (`limit`/`continue`), so a 150,000-pod cluster never arrives as one
  response; each page is slimmed (`adapters.slim`) before the next is read. A continue token
  that expired (410) starts the list again.
* **Watch** from the list's resourceVersion with bookmarks, so a quiet watch that the server
  closes resumes from a recent version instead of listing again. A 410 Gone (as an HTTP answer
  or an ERROR event) means the version left the server's window: list again, and turn the
  difference between the store and the fresh list into ADDED/MODIFIED/DELETED events (the
  "replace" of client-go's DeltaFIFO), so consumers never miss a deletion. Any other end of a
  watch (a reset connection, a server error, a watch that hung) watches again from the last
  version seen, after a backoff if it failed, as client-go's reflector does: a list of every
  pod of a 150,000-pod cluster for each dropped connection would cost the API server and us
  far more than the watch it replaces. A watch the server has not ended WATCH_GRACE_SECONDS
  after its own timeout is ended here: its connection is dead or hung, and without this bound
  the store would stay stale, silently, for as long as the connection stays open.
* **Store** of slim objects by key, with secondary indexes (e.g. pods by PodGroup) maintained
  on every change, so readers answer "members of this group" without a scan.
* **Fan-out**: each event goes synchronously, in order, to every registered handler with the
  new and the previous object. Handlers must be quick (mark dirty, update a snapshot); a
  handler that raises is logged and counted, never allowed to stop the informer or the other
  handlers.
* **Synced**: `synced` is set after the first complete list, when every handler has seen every
  object once; `Informers.wait_synced()` waits for all kinds.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Hashable, Sequence, ValuesView
from dataclasses import dataclass, field
from typing import Any, Protocol

from podgroup_operator.adapters import heap
from podgroup_operator.adapters.kube import JSON, ApiError, Kind, KubeClient
from podgroup_operator.api.backoff import Backoff
from podgroup_operator.constants import WatchEventType
from podgroup_operator.logs import describe

logger = logging.getLogger(__name__)

Handler = Callable[[WatchEventType, JSON, JSON | None], None]
"""(event type, the object as now stored or last known when deleted, the previous object)."""
IndexFunc = Callable[[JSON], Hashable | None]
"""The index value of an object, or None to leave it out of the index."""

PAGE_SIZE = 500
"""Objects per LIST page: big enough for few round trips, small enough to slim as we go."""
WATCH_SECONDS = (240, 360)
"""The server ends each watch after a random time in this range, as client-go asks (5-10 min
there); spreading the ends keeps several informers from re-watching at the same instant."""
WATCH_GRACE_SECONDS = 30.0
"""How long past a watch's `timeoutSeconds` we wait for the server to end it before we do.

A bound past the server's own, not a limit on silence: a quiet kind's watch may carry nothing
for its whole life, but a server that has not ended a watch well past the time it was given is
not reaching us (docs/decisions/001-informers-for-pods-and-nodes.md). Kopf's watches of PodGroups
have the same bound (`settings.watching.client_timeout`, handlers/startup.py)."""
SHORT_WATCH_SECONDS = 1.0
"""A watch that ends sooner than this with nothing in it counts as a failure (backed off): a
server or proxy that answers every watch with an empty stream would otherwise be asked again
as fast as it answers. client-go calls this a "very short watch"."""
REPLAY_SLICE = 1_000
"""Stored objects replayed to a handler between two turns of the event loop (`attach`;
docs/decisions/001-informers-for-pods-and-nodes.md)."""
CATCH_UP_POLL_SECONDS = 0.01
"""How often `Informer.caught_up` looks at the watch's resume point."""
RETRY = Backoff(initial_seconds=1.0, max_seconds=30.0)
"""Backoff after an unexpected failure of list or watch: 1 s, doubling, at most 30 s."""


def object_key(obj: JSON) -> str:
    """`namespace/name`, or `name` for cluster-scoped objects (client-go's MetaNamespaceKey)."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


def resource_version(obj: JSON) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _revision(version: str) -> int | None:
    """A resourceVersion as the etcd revision it is, or None for one that is not a number.

    Clients are told to treat resourceVersions as opaque; the one comparison made here
    (`Informer.caught_up`) is skipped when they are not numbers, as with another storage."""
    try:
        return int(version)
    except ValueError:
        return None


class ResourceVersionGoneError(Exception):
    """The resourceVersion we asked for is too old (410): list again."""


class WatchStalledError(TimeoutError):
    """The server did not end a watch WATCH_GRACE_SECONDS after its timeout: watch again."""


class ShortWatchError(Exception):
    """A watch ended at once with no event (see SHORT_WATCH_SECONDS): back off, watch again."""


class Index(Protocol):
    """What a controller reads of an index: the objects indexed under `value`, or `default`
    when there are none. `IndexView` is one; unit tests give a fake (`tests.fakes.FakeIndex`)."""

    def get(self, value: Hashable, default: Sequence[JSON] = ()) -> Sequence[JSON]: ...


class IndexView:
    """Read-only view of one index (an `Index`): `get(value, default)` returns the objects under
    `value`, `value in view` says whether there are any, `keys()` lists the values with some."""

    def __init__(self, buckets: dict[Hashable, dict[str, JSON]]) -> None:
        self._buckets = buckets

    def get(self, value: Hashable, default: Any = ()) -> Any:
        bucket = self._buckets.get(value)
        return tuple(bucket.values()) if bucket else default

    def __contains__(self, value: Hashable) -> bool:
        return bool(self._buckets.get(value))

    def keys(self) -> list[Hashable]:
        return [value for value, bucket in self._buckets.items() if bucket]


class Store:
    """Slim objects by key, with secondary indexes kept current on every change."""

    def __init__(self) -> None:
        self._items: dict[str, JSON] = {}
        self._index_funcs: dict[str, IndexFunc] = {}
        self._indexes: dict[str, dict[Hashable, dict[str, JSON]]] = {}

    def add_index(self, name: str, func: IndexFunc) -> IndexView:
        buckets: dict[Hashable, dict[str, JSON]] = {}
        self._index_funcs[name] = func
        self._indexes[name] = buckets
        for key, obj in self._items.items():
            value = func(obj)
            if value is not None:
                buckets.setdefault(value, {})[key] = obj
        return IndexView(buckets)

    def index(self, name: str) -> IndexView:
        return IndexView(self._indexes[name])

    def get(self, key: str) -> JSON | None:
        return self._items.get(key)

    def __len__(self) -> int:
        return len(self._items)

    def values(self) -> ValuesView[JSON]:
        """Every object, as a live view (as a dict's): copy it before the store changes."""
        return self._items.values()

    def objects(self) -> list[JSON]:
        """Every stored object (a copy of the list: safe while the store changes)."""
        return list(self._items.values())

    def object_keys(self) -> list[str]:
        return list(self._items)

    def put(self, key: str, obj: JSON) -> JSON | None:
        old = self._items.get(key)
        if old is not None:
            self._unindex(key, old)
        self._items[key] = obj
        for name, func in self._index_funcs.items():
            value = func(obj)
            if value is not None:
                self._indexes[name].setdefault(value, {})[key] = obj
        return old

    def delete(self, key: str) -> JSON | None:
        old = self._items.pop(key, None)
        if old is not None:
            self._unindex(key, old)
        return old

    def _unindex(self, key: str, obj: JSON) -> None:
        for name, func in self._index_funcs.items():
            value = func(obj)
            if value is None:
                continue
            buckets = self._indexes[name]
            bucket = buckets.get(value)
            if bucket is not None:
                bucket.pop(key, None)
                if not bucket:
                    del buckets[value]


@dataclass
class InformerStats:
    """What the informer did, for tests, logs and metrics."""

    lists: int = 0
    pages: int = 0
    watches: int = 0
    events: int = 0
    bookmarks: int = 0
    gone: int = 0
    handler_errors: int = 0
    failures: int = 0
    """Lists and watches that failed (each then backed off)."""
    unserved: int = 0
    """Lists of an optional kind the server does not serve (or lets us not list), retried: the
    kind is absent, not failing, so these are not `failures`."""
    stalls: int = 0
    """Watches ended here because the server had not ended them (WATCH_GRACE_SECONDS)."""
    last_event: float = 0.0
    """Loop time of the last event or bookmark (to tell a quiet kind from a stuck one)."""


@dataclass
class Informer:
    """List and watch one kind; keep a store; tell every handler about every change."""

    kube: KubeClient
    kind: Kind
    slim: Callable[[JSON], JSON]
    namespace: str | None = None
    page_size: int = PAGE_SIZE
    name: str = ""
    store: Store = field(default_factory=Store)
    stats: InformerStats = field(default_factory=InformerStats)
    fallbacks: tuple[Kind, ...] = ()
    """Older API versions of the kind, tried in order when the server does not serve `kind`
    (404 on the first list): e.g. policy/v1beta1 PodDisruptionBudgets before Kubernetes 1.21."""
    watch_seconds: tuple[int, int] = WATCH_SECONDS
    watch_grace_seconds: float = WATCH_GRACE_SECONDS
    missing: str = ""
    """What to do when the server does not serve the kind at all (404 on a list), e.g. install
    the CRD: the log then says so instead of the API server's "404 page not found"."""
    optional: str = ""
    """For a kind the operator can do without, what goes missing without it. When a list is
    refused (403: the ClusterRole of an older release) or the kind is not served (404), the
    informer counts as synced, its store empty, and says so once with this text; it keeps
    listing, backed off, and a list that succeeds later brings the objects as ADDED events
    ("synced" gates leadership: a kind that may be refused must not stop every gang)."""

    def __post_init__(self) -> None:
        self.name = self.name or self.kind.plural
        self.synced = asyncio.Event()
        self._handlers: list[Handler] = []
        self._resource_version = ""

    def add_handler(self, handler: Handler, *, replay: bool = True) -> None:
        """Register a handler; with `replay`, it first gets ADDED for every stored object (as a
        client-go handler added to a running informer does), so late consumers catch up."""
        self._handlers.append(handler)
        if replay:
            for obj in self.store.objects():
                self._call(handler, WatchEventType.ADDED, obj, None)

    async def attach(self, handler: Handler) -> None:
        """`add_handler` with its replay given `REPLAY_SLICE` objects at a time, the event loop
        running between slices.

        A replay in one piece holds the event loop for as long as it takes (about a second for
        50,000 pods: docs/decisions/001-informers-for-pods-and-nodes.md). Events that arrive
        meanwhile reach the handler at once, as they reach every handler; an object changed or
        deleted before its turn is replayed as the store holds it then, or not at all, so a
        deleted object never comes back. A handler removed meanwhile gets no more of it."""
        self._handlers.append(handler)
        keys = self.store.object_keys()
        for start in range(0, len(keys), REPLAY_SLICE):
            if start:
                await asyncio.sleep(0)
                if handler not in self._handlers:
                    return
            for key in keys[start : start + REPLAY_SLICE]:
                obj = self.store.get(key)
                if obj is not None:
                    self._call(handler, WatchEventType.ADDED, obj, None)

    @property
    def resource_version(self) -> str:
        """Where the watch resumes: the version of the last event or bookmark (or list)."""
        return self._resource_version

    async def caught_up(self, version: str, *, quiet: float, timeout: float) -> bool:
        """Wait until the watch has delivered every change made before `version` (a
        resourceVersion of any kind: they share etcd's revisions), or until it has been quiet
        for `quiet` seconds (nothing is on its way: there is nothing to catch up with); False
        when neither happened within `timeout` seconds.

        A watch delivers changes in revision order, so once it brings one at `version` or
        later (an event or a bookmark), all before it are in the store. A store that is merely
        synced may be seconds behind a busy cluster; a new leader's first placements need the
        binds its predecessor made just before it stopped (`Leading._catch_up`)."""
        target = _revision(version)
        if target is None:
            return True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            seen = _revision(self._resource_version)
            if seen is not None and seen >= target:
                return True
            now = loop.time()
            if now - self.stats.last_event >= quiet:
                return True
            if now >= deadline:
                return False
            await asyncio.sleep(CATCH_UP_POLL_SECONDS)

    def remove_handler(self, handler: Handler) -> None:
        """Stop calling `handler`; one never added (or already removed) is let be."""
        if handler in self._handlers:
            self._handlers.remove(handler)

    # --- the loop ------------------------------------------------------------------------------
    async def run(self) -> None:
        """List, then watch until the version is gone; list again. Never returns."""
        failures = 0
        while True:
            try:
                await self._list()
                failures = 0
                await self._watch_until_gone()
            except asyncio.CancelledError:
                raise
            except ResourceVersionGoneError:
                self.stats.gone += 1
                logger.info("%s: resourceVersion expired; listing again", self.name)
            except Exception as exc:
                failures += 1
                # An optional kind missing is said once (below): its retries only at debug
                # level, or a cluster without it would log one line per kind every 30 s.
                quiet = bool(self.optional) and _unavailable(exc)
                if self.optional and not self.synced.is_set() and _unavailable(exc):
                    logger.warning(
                        "%s: %s; going on without it: %s", self.name, describe(exc), self.optional
                    )
                    self.synced.set()
                await self._back_off(failures, exc, "list", "again", quiet=quiet)

    async def _watch_until_gone(self) -> None:
        """Watch again and again from the last version seen; return only by raising
        ResourceVersionGoneError (list again). A failed watch is backed off, not listed again:
        the version it started from is still good unless the server says 410."""
        failures = 0
        while True:
            try:
                await self._watch()
                failures = 0
            except (asyncio.CancelledError, ResourceVersionGoneError):
                raise
            except Exception as exc:
                failures += 1
                version = self._resource_version or "(none)"
                await self._back_off(
                    failures, exc, "watch", f"watching again from resourceVersion {version}"
                )

    async def _back_off(
        self, failures: int, exc: Exception, step: str, then: str, *, quiet: bool = False
    ) -> None:
        """Count and log the `failures`-th failure in a row of `step` (list or watch), saying
        what comes `then` (`quiet`: at debug level, an optional kind not served, counted as
        `unserved`), and wait RETRY's delay for it."""
        if quiet:
            self.stats.unserved += 1
        else:
            self.stats.failures += 1
        delay = RETRY.delay(failures).total_seconds()
        cause = describe(exc)
        if isinstance(exc, ApiError) and exc.not_found:
            cause = "; ".join(
                filter(None, (f"{self.kind.path()} is not served (404)", self.missing))
            )
        logger.log(
            logging.DEBUG if quiet else logging.WARNING,
            "%s: %s failed (%s); %s in %.1fs",
            self.name,
            step,
            cause,
            then,
            delay,
        )
        await asyncio.sleep(delay)

    async def _list(self) -> None:
        # Everything a list loads lives as long as the store: no collector walks meanwhile.
        with heap.paused():
            await self._load()
        self.synced.set()

    async def _load(self) -> None:
        fresh: dict[str, JSON] = {}
        continue_token: str | None = None
        while True:
            try:
                page = await self.kube.list_page(
                    self.kind, self.namespace, limit=self.page_size, continue_token=continue_token
                )
            except ApiError as exc:
                if exc.gone and continue_token:
                    fresh.clear()  # the snapshot the token pointed into is gone: start over
                    continue_token = None
                    continue
                if exc.not_found and not continue_token and self.fallbacks:
                    old, self.kind = self.kind, self.fallbacks[0]
                    self.fallbacks = self.fallbacks[1:]
                    logger.info(
                        "%s: %s not served; using %s", self.name, old.path(), self.kind.path()
                    )
                    continue
                raise
            self.stats.pages += 1
            for item in page.get("items") or ():
                obj = self.slim(item)
                fresh[object_key(obj)] = obj
            metadata = page.get("metadata") or {}
            continue_token = metadata.get("continue") or None
            if continue_token is None:
                self._resource_version = str(metadata.get("resourceVersion") or "")
                break
        self.stats.lists += 1
        self._replace(fresh)

    def _replace(self, fresh: dict[str, JSON]) -> None:
        """Make the store equal `fresh`, telling handlers what changed (client-go's Replace)."""
        for key in [key for key in self.store.object_keys() if key not in fresh]:
            old = self.store.delete(key)
            if old is not None:
                self._fan_out(WatchEventType.DELETED, old, old)
        for key, obj in fresh.items():
            current = self.store.get(key)
            if current is not None and resource_version(current) == resource_version(obj):
                continue
            self.store.put(key, obj)
            event = WatchEventType.ADDED if current is None else WatchEventType.MODIFIED
            self._fan_out(event, obj, current)

    async def _watch(self) -> None:
        """One watch, from the last version seen, until the server ends it or it fails."""
        self.stats.watches += 1
        loop = asyncio.get_running_loop()
        started = loop.time()
        seen = self.stats.events + self.stats.bookmarks
        seconds = random.randint(*self.watch_seconds)
        bound = asyncio.timeout(seconds + self.watch_grace_seconds)
        try:
            async with bound:
                async for event_type, raw in self.kube.watch(
                    self.kind,
                    self.namespace,
                    resource_version=self._resource_version,
                    timeout_seconds=seconds,
                ):
                    self._on_event(event_type, raw)
        except ApiError as exc:
            if exc.gone:
                raise ResourceVersionGoneError() from exc
            raise
        except TimeoutError as exc:
            if not bound.expired():
                raise  # the transport's own timeout: a failure like any other
            self.stats.stalls += 1
            raise WatchStalledError(
                f"the server had not ended the watch {self.watch_grace_seconds:.0f}s after its "
                f"{seconds}s timeout; the connection is presumed dead"
            ) from exc
        if self.stats.events + self.stats.bookmarks == seen and (
            loop.time() - started < SHORT_WATCH_SECONDS
        ):
            raise ShortWatchError(
                f"the watch ended after {loop.time() - started:.2f}s with no event"
            )

    def _on_event(self, event_type: str, raw: JSON) -> None:
        self.stats.last_event = asyncio.get_running_loop().time()
        try:
            kind = WatchEventType(event_type)
        except ValueError:
            logger.warning("%s: unknown watch event type %r ignored", self.name, event_type[:40])
            return
        if kind is WatchEventType.ERROR:
            code = raw.get("code")
            if code == 410:
                raise ResourceVersionGoneError()
            raise ApiError(int(code or 500), raw, "WATCH", self.kind.path(self.namespace))
        version = resource_version(raw)
        if version:
            self._resource_version = version
        if kind is WatchEventType.BOOKMARK:
            self.stats.bookmarks += 1
            return
        self.stats.events += 1
        obj = self.slim(raw)
        key = object_key(obj)
        if kind is WatchEventType.DELETED:
            old = self.store.delete(key)
            self._fan_out(WatchEventType.DELETED, obj, old)
            return
        old = self.store.put(key, obj)
        self._fan_out(WatchEventType.ADDED if old is None else WatchEventType.MODIFIED, obj, old)

    def _fan_out(self, event_type: WatchEventType, obj: JSON, old: JSON | None) -> None:
        for handler in list(self._handlers):
            self._call(handler, event_type, obj, old)

    def _call(
        self, handler: Handler, event_type: WatchEventType, obj: JSON, old: JSON | None
    ) -> None:
        try:
            handler(event_type, obj, old)
        except Exception as exc:
            self.stats.handler_errors += 1
            logger.error(
                "%s: handler %s failed on %s %s: %s",
                self.name,
                getattr(handler, "__qualname__", handler),
                event_type,
                object_key(obj),
                describe(exc),
                exc_info=self.stats.handler_errors <= 3,  # a traceback for the first few only
            )


def _unavailable(exc: Exception) -> bool:
    """A list that cannot succeed until the cluster changes: refused (403) or not served
    (404)."""
    return isinstance(exc, ApiError) and (exc.forbidden or exc.not_found)
