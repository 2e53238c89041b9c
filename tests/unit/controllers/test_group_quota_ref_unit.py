"""The scheduler keeps the snapshot's gang -> quota map from PodGroup events: the quota a
PodGroup's label names reaches `QuotaState.group_refs`, and its members are charged there."""

from __future__ import annotations

from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.api.elastic_quota import QuotaRef, QuotaSpec
from podgroup_operator.scheduling.elastic.tree import build_tree
from tests.builders import pod, podgroup
from tests.unit.controllers.test_gang_scheduler_unit import NS, Harness


def _labelled(name: str, labels: dict[str, str]) -> dict[str, Any]:
    body = podgroup(name, NS, min_member=1)
    body["metadata"]["labels"] = labels
    return body


def test_a_podgroup_label_reaches_the_snapshot_and_follows_relabels_and_deletion() -> None:
    h = Harness()
    h.add_node("n1", cpu=8)
    quotas = h.scheduler.snapshot.quotas
    quotas.set_tree(build_tree([QuotaSpec(key=("team-a", "a"), min={"cpu": 4000})]))
    member = pod("g-0", NS, group="g", node="n1", phase=c.PodPhase.RUNNING, requests={"cpu": 2})
    h.scheduler.on_pod("ADDED", member)
    assert quotas.state() == ()  # the namespace has no quota, and the group names none yet

    first = _labelled("g", {c.LABEL_ELASTIC_QUOTA: "a"})
    h.groups.put((NS, "g"), first)
    h.scheduler.on_group((NS, "g"))
    assert quotas.group_refs == {(NS, "g"): QuotaRef(None, "a")}
    assert quotas.state() == ((("team-a", "a"), (("cpu", 2000),)),)

    h.groups.remove((NS, "g"), first)
    relabelled = _labelled("g", {c.LABEL_KOORD_QUOTA_NAME: "elsewhere"})
    h.groups.put((NS, "g"), relabelled)
    h.scheduler.on_group((NS, "g"))
    assert quotas.group_refs == {(NS, "g"): QuotaRef(None, "elsewhere")}
    assert quotas.state() == ()  # names no quota that exists: charged to none

    h.groups.remove((NS, "g"), relabelled)
    h.scheduler.on_group((NS, "g"))
    assert quotas.group_refs == {}
