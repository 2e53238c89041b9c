"""`kubectl podgroup`: PodGroups the way kubectl shows objects, with why each gang waits.

`kubectl get podgroups` shows counters; the question operators actually ask is "why is my gang
stuck?". This plugin puts the Unschedulable condition's reason and message next to each group,
and `describe` adds the member pods, the nodes they are on, and the group's recent Events.
`fabric` draws the nodes level by level (blocks, racks, nodes) with their free room and the gangs
on them (kubectl_fabric.py). `queues` draws the ElasticQuota tree with each quota's numbers
(kubectl_queues.py).

It keeps kubectl's habits, so that it behaves as people expect a kubectl command to behave:
--kubeconfig, --context, -n defaulting to the context's namespace, -A, -o wide|json|yaml|name,
one-line errors (`Error from server (NotFound): ...`) and exit code 1 on any error.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import yaml

from podgroup_operator import constants as c
from podgroup_operator import kubectl_fabric as fabric
from podgroup_operator import kubectl_queues as queues
from podgroup_operator.adapters.kube import (
    EVENTS,
    JSON,
    NODES,
    PODGROUPS,
    PODS,
    TOPOLOGIES,
    ApiError,
    InvalidNameError,
    Kind,
    KubeClient,
    KubeconfigError,
)
from podgroup_operator.api.run_time import declared_run_seconds
from podgroup_operator.api.times import parse_time
from podgroup_operator.domain.membership import group_name_of

OUTPUTS = ("wide", "json", "yaml", "name")
VERBS = ("get", "describe", "fabric", "queues")
ELASTIC_QUOTA_KINDS = (
    Kind(c.GROUP, c.VERSION, c.ELASTIC_QUOTA_PLURAL),
    Kind(c.KOORD_QUOTA_GROUP, c.VERSION, c.ELASTIC_QUOTA_PLURAL),
)
"""`queues` reads ElasticQuotas of both groups; a group not served (no CRD) is skipped."""
RESOURCE = f"{c.SINGULAR}.{c.GROUP}"
"""How `-o name` names a PodGroup, as kubectl does (`podgroup.scheduling.x-k8s.io/train`)."""

EPILOG = """examples:
  kubectl podgroup                      # PodGroups in the context's namespace, and why they wait
  kubectl podgroup -A -o wide           # every namespace, with scheduled count, restarts, mode
  kubectl podgroup train -o yaml        # one PodGroup as YAML (get is the default verb)
  kubectl podgroup describe train       # members, their nodes, why the gang waits, Events
  kubectl podgroup get describe         # a PodGroup named "describe"
  kubectl podgroup fabric --topology fabric    # each block, rack and node: free room, gangs
  kubectl podgroup fabric --levels example.com/rack --pod cpu=4,nvidia.com/gpu=1
                                        # per rack: how many such pods fit at once
  kubectl podgroup queues               # the ElasticQuota tree: used, min, max, fair share...

fabric draws the nodes level by level (a Topology's levels, or --levels label keys; a node
lacking a level's label is shown where its labels stop), each domain with free/allocatable of
cpu and nvidia.com/gpu (--resources for others; free counts Ready, schedulable nodes only) and
the gangs on it: the picture behind "no rack holds 8". A PodGroup named fabric: get fabric.

queues draws every ElasticQuota (scheduling.x-k8s.io, and Koordinator's scheduling.sigs.k8s.io)
under its parent, one row per resource: used, min, max, guarantee, fair share, borrowed, lent,
and the gangs waiting (- where the operator has written no status yet).
"""


class PluginError(Exception):
    """An error shown to the user as one line, exit code 1."""


@dataclass(frozen=True)
class Invocation:
    """What was asked, after parsing: verb, names, where, how to print."""

    verb: str
    names: tuple[str, ...]
    namespace: str | None
    """None: all namespaces (-A)."""
    output: str
    """"" (the table), or one of OUTPUTS."""
    kubeconfig: str | None = None
    context: str | None = None
    fabric: FabricAsk | None = None
    """What `fabric` draws; None for the other verbs."""
    queues: bool = False
    """`queues`: the ElasticQuota tree."""


@dataclass(frozen=True)
class FabricAsk:
    """`fabric`'s options: the levels (a Topology's, or label keys), the resource columns (None:
    the defaults) and one member's request for the FITS column."""

    topology: str | None
    levels: tuple[str, ...]
    resources: tuple[str, ...] | None
    pod: dict[str, int] | None
    selector: str | None = None
    """A node label selector: only those nodes are drawn."""
    nodes: bool = True
    """False: domains only, no node rows."""


@dataclass
class Outcome:
    """What to print and the exit code; errors are already one line each."""

    stdout: str = ""
    errors: list[str] = field(default_factory=list)
    """Lines for stderr that make the exit code 1."""
    notes: list[str] = field(default_factory=list)
    """Lines for stderr that do not (`No resources found in default namespace.`)."""

    @property
    def code(self) -> int:
        return 1 if self.errors else 0


# --- arguments -----------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # kubectl: one line, a pointer to --help, exit code 1.
        sys.stderr.write(f"error: {message}\nSee '{self.prog} --help' for usage.\n")
        raise SystemExit(1)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kubectl podgroup",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "words", nargs="*", metavar="[get|describe] NAME | fabric | queues", help="PodGroup names"
    )
    parser.add_argument("-n", "--namespace", help="default: the context's namespace, or default")
    parser.add_argument("-A", "--all-namespaces", action="store_true")
    parser.add_argument("-o", "--output", default="", help="one of: " + ", ".join(OUTPUTS))
    parser.add_argument("--kubeconfig", help="default: $KUBECONFIG, else ~/.kube/config")
    parser.add_argument("--context", help="default: the kubeconfig's current-context")
    shape = parser.add_argument_group("fabric")
    shape.add_argument("--topology", help="fabric: draw the levels of this Topology")
    shape.add_argument(
        "--levels",
        help="fabric: node label keys, coarse to fine, e.g. example.com/block,example.com/rack",
    )
    shape.add_argument(
        "--resources", help="fabric: resource columns (default: cpu, and nvidia.com/gpu if offered)"
    )
    shape.add_argument(
        "-l", "--selector", help="fabric: draw only the nodes this label selector matches"
    )
    shape.add_argument(
        "--no-nodes", action="store_true", help="fabric: domains only (a fabric of many nodes)"
    )
    shape.add_argument(
        "--pod",
        help="fabric: one member's request, e.g. cpu=4,nvidia.com/gpu=1: how many fit where",
    )
    return parser


def parse(
    argv: Sequence[str], default_namespace: Callable[[str | None, str | None], str]
) -> Invocation:
    """The invocation; usage errors raise PluginError with kubectl's wording.

    `default_namespace(kubeconfig, context)` is asked only when neither -n nor -A is given.
    """
    args = build_parser().parse_intermixed_args(list(argv))
    words = list(args.words)
    verb = words.pop(0) if words and words[0] in VERBS else "get"
    if args.output and args.output not in OUTPUTS:
        raise PluginError(
            f'unable to match a printer suitable for the output format "{args.output}", '
            f"allowed formats are: {','.join(OUTPUTS)}"
        )
    if verb == "describe" and args.output:
        raise PluginError("describe does not take -o/--output")
    if args.all_namespaces and words:
        raise PluginError("a resource cannot be retrieved by name across all namespaces")
    if args.kubeconfig and not os.path.exists(args.kubeconfig):
        raise PluginError(f"stat {args.kubeconfig}: no such file or directory")
    if verb == "fabric":
        ask = _fabric_ask(args, words)
        return Invocation(verb, (), None, "", args.kubeconfig, args.context, ask)
    if args.topology or args.levels or args.resources or args.pod or args.selector or args.no_nodes:
        raise PluginError(
            "--topology, --levels, --resources, --pod, -l and --no-nodes belong to fabric"
        )
    if verb == "queues":
        _check_queues(args, words)
        return Invocation(verb, (), None, "", args.kubeconfig, args.context, queues=True)
    namespace = args.namespace
    if args.all_namespaces:
        namespace = None
    elif not namespace:
        namespace = default_namespace(args.kubeconfig, args.context)
    return Invocation(verb, tuple(words), namespace, args.output, args.kubeconfig, args.context)


def _fabric_ask(args: argparse.Namespace, words: list[str]) -> FabricAsk:
    if words:
        raise PluginError(
            f"fabric takes no NAME (got {' '.join(words)}); a PodGroup named fabric: get fabric"
        )
    if args.output:
        raise PluginError("fabric does not take -o/--output")
    if args.namespace or args.all_namespaces:
        raise PluginError("fabric shows the whole cluster: drop -n/-A")
    if bool(args.topology) == bool(args.levels):
        raise PluginError(
            "fabric needs one of --topology NAME or --levels KEY,KEY "
            "(e.g. --levels example.com/block,example.com/rack)"
        )
    try:
        return FabricAsk(
            topology=args.topology,
            levels=fabric.parse_levels(args.levels) if args.levels else (),
            resources=fabric.parse_resources(args.resources) if args.resources else None,
            pod=fabric.parse_pod(args.pod) if args.pod else None,
            selector=args.selector,
            nodes=not args.no_nodes,
        )
    except fabric.FabricError as exc:
        raise PluginError(str(exc)) from None


def _check_queues(args: argparse.Namespace, words: list[str]) -> None:
    if words:
        raise PluginError(
            f"queues takes no NAME (got {' '.join(words)}); a PodGroup named queues: get queues"
        )
    if args.output:
        raise PluginError("queues does not take -o/--output; kubectl get eq -A -o yaml does")
    if args.namespace or args.all_namespaces:
        raise PluginError("queues shows the whole tree, across namespaces: drop -n/-A")


def context_namespace(kubeconfig: str | None, context: str | None) -> str:
    """The namespace of the context in use (kubectl's default for -n), else `default`."""
    from kubernetes import config as k8s_config

    try:
        contexts, active = k8s_config.list_kube_config_contexts(config_file=kubeconfig)
    except k8s_config.ConfigException:
        if context is not None or kubeconfig is not None:
            raise
        return "default"  # no kubeconfig at all: in-cluster credentials, as kubectl falls back
    chosen = active
    if context is not None:
        chosen = next((ctx for ctx in contexts if ctx.get("name") == context), None)
        if chosen is None:
            raise PluginError(f'context "{context}" does not exist')
    return str(((chosen or {}).get("context") or {}).get("namespace") or "default")


# --- reading -------------------------------------------------------------------------------------


async def _get_named(kube: KubeClient, invocation: Invocation, outcome: Outcome) -> list[JSON]:
    assert invocation.namespace is not None
    found = []
    for name in invocation.names:
        try:
            found.append(await kube.get(PODGROUPS, name, invocation.namespace))
        except ApiError as exc:
            outcome.errors.append(server_error(exc))
    return found


async def _members(kube: KubeClient, group: JSON) -> list[JSON]:
    meta = group["metadata"]
    pods = (await kube.list(PODS, meta["namespace"])).get("items") or []
    return [pod for pod in pods if group_name_of(pod) == meta["name"]]


async def _events(kube: KubeClient, group: JSON) -> list[JSON]:
    meta = group["metadata"]
    selector = f"involvedObject.kind={c.KIND},involvedObject.name={meta['name']}"
    if meta.get("uid"):
        selector += f",involvedObject.uid={meta['uid']}"
    items = (await kube.list(EVENTS, meta["namespace"], field_selector=selector)).get("items")
    return sorted(items or [], key=_event_time)


async def execute(kube: KubeClient, invocation: Invocation, now: dt.datetime) -> Outcome:
    """Read what the invocation asks for and render it; API errors become one-line errors."""
    outcome = Outcome()
    try:
        await _execute(kube, invocation, now, outcome)
    except ApiError as exc:
        outcome.errors.append(server_error(exc))
    return outcome


async def _draw_fabric(kube: KubeClient, ask: FabricAsk) -> str:
    """Read the Topology (if named), every node and every bound, unterminated pod; draw."""
    levels, title = ask.levels, "labels"
    if ask.topology:
        levels = fabric.topology_levels(await kube.get(TOPOLOGIES, ask.topology))
        title = f"Topology {ask.topology}"
    nodes = (await kube.list(NODES, label_selector=ask.selector)).get("items") or []
    bound = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
    pods = (await kube.list(PODS, field_selector=bound)).get("items") or []
    drawn = fabric.build(levels, nodes, pods)
    return fabric.render(
        drawn,
        fabric.shown_resources(drawn, ask.resources),
        pod=ask.pod,
        title=title,
        nodes=ask.nodes,
    )


async def _draw_queues(kube: KubeClient, outcome: Outcome) -> None:
    """Read the ElasticQuotas of both groups (a group without its CRD is skipped); draw."""
    objects: list[JSON] = []
    served = 0
    for kind in ELASTIC_QUOTA_KINDS:
        try:
            listed = await kube.list(kind)
        except ApiError as exc:
            if exc.not_found and not exc.reason:
                continue  # the group is not served: no CRD of that group
            raise
        served += 1
        for item in listed.get("items") or []:
            objects.append({"apiVersion": f"{kind.group}/{kind.version}", **item})
    if not served:
        outcome.errors.append(
            f'error: the server doesn\'t have a resource type "{c.ELASTIC_QUOTA_PLURAL}" (is '
            "the ElasticQuota CRD installed? kubectl apply -f crds/)"
        )
    elif not objects:
        outcome.notes.append("No resources found.")
    else:
        outcome.stdout = queues.render(queues.build(objects))


async def _execute(
    kube: KubeClient, invocation: Invocation, now: dt.datetime, outcome: Outcome
) -> None:
    if invocation.fabric is not None:
        outcome.stdout = await _draw_fabric(kube, invocation.fabric)
        return
    if invocation.queues:
        await _draw_queues(kube, outcome)
        return
    if invocation.names:
        groups = await _get_named(kube, invocation, outcome)
    else:
        listed = await kube.list(PODGROUPS, invocation.namespace)
        groups = list(listed.get("items") or [])
        if not groups:
            # As kubectl: said on stderr, and not an error.
            where = f" in {invocation.namespace} namespace" if invocation.namespace else ""
            outcome.notes.append(f"No resources found{where}.")
            return
    if invocation.verb == "describe":
        blocks = [
            describe(group, await _members(kube, group), await _events(kube, group), now)
            for group in groups
        ]
        outcome.stdout = "\n\n".join(blocks)
    elif groups:
        outcome.stdout = render(groups, invocation, now, single=len(invocation.names) == 1)


# --- rendering -----------------------------------------------------------------------------------


def server_error(exc: ApiError) -> str:
    """kubectl's line for an API error: `Error from server (NotFound): podgroups... not found`.

    A 404 without a Status reason is the API path itself missing: the CRD is not installed.
    """
    if exc.not_found and not exc.reason:
        return (
            f'error: the server doesn\'t have a resource type "{c.PLURAL}" (is the CRD installed?)'
        )
    return f"Error from server ({exc.reason or exc.status}): {exc.message}"


_LONG_AGO = dt.datetime.min.replace(tzinfo=dt.UTC)


def _event_time(event: Mapping[str, Any]) -> dt.datetime:
    """When an Event last happened: core/v1 and events.k8s.io writers fill different fields."""
    created = (event.get("metadata") or {}).get("creationTimestamp")
    for value in (
        event.get("lastTimestamp"),
        event.get("eventTime"),
        event.get("firstTimestamp"),
        created,
    ):
        parsed = parse_time(value)
        if parsed is not None:
            return parsed
    return _LONG_AGO


def human_age(since: dt.datetime | None, now: dt.datetime) -> str:
    """kubectl's short ages: 45s, 3m20s, 25m, 5h10m, 3d4h, 120d, 3y."""
    if since is None:
        return "<unknown>"
    seconds = max(0, int((now - since).total_seconds()))
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 120:
        return f"{seconds}s"
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if hours < 3:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    return f"{days // 365}y"


def waiting_for(group: Mapping[str, Any]) -> str:
    """`Reason: message` of a True Unschedulable condition: why the gang does not run."""
    for condition in (group.get("status") or {}).get("conditions") or []:
        if (
            condition.get("type") == c.ConditionType.UNSCHEDULABLE
            and condition.get("status") == c.ConditionStatus.TRUE
        ):
            return f"{condition.get('reason', '')}: {condition.get('message', '')}"
    return ""


def _table(rows: list[list[str]]) -> str:
    """kubectl's layout: columns padded to the widest cell, three spaces apart; the last
    column is not padded (it may be a long message)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for row in rows:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        lines.append("   ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines)


def table(
    groups: Sequence[Mapping[str, Any]], *, all_namespaces: bool, wide: bool, now: dt.datetime
) -> str:
    header = ["NAME", "PHASE", "MIN", "RUNNING", "SUCCEEDED", "FAILED", "AGE"]
    if wide:
        header += ["SCHEDULED", "RESTARTS", "MODE"]
    header.append("WAITING FOR")
    if all_namespaces:
        header.insert(0, "NAMESPACE")
    rows = [header]
    ordered = sorted(
        groups, key=lambda g: (g["metadata"].get("namespace", ""), g["metadata"]["name"])
    )
    for group in ordered:
        meta, spec, status = group["metadata"], group.get("spec") or {}, group.get("status") or {}
        row = [
            meta["name"],
            status.get("phase") or "-",
            str(spec.get("minMember", "")),
            *(str(status.get(k) or 0) for k in ("running", "succeeded", "failed")),
            human_age(parse_time(meta.get("creationTimestamp")), now),
        ]
        if wide:
            row += [
                str(status.get("scheduled") or 0),
                str(status.get("restarts") or 0),
                str(spec.get("mode") or c.GangMode.STRICT),
            ]
        row.append(waiting_for(group))
        if all_namespaces:
            row.insert(0, meta.get("namespace", ""))
        rows.append(row)
    return _table(rows)


def render(
    groups: Sequence[JSON], invocation: Invocation, now: dt.datetime, *, single: bool
) -> str:
    """`get` output: the table, or the objects as kubectl prints them for -o json|yaml|name."""
    if invocation.output == "name":
        return "\n".join(f"{RESOURCE}/{g['metadata']['name']}" for g in groups)
    if invocation.output in ("json", "yaml"):
        document: JSON = (
            groups[0]
            if single
            else {
                "apiVersion": "v1",
                "kind": "List",
                "items": list(groups),
                "metadata": {"resourceVersion": ""},
            }
        )
        if invocation.output == "json":
            return json.dumps(document, indent=4)
        return yaml.safe_dump(document, sort_keys=False).rstrip("\n")
    return table(
        groups,
        all_namespaces=invocation.namespace is None,
        wide=invocation.output == "wide",
        now=now,
    )


def _quantities(resources: Mapping[str, Any] | None) -> str:
    if not resources:
        return "<none>"
    return ", ".join(f"{k}={v}" for k, v in sorted(resources.items()))


def policy_summary(policy: Mapping[str, Any] | None) -> str:
    """`RestartGang (scope SubGroup, maxRestarts 3)`: the action, then the fields set."""
    if not policy:
        return "<none> (the owning controller handles failures)"
    details = [
        f"{key} {policy[key]}"
        for key in ("scope", "maxRestarts", "backoffSeconds", "maxBackoffSeconds")
        if policy.get(key) is not None
    ]
    action = str(policy.get("action", ""))
    return f"{action} ({', '.join(details)})" if details else action


def _constraint(constraint: Mapping[str, Any] | None) -> str:
    """`required example.com/block, preferred example.com/rack (Topology fabric)`."""
    if not constraint:
        return "<none>"
    parts = [
        f"{word} {constraint[key]}"
        for word, key in (
            ("required", "requiredTopologyLevel"),
            ("preferred", "preferredTopologyLevel"),
        )
        if constraint.get(key)
    ]
    named = constraint.get("topology")
    return ", ".join(parts) + (f" (Topology {named})" if named else "")


def _placement(placement: Mapping[str, Any] | None) -> str:
    """`example.com/rack=r2`: the domain the gang was bound in."""
    if not placement or not placement.get("level"):
        return "<none>"  # sub-groups' domains are in the tree below
    return f"{placement.get('level')}={placement.get('domain')}"


def _pod_status(pod: Mapping[str, Any]) -> str:
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return "Terminating"
    status = pod.get("status") or {}
    return str(status.get("reason") or status.get("phase") or "Unknown")


def _indented(rows: list[list[str]]) -> list[str]:
    return ["  " + line for line in _table(rows).splitlines()]


def sub_group_tree(spec: Mapping[str, Any], status: Mapping[str, Any]) -> list[str]:
    """The `Sub-Groups:` lines of `describe`: the tree of spec.subGroups, each with its
    minimum and members by state (status.subGroups) and its domain (status.placement); a
    template's instances under it. Nothing without sub-groups."""
    subs = [s for s in spec.get("subGroups") or [] if isinstance(s, Mapping)]
    if not subs:
        return []
    counts = {s.get("name"): s for s in status.get("subGroups") or []}
    placement = status.get("placement") or {}
    domains = {p.get("name"): p for p in placement.get("subGroups") or []}
    children: dict[Any, list[Mapping[str, Any]]] = {}
    for sub in subs:
        children.setdefault(sub.get("parent"), []).append(sub)
    rows = [["Name", "Min", "Running", "Succeeded", "Failed", "Domain"]]

    def row(name: str, depth: int) -> None:
        seen = counts.get(name) or {}
        where = domains.get(name)
        domain = f"{where.get('level')}={where.get('domain')}" if where else "-"
        rows.append(
            ["  " * depth + name]
            + [str(seen.get(k, 0)) for k in ("minMember", "running", "succeeded", "failed")]
            + [domain]
        )

    def walk(parent: Any, depth: int, seen: set[str]) -> None:
        for sub in children.get(parent, []):
            name = str(sub.get("name"))
            if name in seen:
                continue  # a cycle the webhook would have refused
            seen.add(name)
            if sub.get("matchLabelKeys"):
                keys = ", ".join(map(str, sub["matchLabelKeys"]))
                rows.append(["  " * depth + f"{name} (per {keys})", "", "", "", "", ""])
                for instance in sorted(n for n in counts if str(n).startswith(f"{name}-")):
                    row(str(instance), depth + 1)
            else:
                row(name, depth)
            walk(name, depth + 1, seen)

    walk(None, 0, set())
    k = spec.get("minSubGroup")
    head = f"Sub-Groups:         {status.get('subGroupsSatisfied') or '0/?'} satisfied"
    return [head + (f" (minSubGroup {k})" if k else ""), *_indented(rows)]


def _max_run(spec: Mapping[str, Any], members: Sequence[Mapping[str, Any]]) -> str:
    """The gang's run-time limit and where it comes from (`api.run_time`)."""
    if spec.get("maxRunSeconds") is not None:
        return f"{spec['maxRunSeconds']}s"
    seconds = declared_run_seconds(None, members) if members else None
    return "<none>" if seconds is None else f"{seconds}s (declared by its members)"


def describe(
    group: Mapping[str, Any],
    members: Sequence[Mapping[str, Any]],
    events: Sequence[Mapping[str, Any]],
    now: dt.datetime,
) -> str:
    """`kubectl describe`-style text: the spec that matters, counters, why it waits, member pods
    with their nodes, conditions and the recent Events."""
    meta, spec, status = group["metadata"], group.get("spec") or {}, group.get("status") or {}
    timeout = spec.get("scheduleTimeoutSeconds")
    lines = [
        f"Name:               {meta['name']}",
        f"Namespace:          {meta.get('namespace', '')}",
        f"Created:            {human_age(parse_time(meta.get('creationTimestamp')), now)} ago",
        f"Phase:              {status.get('phase') or '-'}",
        f"Min Member:         {spec.get('minMember', '')}",
        f"Mode:               {spec.get('mode') or c.GangMode.STRICT}",
        f"Schedule Timeout:   {f'{timeout}s' if timeout is not None else '<default>'}",
        f"Max Run:            {_max_run(spec, members)}",
        f"Min Resources:      {_quantities(spec.get('minResources'))}",
        f"Total Resources:    {_quantities(spec.get('totalResources'))}",
        f"Gang Group:         {', '.join(spec.get('gangGroup') or []) or '<none>'}",
        f"Policy:             {policy_summary(spec.get('policy'))}",
        f"Topology:           {_constraint(spec.get('topologyConstraint'))}",
        f"Placement:          {_placement(status.get('placement'))}",
        "Members:            "
        + ", ".join(
            f"{status.get(k) or 0} {k}" for k in ("running", "succeeded", "failed", "scheduled")
        ),
        f"Restarts:           {status.get('restarts') or 0}",
        f"Waiting For:        {waiting_for(group) or '<nothing>'}",
    ]
    lines += sub_group_tree(spec, status)
    conditions = status.get("conditions") or []
    if conditions:
        lines.append("Conditions:")
        rows = [["Type", "Status", "Reason", "Age", "Message"]]
        for condition in conditions:
            rows.append(
                [
                    str(condition.get("type", "")),
                    str(condition.get("status", "")),
                    str(condition.get("reason", "")),
                    human_age(parse_time(condition.get("lastTransitionTime")), now),
                    str(condition.get("message", "")),
                ]
            )
        lines += _indented(rows)
    else:
        lines.append("Conditions:         <none>")
    if members:
        lines.append("Member Pods:")
        rows = [["Name", "Status", "Node", "Age"]]
        for pod in sorted(members, key=lambda p: p["metadata"]["name"]):
            rows.append(
                [
                    pod["metadata"]["name"],
                    _pod_status(pod),
                    str((pod.get("spec") or {}).get("nodeName") or "<none>"),
                    human_age(parse_time(pod["metadata"].get("creationTimestamp")), now),
                ]
            )
        lines += _indented(rows)
    else:
        lines.append("Member Pods:        <none>")
    if events:
        lines.append("Events:")
        rows = [
            ["Type", "Reason", "Age", "From", "Message"],
            ["----", "------", "---", "----", "-------"],
        ]
        for event in events:
            source = (event.get("source") or {}).get("component") or event.get("reportingComponent")
            rows.append(
                [
                    str(event.get("type", "")),
                    str(event.get("reason", "")),
                    human_age(_event_time(event), now),
                    str(source or ""),
                    str(event.get("message", "")),
                ]
            )
        lines += _indented(rows)
    else:
        lines.append("Events:             <none>")
    return "\n".join(lines)


# --- entry point ---------------------------------------------------------------------------------


def _config_error(exc: Exception) -> str:
    """The kubeconfig problem in one line; the in-cluster fallback's complaint means none found."""
    if not os.environ.get("KUBERNETES_SERVICE_HOST") and "host/port" in str(exc):
        return "no kubeconfig found ($KUBECONFIG, ~/.kube/config) and not running in a cluster"
    return str(exc)


def _connection_error(exc: BaseException) -> bool:
    import aiohttp

    return isinstance(exc, (aiohttp.ClientError, OSError, asyncio.TimeoutError))


def main(argv: list[str]) -> int:
    """Parse, read, print; every failure is one line on stderr and exit code 1."""
    from kubernetes.config import ConfigException

    try:
        invocation = parse(argv, context_namespace)

        async def run() -> Outcome:
            kubeconfig, context = invocation.kubeconfig, invocation.context
            async with KubeClient.from_kubeconfig(kubeconfig, context=context) as kube:
                return await execute(kube, invocation, dt.datetime.now(dt.UTC))

        outcome = asyncio.run(run())
    except PluginError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except ConfigException as exc:
        print(f"error: {_config_error(exc)}", file=sys.stderr)
        return 1
    except KubeconfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except ApiError as exc:
        print(server_error(exc), file=sys.stderr)
        return 1
    except InvalidNameError as exc:  # refused before any request, as kubectl refuses it
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        if not _connection_error(exc):
            raise
        print(f"Unable to connect to the server: {exc}", file=sys.stderr)
        return 1
    if outcome.stdout:
        print(outcome.stdout)
    for line in [*outcome.notes, *outcome.errors]:
        print(line, file=sys.stderr)
    return outcome.code
