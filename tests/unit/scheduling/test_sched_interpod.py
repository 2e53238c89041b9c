"""Pod-to-pod filters: inter-pod affinity and anti-affinity (with symmetry), topology spread,
host ports, and the refusal of constraints the scheduler cannot evaluate."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podgroup_operator.constants import Reason
from podgroup_operator.scheduling.gang import (
    HOST_PORT_COST,
    NODE_EXPRESSION_COST,
    NODE_VALUE_COST,
    POD_TERM_COST,
    GangRequest,
    Placement,
    Refusal,
    decision_cost,
    host_port_count,
    node_affinity_size,
    pod_terms,
)
from podgroup_operator.scheduling.placement import place_group
from podgroup_operator.scheduling.podinfo import HostPort, PortWants, port_conflict
from podgroup_operator.scheduling.snapshot import Snapshot
from tests.builders import node, pod
from tests.unit.scheduling.helpers import gang, members

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def zoned(count: int, zones: str = "abc", **kwargs: Any) -> list[dict[str, Any]]:
    """Nodes n0..n(count-1), node i in zone zones[i % len(zones)]."""
    return [node(f"n{i}", labels={ZONE: zones[i % len(zones)]}, **kwargs) for i in range(count)]


def term(labels: dict[str, str], key: str = HOST, **extra: Any) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key, **extra}


def anti(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def near(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def spread(
    key: str, labels: dict[str, str], when: str = "DoNotSchedule", skew: int = 1, **extra: Any
) -> list[dict[str, Any]]:
    return [
        {
            "maxSkew": skew,
            "topologyKey": key,
            "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": labels},
            **extra,
        }
    ]


def nodes_of(outcome: Placement | Refusal) -> list[str]:
    assert isinstance(outcome, Placement), getattr(outcome, "message", outcome)
    return [b.node for b in outcome.bindings]


# --- anti-affinity -------------------------------------------------------------------------------
def test_gang_members_with_anti_affinity_to_each_other_take_one_node_each() -> None:
    snapshot = Snapshot.build([node(f"n{i}") for i in range(4)], [])
    pods = members(
        "job", 3, requests={"cpu": "1"}, labels={"app": "w"}, affinity=anti(term({"app": "w"}))
    )
    placed = nodes_of(place_group(gang("job", pods), snapshot))
    assert len(set(placed)) == 3


def test_anti_affinity_refusal_names_the_term_and_leaves_the_snapshot_as_it_was() -> None:
    snapshot = Snapshot.build([node("n0"), node("n1")], [])
    before = (snapshot.state(), snapshot.index_state())
    pods = members(
        "job", 3, requests={"cpu": "1"}, labels={"app": "w"}, affinity=anti(term({"app": "w"}))
    )
    outcome = place_group(gang("job", pods), snapshot)
    assert isinstance(outcome, Refusal)
    assert outcome.reason is Reason.NOT_ENOUGH_RESOURCES
    assert "only 2 fit" in outcome.message
    assert (
        "2 node(s) didn't match pod anti-affinity rules (app=w in default per "
        "kubernetes.io/hostname)" in outcome.message
    )
    assert (snapshot.state(), snapshot.index_state()) == before


def test_running_pods_anti_affinity_keeps_newcomers_out_of_its_zone() -> None:
    guard = pod(
        "guard",
        node="n0",
        labels={"app": "guard"},
        affinity=anti(term({"app": "web"}, ZONE)),
    )
    snapshot = Snapshot.build(zoned(4, "ab"), [guard])
    outcome = place_group(gang("web", members("web", 2, labels={"app": "web"})), snapshot)
    # n0 and n2 are zone a, where the guard forbids app=web.
    assert set(nodes_of(outcome)) <= {"n1", "n3"}


def test_symmetry_only_applies_in_the_terms_namespaces() -> None:
    guard = pod("guard", node="n0", affinity=anti(term({"app": "web"})))
    snapshot = Snapshot.build([node("n0")], [guard])
    other = members("web", 1, namespace="other", labels={"app": "web"})
    assert nodes_of(place_group(gang("web", other, namespace="other"), snapshot)) == ["n0"]
    same = members("web2", 1, labels={"app": "web"})
    outcome = place_group(gang("web2", same), snapshot)
    assert isinstance(outcome, Refusal)
    assert "didn't satisfy existing pods anti-affinity rules" in outcome.message


def test_anti_affinity_of_one_member_keeps_an_unconstrained_gang_mate_away() -> None:
    """Shapes differ: the constrained shape is placed, then the plain one must respect it."""
    snapshot = Snapshot.build([node("n0", cpu=16), node("n1", cpu=16)], [])
    leader = pod(
        "job-leader",
        group="job",
        requests={"cpu": "8"},
        labels={"role": "leader"},
        affinity=anti(term({"role": "worker"})),
    )
    worker = pod("job-worker", group="job", requests={"cpu": "1"}, labels={"role": "worker"})
    outcome = place_group(gang("job", [leader, worker]), snapshot)
    where = dict(zip([b.pod for b in outcome.bindings], nodes_of(outcome), strict=True))
    assert where["job-leader"] != where["job-worker"]


def test_namespaces_field_and_empty_namespace_selector_widen_the_term() -> None:
    def place(affinity: dict[str, Any]) -> list[str]:
        db = pod("db", "data", node="n0", labels={"app": "db"})
        snapshot = Snapshot.build([node("n0"), node("n1")], [db])
        return nodes_of(place_group(gang("a", members("a", 1, affinity=affinity)), snapshot))

    assert place(anti(term({"app": "db"}, namespaces=["data"]))) == ["n1"]
    assert place(anti(term({"app": "db"}, namespaceSelector={}))) == ["n1"]
    # The default is the pod's own namespace, where no db runs: packing picks the fuller n0.
    assert place(anti(term({"app": "db"}))) == ["n0"]


# --- affinity ------------------------------------------------------------------------------------
def test_affinity_places_next_to_a_matching_pod_in_the_same_zone() -> None:
    db = pod("db", node="n1", labels={"app": "db"})
    snapshot = Snapshot.build(zoned(6), [db])
    pods = members("app", 2, requests={"cpu": "6"}, affinity=near(term({"app": "db"}, ZONE)))
    # Zone b holds n1 and n4; each member needs most of a node.
    assert sorted(nodes_of(place_group(gang("app", pods), snapshot))) == ["n1", "n4"]


def test_first_member_of_a_self_affine_gang_may_start_anywhere_the_rest_follow() -> None:
    snapshot = Snapshot.build(zoned(6), [])
    together = near(term({"app": "job"}, ZONE))
    pods = members("job", 2, requests={"cpu": "6"}, labels={"app": "job"}, affinity=together)
    placed = nodes_of(place_group(gang("job", pods), snapshot))
    assert len({"abc"[int(n[1:]) % 3] for n in placed}) == 1
    # Two nodes per zone and each member needs most of one: a third member cannot follow.
    three = members(
        "big",
        3,
        requests={"cpu": "6"},
        labels={"app": "big"},
        affinity=near(term({"app": "big"}, ZONE)),
    )
    outcome = place_group(gang("big", three), snapshot)
    assert isinstance(outcome, Refusal)
    assert "only 2 fit" in outcome.message
    assert (
        "didn't match pod affinity rules (app=big in default per topology.kubernetes.io/zone)"
        in outcome.message
    )


def test_affinity_without_any_match_and_no_self_match_refuses() -> None:
    snapshot = Snapshot.build([node("n0")], [])
    outcome = place_group(
        gang("job", members("job", 1, affinity=near(term({"app": "db"})))), snapshot
    )
    assert isinstance(outcome, Refusal)
    assert "1 node(s) didn't match pod affinity rules (app=db in default per" in outcome.message


def test_affinity_needs_the_topology_label_on_the_node() -> None:
    db = pod("db", node="n0", labels={"app": "db"})
    snapshot = Snapshot.build([node("n0", labels={"rack": "r1"}), node("n1")], [db])
    pods = members("app", 2, requests={"cpu": "5"}, affinity=near(term({"app": "db"}, "rack")))
    outcome = place_group(gang("app", pods), snapshot)
    assert isinstance(outcome, Refusal)
    assert "only 1 fit" in outcome.message
    assert "didn't match pod affinity rules" in outcome.message


# --- topology spread -----------------------------------------------------------------------------
def test_spread_do_not_schedule_puts_one_member_per_zone() -> None:
    snapshot = Snapshot.build(zoned(6), [])
    pods = members(
        "job", 3, labels={"app": "s"}, topologySpreadConstraints=spread(ZONE, {"app": "s"})
    )
    zones = sorted(
        "abc"[int(n[1:]) % 3] for n in nodes_of(place_group(gang("job", pods), snapshot))
    )
    assert zones == ["a", "b", "c"]


def test_spread_counts_existing_matching_pods_but_not_terminating_ones() -> None:
    existing = [
        pod("old-0", node="n0", labels={"app": "s"}),
        pod("old-1", node="n3", labels={"app": "s"}),
        pod("gone", node="n1", labels={"app": "s"}, deleting=True),
    ]
    snapshot = Snapshot.build(zoned(6), existing)
    pods = members(
        "job", 2, labels={"app": "s"}, topologySpreadConstraints=spread(ZONE, {"app": "s"})
    )
    zones = sorted(
        "abc"[int(n[1:]) % 3] for n in nodes_of(place_group(gang("job", pods), snapshot))
    )
    # Zone a already holds two; b and c hold none (the terminating pod does not count).
    assert zones == ["b", "c"]


def test_spread_refusal_names_the_constraint_and_not_ready_nodes_still_count_as_domains() -> None:
    nodes = [*zoned(2, "ab"), node("down", labels={ZONE: "c"}, ready=False)]
    snapshot = Snapshot.build(nodes, [])
    constraint = spread(ZONE, {"app": "s"})
    pods = members("job", 3, labels={"app": "s"}, topologySpreadConstraints=constraint)
    outcome = place_group(gang("job", pods), snapshot)
    # Zone c (its node is not Ready) holds 0, so a and b may not take a second member.
    assert isinstance(outcome, Refusal)
    assert "only 2 fit" in outcome.message
    assert (
        "2 node(s) didn't match pod topology spread constraints (maxSkew 1 per "
        "topology.kubernetes.io/zone of app=s)" in outcome.message
    )
    assert "1 node(s) were not Ready" in outcome.message


def test_nodes_without_the_key_fail_with_missing_label() -> None:
    snapshot = Snapshot.build([node("bare")], [])
    pods = members(
        "job", 1, labels={"app": "s"}, topologySpreadConstraints=spread(ZONE, {"app": "s"})
    )
    outcome = place_group(gang("job", pods), snapshot)
    assert isinstance(outcome, Refusal)
    assert "(missing required label) (topology.kubernetes.io/zone)" in outcome.message


def test_min_domains_treats_missing_domains_as_empty() -> None:
    snapshot = Snapshot.build(zoned(4, "ab"), [])
    constraint = spread(ZONE, {"app": "s"}, minDomains=3)
    pods = members("job", 3, labels={"app": "s"}, topologySpreadConstraints=constraint)
    outcome = place_group(gang("job", pods), snapshot)
    # Two domains < minDomains 3, so the global minimum is 0: at most 1 per zone.
    assert isinstance(outcome, Refusal)
    assert "only 2 fit" in outcome.message


def test_node_affinity_policy_limits_the_domains() -> None:
    snapshot = Snapshot.build(zoned(6), [])
    only_ab = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a", "b"]}]}
                ]
            }
        }
    }
    honor = members(
        "h",
        3,
        labels={"app": "h"},
        affinity=only_ab,
        topologySpreadConstraints=spread(ZONE, {"app": "h"}),
    )
    assert isinstance(place_group(gang("h", honor), snapshot), Placement)
    ignore = members(
        "i",
        3,
        labels={"app": "i"},
        affinity=only_ab,
        topologySpreadConstraints=spread(ZONE, {"app": "i"}, nodeAffinityPolicy="Ignore"),
    )
    # Zone c counts as an empty domain, so neither a nor b may take a second member.
    outcome = place_group(gang("i", ignore), snapshot)
    assert isinstance(outcome, Refusal)
    assert "only 2 fit" in outcome.message


def test_match_label_keys_narrow_the_spread_selector_to_the_pods_own_value() -> None:
    existing = [pod(f"v1-{i}", node="n0", labels={"app": "s", "rev": "1"}) for i in range(3)]
    narrowed = members(
        "new",
        1,
        labels={"app": "s", "rev": "2"},
        topologySpreadConstraints=spread(ZONE, {"app": "s"}, matchLabelKeys=["rev"]),
    )
    # Only rev=2 pods count, so zone a is as empty as the others and packing picks n0.
    assert nodes_of(place_group(gang("new", narrowed), Snapshot.build(zoned(3), existing))) == [
        "n0"
    ]
    whole = members(
        "all",
        1,
        labels={"app": "s", "rev": "2"},
        topologySpreadConstraints=spread(ZONE, {"app": "s"}),
    )
    assert nodes_of(place_group(gang("all", whole), Snapshot.build(zoned(3), existing))) != ["n0"]


def test_schedule_anyway_prefers_the_emptier_zone_over_packing() -> None:
    existing = [
        pod(f"old-{i}", node="n0", labels={"app": "s"}, requests={"cpu": "1"}) for i in range(2)
    ]
    snapshot = Snapshot.build(zoned(2, "ab"), existing)
    soft = spread(ZONE, {"app": "s"}, when="ScheduleAnyway")
    pods = members("job", 1, labels={"app": "s"}, topologySpreadConstraints=soft)
    # Packing alone would pick n0 (fuller); the spread score moves the pod to zone b.
    assert nodes_of(place_group(gang("job", pods), snapshot)) == ["n1"]
    plain = members("plain", 1, labels={"app": "s"})
    assert nodes_of(place_group(gang("plain", plain), snapshot)) == ["n0"]


def test_schedule_anyway_by_hostname_scores_nodes_inside_one_class() -> None:
    existing = [pod("old", node="n0", labels={"app": "s"}, requests={"cpu": "1"})]
    snapshot = Snapshot.build([node("n0"), node("n1")], existing)
    soft = spread(HOST, {"app": "s"}, when="ScheduleAnyway")
    pods = members("job", 1, labels={"app": "s"}, topologySpreadConstraints=soft)
    assert nodes_of(place_group(gang("job", pods), snapshot)) == ["n1"]


# --- host ports ----------------------------------------------------------------------------------
def with_port(
    port: int, ip: str | None = None, protocol: str | None = None
) -> list[dict[str, Any]]:
    spec: dict[str, Any] = {"containerPort": port, "hostPort": port}
    if ip:
        spec["hostIP"] = ip
    if protocol:
        spec["protocol"] = protocol
    return [{"name": "main", "image": "sim", "ports": [spec]}]


def test_host_port_in_use_keeps_the_member_off_that_node() -> None:
    holder = pod("holder", node="n0", containers=with_port(8080))
    snapshot = Snapshot.build([node("n0"), node("n1")], [holder])
    pods = members("job", 1, containers=with_port(8080))
    assert nodes_of(place_group(gang("job", pods), snapshot)) == ["n1"]


def test_members_wanting_the_same_host_port_spread_and_the_refusal_names_it() -> None:
    snapshot = Snapshot.build([node("n0"), node("n1")], [])
    outcome = place_group(gang("job", members("job", 3, containers=with_port(9000))), snapshot)
    assert isinstance(outcome, Refusal)
    assert (
        "2 node(s) didn't have free ports for the requested pod ports (0.0.0.0:9000/TCP)"
        in outcome.message
    )


@pytest.mark.parametrize(
    ("held", "wanted", "conflict"),
    [
        (("10.0.0.1", "TCP"), ("10.0.0.2", "TCP"), False),
        (("10.0.0.1", "TCP"), ("0.0.0.0", "TCP"), True),
        (("0.0.0.0", "TCP"), ("10.0.0.2", "TCP"), True),
        (("10.0.0.1", "TCP"), ("10.0.0.1", "UDP"), False),
        (("10.0.0.1", "UDP"), ("10.0.0.1", "UDP"), True),
    ],
)
def test_host_port_conflicts_follow_ip_and_protocol(
    held: tuple[str, str], wanted: tuple[str, str], conflict: bool
) -> None:
    holder = pod("holder", node="n0", containers=with_port(53, *held))
    snapshot = Snapshot.build([node("n0")], [holder])
    outcome = place_group(
        gang("job", members("job", 1, containers=with_port(53, *wanted))), snapshot
    )
    assert isinstance(outcome, Refusal) is conflict


_PORTS = st.builds(
    HostPort,
    st.sampled_from(["0.0.0.0", "10.0.0.1", "10.0.0.2"]),
    st.sampled_from(["TCP", "UDP"]),
    st.integers(80, 83),
)


@given(wanted=st.lists(_PORTS, max_size=6), used=st.lists(_PORTS, max_size=6))
def test_the_port_lookup_finds_what_comparing_every_pair_finds(
    wanted: list[HostPort], used: list[HostPort]
) -> None:
    """`port_conflict` looks ports up (a pod may bind thousands); the rule is pairwise."""
    pairwise = next((w for w in wanted if any(w.conflicts(u) for u in used)), None)
    assert port_conflict(wanted, dict.fromkeys(used, 1)) == pairwise
    assert PortWants.of(tuple(wanted)).conflict(dict.fromkeys(used, 1)) == pairwise


def test_undo_releases_ports_and_indexes() -> None:
    snapshot = Snapshot.build([node("n0")], [])
    before = snapshot.index_state()
    pods = members(
        "job", 1, labels={"app": "w"}, containers=with_port(80), affinity=anti(term({"app": "w"}))
    )
    outcome = place_group(gang("job", pods), snapshot)
    assert isinstance(outcome, Placement)
    assert snapshot.index_state() != before
    outcome.undo()
    assert snapshot.index_state() == before


# --- what cannot be evaluated is refused ---------------------------------------------------------
@pytest.mark.parametrize(
    ("affinity", "spread_constraints", "path"),
    [
        (
            anti(
                {
                    "labelSelector": {
                        "matchExpressions": [{"key": "app", "operator": "Near", "values": ["x"]}]
                    },
                    "topologyKey": HOST,
                }
            ),
            None,
            "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
            ".labelSelector.matchExpressions[0].operator",
        ),
        (
            near(term({"app": "x"}, matchLabelKeys=["rev"])),
            None,
            "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].matchLabelKeys",
        ),
        (
            anti(term({"app": "x"}, namespaceSelector={"matchLabels": {"team": "a"}})),
            None,
            "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaceSelector",
        ),
        (
            None,
            [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "Sometimes"}],
            "spec.topologySpreadConstraints[0].whenUnsatisfiable",
        ),
        (
            None,
            [
                {
                    "maxSkew": 1,
                    "topologyKey": ZONE,
                    "whenUnsatisfiable": "DoNotSchedule",
                    "futureField": 1,
                }
            ],
            "spec.topologySpreadConstraints[0].futureField",
        ),
    ],
)
def test_constraints_the_scheduler_cannot_evaluate_refuse_the_pod_naming_the_field(
    affinity: dict[str, Any] | None, spread_constraints: list[dict[str, Any]] | None, path: str
) -> None:
    snapshot = Snapshot.build([node("n0")], [])
    spec: dict[str, Any] = {}
    if affinity is not None:
        spec["affinity"] = affinity
    if spread_constraints is not None:
        spec["topologySpreadConstraints"] = spread_constraints
    outcome = place_group(gang("job", members("job", 2, **spec)), snapshot)
    assert isinstance(outcome, Refusal)
    assert outcome.reason is Reason.UNSUPPORTED_CONSTRAINT
    assert f"2 cannot be placed: {path}:" in outcome.message
    assert "not supported by podgroup-scheduler" in outcome.message


def test_unreadable_anti_affinity_of_a_running_pod_is_widened_not_dropped() -> None:
    guard = pod(
        "guard",
        node="n0",
        affinity=anti(
            term(
                {"app": "web"},
                namespaceSelector={"matchLabels": {"team": "a"}},
                matchLabelKeys=["rev"],
            )
        ),
    )
    snapshot = Snapshot.build([node("n0"), node("n1")], [guard])
    # The namespace selector cannot be read: the term is taken to cover every namespace.
    web = members("web", 1, namespace="elsewhere", labels={"app": "web"})
    assert nodes_of(place_group(gang("web", web, namespace="elsewhere"), snapshot)) == ["n1"]


# --- resources -----------------------------------------------------------------------------------
def test_ephemeral_storage_is_a_resource_nodes_must_offer() -> None:
    snapshot = Snapshot.build(
        [node("plain"), node("disk", extended={"ephemeral-storage": "100Gi"})], []
    )
    pods = members("job", 2, requests={"cpu": "1", "ephemeral-storage": "60Gi"})
    outcome = place_group(gang("job", pods), snapshot)
    assert isinstance(outcome, Refusal)
    assert "2 Insufficient ephemeral-storage" in outcome.message
    assert "only 1 fit" in outcome.message


def test_only_the_members_a_running_pods_anti_affinity_selects_are_kept_away() -> None:
    guard = pod("guard", node="n0", requests={"cpu": "1"}, affinity=anti(term({"app": "x"})))
    snapshot = Snapshot.build([node("n0"), node("n1")], [guard])
    pods = [
        pod(f"job-{i}", group="job", requests={"cpu": "1"}, labels={"app": app})
        for i, app in enumerate(["x", "y", "x", "y"])
    ]
    outcome = place_group(gang("job", pods), snapshot)
    assert isinstance(outcome, Placement)
    where = {b.pod: b.node for b in outcome.bindings}
    assert where == {"job-0": "n1", "job-2": "n1", "job-1": "n0", "job-3": "n0"}


def test_pod_terms_count_each_shared_list_once_and_every_kind_of_term() -> None:
    """What makes a decision costly beyond its size (scheduler DECIDE_IN_THREAD_COST_US)."""
    term = {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "zone"}
    shared_required = [term, term, term]
    spread = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]
    preferred = [{"weight": 1, "podAffinityTerm": term}]

    def member(name: str, required: list[Any]) -> dict[str, Any]:
        affinity = {
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred},
        }
        return pod(name, affinity=affinity, topologySpreadConstraints=spread)

    template = [member(f"m{i}", shared_required) for i in range(10)]
    gang = GangRequest(namespace="ns", name="g", min_member=10, pending=template)
    assert pod_terms(gang.pending) == 3 + 1 + 1  # one template: its lists count once
    own = GangRequest(
        namespace="ns", name="h", min_member=2, pending=[member("x", [term]), member("y", [term])]
    )
    assert (
        pod_terms([*gang.pending, *own.pending]) == 5 + 2
    )  # lists of their own count for each member
    bare = GangRequest(namespace="ns", name="b", min_member=1, pending=[pod("b")])
    assert pod_terms(bare.pending) == 0
    assert decision_cost([bare], pods=10**6, nodes=10**6) == 0


def test_host_ports_count_for_every_node_and_a_shared_template_once() -> None:
    """A member binding thousands of host ports costs a lookup of each on every node."""
    ports = [{"containerPort": 8000 + i, "hostPort": 8000 + i} for i in range(3)]
    containers = [{"name": "main", "image": "x", "ports": [*ports, {"containerPort": 9}]}]
    template = [pod(f"m{i}", containers=containers) for i in range(4)]
    gang = GangRequest(namespace="ns", name="g", min_member=4, pending=template)
    assert host_port_count(gang.pending) == 3
    assert decision_cost([gang], pods=10, nodes=100) == 3 * 100 * HOST_PORT_COST
    own = [pod(f"o{i}", containers=copy.deepcopy(containers)) for i in range(2)]
    assert host_port_count(own) == 6


def test_node_affinity_size_counts_required_and_preferred_once_per_affinity() -> None:
    expression = {"key": "zone", "operator": "In", "values": ["a"]}
    field = {"key": "metadata.name", "operator": "In", "values": ["n1"]}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [expression, expression]},
                    {"matchFields": [field]},
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchExpressions": [expression]}}
            ],
        }
    }
    shared = affinity["nodeAffinity"]
    template = [pod(f"m{i}", affinity={"nodeAffinity": shared}) for i in range(5)]
    gang = GangRequest(namespace="ns", name="g", min_member=5, pending=template)
    assert node_affinity_size(gang.pending) == (4, 4)
    assert decision_cost([gang], pods=10, nodes=100) == pytest.approx(
        4 * 100 * NODE_EXPRESSION_COST + 4 * 100 * NODE_VALUE_COST
    )
    spread = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]
    both = GangRequest(
        namespace="ns",
        name="b",
        min_member=1,
        pending=[pod("b", affinity=affinity, topologySpreadConstraints=spread)],
    )
    expected = 1 * 10 * POD_TERM_COST + 4 * 100 * NODE_EXPRESSION_COST + 4 * 100 * NODE_VALUE_COST
    assert decision_cost([both], pods=10, nodes=100) == pytest.approx(expected)
    # A long In list costs by its values: one expression of 100,000 of them.
    many = {"key": "zone", "operator": "In", "values": [f"z{i}" for i in range(100_000)]}
    term = {"nodeSelectorTerms": [{"matchExpressions": [many]}]}
    listed = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": term}}
    huge = GangRequest(namespace="ns", name="l", min_member=1, pending=[pod("l", affinity=listed)])
    assert decision_cost([huge], pods=10, nodes=5000) > 1_000_000  # seconds: off the loop


def test_a_matching_pod_on_a_node_without_the_key_leaves_the_first_pod_rule_open() -> None:
    """Required affinity to its own kind by `disk`: the only `app=cache` pod runs on a node
    with no `disk` label, so it is in no domain, and kube-scheduler (its affinity counts only
    hold the pairs a node has) lets the first of its kind in, on a node with the key. Counted,
    that pod kept this one off every node."""
    term = {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "disk"}
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    snapshot = Snapshot.build(
        [node("keyless"), node("hdd", labels={"disk": "hdd"})],
        [pod("elsewhere", node="keyless", labels={"app": "cache"}, requests={"cpu": "1"})],
    )
    outcome = place_group(
        gang("g", members("g", 1, labels={"app": "cache"}, affinity=affinity), min_member=1),
        snapshot,
    )
    assert nodes_of(outcome) == ["hdd"]
