"""Other schedulers' PodGroups: their mirrors kept equal to them, their status written back.

Runs on the leader. A source PodGroup (Volcano, Koordinator, native; `domain.dialects`) marks
its key dirty on every event, and so does our PodGroup of the same key when it is a mirror (its
status changed). A dirty key is reconciled from the stores, one at a time, after COALESCE
seconds (a burst of status writes costs one pass):

* the source translated (`domain.dialects.translate`); errors go to one Warning Event on the
  source (`InvalidPodGroup`, each field and its fix) and nothing is made; each Note to one
  Normal Event;
* no PodGroup of ours by that name: the mirror is created; ours, made from this source: its
  spec and its quota label are replaced when they differ (a Volcano `spec.queue` names the
  ElasticQuota of its name while one exists: the sources with a queue are reconciled again
  whenever the set of ElasticQuotas changes, `on_quota_tree`); ours made otherwise (a user's,
  another dialect's): one Warning (`PodGroupNameTaken`), and that one governs the pods;
* the mirror's status, in the source's shape, is written to the source when it differs
  (through `/status` where the CRD has that subresource, else on the object, as Volcano's own
  CRD has none).

A source deleted takes its mirror along (the mirror's ownerReference, the garbage collector).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable, Mapping
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.adapters.informers import Handler, Informer, Store, resource_version
from podgroup_operator.adapters.kube import (
    CRDS,
    JSON,
    KOORD_PODGROUPS,
    NATIVE_PODGROUPS,
    NATIVE_PODGROUPS_V1ALPHA2,
    PODGROUPS,
    VOLCANO_PODGROUPS,
    ApiError,
    Kind,
    KubeClient,
)
from podgroup_operator.adapters.slim import without_managed_fields
from podgroup_operator.api.dialect_crds import DIALECT_CRDS
from podgroup_operator.api.elastic_quota import QuotaKey, QuotaRef
from podgroup_operator.api.times import rfc3339
from podgroup_operator.constants import Dialect, WatchEventType
from podgroup_operator.controllers.background import Background
from podgroup_operator.controllers.clock import LOOP_CLOCK, MonotonicClock, sleep
from podgroup_operator.controllers.isolation import Failures
from podgroup_operator.controllers.narrator import Narrator
from podgroup_operator.domain.dialects import (
    DEFAULT_VOLCANO_QUEUE,
    differs,
    mirror_body,
    mirror_labels,
    mirror_of,
    owned_by,
    status_for,
    translate,
)
from podgroup_operator.logs import truncate
from podgroup_operator.scheduling.elastic.tree import QuotaTree, label

logger = logging.getLogger(__name__)

COALESCE_SECONDS = 0.2
"""How long after a first change the dirty keys are reconciled, all at once."""

Key = tuple[Dialect, str]
"""(dialect, `namespace/name`)."""


class DialectMirrors(Background):
    """Mirrors other schedulers' PodGroups into ours and writes their status back."""

    task_name = "dialect-mirrors"

    def __init__(
        self,
        kube: KubeClient,
        groups: Store,
        sources: Mapping[Dialect, Informer],
        topologies: Callable[[], Mapping[str, tuple[str, ...]]],
        *,
        namespaces: frozenset[str] = frozenset(),
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        monotonic: MonotonicClock = LOOP_CLOCK,
        delay: float = COALESCE_SECONDS,
    ) -> None:
        self.kube = kube
        self.namespaces = namespaces
        """Namespaces whose sources are mirrored (`run --namespace`); empty means all."""
        self.groups = groups
        self.sources = dict(sources)
        self.topologies = topologies
        self.clock = clock
        self.monotonic = monotonic
        self.delay = delay
        self.narrator = Narrator(kube, clock)
        self.failures = Failures(
            "mirror of PodGroup", logger, metric="dialect", monotonic=monotonic
        )
        self._said: set[tuple[str, str, str]] = set()
        """(source uid, reason, message) of the Events posted, each said once."""
        self._dirty: set[Key] = set()
        self._wake = asyncio.Event()
        self._handlers: dict[Dialect, Handler] = {}
        self._quota_tree: QuotaTree | None = None
        self._quota_keys: frozenset[QuotaKey] = frozenset()
        self.writes = 0

    # --- events ------------------------------------------------------------------------------
    def on_source(self, dialect: Dialect) -> Handler:
        """The handler of one dialect's informer (the same one each call, to remove it)."""
        handler = self._handlers.get(dialect)
        if handler is None:

            def handler(kind: WatchEventType, body: JSON, old: JSON | None) -> None:
                if kind is WatchEventType.DELETED:
                    uid = (body.get("metadata") or {}).get("uid")
                    self._said = {said for said in self._said if said[0] != uid}
                    return  # the garbage collector deletes its mirror
                self.touch((dialect, _key(body)))

            handler.__qualname__ = f"DialectMirrors.on_source[{dialect.value}]"
            self._handlers[dialect] = handler
        return handler

    def on_group(self, kind: WatchEventType, body: JSON, old: JSON | None) -> None:
        """Our PodGroup changed: when it is a mirror, its source's status may need writing."""
        dialect = mirror_of(body)
        if dialect is c.Dialect.NATIVE_V1ALPHA2:
            dialect = c.Dialect.NATIVE_V1BETA1  # one informer reads the native kind
        if dialect is not None and dialect in self.sources:
            self.touch((dialect, _key(body)))

    def on_quota_tree(self, tree: QuotaTree | None) -> None:
        """The ElasticQuota tree was rebuilt: when the set of quotas changed, each Volcano
        source naming a queue is reconciled again (its queue may name a quota now, or no
        longer)."""
        self._quota_tree = tree
        keys = frozenset(tree.nodes) if tree is not None else frozenset()
        if keys == self._quota_keys:
            return
        self._quota_keys = keys
        informer = self.sources.get(c.Dialect.VOLCANO)
        if informer is None:
            return
        for source in informer.store.values():
            queue = (source.get("spec") or {}).get("queue")
            if queue and queue != DEFAULT_VOLCANO_QUEUE:
                self.touch((c.Dialect.VOLCANO, _key(source)))

    def _quota_of(self, namespace: str, name: str) -> str | None:
        """The ElasticQuota a bare name resolves to from `namespace` (`QuotaTree.resolve`)."""
        tree = self._quota_tree
        found = tree.resolve(QuotaRef(None, name), namespace) if tree is not None else None
        return label(found) if found is not None else None

    def touch(self, key: Key) -> None:
        if self.namespaces and key[1].split("/", 1)[0] not in self.namespaces:
            return
        self._dirty.add(key)
        self._wake.set()

    # --- the loop ----------------------------------------------------------------------------
    async def stop(self) -> None:
        await super().stop()
        await self.narrator.stop()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            await sleep(self.monotonic, self.delay)
            await self.reconcile_dirty()

    async def reconcile_dirty(self) -> None:
        self._wake.clear()
        keys, self._dirty = sorted(self._dirty), set()
        for key in keys:
            await self.failures.attempt(key, self.reconcile(*key), self.touch)

    async def reconcile(self, dialect: Dialect, key: str) -> None:
        """Make the mirror of source `key` equal it, and the source's status equal the
        mirror's (see the module docstring)."""
        informer = self.sources[dialect]
        kind = informer.kind
        source = informer.store.get(key)
        if source is None or (source.get("metadata") or {}).get("deletionTimestamp"):
            return
        if kind == NATIVE_PODGROUPS_V1ALPHA2:
            dialect = c.Dialect.NATIVE_V1ALPHA2  # the API server serves the older version only
        # List items may come without them; the Events and the ownerReference need both.
        source = {**source, "apiVersion": f"{kind.group}/{kind.version}", "kind": c.KIND}
        translation = translate(dialect, source, self._topologies(), self._quota_of)
        if translation.errors:
            kept = (
                f"its {c.API_VERSION} PodGroup keeps the last spec read"
                if self.groups.get(key) is not None
                else "no gang is made from this PodGroup"
            )
            self._say(
                source,
                c.EventType.WARNING,
                c.DialectReason.INVALID,
                f"{kept} until it is fixed: " + "; ".join(translation.errors),
            )
            return
        for note in translation.notes:
            self._say(source, c.EventType.NORMAL, note.reason, note.text)
        ours = self.groups.get(key)
        if ours is None:
            await self._create(dialect, source, translation.spec, translation.quota)
            return
        if not owned_by(ours, source):
            self._say(
                source,
                c.EventType.WARNING,
                c.DialectReason.NAME_TAKEN,
                f"a {c.API_VERSION} PodGroup {key} exists and was not made from this one; it "
                "governs the pods that name the group. Delete it, or rename one of the two",
            )
            return
        current = (ours.get("metadata") or {}).get("labels") or {}
        labels = mirror_labels(dialect, translation.quota, current)
        if ours.get("spec") != translation.spec or labels != current:
            body = {**ours, "spec": translation.spec}
            body["metadata"] = {
                **ours["metadata"],
                "labels": labels,
                "resourceVersion": resource_version(ours),
            }
            namespace, name = key.split("/", 1)
            try:
                await self.kube.replace(PODGROUPS, name, body, namespace)
            except ApiError as exc:
                if exc.conflict or exc.not_found:
                    return  # the watch brings the newer version, which marks the key again
                if exc.status in (400, 422):
                    self._refused(source, exc)
                    return
                raise
            self.writes += 1
        await self._write_status(dialect, kind, source, ours.get("status") or {})

    def _topologies(self) -> Mapping[str, tuple[str, ...]]:
        return self.topologies()

    async def _create(
        self, dialect: Dialect, source: JSON, spec: JSON, quota: str | None = None
    ) -> None:
        body = mirror_body(dialect, source, spec, quota)
        meta = body["metadata"]
        try:
            await self.kube.create(PODGROUPS, body, meta["namespace"])
        except ApiError as exc:
            if exc.conflict or exc.namespace_terminating:
                return  # made meanwhile (the watch brings it), or going away
            if exc.status in (400, 422):
                self._refused(source, exc)
                return
            raise
        self.writes += 1
        logger.info("mirrored %s PodGroup %s/%s", dialect.value, meta["namespace"], meta["name"])
        self._say(
            source,
            c.EventType.NORMAL,
            c.DialectReason.MIRRORED,
            f"read as {c.API_VERSION} PodGroup {meta['name']} (labelled {c.LABEL_MIRROR_OF}="
            f"{dialect.value}), which the gang scheduler places; its status is written back here",
        )

    def _refused(self, source: JSON, exc: ApiError) -> None:
        self._say(
            source,
            c.EventType.WARNING,
            c.DialectReason.INVALID,
            f"the {c.API_VERSION} PodGroup made from this one was refused: {exc.message}",
        )

    async def _write_status(
        self, dialect: Dialect, kind: Kind, source: JSON, ours: Mapping[str, Any]
    ) -> None:
        """Write the source's status from ours when it differs."""
        current = source.get("status") or {}
        wanted = status_for(dialect, ours, current)
        if not differs(current, wanted):
            return
        now = rfc3339(self.clock())
        for condition in wanted.get("conditions") or ():
            condition.setdefault("lastTransitionTime", now)
        meta = source["metadata"]
        patch = {"status": wanted}
        try:
            try:
                await self.kube.patch(
                    kind, meta["name"], patch, meta["namespace"], subresource="status"
                )
            except ApiError as exc:
                if not exc.not_found:
                    raise
                # No status subresource (Volcano's CRD has none): status is part of the object.
                await self.kube.patch(kind, meta["name"], patch, meta["namespace"])
        except ApiError as exc:
            if exc.not_found or exc.conflict:
                return
            raise
        self.writes += 1

    def _say(self, source: JSON, event_type: str, reason: str, message: str) -> None:
        """Post an Event on the source once per message (a re-list must not repeat it)."""
        uid = (source.get("metadata") or {}).get("uid") or ""
        said = (uid, reason, message)
        if said in self._said:
            return
        self._said.add(said)
        self.narrator.narrate(source, event_type, reason, truncate(message, c.EVENT_MESSAGE_LIMIT))


def _key(body: JSON) -> str:
    meta = body.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def dialect_informers(kube: KubeClient) -> dict[Dialect, Informer]:
    """One optional informer per other scheduler's PodGroup kind: a kind no CRD serves (or
    that RBAC refuses) is read as empty, and listed again, backed off, until it is served."""
    why = (
        "{} PodGroups are not read until a CRD serves them (run --dialect-crds install, or "
        "install that scheduler's) and the operator may list and watch them "
        "(deploy/base/rbac.yaml)"
    )
    # Named by group: our own PodGroups' informer is `podgroups` (logs, metrics, readiness).
    return {
        Dialect.VOLCANO: Informer(
            kube,
            VOLCANO_PODGROUPS,
            without_managed_fields,
            name=f"{c.PLURAL}.{c.VOLCANO_GROUP}",
            optional=why.format("Volcano"),
        ),
        Dialect.KOORDINATOR: Informer(
            kube,
            KOORD_PODGROUPS,
            without_managed_fields,
            name=f"{c.PLURAL}.{c.KOORD_PODGROUP_GROUP}",
            optional=why.format("Koordinator"),
        ),
        Dialect.NATIVE_V1BETA1: Informer(
            kube,
            NATIVE_PODGROUPS,
            without_managed_fields,
            name=f"{c.PLURAL}.{c.NATIVE_GROUP}",
            fallbacks=(NATIVE_PODGROUPS_V1ALPHA2,),
            optional=why.format("native scheduling.k8s.io"),
        ),
    }


ESTABLISHED_SECONDS = 10.0
"""How long `install_dialect_crds` waits for a CRD it created to be served."""


async def install_dialect_crds(
    kube: KubeClient, established_seconds: float = ESTABLISHED_SECONDS
) -> list[str]:
    """Install our CRD for each other scheduler's kind we serve that no CRD serves yet
    (`api.dialect_crds.DIALECT_CRDS`: Volcano's and Koordinator's PodGroup, Koordinator's
    ElasticQuota); bring up to date one that carries `DIALECT_CRD_LABEL` (ours, from an earlier
    release); let any other be (Volcano's own, Koordinator's: replacing its schema under a
    running owner could prune the fields it stores). Returns the names of the CRDs created or
    replaced, once served. Every replica may run this at start: the first write wins (a create
    or a replace conditional on the resourceVersion) and the others find it done. A refusal (no
    RBAC for CRDs) is logged: the kinds already served are still read."""
    done = []
    for name, render in DIALECT_CRDS.items():
        try:
            if await _install_one(kube, render()):
                done.append(name)
        except ApiError as exc:
            if exc.conflict:
                logger.info("CRD %s was written meanwhile (another replica); left as it is", name)
                continue
            logger.warning(
                "CRD %s not installed (%s); that kind is read only once a CRD serves it",
                name,
                exc.message,
            )
    await _established(kube, done, established_seconds)
    return done


async def _install_one(kube: KubeClient, body: JSON) -> bool:
    """Create `body`, or replace ours where it differs; True when this call wrote it."""
    name = body["metadata"]["name"]
    try:
        current = await kube.get(CRDS, name)
    except ApiError as exc:
        if not exc.not_found:
            raise
        await kube.create(CRDS, body)
        logger.info("CRD %s installed (none existed)", name)
        return True
    meta = current.get("metadata") or {}
    if (meta.get("labels") or {}).get(c.DIALECT_CRD_LABEL) is None:
        logger.info("CRD %s exists and is not ours; left as it is", name)
        return False
    # Fields the API server defaults (conversion) are kept, so an unchanged CRD compares equal.
    spec = {**current["spec"], **body["spec"]}
    labels = {**(meta.get("labels") or {}), **body["metadata"].get("labels", {})}
    annotations = {**(meta.get("annotations") or {}), **body["metadata"].get("annotations", {})}
    if (spec, labels, annotations) == (
        current["spec"],
        meta.get("labels") or {},
        meta.get("annotations") or {},
    ):
        logger.info("CRD %s exists, ours and up to date", name)
        return False
    metadata = {**body["metadata"], "resourceVersion": meta["resourceVersion"], "labels": labels}
    if annotations:
        metadata["annotations"] = annotations
    await kube.replace(CRDS, name, {**body, "metadata": metadata, "spec": spec})
    logger.info("CRD %s updated (ours, from an earlier release)", name)
    return True


async def _established(kube: KubeClient, names: list[str], seconds: float) -> None:
    """Wait, at most `seconds` in all, until the API server serves the CRDs `names`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    for name in names:
        while loop.time() < deadline:
            crd = await kube.get(CRDS, name)
            conditions = (crd.get("status") or {}).get("conditions") or ()
            if any(
                x.get("type") == "Established" and x.get("status") == "True" for x in conditions
            ):
                break
            await asyncio.sleep(0.1)
