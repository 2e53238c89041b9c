"""Randomized properties: never fewer than minMember placed, never an over-committed node."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from podgroup_operator.constants import GangMode
from podgroup_operator.scheduling import nodeorder, placement
from podgroup_operator.scheduling.filters import check_node, node_facts, pod_constraints
from podgroup_operator.scheduling.gang import Binding, GangRequest, Placement, Refusal
from podgroup_operator.scheduling.placement import place_gang_group, place_group
from podgroup_operator.scheduling.resources import node_allocatable
from podgroup_operator.scheduling.snapshot import Snapshot
from podgroup_operator.scheduling.volumes import VolumeClaim, persistent_volume, volume_claim
from tests.builders import node, pod
from tests.unit.scheduling.helpers import GPU, overcommitted, uid_of, usage_by_node
from tests.unit.scheduling.test_sched_volumes import local_pv

TAINT = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}


@st.composite
def clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(1, 8))
    nodes = []
    for i in range(count):
        gpus = draw(st.sampled_from([0, 0, 4, 8]))
        nodes.append(
            node(
                f"n{i}",
                cpu=f"{draw(st.integers(1, 32)) * 500}m",
                memory=f"{draw(st.integers(1, 16))}Gi",
                pods=draw(st.integers(1, 10)),
                extended={GPU: gpus} if gpus else None,
                taints=[TAINT] if draw(st.booleans()) and draw(st.booleans()) else None,
                ready=draw(st.integers(0, 9)) > 0,
                unschedulable=draw(st.integers(0, 9)) == 0,
            )
        )
    return nodes


@st.composite
def gangs(draw: st.DrawFn, index: int) -> GangRequest:
    name = f"g{index}"
    size = draw(st.integers(1, 6))
    shapes: list[dict[str, str | int]] = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "cpu": st.integers(0, 8).map(lambda n: f"{n * 500}m"),
                    "memory": st.integers(0, 8).map(lambda n: f"{n * 512}Mi"),
                    GPU: st.integers(0, 4).map(str),
                }
            ),
            min_size=1,
            max_size=2,
        )
    )
    tolerate = draw(st.booleans())
    pods = [
        pod(
            f"{name}-{i}",
            group=name,
            requests=shapes[i % len(shapes)],
            tolerations=[{"key": "dedicated", "operator": "Exists"}] if tolerate else [],
        )
        for i in range(size)
    ]
    return GangRequest(
        namespace="default",
        name=name,
        uid=f"uid-{name}",
        min_member=draw(st.integers(1, size + 1)),
        pending=tuple(pods),
        mode=draw(st.sampled_from([GangMode.STRICT, GangMode.NON_STRICT])),
    )


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[GangRequest], bool]:
    nodes = draw(clusters())
    count = draw(st.integers(1, 5))
    return nodes, [draw(gangs(i)) for i in range(count)], draw(st.booleans())


# Half the profile's examples: each draws a cluster and up to five gangs, and the unit tier's
# 2 s timeout holds on a busy machine too (HYPOTHESIS_PROFILE=thorough still runs 500).
@settings(max_examples=max(1, settings().max_examples // 2))
@given(scenarios())
def test_min_member_barrier_and_no_overcommit(
    scenario: tuple[list[dict[str, Any]], list[GangRequest], bool],
) -> None:
    nodes, requests, as_one_group = scenario
    snapshot = Snapshot.build(nodes, [])
    pods_by_uid = {uid_of(p): p for g in requests for p in g.pending}
    kept: list[Binding] = []

    if as_one_group:
        before = snapshot.state()
        outcome = place_gang_group(requests, snapshot)
        if isinstance(outcome, Refusal):
            assert snapshot.state() == before
            assert outcome.partial == ()
        else:
            for placement in outcome.placements:
                request = next(g for g in requests if g.key == placement.gang)
                assert len(placement.bindings) >= request.min_member
            kept.extend(outcome.bindings)
    else:
        for request in requests:
            before = snapshot.state()
            decision = place_group(request, snapshot)
            if isinstance(decision, Placement):
                assert len(decision.bindings) + request.already_bound >= request.min_member
                kept.extend(decision.bindings)
            elif request.mode is GangMode.STRICT or not decision.partial:
                assert decision.partial == ()
                assert snapshot.state() == before
            else:
                assert len(decision.partial) < request.min_member
                kept.extend(decision.partial)

    assert len({b.pod_uid for b in kept}) == len(kept)
    assert overcommitted(usage_by_node(kept, pods_by_uid), nodes) == []
    facts = {n["metadata"]["name"]: node_facts(n) for n in nodes}
    for binding in kept:
        assert (
            check_node(pod_constraints(pods_by_uid[binding.pod_uid]), facts[binding.node]) is None
        )
    # The snapshot agrees with an independent recount.
    usage = usage_by_node(kept, pods_by_uid)
    for raw in nodes:
        name = raw["metadata"]["name"]
        allocatable = node_allocatable(raw)
        expected = {r: a - usage.get(name, {}).get(r, 0) for r, a in allocatable.items()}
        assert snapshot.free(name) == expected


ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


@st.composite
def constrained(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[tuple[str, GangRequest]]]:
    nodes = [
        node(
            f"n{i}",
            cpu=draw(st.integers(1, 4)),
            labels={ZONE: draw(st.sampled_from("abc"))},
            ready=draw(st.integers(0, 7)) > 0,
        )
        for i in range(draw(st.integers(1, 8)))
    ]
    requests = []
    for g in range(draw(st.integers(1, 4))):
        name = f"g{g}"
        labels = {"app": name}
        spec: dict[str, Any] = {}
        rule = draw(st.sampled_from(["anti-host", "anti-zone", "spread", "port", "none"]))
        if rule.startswith("anti"):
            key = HOST if rule == "anti-host" else ZONE
            spec["affinity"] = {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": labels}, "topologyKey": key}
                    ]
                }
            }
        elif rule == "spread":
            spec["topologySpreadConstraints"] = [
                {
                    "maxSkew": 1,
                    "topologyKey": ZONE,
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": labels},
                }
            ]
        elif rule == "port":
            port = {"containerPort": 80, "hostPort": 80}
            spec["containers"] = [
                {
                    "name": "main",
                    "image": "sim",
                    "ports": [port],
                    "resources": {"requests": {"cpu": "500m"}},
                }
            ]
        size = draw(st.integers(1, 4))
        pods = [
            pod(f"{name}-{i}", group=name, labels=labels, requests={"cpu": "500m"}, **spec)
            for i in range(size)
        ]
        request = GangRequest(
            namespace="default",
            name=name,
            uid=f"uid-{name}",
            min_member=draw(st.integers(1, size)),
            pending=tuple(pods),
        )
        requests.append((rule, request))
    return nodes, requests


@given(constrained())
def test_pod_to_pod_constraints_hold_between_every_kept_member(
    scenario: tuple[list[dict[str, Any]], list[tuple[str, GangRequest]]],
) -> None:
    nodes, requests = scenario
    snapshot = Snapshot.build(nodes, [])
    zone_of = {n["metadata"]["name"]: n["metadata"]["labels"][ZONE] for n in nodes}
    pods_by_uid = {uid_of(p): p for _, g in requests for p in g.pending}
    kept: list[tuple[str, Binding]] = []
    for rule, request in requests:
        before = (snapshot.state(), snapshot.index_state())
        outcome = place_group(request, snapshot)
        if isinstance(outcome, Refusal):
            assert (snapshot.state(), snapshot.index_state()) == before
            continue
        assert len(outcome.bindings) >= request.min_member
        kept.extend((rule, b) for b in outcome.bindings)
    assert overcommitted(usage_by_node([b for _, b in kept], pods_by_uid), nodes) == []
    by_gang: dict[str, list[tuple[str, Binding]]] = {}
    for rule, binding in kept:
        by_gang.setdefault(binding.pod.rsplit("-", 1)[0], []).append((rule, binding))
    ported = [b.node for rule, b in kept if rule == "port"]
    assert len(ported) == len(set(ported)), "two pods hold host port 80 on one node"
    for placed in by_gang.values():
        rule = placed[0][0]
        where = [b.node for _, b in placed]
        if rule == "anti-host":
            assert len(where) == len(set(where))
        elif rule == "anti-zone":
            zones = [zone_of[n] for n in where]
            assert len(zones) == len(set(zones))
        elif rule == "spread":
            # Every zone with a node is a domain (Ready or not), so counts differ by <= 1.
            counts = {z: 0 for z in zone_of.values()}
            for n in where:
                counts[zone_of[n]] += 1
            assert max(counts.values()) - min(counts.values()) <= 1


Scenario = tuple[
    list[dict[str, Any]], list[dict[str, Any]], list[GangRequest], list[dict[str, Any]]
]
"""Nodes, running pods, gangs in queue order, and PersistentVolumes."""

STATIC_CLASS = {
    "metadata": {"name": "local"},
    "provisioner": "kubernetes.io/no-provisioner",
    "volumeBindingMode": "WaitForFirstConsumer",
}


def _claim(name: str, gib: int, klass: dict[str, Any]) -> VolumeClaim:
    raw = {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "storageClassName": klass["metadata"]["name"],
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": f"{gib}Gi"}},
        },
    }
    return volume_claim(raw, klass)


def _mounting(claim: str | None) -> dict[str, Any]:
    """The pod spec's volumes mounting `claim` (none for None)."""
    if claim is None:
        return {}
    return {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}


@st.composite
def _claims_of(
    draw: st.DrawFn, gang: str, size: int
) -> tuple[list[str | None], dict[tuple[str, str], VolumeClaim]]:
    """The claim each member mounts (none, one of its own from static local PVs or from a
    provisioner limited to some zones, or one shared by all), and the claims by key."""
    kind = draw(st.sampled_from(["none", "own-static", "own-dynamic", "shared-static"]))
    if kind == "none":
        return [None] * size, {}
    if kind == "own-dynamic":
        zones = draw(st.lists(st.sampled_from("abcd"), min_size=1, max_size=3, unique=True))
        klass = {
            "metadata": {"name": "zonal"},
            "provisioner": "csi.example.com",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": zones}]}],
        }
    else:
        klass = STATIC_CLASS
    if kind == "shared-static":
        names = [f"{gang}-shared"] * size
    else:
        names = [f"{gang}-data-{i}" for i in range(size)]
    claims = {
        ("default", name): _claim(name, draw(st.integers(1, 3)), klass)
        for name in sorted(set(names))
    }
    return list(names), claims


IMAGE_SIZES = {"img-a:v1": 2 * 2**30, "img-b:v1": 700 * 2**20}
SOFT_TAINT = {"key": "spot", "value": "true", "effect": "PreferNoSchedule"}


@st.composite
def anti_affine(draw: st.DrawFn) -> Scenario:
    """Gangs whose members shun, seek or spread from each other, required or preferred (and are
    shunned by running pods), on nodes of mixed room and zones, some with host port 80 in use,
    some members mounting claims that only some nodes' local PVs or zones can serve, some
    preferring labelled nodes or images that some nodes hold, some nodes with a PreferNoSchedule
    taint: what `MemberChecks` and `choose`'s lost nodes shortcut."""
    nodes = [
        node(
            f"n{i}",
            cpu=draw(st.integers(1, 4)),
            labels={ZONE: draw(st.sampled_from("abcd")), "disk": draw(st.sampled_from("sh"))},
            taints=[SOFT_TAINT] if draw(st.integers(0, 3)) == 0 else [],
        )
        for i in range(draw(st.integers(1, 10)))
    ]
    for each in nodes:
        held = draw(st.lists(st.sampled_from(sorted(IMAGE_SIZES)), unique=True, max_size=2))
        each["status"]["images"] = [{"names": [i], "sizeBytes": IMAGE_SIZES[i]} for i in held]
    volumes = [
        local_pv(f"pv-{i}-{j}", f"n{i}", f"{draw(st.integers(1, 3))}Gi")
        for i in range(len(nodes))
        for j in range(draw(st.integers(0, 2)))
    ]
    port = [{"name": "main", "image": "sim", "ports": [{"containerPort": 80, "hostPort": 80}]}]
    running = []
    for i in range(draw(st.integers(0, 3))):
        shunned = draw(st.sampled_from([("app", "g0"), ("app", "g1"), ("index", "0")]))
        term = {"labelSelector": {"matchLabels": dict([shunned])}, "topologyKey": HOST}
        # Its own preferences (and required affinity) toward the gangs' members score them.
        seek, weight, toward, key = draw(
            st.tuples(
                st.sampled_from(["podAffinity", "podAntiAffinity", "required"]),
                st.integers(1, 100),
                st.sampled_from([("app", "g0"), ("app", "g1"), ("index", "1")]),
                st.sampled_from([HOST, ZONE]),
            )
        )
        scoring = {"labelSelector": {"matchLabels": dict([toward])}, "topologyKey": key}
        affinity: dict[str, Any] = {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        }
        if seek == "required":
            affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [scoring]}
        else:
            affinity.setdefault(seek, {})["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": weight, "podAffinityTerm": scoring}
            ]
        running.append(
            pod(
                f"r{i}",
                labels={"app": "other"},
                node=f"n{draw(st.integers(0, len(nodes) - 1))}",
                requests={"cpu": "500m"},
                affinity=affinity,
                **({"containers": port} if draw(st.booleans()) else {}),
            )
        )
    requests = []
    for g in range(draw(st.integers(1, 3))):
        name = f"g{g}"
        keys = draw(st.lists(st.sampled_from([HOST, ZONE]), max_size=2, unique=True))
        terms = [{"labelSelector": {"matchLabels": {"app": name}}, "topologyKey": k} for k in keys]
        if draw(st.booleans()):  # also shun the previous gang
            terms.append(
                {"labelSelector": {"matchLabels": {"app": f"g{g - 1}"}}, "topologyKey": HOST}
            )
        seeking = [
            ({"app": name}, ZONE),  # together, in one zone
            ({"app": f"g{g - 1}"}, ZONE),  # near the previous gang
            ({"index": "0"}, HOST),  # beside an index-0 member
        ]
        picked = draw(st.lists(st.integers(0, len(seeking) - 1), max_size=2, unique=True))
        wanted = [seeking[i] for i in picked]
        preferred = draw(
            st.lists(
                st.tuples(
                    st.booleans(),  # affinity, else anti-affinity
                    st.integers(1, 100),
                    st.sampled_from([{"app": name}, {"app": f"g{g - 1}"}, {"app": "other"}]),
                    st.sampled_from([HOST, ZONE]),
                ),
                max_size=3,
            )
        )
        weighted: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
        for attracts, w, sel, key in preferred:  # affinity (True) or anti-affinity terms
            term = {"labelSelector": {"matchLabels": sel}, "topologyKey": key}
            weighted[attracts].append({"weight": w, "podAffinityTerm": term})
        spec: dict[str, Any] = {
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": terms,
                    "preferredDuringSchedulingIgnoredDuringExecution": weighted[False],
                },
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": selector}, "topologyKey": key}
                        for selector, key in wanted
                    ],
                    "preferredDuringSchedulingIgnoredDuringExecution": weighted[True],
                },
            }
        }
        spread = draw(
            st.lists(
                st.fixed_dictionaries(
                    {
                        "maxSkew": st.integers(1, 2),
                        "topologyKey": st.sampled_from([HOST, ZONE]),
                        "whenUnsatisfiable": st.sampled_from(["DoNotSchedule", "ScheduleAnyway"]),
                        "labelSelector": st.sampled_from(
                            [{"matchLabels": {"app": name}}, {"matchLabels": {"index": "0"}}]
                        ),
                        "minDomains": st.integers(1, 3),
                    }
                ),
                max_size=2,
            )
        )
        for constraint in spread:
            if constraint["whenUnsatisfiable"] == "ScheduleAnyway":
                del constraint["minDomains"]  # the API allows it with DoNotSchedule only
        if spread:
            spec["topologySpreadConstraints"] = spread
        if draw(st.booleans()):
            spec["containers"] = [{**port[0], "resources": {"requests": {"cpu": "500m"}}}]
        varied = draw(st.booleans())  # members whose labels differ (an index label)
        # Which index comes first: a first member not matching its own affinity term is refused
        # everywhere, and a later one that does may still go anywhere (the first-pod rule).
        offset = draw(st.integers(0, 1))
        size = draw(st.integers(1, 8))
        mounts, claims = draw(_claims_of(name, size))
        pods = [
            pod(
                f"{name}-{i}",
                group=name,
                labels={"app": name, **({"index": str((i + offset) % 2)} if varied else {})},
                requests={"cpu": draw(st.sampled_from(["500m", "1"]))} if i == 0 else None,
                **spec,
                **_mounting(mounts[i]),
            )
            for i in range(size)
        ]
        # One shape: every member asks what the first asks.
        first = pods[0]["spec"]["containers"][0].get("resources", {}).get("requests")
        for member in pods[1:]:
            member["spec"]["containers"][0].setdefault("resources", {})["requests"] = first
        image = draw(st.sampled_from(["sim", *sorted(IMAGE_SIZES)]))
        prefers = draw(st.integers(0, 100))  # weight of a preferred disk=s term, 0 for none
        for member in pods:
            member["spec"]["containers"][0]["image"] = image
            if prefers:
                member["spec"]["affinity"]["nodeAffinity"] = {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": prefers,
                            "preference": {
                                "matchExpressions": [
                                    {"key": "disk", "operator": "In", "values": ["s"]}
                                ]
                            },
                        }
                    ]
                }
        requests.append(
            GangRequest(
                namespace="default",
                name=name,
                uid=f"uid-{name}",
                min_member=draw(st.integers(1, size)),
                pending=tuple(pods),
                claims=claims,
            )
        )
    return nodes, running, requests, volumes


def _decide_all(scenario: Scenario) -> list[Any]:
    nodes, running, requests, volumes = scenario
    snapshot = Snapshot.build(nodes, running)
    for raw in volumes:
        snapshot.volumes.set_volume(persistent_volume(raw))
    outcomes: list[Any] = []
    for request in requests:
        outcome = place_group(request, snapshot)
        if isinstance(outcome, Refusal):
            outcomes.append(("refused", outcome.reason, outcome.message))
        else:
            outcomes.append(("placed", [(b.pod, b.node, b.volumes) for b in outcome.bindings]))
    return outcomes


@pytest.mark.parametrize("unlost_after", [0.0, nodeorder.UNLOST_ORDER_AFTER])
@given(anti_affine())
def test_shape_shortcuts_decide_what_checking_every_member_afresh_decides(
    unlost_after: float, scenario: Scenario
) -> None:
    """`MemberChecks` keeps the shape's closed and wanted domains and spread counts as members
    are assumed, and `choose` skips nodes lost to earlier members (walking the shape's own
    order without them once `unlost_after` lost nodes per node were met: these gangs are
    small, so 0, from the first lost node, is what exercises it); recounting and re-walking
    for each member (the plain algorithm) must give the same placements, the same volumes and
    the same refusals, word for word."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(nodeorder, "UNLOST_ORDER_AFTER", unlost_after)
        shortcut = _decide_all(scenario)
    plain_choose = placement.choose

    class Recounted(placement.MemberChecks):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            self.incremental = False

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(placement, "MemberChecks", Recounted)
        patch.setattr(placement, "choose", lambda *args, lost=None: plain_choose(*args[:5], None))
        plain = _decide_all(scenario)
    assert shortcut == plain
