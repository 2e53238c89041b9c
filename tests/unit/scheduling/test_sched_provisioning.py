"""What a gang refused for room still lacks (scheduling/provisioning.py): the members that do not
fit once what fits is placed, grouped into pod sets by template; the snapshot left untouched."""

from __future__ import annotations

import pytest

from podgroup_operator.constants import PROVISIONING_MAX_POD_SETS
from podgroup_operator.scheduling.provisioning import pod_sets, still_missing, template_spec
from podgroup_operator.scheduling.snapshot import Snapshot
from tests.builders import node, pod
from tests.unit.scheduling.helpers import gang, members


def snapshot_of(*nodes: dict[str, object]) -> Snapshot:
    snapshot = Snapshot()
    for body in nodes:
        snapshot.add_node(body)
    return snapshot


def test_an_8_pod_gang_with_room_for_2_lacks_exactly_6_in_one_pod_set() -> None:
    snapshot = snapshot_of(node("n1", cpu=4))
    request = gang("train", members("train", 8, requests={"cpu": 2}))
    free_before = snapshot.total_free()

    missing = still_missing(request, snapshot)

    assert [pod_set.count for pod_set in missing] == [6]
    assert missing[0].spec["containers"][0]["resources"] == {"requests": {"cpu": "2"}}
    assert snapshot.total_free() == free_before  # nothing stays assumed
    assert snapshot.pod_count == 0


def test_a_gang_that_fits_whole_lacks_nothing() -> None:
    snapshot = snapshot_of(node("n1", cpu=8))
    assert still_missing(gang("small", members("small", 2, requests={"cpu": 2})), snapshot) == ()
    assert snapshot.pod_count == 0


def test_members_of_different_shapes_get_one_pod_set_each_counting_what_is_left() -> None:
    snapshot = snapshot_of(node("n1", cpu=4))
    workers = members("job", 3, requests={"cpu": 2})
    chiefs = [pod("job-chief", group="job", requests={"cpu": 1}, nodeSelector={"pool": "a"})]
    missing = still_missing(gang("job", [*workers, *chiefs]), snapshot)
    by_count = {
        pod_set.spec.get("nodeSelector", {}).get("pool"): pod_set.count for pod_set in missing
    }
    # the chief's selector matches no node: it is missing; two workers fit on n1
    assert by_count == {"a": 1, None: 1}


def test_a_gang_with_a_topology_constraint_asks_for_all_its_pending_members() -> None:
    from podgroup_operator.scheduling.topology import TopologyRequest

    snapshot = snapshot_of(node("n1", cpu=4))
    rack = "example.com/rack"
    topology = TopologyRequest(chain=(rack,), levels=(rack,), required=rack)
    request = gang("t", members("t", 4, requests={"cpu": 2}), topology=topology)
    assert [pod_set.count for pod_set in still_missing(request, snapshot)] == [4]


def test_the_template_keeps_what_the_autoscaler_needs_and_drops_the_rest() -> None:
    body = pod(
        "p",
        requests={"cpu": 1},
        nodeSelector={"pool": "gpu"},
        tolerations=[{"key": "gpu", "operator": "Exists"}],
        nodeName=None,
        hostname="not-kept",
    )
    spec = template_spec(body)
    assert set(spec) == {"containers", "nodeSelector", "tolerations"}
    assert spec["containers"] == [
        {
            "name": "main",
            "image": "registry.local/sim:latest",
            "resources": {"requests": {"cpu": "1"}},
        }
    ]


def test_members_alike_share_a_pod_set_whatever_their_names_and_labels() -> None:
    pods = [pod(f"p{i}", labels={"i": str(i)}, requests={"cpu": 1}) for i in range(3)]
    (only,) = pod_sets(pods)
    assert only.count == 3


def test_more_templates_than_a_request_holds_is_an_error_naming_the_bound() -> None:
    pods = [
        pod(f"p{i}", requests={"cpu": f"{i + 1}m"}) for i in range(PROVISIONING_MAX_POD_SETS + 1)
    ]
    with pytest.raises(ValueError, match=f"at most {PROVISIONING_MAX_POD_SETS} pod sets"):
        pod_sets(pods)
