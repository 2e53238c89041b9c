"""DialectMirrors on the in-memory API server: other schedulers' PodGroups mirrored into ours,
their status written back, their bad input reported; their CRDs installed only where none is.

The native PodGroup is shown here only: the dev cluster's API server (v1.20) serves the whole
`scheduling.k8s.io` group itself, so a CRD-backed native kind is never served there, and it
drops the pod field `spec.schedulingGroup.podGroupName` it does not know.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters.informers import Store
from podgroup_operator.adapters.kube import (
    CRDS,
    KOORD_PODGROUPS,
    NATIVE_PODGROUPS,
    PODGROUPS,
    VOLCANO_PODGROUPS,
    Kind,
    KubeClient,
)
from podgroup_operator.api.dialect_crds import (
    DIALECT_CRDS,
    koordinator_crd,
    koordinator_elastic_quota_crd,
    volcano_crd,
)
from podgroup_operator.api.elastic_quota import QuotaSpec
from podgroup_operator.controllers.dialects import (
    DialectMirrors,
    dialect_informers,
    install_dialect_crds,
)
from podgroup_operator.domain.dialects import mirror_body
from podgroup_operator.scheduling.elastic.tree import build_tree
from tests.fakes import FakeApiServer

Body = dict[str, Any]
NS = "team"
VOLCANO_CRD = f"{c.PLURAL}.{c.VOLCANO_GROUP}"
KOORD_PODGROUP_CRD = f"{c.PLURAL}.{c.KOORD_PODGROUP_GROUP}"


class Mirrors:
    """The controller over a fake API server, its stores filled by hand as the watches would."""

    def __init__(self) -> None:
        self.fake = FakeApiServer(schemas={})
        self.kube = KubeClient(self.fake)
        self.informers = dialect_informers(self.kube)
        self.groups = Store()
        self.mirrors = DialectMirrors(self.kube, self.groups, self.informers, lambda: {}, delay=0)

    def source(self, dialect: c.Dialect, kind: Kind, name: str, spec: Body, **meta: Any) -> Body:
        body = {
            "apiVersion": f"{kind.group}/{kind.version}",
            "kind": c.KIND,
            "metadata": {"name": name, "namespace": NS, **meta},
            "spec": spec,
        }
        (stored,) = self.fake.seed(body)
        self.informers[dialect].store.put(f"{NS}/{name}", stored)
        return stored

    def ours(self, name: str, status: Body | None = None) -> Body:
        """Our PodGroup as stored, with `status` as the status reconciler would have written."""
        body = self.fake.get_object(PODGROUPS, name, NS)
        assert body is not None, f"no PodGroup {name}"
        if status is not None:
            body["status"] = status
        self.groups.put(f"{NS}/{name}", body)
        return body

    async def reconcile(self, dialect: c.Dialect, name: str) -> None:
        await self.mirrors.reconcile(dialect, f"{NS}/{name}")
        await self.mirrors.narrator.settled()

    def refreshed(self, dialect: c.Dialect, kind: Kind, name: str) -> Body:
        body = self.fake.get_object(kind, name, NS)
        assert body is not None
        self.informers[dialect].store.put(f"{NS}/{name}", body)
        return body


def pending(reason: str) -> Body:
    return {
        "phase": "Pending",
        "conditions": [
            {"type": "Unschedulable", "status": "True", "reason": reason, "message": "no room"}
        ],
    }


async def test_a_native_v1beta1_podgroup_is_mirrored_and_its_condition_latches() -> None:
    h = Mirrors()
    native = c.Dialect.NATIVE_V1BETA1
    source = h.source(
        native, NATIVE_PODGROUPS, "js", {"schedulingPolicy": {"gang": {"minCount": 2}}}
    )
    await h.reconcile(native, "js")
    mirror = h.ours("js", pending(c.Reason.NOT_ENOUGH_RESOURCES))
    assert mirror["spec"] == {"minMember": 2}
    assert mirror["metadata"]["labels"] == {c.LABEL_MIRROR_OF: native.value}
    (owner,) = mirror["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"]) == ("PodGroup", source["metadata"]["uid"])
    assert owner["apiVersion"] == "scheduling.k8s.io/v1beta1"
    (event,) = h.fake.events(involved="js", reason=c.DialectReason.MIRRORED)
    assert event["involvedObject"]["apiVersion"] == "scheduling.k8s.io/v1beta1"

    await h.reconcile(native, "js")
    cond = h.refreshed(native, NATIVE_PODGROUPS, "js")["status"]["conditions"][0]
    assert (cond["type"], cond["status"], cond["message"]) == (
        "PodGroupInitiallyScheduled",
        "False",
        "no room",
    )
    assert cond["lastTransitionTime"]

    h.ours("js", {"phase": "Running", "running": 2})
    await h.reconcile(native, "js")
    cond = h.refreshed(native, NATIVE_PODGROUPS, "js")["status"]["conditions"][0]
    assert cond["status"] == "True"
    h.ours("js", pending(c.Reason.NOT_ENOUGH_RESOURCES))
    writes = h.fake.count("PATCH")
    await h.reconcile(native, "js")
    assert h.fake.count("PATCH") == writes  # latched: nothing to write


async def test_a_volcano_podgroup_gets_volcano_s_status_and_a_changed_spec_is_mirrored() -> None:
    h = Mirrors()
    vc = c.Dialect.VOLCANO
    h.source(vc, VOLCANO_PODGROUPS, "job", {"minMember": 2, "queue": "research"})
    await h.reconcile(vc, "job")
    h.ours("job", {"phase": "Pending"})
    await h.reconcile(vc, "job")
    status = h.refreshed(vc, VOLCANO_PODGROUPS, "job")["status"]
    assert status == {
        "phase": "Inqueue",
        "running": 0,
        "succeeded": 0,
        "failed": 0,
        "conditions": [],
    }
    (note,) = h.fake.events(involved="job", reason=c.DialectReason.QUEUE_IGNORED)
    assert note["type"] == c.EventType.NORMAL and "'research'" in note["message"]

    changed = h.refreshed(vc, VOLCANO_PODGROUPS, "job")
    changed["spec"]["minMember"] = 3
    (stored,) = h.fake.seed(changed)
    h.informers[vc].store.put(f"{NS}/job", stored)
    await h.reconcile(vc, "job")
    assert h.fake.get_object(PODGROUPS, "job", NS)["spec"] == {"minMember": 3}
    # The queue was said once, not again on the second pass.
    assert len(h.fake.events(involved="job", reason=c.DialectReason.QUEUE_IGNORED)) == 1


async def test_a_volcano_queue_labels_the_mirror_with_its_elastic_quota_while_one_exists() -> None:
    """No ElasticQuota named as the queue: no label, QueueIgnored. The quota created (a new
    tree): the source is reconciled again, its mirror labelled, QueueMapped. The quota gone:
    the label is taken off."""
    h = Mirrors()
    vc = c.Dialect.VOLCANO
    h.source(vc, VOLCANO_PODGROUPS, "job", {"minMember": 2, "queue": "team-a"})
    h.source(vc, VOLCANO_PODGROUPS, "plain", {"minMember": 1, "queue": "default"})
    await h.reconcile(vc, "job")
    assert c.LABEL_ELASTIC_QUOTA not in h.ours("job")["metadata"]["labels"]
    (ignored,) = h.fake.events(involved="job", reason=c.DialectReason.QUEUE_IGNORED)
    assert "'team-a' is not charged" in ignored["message"]

    tree = build_tree([QuotaSpec(key=(NS, "team-a"), min={"cpu": 4000})])
    h.mirrors.on_quota_tree(tree)
    assert h.mirrors._dirty == {(vc, f"{NS}/job")}  # the default queue's is not touched
    await h.mirrors.reconcile_dirty()
    await h.mirrors.narrator.settled()
    labels = h.ours("job")["metadata"]["labels"]
    assert labels == {c.LABEL_MIRROR_OF: vc.value, c.LABEL_ELASTIC_QUOTA: "team-a"}
    (mapped,) = h.fake.events(involved="job", reason=c.DialectReason.QUEUE_MAPPED)
    assert mapped["type"] == c.EventType.NORMAL
    assert "charged to ElasticQuota team/team-a" in mapped["message"]

    h.mirrors.on_quota_tree(tree)  # the same quotas: nothing to do
    assert h.mirrors._dirty == set()
    h.mirrors.on_quota_tree(None)
    await h.mirrors.reconcile_dirty()
    assert c.LABEL_ELASTIC_QUOTA not in h.ours("job")["metadata"]["labels"]


async def test_a_bad_source_gets_one_warning_naming_each_field_and_no_mirror() -> None:
    h = Mirrors()
    koord = c.Dialect.KOORDINATOR
    h.source(
        koord,
        KOORD_PODGROUPS,
        "bad",
        {"minMember": 0},
        annotations={c.ANNOTATION_KOORD_MODE: "Loose"},
    )
    await h.reconcile(koord, "bad")
    await h.reconcile(koord, "bad")
    (warning,) = h.fake.events(involved="bad", reason=c.DialectReason.INVALID)
    assert warning["type"] == c.EventType.WARNING
    assert "spec.minMember: must be a whole number of at least 1, not 0" in warning["message"]
    assert f"annotation {c.ANNOTATION_KOORD_MODE}" in warning["message"]
    assert h.fake.get_object(PODGROUPS, "bad", NS) is None


async def test_a_name_taken_by_a_podgroup_not_made_from_the_source_is_warned_and_kept() -> None:
    h = Mirrors()
    vc = c.Dialect.VOLCANO
    (mine,) = h.fake.seed(
        {
            "apiVersion": c.API_VERSION,
            "kind": c.KIND,
            "metadata": {"name": "job", "namespace": NS},
            "spec": {"minMember": 5},
        }
    )
    h.groups.put(f"{NS}/job", mine)
    h.source(vc, VOLCANO_PODGROUPS, "job", {"minMember": 2})
    await h.reconcile(vc, "job")
    (warning,) = h.fake.events(involved="job", reason=c.DialectReason.NAME_TAKEN)
    assert "Delete it, or rename one of the two" in warning["message"]
    assert h.fake.get_object(PODGROUPS, "job", NS)["spec"] == {"minMember": 5}


async def test_a_mirror_s_status_change_marks_its_source_and_others_are_ignored() -> None:
    h = Mirrors()
    source = h.source(c.Dialect.KOORDINATOR, KOORD_PODGROUPS, "g", {"minMember": 1})
    body = mirror_body(c.Dialect.KOORDINATOR, source, {"minMember": 1})
    h.mirrors.on_group(c.WatchEventType.MODIFIED, body, None)
    h.mirrors.on_group(
        c.WatchEventType.MODIFIED, {"metadata": {"name": "x", "namespace": NS}}, None
    )
    assert h.mirrors._dirty == {(c.Dialect.KOORDINATOR, f"{NS}/g")}


async def test_dialect_crds_are_installed_where_absent_and_never_over_the_owner_s() -> None:
    """Volcano's own CRD (no mark) is let be; ours from an earlier release (marked, outdated)
    is brought up to date; Koordinator's ElasticQuota, absent, is created."""
    fake = FakeApiServer(schemas={})
    kube = KubeClient(fake)
    owners = volcano_crd()
    owners["metadata"]["labels"] = {"app.kubernetes.io/name": "volcano"}
    owners["spec"]["versions"][0]["additionalPrinterColumns"] = []
    fake.seed(owners)
    stale = koordinator_crd()
    stale["spec"]["versions"][0]["additionalPrinterColumns"] = []
    stale["metadata"]["labels"]["extra"] = "kept"
    fake.seed(stale)
    done = await install_dialect_crds(kube, established_seconds=0)
    assert done == [KOORD_PODGROUP_CRD, c.KOORD_ELASTIC_QUOTA_CRD_NAME]
    volcano = fake.get_object(CRDS, VOLCANO_CRD)
    assert volcano is not None and volcano["metadata"]["labels"] == {
        "app.kubernetes.io/name": "volcano"
    }
    koordinator = fake.get_object(CRDS, KOORD_PODGROUP_CRD)
    assert koordinator is not None and koordinator["spec"] == koordinator_crd()["spec"]
    assert koordinator["metadata"]["labels"]["extra"] == "kept"
    quota = fake.get_object(CRDS, c.KOORD_ELASTIC_QUOTA_CRD_NAME)
    assert quota is not None and quota["spec"] == koordinator_elastic_quota_crd()["spec"]
    assert quota["metadata"]["annotations"] == {c.ANNOTATION_API_APPROVED: c.KOORD_API_APPROVAL}


async def test_dialect_crds_up_to_date_are_not_written_again() -> None:
    """A restart (or a second replica) finds every CRD ours and current: reads only."""
    fake = FakeApiServer(schemas={})
    kube = KubeClient(fake)
    assert len(await install_dialect_crds(kube, established_seconds=0)) == len(DIALECT_CRDS)
    fake.requests.clear()
    assert await install_dialect_crds(kube, established_seconds=0) == []
    assert {method for method, _ in fake.requests} == {"GET"}


async def test_an_earlier_approval_value_is_replaced_by_the_one_in_use() -> None:
    """A Koordinator-group CRD we installed with another approval annotation (an earlier
    release's) is rewritten to carry the one Koordinator's own CRDs carry."""
    fake = FakeApiServer(schemas={})
    older = koordinator_crd()
    older["metadata"]["annotations"] = {c.ANNOTATION_API_APPROVED: "unapproved, experimental"}
    fake.seed(older)
    assert KOORD_PODGROUP_CRD in await install_dialect_crds(KubeClient(fake), 0)
    stored = fake.get_object(CRDS, KOORD_PODGROUP_CRD)
    assert stored is not None
    assert stored["metadata"]["annotations"][c.ANNOTATION_API_APPROVED] == c.KOORD_API_APPROVAL


@pytest.mark.parametrize(("method", "code"), [("GET", 403), ("POST", 403), ("POST", 409)])
async def test_a_refusal_or_a_race_is_logged_and_the_operator_runs_on(
    method: str, code: int, caplog: pytest.LogCaptureFixture
) -> None:
    """No RBAC for CRDs: a warning per CRD, nothing raised. Another replica created it first
    (409): said at info level, not as a failure."""
    fake = FakeApiServer(schemas={})
    fake.inject_error(
        method,
        lambda request: "customresourcedefinitions" in request.path,
        code,
        times=len(DIALECT_CRDS),
    )
    caplog.set_level(logging.INFO)
    assert await install_dialect_crds(KubeClient(fake), established_seconds=0) == []
    level = logging.INFO if code == 409 else logging.WARNING
    for name in DIALECT_CRDS:
        assert [r.levelno for r in caplog.records if name in r.getMessage()] == [level]


async def test_only_the_namespaces_handled_are_mirrored_and_a_deleted_source_is_forgotten() -> None:
    h = Mirrors()
    h.mirrors.namespaces = frozenset({"other"})
    source = h.source(c.Dialect.VOLCANO, VOLCANO_PODGROUPS, "job", {"minMember": 1})
    handler = h.mirrors.on_source(c.Dialect.VOLCANO)
    handler(c.WatchEventType.ADDED, source, None)
    assert h.mirrors._dirty == set()
    h.mirrors.namespaces = frozenset()
    handler(c.WatchEventType.ADDED, source, None)
    await h.mirrors.reconcile_dirty()
    await h.mirrors.narrator.settled()
    assert h.fake.get_object(PODGROUPS, "job", NS) is not None
    assert h.mirrors._said
    handler(c.WatchEventType.DELETED, source, source)
    assert h.mirrors._said == set()


def test_each_dialect_informer_has_a_name_of_its_own() -> None:
    """Logs, metrics and readiness key informers by name: none may take `podgroups`, ours."""
    names = [informer.name for informer in Mirrors().informers.values()]
    assert names == [
        "podgroups.scheduling.volcano.sh",
        "podgroups.scheduling.sigs.k8s.io",
        "podgroups.scheduling.k8s.io",
    ]


async def test_a_source_broken_after_its_mirror_was_made_keeps_the_mirror_s_last_spec() -> None:
    h = Mirrors()
    vc = c.Dialect.VOLCANO
    h.source(vc, VOLCANO_PODGROUPS, "job", {"minMember": 2})
    await h.reconcile(vc, "job")
    h.ours("job")
    h.source(vc, VOLCANO_PODGROUPS, "job", {"minMember": -2})
    await h.reconcile(vc, "job")
    (warning,) = h.fake.events(involved="job", reason=c.DialectReason.INVALID)
    assert warning["message"].startswith(
        f"its {c.API_VERSION} PodGroup keeps the last spec read until it is fixed: spec.minMember"
    )
    assert h.fake.get_object(PODGROUPS, "job", NS)["spec"] == {"minMember": 2}
