"""Image locality: kube-scheduler v1.20's ImageLocality score, weighed against packing."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from podgroup_operator.adapters.slim import SharedValues, slim_node
from podgroup_operator.scheduling import nodeorder, placement
from podgroup_operator.scheduling.gang import Placement, Refusal
from podgroup_operator.scheduling.nodeorder import IMAGE_STREAMS, held_images
from podgroup_operator.scheduling.placement import place_group
from podgroup_operator.scheduling.scores import (
    MIB,
    WEIGHT_NODE_AFFINITY,
    image_name,
    image_score,
    pack_score,
)
from podgroup_operator.scheduling.snapshot import Snapshot
from tests.builders import node, pod
from tests.unit.scheduling.helpers import gang, members

GIB = 1024 * MIB


def holding(body: dict[str, Any], **images: int) -> dict[str, Any]:
    """`body` with `status.images`: one image per name, listed under `name` and a digest."""
    body["status"]["images"] = [
        {"names": [name, f"{name.split(':')[0]}@sha256:{_digest(name)}"], "sizeBytes": size}
        for name, size in images.items()
    ]
    return body


def _digest(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


def running(pods: list[dict[str, Any]], *images: str) -> list[dict[str, Any]]:
    """`pods` with a container per image: the first keeps the pod's requests, the others
    request nothing."""
    for each in pods:
        first, *_ = each["spec"]["containers"]
        first["image"] = images[0]
        each["spec"]["containers"] = [first] + [
            {"name": f"c{i}", "image": image} for i, image in enumerate(images[1:], 1)
        ]
    return pods


def nodes_of(outcome: Placement | Refusal) -> list[str]:
    assert isinstance(outcome, Placement), getattr(outcome, "message", outcome)
    return [b.node for b in outcome.bindings]


def test_image_names_and_scores_follow_kube_scheduler() -> None:
    assert image_name("nginx") == "nginx:latest"
    assert image_name("nginx:1.19") == "nginx:1.19"
    assert image_name("registry:5000/team/app") == "registry:5000/team/app:latest"
    assert image_name("app@sha256:" + "0" * 64) == "app@sha256:" + "0" * 64
    assert image_score(0, 1) == 0.0
    assert image_score(23 * MIB, 1) == 0.0
    assert image_score(1000 * MIB, 1) == 100.0
    assert image_score(5 * GIB, 1) == 100.0
    # Integer arithmetic, as upstream: 100 * (500 - 23) // (1000 - 23) = 48.
    assert image_score(500 * MIB, 1) == 48.0
    # The ceiling grows with the containers: 1,000 MiB of two containers' images is 49.
    assert image_score(1000 * MIB, 2) == 49.0
    assert image_score(0, 0) == 0.0


def test_a_node_holding_the_image_beats_a_fuller_one() -> None:
    """The image (2 GiB, on one node of two: 1 GiB once spread) scores 100; the busy node's
    packing score is 50. Without the image, packing picks the busy node."""
    snapshot = Snapshot.build(
        [node("busy"), holding(node("cached"), **{"trainer:v1": 2 * GIB})],
        [pod("filler", node="busy", requests={"cpu": "4"})],
    )
    job = running(members("job", 2, requests={"cpu": "1"}), "trainer:v1")
    assert nodes_of(place_group(gang("job", job), snapshot)) == ["cached", "cached"]
    other = running(members("other", 2, requests={"cpu": "1"}), "other:v1")
    assert nodes_of(place_group(gang("other", other), snapshot)) == ["busy", "busy"]


def test_a_tag_less_image_matches_its_latest_tag() -> None:
    snapshot = Snapshot.build(
        [node("busy"), holding(node("cached"), **{"trainer:latest": 2 * GIB})],
        [pod("filler", node="busy", requests={"cpu": "4"})],
    )
    job = running(members("job", 1, requests={"cpu": "1"}), "trainer")
    assert nodes_of(place_group(gang("job", job), snapshot)) == ["cached"]


def test_an_image_on_few_nodes_weighs_little() -> None:
    """Upstream scales an image's size by the share of nodes holding it, so a pod is not drawn
    to the one node that happens to hold it ("node heating"): 2 GiB on 1 node of 10 is about
    205 MiB, a score of 18, against the busy node's 50."""
    nodes = [node(f"n{i}") for i in range(8)] + [
        node("busy"),
        holding(node("cached"), **{"trainer:v1": 2 * GIB}),
    ]
    snapshot = Snapshot.build(nodes, [pod("filler", node="busy", requests={"cpu": "4"})])
    job = running(members("job", 1, requests={"cpu": "1"}), "trainer:v1")
    assert nodes_of(place_group(gang("job", job), snapshot)) == ["busy"]


def test_an_image_every_node_holds_leaves_the_packing_order() -> None:
    nodes = [holding(node(n), **{"base:v1": 2 * GIB}) for n in ("a", "b", "c")]
    snapshot = Snapshot.build(nodes, [pod("filler", node="b", requests={"cpu": "4"})])
    job = running(members("job", 3, requests={"cpu": "2"}), "base:v1")
    assert nodes_of(place_group(gang("job", job), snapshot)) == ["b", "b", "a"]


def test_members_placed_one_by_one_weigh_the_image_too() -> None:
    """Required anti-affinity on the hostname places members one by one, each on its own node:
    the two holding the image first, then packing."""
    apart = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "ring"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    nodes = [node("busy"), node("empty")] + [
        holding(node(n), **{"trainer:v1": 4 * GIB}) for n in ("cached-1", "cached-2")
    ]
    snapshot = Snapshot.build(nodes, [pod("filler", node="busy", requests={"cpu": "4"})])
    job = running(
        members("ring", 3, requests={"cpu": "1"}, labels={"app": "ring"}, affinity=apart),
        "trainer:v1",
    )
    assert nodes_of(place_group(gang("ring", job), snapshot)) == ["cached-1", "cached-2", "busy"]


def test_a_node_that_loses_the_image_loses_its_score() -> None:
    """Image scores are cached per image epoch; a node's new image list starts a new one."""
    cached = holding(node("cached"), **{"trainer:v1": 2 * GIB})
    snapshot = Snapshot.build(
        [node("busy"), cached], [pod("filler", node="busy", requests={"cpu": "4"})]
    )
    job = running(members("job", 1, requests={"cpu": "1"}), "trainer:v1")
    assert nodes_of(place_group(gang("job", job), snapshot)) == ["cached"]
    epoch = snapshot.node_epoch
    snapshot.update_node(holding(node("cached")))
    assert snapshot.node_epoch == epoch  # the verdicts and domains cached per node epoch stay
    assert snapshot.images.count("trainer:v1") == 0 and not snapshot.images.holders("trainer:v1")
    assert nodes_of(place_group(gang("job", job), snapshot)) == ["busy"]
    snapshot.update_node(holding(node("cached"), **{"trainer:v1": 100 * MIB}))
    # 50 MiB once spread over two nodes: a score of 2, against packing's 50.
    assert nodes_of(place_group(gang("job", job), snapshot)) == ["busy"]
    snapshot.update_node(holding(node("cached"), **{"trainer:v1": 2 * GIB}))
    assert nodes_of(place_group(gang("job", job), snapshot)) == ["cached"]
    snapshot.remove_node("cached")
    assert snapshot.images.count("trainer:v1") == 0 and not snapshot.images.holders("trainer:v1")
    assert snapshot.images.size("trainer:v1") == 0


def test_slim_nodes_keep_image_names_and_sizes_once_for_all_nodes() -> None:
    share = SharedValues()
    first = holding(node("a"), **{"trainer:v1": GIB})
    first["status"]["images"][0]["extra"] = "dropped"
    second = holding(node("b"), **{"trainer:v1": GIB})
    a, b = slim_node(first, share), slim_node(second, share)
    assert a["status"]["images"] == [
        {"names": ["trainer:v1", "trainer@sha256:" + _digest("trainer:v1")], "sizeBytes": GIB}
    ]
    assert a["status"]["images"][0] is b["status"]["images"][0]
    assert "images" not in slim_node(node("c"))["status"]


# --- the order, checked against scoring every node ----------------------------------------------
SIZES = {"a:1": 600 * MIB, "b:1": 2 * GIB, "c:1": 5 * GIB}
IMAGES = tuple(SIZES)
SSD = {
    "nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 10,
                "preference": {
                    "matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]
                },
            }
        ]
    }
}

cluster = st.lists(
    st.tuples(
        st.integers(0, 8),  # cpu already used, of 8
        st.booleans(),  # labelled disk=ssd
        st.lists(st.sampled_from(IMAGES), unique=True, max_size=3),
    ),
    min_size=1,
    max_size=9,
)


@settings(max_examples=300, deadline=None)
@given(
    cluster,
    st.lists(st.sampled_from(IMAGES), min_size=1, max_size=3),
    st.booleans(),
    st.booleans(),
)
def test_placement_follows_the_image_score_added_to_every_other_score(
    spec: list[tuple[int, bool, list[str]]],
    containers: list[str],
    prefers_ssd: bool,
    one_by_one: bool,
) -> None:
    """A member goes to the node of the highest score: packing, preferred node affinity and
    the image score added up (ties to the name), whether the walk merges streams of image
    score groups or scores every node (past IMAGE_STREAMS groups); one by one, each member of
    a gang whose members shun each other's host does the same on the nodes left."""
    nodes, pods = [], []
    for i, (used, ssd, images) in enumerate(spec):
        body = node(f"n{i}", cpu=8, labels={"disk": "ssd"} if ssd else {})
        nodes.append(holding(body, **{image: SIZES[image] for image in images}))
        if used:
            pods.append(pod(f"filler-{i}", node=f"n{i}", requests={"cpu": str(used)}))
    snapshot = Snapshot.build(nodes, pods)
    extra: dict[str, Any] = {}
    if prefers_ssd:
        extra["affinity"] = SSD
    size = 2 if one_by_one else 1
    if one_by_one:
        apart = {
            "labelSelector": {"matchLabels": {"app": "x"}},
            "topologyKey": "kubernetes.io/hostname",
        }
        extra["affinity"] = {
            **extra.get("affinity", {}),
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [apart]},
        }
    job = running(
        members("job", size, requests={"cpu": "1"}, labels={"app": "x"}, **extra), *containers
    )

    def expected() -> list[str] | None:
        holders = {image: [n for n, s in enumerate(spec) if image in s[2]] for image in IMAGES}
        chosen: list[str] = []
        for _ in range(size):
            best: tuple[float, str] | None = None
            for i, (used, ssd, _) in enumerate(spec):
                name = f"n{i}"
                if used > 7 or name in chosen:
                    continue
                spread = sum(
                    int(SIZES[image] * (len(holders[image]) / len(spec)))
                    for image in containers
                    if i in holders[image]
                )
                score = pack_score((8 - used) / 8) + image_score(spread, len(containers))
                if prefers_ssd and ssd:
                    score += WEIGHT_NODE_AFFINITY * 100
                if best is None or (-score, name) < (-best[0], best[1]):
                    best = (score, name)
            if best is None:
                return None
            chosen.append(best[1])
        return chosen

    want = expected()
    outcome = place_group(gang("job", job), snapshot)
    if want is None:
        assert isinstance(outcome, Refusal)
    else:
        assert nodes_of(outcome) == want


def test_many_image_score_groups_score_every_node() -> None:
    """Three containers whose images six nodes hold in six ways: six score groups, more than
    IMAGE_STREAMS, so every node is scored. The node holding the 5 GiB image alone (n2) beats
    the one holding both others (n3), and n5 (b and c, past the ceiling) wins."""
    holdings = [("a:1",), ("b:1",), ("c:1",), ("a:1", "b:1"), ("a:1", "c:1"), ("b:1", "c:1")]
    nodes = [
        holding(node(f"n{i}"), **{image: SIZES[image] for image in images})
        for i, images in enumerate(holdings)
    ]
    snapshot = Snapshot.build(nodes, [])
    held = held_images(snapshot, IMAGES)
    assert held is not None and len(held.groups) > IMAGE_STREAMS
    # Each image is on 3 of 6 nodes: 300 MiB, 1 GiB and 2.5 GiB once spread, out of 3,000 MiB.
    assert held.scores == {"n0": 9.0, "n1": 33.0, "n2": 85.0, "n3": 43.0, "n4": 95.0, "n5": 100.0}
    job = running(members("job", 1, requests={"cpu": "1"}), *IMAGES)
    assert nodes_of(place_group(gang("job", job), snapshot)) == ["n5"]


@settings(max_examples=200, deadline=None)
@given(
    cluster,
    st.lists(st.sampled_from(IMAGES), min_size=1, max_size=3),
    st.booleans(),
    st.integers(2, 6),
    st.booleans(),
)
def test_members_placed_one_by_one_keep_the_image_order_as_nodes_fill(
    spec: list[tuple[int, bool, list[str]]],
    containers: list[str],
    prefers_ssd: bool,
    size: int,
    apart: bool,
) -> None:
    """Members that shun each other's host, or spread over zones (a hard constraint, which
    scores nothing), are placed one by one. Walking the shape's own order of its static bonus
    (`Lost`, built here from the first lost node), kept as members fill nodes, must place them
    where walking every node afresh does."""
    nodes, pods = [], []
    for i, (used, ssd, images) in enumerate(spec):
        labels = {"disk": "ssd"} if ssd else {}
        body = node(f"n{i}", cpu=8, labels={**labels, "zone": "abc"[i % 3]})
        nodes.append(holding(body, **{image: SIZES[image] for image in images}))
        if used:
            pods.append(pod(f"filler-{i}", node=f"n{i}", requests={"cpu": str(used)}))
    mine = {"matchLabels": {"app": "x"}}
    extra: dict[str, Any] = {"affinity": dict(SSD) if prefers_ssd else {}}
    if apart:
        extra["affinity"]["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": mine, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    else:
        extra["topologySpreadConstraints"] = [
            {
                "maxSkew": 2,
                "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": mine,
            }
        ]

    def decide() -> list[str] | str:
        snapshot = Snapshot.build(nodes, pods)
        job = running(
            members("job", size, requests={"cpu": "2"}, labels={"app": "x"}, **extra),
            *containers,
        )
        outcome = place_group(gang("job", job), snapshot)
        return outcome.message if isinstance(outcome, Refusal) else nodes_of(outcome)

    plain_choose = placement.choose
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(nodeorder, "UNLOST_ORDER_AFTER", 0.0)
        shortcut = decide()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(placement, "choose", lambda *args, lost=None: plain_choose(*args[:5], None))
        plain = decide()
    assert shortcut == plain
