"""`kubectl podgroup` keeps kubectl's habits: arguments, defaults, output formats, one-line errors.

Parsing and rendering are pure; `execute` runs against the in-memory API server. The same
commands run as a real kubectl plugin against the dev cluster in
tests/integration/test_kubectl_plugin.py.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
import yaml

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import PODGROUPS, KubeClient
from podgroup_operator.kubectl_plugin import (
    Outcome,
    PluginError,
    context_namespace,
    describe,
    execute,
    human_age,
    main,
    parse,
    policy_summary,
    sub_group_tree,
)
from tests.builders import pod, podgroup
from tests.fakes import FakeApiServer

NOW = dt.datetime(2026, 1, 1, 0, 10, 0, tzinfo=dt.UTC)
CREATED = "2026-01-01T00:00:00Z"


def no_default(kubeconfig: str | None, context: str | None) -> str:
    raise AssertionError("the context's namespace was looked up although -n or -A was given")


def from_context(kubeconfig: str | None, context: str | None) -> str:
    return f"ns-of-{context or 'current'}"


# --- arguments -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "verb", "names", "namespace", "output"),
    [
        ([], "get", (), "ns-of-current", ""),
        (["train"], "get", ("train",), "ns-of-current", ""),
        (["get", "a", "b", "-o", "yaml"], "get", ("a", "b"), "ns-of-current", "yaml"),
        (["describe", "train", "-n", "team"], "describe", ("train",), "team", ""),
        (["-A", "-o", "wide"], "get", (), None, "wide"),
        (["get", "describe"], "get", ("describe",), "ns-of-current", ""),
        (["--context", "other"], "get", (), "ns-of-other", ""),
        (["train", "--namespace=team", "-ojson"], "get", ("train",), "team", "json"),
    ],
)
def test_arguments_read_as_kubectl_reads_them(
    argv: list[str], verb: str, names: tuple[str, ...], namespace: str | None, output: str
) -> None:
    invocation = parse(argv, from_context)
    assert (invocation.verb, invocation.names, invocation.namespace, invocation.output) == (
        verb,
        names,
        namespace,
        output,
    )


def test_an_explicit_namespace_or_all_namespaces_skips_the_context_lookup() -> None:
    assert parse(["-n", "x"], no_default).namespace == "x"
    assert parse(["-A"], no_default).namespace is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["-o", "table"],
            'unable to match a printer suitable for the output format "table", '
            "allowed formats are: wide,json,yaml,name",
        ),
        (["-A", "train"], "a resource cannot be retrieved by name across all namespaces"),
        (["describe", "train", "-o", "json"], "describe does not take -o/--output"),
        (
            ["--kubeconfig", "/nonexistent/config"],
            "stat /nonexistent/config: no such file or directory",
        ),
    ],
)
def test_bad_arguments_are_one_line_errors(argv: list[str], message: str) -> None:
    with pytest.raises(PluginError) as error:
        parse(argv, from_context)
    assert str(error.value) == message


def test_an_unknown_flag_exits_1_with_kubectls_hint(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse(["--bogus"], from_context)
    assert exit_.value.code == 1
    assert capsys.readouterr().err == (
        "error: unrecognized arguments: --bogus\nSee 'kubectl podgroup --help' for usage.\n"
    )


def two_contexts(path: Path) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [
            {"name": "plain", "context": {"cluster": "c", "user": "u"}},
            {"name": "team", "context": {"cluster": "c", "user": "u", "namespace": "team-a"}},
        ],
        "current-context": "team",
    }
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_default_namespace_is_the_contexts(tmp_path: Path) -> None:
    kubeconfig = str(two_contexts(tmp_path / "config"))
    assert context_namespace(kubeconfig, None) == "team-a"
    assert context_namespace(kubeconfig, "team") == "team-a"
    assert context_namespace(kubeconfig, "plain") == "default"
    with pytest.raises(PluginError, match=r'^context "nope" does not exist$'):
        context_namespace(kubeconfig, "nope")


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (5, "5s"),
        (119, "119s"),
        (200, "3m20s"),
        (600, "10m"),
        (3 * 3600 + 60, "3h1m"),
        (20 * 3600, "20h"),
        (3 * 86400 + 4 * 3600, "3d4h"),
        (100 * 86400, "100d"),
        (3 * 365 * 86400, "3y"),
    ],
)
def test_ages_read_like_kubectls(seconds: int, shown: str) -> None:
    assert human_age(NOW - dt.timedelta(seconds=seconds), NOW) == shown


# --- against the in-memory API server ------------------------------------------------------------


def waiting(reason: str, message: str) -> dict[str, object]:
    return {
        "phase": c.Phase.PENDING,
        "conditions": [
            {
                "type": c.ConditionType.UNSCHEDULABLE,
                "status": c.ConditionStatus.TRUE,
                "reason": reason,
                "message": message,
                "lastTransitionTime": "2026-01-01T00:05:00Z",
            }
        ],
    }


@pytest.fixture
def fake() -> FakeApiServer:
    server = FakeApiServer()
    server.seed(
        podgroup(
            "train",
            "team",
            min_member=3,
            created=CREATED,
            status=waiting(c.Reason.NOT_ENOUGH_TASKS, "2 of minMember 3 member pods exist"),
        ),
        podgroup(
            "eval",
            "team",
            min_member=1,
            created=CREATED,
            status={"phase": c.Phase.RUNNING, "running": 1},
        ),
        podgroup("other", "elsewhere", min_member=2, created=CREATED),
        pod("train-0", "team", group="train", node="node-a", phase=c.PodPhase.RUNNING),
        pod("train-1", "team", group_annotation="train"),
        pod("eval-0", "team", group="eval", node="node-b"),
        pod("train-0", "elsewhere", group="train", node="node-z"),
    )
    return server


async def outcome_of(fake: FakeApiServer, argv: list[str]) -> Outcome:
    """The plugin run with `argv` in a context whose namespace is `team`."""
    return await execute(KubeClient(fake), parse(argv, lambda *_: "team"), NOW)


async def test_the_table_shows_why_each_gang_waits(fake: FakeApiServer) -> None:
    outcome = await outcome_of(fake, [])
    assert outcome.code == 0
    assert outcome.stdout.splitlines() == [
        "NAME    PHASE     MIN   RUNNING   SUCCEEDED   FAILED   AGE   WAITING FOR",
        "eval    Running   1     1         0           0        10m",
        "train   Pending   3     0         0           0        10m   "
        "NotEnoughTasks: 2 of minMember 3 member pods exist",
    ]


async def test_all_namespaces_adds_the_namespace_column_and_wide_adds_columns(
    fake: FakeApiServer,
) -> None:
    outcome = await outcome_of(fake, ["-A", "-o", "wide"])
    header, *rows = outcome.stdout.splitlines()
    assert header.split() == [
        "NAMESPACE",
        "NAME",
        "PHASE",
        "MIN",
        "RUNNING",
        "SUCCEEDED",
        "FAILED",
        "AGE",
        "SCHEDULED",
        "RESTARTS",
        "MODE",
        "WAITING",
        "FOR",
    ]
    assert [row.split()[:2] for row in rows] == [
        ["elsewhere", "other"],
        ["team", "eval"],
        ["team", "train"],
    ]


async def test_a_missing_name_is_kubectls_one_line_not_found(fake: FakeApiServer) -> None:
    outcome = await outcome_of(fake, ["nope"])
    assert outcome.code == 1
    assert outcome.stdout == ""
    assert outcome.errors == [
        'Error from server (NotFound): podgroups.scheduling.x-k8s.io "nope" not found'
    ]


async def test_found_names_print_and_missing_ones_still_fail(fake: FakeApiServer) -> None:
    outcome = await outcome_of(fake, ["train", "nope", "-o", "name"])
    assert outcome.stdout == "podgroup.scheduling.x-k8s.io/train"
    assert outcome.code == 1
    assert len(outcome.errors) == 1


async def test_nothing_found_is_said_on_stderr_and_is_no_error(fake: FakeApiServer) -> None:
    outcome = await execute(KubeClient(fake), parse(["-n", "empty"], no_default), NOW)
    assert (outcome.code, outcome.stdout) == (0, "")
    assert outcome.notes == ["No resources found in empty namespace."]


async def test_json_and_yaml_print_one_object_or_a_list(fake: FakeApiServer) -> None:
    single = json.loads((await outcome_of(fake, ["train", "-o", "json"])).stdout)
    assert (single["kind"], single["metadata"]["name"]) == (c.KIND, "train")
    listed = yaml.safe_load((await outcome_of(fake, ["-o", "yaml"])).stdout)
    assert listed["kind"] == "List"
    assert [item["metadata"]["name"] for item in listed["items"]] == ["eval", "train"]


async def test_describe_shows_members_their_nodes_why_it_waits_and_events(
    fake: FakeApiServer,
) -> None:
    kube = KubeClient(fake)
    group = await kube.get(PODGROUPS, "train", "team")
    await kube.create_event(
        group,
        event_type=c.EventType.NORMAL,
        reason=c.Reason.PHASE_CHANGED,
        message="new -> Pending",
        timestamp="2026-01-01T00:09:30Z",
    )
    other = await kube.get(PODGROUPS, "eval", "team")
    await kube.create_event(
        other,
        event_type=c.EventType.NORMAL,
        reason=c.Reason.PHASE_CHANGED,
        message="about eval",
        timestamp="2026-01-01T00:09:30Z",
    )
    outcome = await outcome_of(fake, ["describe", "train"])
    assert outcome.code == 0
    text = outcome.stdout
    assert "Name:               train" in text
    assert "Waiting For:        NotEnoughTasks: 2 of minMember 3 member pods exist" in text
    members = text.split("Member Pods:\n")[1].split("Events:")[0].splitlines()
    # Both membership keys count; the namesake in another namespace does not.
    assert [line.split()[:3] for line in members[1:3]] == [
        ["train-0", "Running", "node-a"],
        ["train-1", "Pending", "<none>"],
    ]
    events = text.split("Events:\n")[1].splitlines()
    assert events[2].split() == [
        "Normal",
        "PhaseChanged",
        "30s",
        "podgroup-operator",
        "new",
        "->",
        "Pending",
    ]
    assert "about eval" not in text


async def test_a_cluster_without_the_crd_says_so() -> None:
    fake = FakeApiServer()
    fake.inject_error("GET", "/podgroups", 404, reason="", message="404 page not found")
    outcome = await outcome_of(fake, [])
    assert outcome.errors == [
        'error: the server doesn\'t have a resource type "podgroups" (is the CRD installed?)'
    ]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["-n", "team", "../x"], "error: invalid resource name '../x': may not contain '/'"),
        (["-n", "team", ".."], "error: invalid resource name '..': may not be '.' or '..'"),
        (["-n", "a/b"], "error: invalid namespace 'a/b': may not contain '/'"),
    ],
)
def test_a_name_or_namespace_no_api_path_can_hold_is_one_error_line(
    argv: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused before any request: the kubeconfig's server (a closed port) is never reached."""
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    assert main(["--kubeconfig", str(kubeconfig), *argv]) == 1
    assert capsys.readouterr().err.strip() == said


def test_describe_shows_the_topology_constraint_and_the_placement() -> None:
    group = podgroup(
        "train",
        "team",
        min_member=2,
        topologyConstraint={
            "topology": "fabric",
            "requiredTopologyLevel": "example.com/block",
            "preferredTopologyLevel": "example.com/rack",
        },
        status={"phase": "Running", "placement": {"level": "example.com/rack", "domain": "r2"}},
    )
    text = describe(group, [], [], NOW)
    assert (
        "Topology:           required example.com/block, preferred example.com/rack "
        "(Topology fabric)" in text
    )
    assert "Placement:          example.com/rack=r2" in text
    assert "Topology:           <none>" in describe(podgroup("plain", "team"), [], [], NOW)
    parts_only = podgroup("parts", "team", status={"placement": {"subGroups": []}})
    assert "Placement:          <none>" in describe(parts_only, [], [], NOW)


def test_describe_shows_the_sub_group_tree_with_counts_and_domains() -> None:
    spec = {
        "minMember": 3,
        "subGroups": [
            {"name": "stage", "minSubGroup": 1},
            {"name": "a", "parent": "stage", "minMember": 2},
            {"name": "rep", "parent": "stage", "minMember": 1, "matchLabelKeys": ["x"]},
        ],
    }
    status = {
        "subGroupsSatisfied": "3/4",
        "subGroups": [
            {"name": "stage", "minMember": 1, "running": 3},
            {"name": "a", "minMember": 2, "running": 2, "failed": 1},
            {"name": "rep-0", "minMember": 1, "running": 1},
        ],
        "placement": {"subGroups": [{"name": "a", "level": "example.com/rack", "domain": "r1"}]},
    }
    assert sub_group_tree(spec, status) == [
        "Sub-Groups:         3/4 satisfied",
        "  Name            Min   Running   Succeeded   Failed   Domain",
        "  stage           1     3         0           0        -",
        "    a             2     2         0           1        example.com/rack=r1",
        "    rep (per x)",
        "      rep-0       1     1         0           0        -",
    ]
    assert sub_group_tree({"minMember": 1}, {}) == []


def test_describe_shows_the_restart_policy_with_its_scope() -> None:
    policy = {"action": "RestartGang", "scope": "SubGroup", "backoffSeconds": 5}
    assert policy_summary(policy) == "RestartGang (scope SubGroup, backoffSeconds 5)"
    assert policy_summary({"action": "FailGang"}) == "FailGang"
    assert policy_summary(None) == "<none> (the owning controller handles failures)"


def test_describe_shows_the_run_time_limit_the_reservation_and_the_backfill() -> None:
    """The limit (the spec's, else the members'), the head gang's reservation in its condition,
    and a Backfilled Event."""
    reserved = "...; holds a reservation of 4 node(s) (n0, n1, n2, n3); estimated start now"
    group = podgroup(
        "big",
        "team",
        min_member=4,
        status={
            "phase": "Pending",
            "conditions": [
                {
                    "type": "Unschedulable",
                    "status": "True",
                    "reason": c.Reason.NOT_ENOUGH_RESOURCES,
                    "message": reserved,
                }
            ],
        },
    )
    backfilled = {
        "type": "Normal",
        "reason": c.Reason.BACKFILLED,
        "message": "placed on 1 node(s) reserved for team/big",
        "lastTimestamp": "2026-01-01T00:00:00Z",
    }
    text = describe(group, [], [backfilled], NOW)
    assert "Max Run:            <none>" in text
    assert reserved in text
    assert "Backfilled" in text and "reserved for team/big" in text
    limited = podgroup("short", "team", maxRunSeconds=60)
    assert "Max Run:            60s\n" in describe(limited, [], [], NOW)
    member = pod("m0", "team", group="plain", activeDeadlineSeconds=90)
    text = describe(podgroup("plain", "team"), [member], [], NOW)
    assert "Max Run:            90s (declared by its members)" in text
