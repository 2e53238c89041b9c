"""`kubectl podgroup queues`: the ElasticQuota tree drawn with each quota's numbers."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator import kubectl_queues as queues
from podgroup_operator.adapters.kube import KubeClient
from podgroup_operator.kubectl_plugin import PluginError, execute, parse
from tests.fakes import FakeApiServer

GPU = "nvidia.com/gpu"
OURS = f"{c.GROUP}/{c.VERSION}"
KOORD = f"{c.KOORD_QUOTA_GROUP}/{c.VERSION}"
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def quota(
    namespace: str,
    name: str,
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    *,
    labels: dict[str, str] | None = None,
    api_version: str = OURS,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = labels
    body: dict[str, Any] = {"apiVersion": api_version, "kind": "ElasticQuota", "metadata": meta}
    if spec is not None:
        body["spec"] = spec
    if status is not None:
        body["status"] = status
    return body


TREE = [
    quota(
        "platform",
        "org-ml",
        {"min": {GPU: 64}, "max": {GPU: 64}},
        {"used": {GPU: "44"}, "fairShare": {GPU: "64"}, "gangsWaiting": 0},
    ),
    quota(
        "ml",
        "team-a",
        {"parent": "platform/org-ml", "min": {GPU: 48}, "max": {GPU: 64}},
        {
            "used": {GPU: "40"},
            "fairShare": {GPU: "52"},
            "borrowed": {},
            "lent": {GPU: "4"},
            "gangsWaiting": 3,
        },
    ),
    quota("ml", "team-b", {"parent": "platform/org-ml", "min": {GPU: 16}, "guarantee": {GPU: 8}}),
    quota("web", "org-web", {"min": {"cpu": "32", "memory": "128Gi"}}, api_version=KOORD),
    quota(
        "web",
        "team-w",
        {"min": {"cpu": "10", "memory": "64Gi"}},
        labels={c.LABEL_KOORD_QUOTA_PARENT: "org-web"},
        api_version=KOORD,
    ),
]

DRAWN = [
    [
        "QUOTA",
        "RESOURCE",
        "USED",
        "MIN",
        "MAX",
        "GUARANTEE",
        "FAIR",
        "SHARE",
        "BORROWED",
        "LENT",
        "WAITING",
    ],
    ["platform/org-ml", "nvidia.com/gpu", "44", "64", "64", "8", "64", "-", "-", "0"],
    ["├─", "ml/team-a", "nvidia.com/gpu", "40", "48", "64", "0", "52", "0", "4", "3"],
    ["└─", "ml/team-b", "nvidia.com/gpu", "-", "16", "unlimited", "8", "-", "-", "-", "-"],
    ["web/org-web", "cpu", "-", "32", "unlimited", "0", "-", "-", "-", "-"],
    ["memory", "-", "128Gi", "unlimited", "0", "-", "-", "-"],
    ["└─", "web/team-w", "cpu", "-", "10", "unlimited", "0", "-", "-", "-", "-"],
    ["memory", "-", "64Gi", "unlimited", "0", "-", "-", "-"],
]
"""Each line of the drawing, split at its blanks."""


def test_the_tree_is_drawn_parents_first_with_spec_and_status_numbers() -> None:
    """Parents across namespaces as spec.parent names them, Koordinator's label as an alias;
    min, max and the guarantee never lent (org-ml holds team-b's 8) from the specs; used, fair
    share, borrowed, lent and waiting from the status, `-` where none is written yet."""
    text = queues.render(queues.build(TREE))
    assert [line.split() for line in text.splitlines()] == DRAWN
    # Columns line up under their headers, as kubectl's do.
    header = text.splitlines()[0]
    starts = [header.index(title) for title in queues.HEADER]
    for line in text.splitlines()[1:]:
        for start in (start for start in starts[1:] if start < len(line)):
            assert line[start - 1] == " " and line[start] != " ", (line, start)


def test_a_deeper_tree_draws_its_branches() -> None:
    objects = [
        quota("a", "root", {"min": {"cpu": "8"}}),
        quota("a", "mid", {"parent": "root", "min": {"cpu": "4"}}),
        quota("a", "leaf", {"parent": "mid", "min": {"cpu": "2"}}),
        quota("a", "side", {"parent": "root", "min": {"cpu": "4"}}),
    ]
    names = [line.split("   ")[0] for line in queues.render(queues.build(objects)).splitlines()]
    assert names == ["QUOTA", "a/root", "├─ a/mid", "│  └─ a/leaf", "└─ a/side"]


def test_invalid_quotas_and_tree_problems_are_listed_below_it() -> None:
    objects = [
        quota("x", "bad", {"min": {"cpu": "3"}, "max": {"cpu": "2"}}),
        quota("x", "orphan", {"parent": "nowhere", "min": {"cpu": "1"}}),
        quota("x", "orphan", {"min": {"cpu": "1"}}, api_version=KOORD),
    ]
    text = queues.render(queues.build(objects))
    assert "x/orphan" in text.splitlines()[1]
    assert "Not in the tree" in text
    assert "x/bad (scheduling.x-k8s.io): spec.min.cpu: 3 is above spec.max.cpu 2" in text
    assert "x/orphan (scheduling.sigs.k8s.io): a quota of the same namespace and name" in text
    problems = text.split("Problems of the tree:")[1]
    assert "nowhere" in problems


def test_koordinators_internal_quotas_are_left_out() -> None:
    huge = "9223372036854775807"
    objects = [
        quota("koordinator-system", name, {"max": {"cpu": huge}}, api_version=KOORD)
        for name in c.KOORD_INTERNAL_QUOTAS
    ]
    objects.append(quota("ml", "team", {"min": {"cpu": "1"}}, api_version=KOORD))
    text = queues.render(queues.build(objects))
    assert [line.split()[0] for line in text.splitlines()] == ["QUOTA", "ml/team"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["queues", "team-a"], "queues takes no NAME"),
        (["queues", "-o", "yaml"], "queues does not take -o/--output"),
        (["queues", "-n", "ml"], "queues shows the whole tree"),
        (["queues", "-A"], "queues shows the whole tree"),
        (["queues", "--levels", "x"], "belong to fabric"),
    ],
)
def test_queues_refuses_what_it_does_not_take(argv: list[str], message: str) -> None:
    with pytest.raises(PluginError, match=message):
        parse(argv, lambda kubeconfig, context: "default")


def test_queues_parses_to_the_whole_tree() -> None:
    invocation = parse(["queues"], lambda kubeconfig, context: "default")
    assert (invocation.verb, invocation.queues, invocation.namespace) == ("queues", True, None)


async def test_queues_reads_both_groups_and_draws_them() -> None:
    fake = FakeApiServer()
    fake.seed(*TREE)
    outcome = await execute(
        KubeClient(fake), parse(["queues"], lambda kubeconfig, context: "default"), NOW
    )
    assert [line.split() for line in outcome.stdout.splitlines()] == DRAWN
    assert (outcome.errors, outcome.code) == ([], 0)
    listed = [path for method, path in fake.requests if method == "GET"]
    assert listed == [
        f"/apis/{c.GROUP}/{c.VERSION}/elasticquotas",
        f"/apis/{c.KOORD_QUOTA_GROUP}/{c.VERSION}/elasticquotas",
    ]


async def test_no_quota_is_said_on_stderr_and_is_no_error() -> None:
    outcome = await execute(
        KubeClient(FakeApiServer()), parse(["queues"], lambda kubeconfig, context: "default"), NOW
    )
    assert (outcome.stdout, outcome.notes, outcome.code) == ("", ["No resources found."], 0)


async def test_no_crd_in_either_group_is_an_error_naming_the_fix() -> None:
    fake = FakeApiServer()
    for _ in range(2):
        fake.inject_error("GET", "elasticquotas", 404, reason="")
    outcome = await execute(
        KubeClient(fake), parse(["queues"], lambda kubeconfig, context: "default"), NOW
    )
    assert outcome.code == 1
    assert "is the ElasticQuota CRD installed? kubectl apply -f crds/" in outcome.errors[0]
