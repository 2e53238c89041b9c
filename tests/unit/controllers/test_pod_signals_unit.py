"""Pod-level signals (controllers/podsignals.py): the PodScheduled condition and the scheduling
Events, written in the background, only when news, never fatal.

The in-memory API server merges the condition's strategic merge patch by `type`, as the
apiserver does (tests/api_contract.py checks both); the integration tier checks what
`kubectl describe pod` shows.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import EVENTS, PODS, STRATEGIC_PATCH, KubeClient
from podgroup_operator.controllers.podsignals import PodSignals, unschedulable_patch
from tests.builders import pod
from tests.clock import T0, Clock
from tests.fakes import FakeApiServer
from tests.unit.controllers.test_gang_scheduler_unit import NS, Harness

GANG = (NS, "gang")


def timestamp(at: dt.datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


class World:
    def __init__(self, concurrency: int = 8) -> None:
        self.clock = Clock()
        self.fake = FakeApiServer(clock=self.clock)
        self.kube = KubeClient(self.fake)
        self.signals = PodSignals(self.kube, clock=self.clock, concurrency=concurrency)
        self.pods = self.fake.seed(
            *(pod(f"gang-{i}", NS, group="gang", scheduler=c.SCHEDULER_NAME) for i in range(3))
        )

    def condition_patches(self) -> list[Any]:
        return [
            r
            for r in self.fake.request_log
            if r.method == "PATCH" and r.path.endswith("/status") and "/pods/" in r.path
        ]

    def events(self, reason: str) -> list[dict[str, Any]]:
        return self.fake.events(reason=reason)


async def until(condition: Callable[[], bool]) -> None:
    """Let the event loop run until `condition` holds (a barrier, not a timed wait)."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


def test_the_condition_is_exactly_what_cluster_autoscaler_reads() -> None:
    patch = unschedulable_patch("u1", "needs 3 x {cpu: 2}", T0, first=True)
    assert patch == {
        "metadata": {"uid": "u1"},
        "status": {
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "needs 3 x {cpu: 2}",
                    "lastProbeTime": None,
                    "lastTransitionTime": "2026-03-01T12:00:00Z",
                }
            ]
        },
    }
    # A changed message keeps the pod's transition time (strategic merge keeps absent fields).
    later = unschedulable_patch("u1", "other", T0, first=False)
    assert "lastTransitionTime" not in later["status"]["conditions"][0]


async def test_every_waiting_member_is_marked_once_per_message() -> None:
    w = World()
    w.signals.refused(GANG, w.pods, "short 1 node")
    w.signals.refused(GANG, w.pods, "short 1 node")  # the next cycle, same refusal
    await w.signals.idle()

    patches = w.condition_patches()
    assert sorted(r.path for r in patches) == sorted(
        PODS.path(NS, p["metadata"]["name"], "status") for p in w.pods
    )
    assert {r.content_type for r in patches} == {STRATEGIC_PATCH}
    assert {r.body["metadata"]["uid"] for r in patches} == {p["metadata"]["uid"] for p in w.pods}

    for stored in w.fake.objects(PODS, NS):
        (condition,) = stored["status"]["conditions"]
        assert (condition["type"], condition["status"], condition["reason"]) == (
            "PodScheduled",
            "False",
            "Unschedulable",
        )
        assert condition["message"] == "short 1 node"

    w.signals.refused(GANG, w.pods, "short 2 nodes")
    await w.signals.idle()
    assert len(w.condition_patches()) == 6
    for stored in w.fake.objects(PODS, NS):
        (condition,) = stored["status"]["conditions"]
        assert condition["message"] == "short 2 nodes"
        assert condition["lastTransitionTime"] == "2026-03-01T12:00:00Z"  # kept
    assert {r.body["status"]["conditions"][0]["message"] for r in w.condition_patches()[3:]} == {
        "short 2 nodes"
    }


async def test_failed_scheduling_is_rate_limited_per_gang_and_repeats_count_up() -> None:
    """A repeat counts up each pod's Event (kubectl describe: "(x2 over 60s)"), as client-go's
    correlator does for kube-scheduler: etcd keeps one Event per pod, not one per repeat."""
    w = World()
    w.signals.refused(GANG, w.pods, "short 1 node")
    await w.signals.idle()
    assert len(w.events(c.PodReason.FAILED_SCHEDULING)) == 3  # one per waiting member

    w.clock.advance(30)
    w.signals.refused(GANG, w.pods, "short 1 node")
    await w.signals.idle()
    assert w.fake.count("PATCH", "") == w.fake.count("PATCH", "/status")  # within a minute

    w.clock.advance(31)
    w.signals.refused(GANG, w.pods, "short 1 node")
    await w.signals.idle()
    events = w.events(c.PodReason.FAILED_SCHEDULING)
    assert len(events) == 3  # a minute on: said again, on the same Events
    assert {(e["count"], e["lastTimestamp"]) for e in events} == {(2, timestamp(w.clock.now))}
    assert {e["firstTimestamp"] for e in events} == {timestamp(T0)}

    w.signals.refused(GANG, w.pods, "short 2 nodes")
    await w.signals.idle()
    events = w.events(c.PodReason.FAILED_SCHEDULING)
    assert len(events) == 6  # news at once, in Events of its own
    assert {e["type"] for e in events} == {c.EventType.WARNING}
    assert {e["source"]["component"] for e in events} == {c.SCHEDULER_NAME}


async def test_unchanged_refusals_are_said_less_and_less_often_down_to_every_five_minutes() -> None:
    w = World()
    waits = [60, 120, 240, 300, 300]
    w.signals.refused(GANG, w.pods, "short")
    await w.signals.idle()
    for count, wait in enumerate(waits, start=2):
        w.clock.advance(wait - 1)
        w.signals.refused(GANG, w.pods, "short")
        await w.signals.idle()
        counts = {e["count"] for e in w.events(c.PodReason.FAILED_SCHEDULING)}
        assert counts == {count - 1}, f"said again {wait - 1}s after the last time"
        w.clock.advance(1)
        w.signals.refused(GANG, w.pods, "short")
        await w.signals.idle()
        assert {e["count"] for e in w.events(c.PodReason.FAILED_SCHEDULING)} == {count}


async def test_a_repeat_whose_event_is_gone_posts_a_new_one() -> None:
    """Events expire (an hour by default) or are deleted: the count goes on in a new one."""
    w = World()
    w.signals.refused(GANG, w.pods, "short")
    await w.signals.idle()
    for event in w.events(c.PodReason.FAILED_SCHEDULING):
        await w.kube.delete(EVENTS, event["metadata"]["name"], NS)
    w.clock.advance(60)
    w.signals.refused(GANG, w.pods, "short")
    await w.signals.idle()
    events = w.events(c.PodReason.FAILED_SCHEDULING)
    assert [e["count"] for e in events] == [1, 1, 1]
    assert w.signals.failures == 0


async def test_a_pod_gone_while_its_event_is_posted_is_not_remembered() -> None:
    w = World()
    release = w.fake.hold("POST", "/events")
    w.signals.refused(GANG, w.pods[:1], "short")
    await until(lambda: w.fake.count("POST", "/events") == 1)
    w.signals.forget(w.pods[0]["metadata"]["uid"])
    release.set()
    await w.signals.idle()
    assert w.signals._posted == {}


async def test_scheduled_event_is_worded_as_kube_schedulers() -> None:
    w = World()
    body = dict(w.pods[0], spec={**w.pods[0]["spec"], "schedulerName": "volcano"})
    w.signals.placing(body)
    w.signals.bound(body["metadata"]["uid"], "node-1")
    await w.signals.idle()

    (event,) = w.events(c.PodReason.SCHEDULED)
    assert event["message"] == f"Successfully assigned {NS}/gang-0 to node-1"
    assert event["type"] == c.EventType.NORMAL
    assert event["involvedObject"]["uid"] == w.pods[0]["metadata"]["uid"]
    assert event["source"]["component"] == "volcano"


async def test_a_failed_write_is_counted_and_written_again_at_the_next_refusal() -> None:
    w = World()
    (target,) = [p for p in w.pods if p["metadata"]["name"] == "gang-0"]
    w.fake.inject_error("PATCH", PODS.path(NS, "gang-0", "status"), 500)
    w.signals.refused(GANG, [target], "short 1 node")
    await w.signals.idle()
    assert w.signals.failures == 1

    w.signals.refused(GANG, [target], "short 1 node")
    await w.signals.idle()
    assert len(w.condition_patches()) == 2


async def test_writes_run_in_the_background_at_bounded_concurrency() -> None:
    w = World(concurrency=2)
    release = w.fake.hold("PATCH", lambda r: r.path.endswith("/status"))
    w.signals.refused(GANG, w.pods, "short")  # returns at once: nothing is awaited
    await until(lambda: len(w.condition_patches()) == 2)
    # Both workers are held in flight: the third write can only be queued.
    assert len(w.condition_patches()) == 2
    release.set()
    await w.signals.idle()
    assert len(w.condition_patches()) == 3


async def test_a_bound_or_deleted_pod_drops_its_queued_condition() -> None:
    w = World(concurrency=1)
    release = w.fake.hold("PATCH", lambda r: r.path.endswith("/status"))
    w.signals.refused(GANG, w.pods, "short")
    await until(lambda: len(w.condition_patches()) == 1)  # the one worker is held
    w.signals.placing(w.pods[1])
    w.signals.bound(w.pods[1]["metadata"]["uid"], "node-1")
    w.signals.forget(w.pods[2]["metadata"]["uid"])
    release.set()
    await w.signals.idle()
    assert [r.path for r in w.condition_patches()] == [PODS.path(NS, "gang-0", "status")]


# --- wired into the scheduler ---------------------------------------------------------------


async def test_the_scheduler_signals_refusals_and_binds_and_a_failing_write_never_stops_it() -> (
    None
):
    h = Harness()
    h.add_node("n1", cpu=2)
    h.add_group("gang", min_member=3)
    pods = h.add_pods("gang", 3, cpu=1)

    h.fake.inject_error("PATCH", lambda r: "/pods/gang-0/" in r.path, 500)
    await h.scheduler.cycle()  # 2 of 3 fit: refused
    await h.scheduler.signals.idle()
    assert len(h.fake.events(reason=c.PodReason.FAILED_SCHEDULING)) == 3
    ((_, verdict),) = h.verdicts
    marked = {
        p["metadata"]["name"]: p["status"]["conditions"][0]["message"]
        for p in h.fake.objects(PODS, NS)
        if p["status"].get("conditions")
    }
    assert marked == {"gang-1": verdict.message, "gang-2": verdict.message}
    # The one write that failed is counted and logged; nothing else happens.
    assert h.scheduler.signals.failures == 1

    h.add_node("n2", cpu=2)
    await h.scheduler.cycle()
    await h.scheduler.signals.idle()
    assert h.binds() == 3
    scheduled = h.fake.events(reason=c.PodReason.SCHEDULED)
    assert sorted(e["involvedObject"]["name"] for e in scheduled) == sorted(
        p["metadata"]["name"] for p in pods
    )
    assert all(e["message"].startswith(f"Successfully assigned {NS}/gang-") for e in scheduled)


async def test_the_scheduler_places_pods_of_any_of_its_names_only() -> None:
    h = Harness()
    h.scheduler.scheduler_names = frozenset({c.SCHEDULER_NAME, "scheduler-plugins-scheduler"})
    h.add_node("n1", cpu=8)
    h.add_group("gang", min_member=2)
    h.add_pod("kubeflow-0", group="gang", scheduler="scheduler-plugins-scheduler")
    h.add_pod("kubeflow-1", group="gang", scheduler="scheduler-plugins-scheduler")
    h.add_pod("volcano-0", scheduler="volcano")

    await h.scheduler.cycle()

    assert sorted(h.bound_pods()) == ["kubeflow-0", "kubeflow-1"]


async def test_while_binds_are_in_flight_one_write_goes_out_at_a_time_and_resume_restores_all() -> (
    None
):
    """Under a backlog each bind queues a Scheduled Event; eight of them in flight beside the
    binds took CPU from the binds. While the scheduler binds, one goes out at a time."""
    w = World(concurrency=3)
    binding = True
    w.signals.busy = lambda: binding
    release = w.fake.hold("PATCH", lambda r: r.path.endswith("/status"))
    w.signals.refused(GANG, w.pods, "short")
    await until(lambda: len(w.condition_patches()) == 1)
    # The one worker is held in flight: the other two writes can only be queued.
    assert len(w.condition_patches()) == 1
    binding = False
    w.signals.resume()
    # Two more workers start while the first is still held: full concurrency again.
    await until(lambda: len(w.condition_patches()) == 3)
    release.set()
    await w.signals.idle()
    assert len(w.condition_patches()) == 3


async def test_the_scheduler_is_busy_for_its_signals_exactly_while_its_binds_are_in_flight() -> (
    None
):
    h = Harness()
    h.add_node("n1", cpu=4)
    h.add_group("gang", min_member=2)
    h.add_pods("gang", 2, cpu=1)
    release = h.fake.hold("POST", lambda r: r.path.endswith("/binding"))
    await h.scheduler.cycle(pipeline=True)
    assert h.scheduler.signals.busy()
    release.set()
    while h.scheduler.binder.batches:
        await asyncio.gather(*h.scheduler.binder.batches)
    assert not h.scheduler.signals.busy()
    await h.scheduler.signals.idle()
    assert len(h.fake.events(reason=c.PodReason.SCHEDULED)) == 2


async def test_events_refused_because_the_namespace_is_being_deleted_are_no_failures() -> None:
    """The pods and their Events go with the namespace; the condition (an update) still goes."""
    w = World()
    (target,) = [p for p in w.pods if p["metadata"]["name"] == "gang-0"]
    w.fake.terminate_namespace(NS)
    w.signals.refused(GANG, [target], "short 1 node")
    w.signals.bound(target["metadata"]["uid"], "node-1")
    await w.signals.idle()

    assert w.fake.count("POST", "/events") >= 1  # sent, and refused
    assert w.signals.failures == 0
    assert len(w.condition_patches()) == 1


async def test_a_new_leader_writes_no_condition_the_pod_already_carries() -> None:
    """After a restart or a change of leader, every waiting pod was marked again with the
    message it already carried (2,000 PATCHes for one waiting gang of 2,000 members)."""
    w = World()
    said, other = w.pods[0], w.pods[1]
    for body, message in ((said, "short 1 node"), (other, "short 3 nodes")):
        condition = unschedulable_patch("", message, T0, first=True)["status"]["conditions"][0]
        body["status"]["conditions"] = [condition]
    w.signals.refused(GANG, w.pods, "short 1 node")
    await w.signals.idle()

    patched = {r.path.split("/")[-2]: r.body for r in w.condition_patches()}
    assert sorted(patched) == ["gang-1", "gang-2"]
    # gang-1 was marked before: its condition keeps its transition time.
    (changed,) = patched["gang-1"]["status"]["conditions"]
    assert "lastTransitionTime" not in changed
    (fresh,) = patched["gang-2"]["status"]["conditions"]
    assert fresh["lastTransitionTime"] == timestamp(T0)


async def test_a_long_message_the_pod_carries_cut_to_the_limit_is_not_written_again() -> None:
    w = World()
    long = "short " + "x" * c.EVENT_MESSAGE_LIMIT
    condition = unschedulable_patch("", long, T0, first=True)["status"]["conditions"][0]
    for body in w.pods:
        body["status"]["conditions"] = [condition]
    w.signals.refused(GANG, w.pods, long)
    await w.signals.idle()
    assert w.condition_patches() == []


async def test_a_role_without_patch_on_events_posts_new_ones_and_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An install upgraded without its Role: counting up is forbidden, saying it is not."""
    w = World()
    w.signals.refused(GANG, w.pods, "short")
    await w.signals.idle()
    forbidden = 'events "x" is forbidden: User "op" cannot patch resource "events"'
    w.fake.inject_error(
        "PATCH", lambda r: "/events/" in r.path, 403, "Forbidden", forbidden, times=9
    )
    for _ in range(2):
        w.clock.advance(300)
        w.signals.refused(GANG, w.pods, "short")
        await w.signals.idle()

    assert len(w.events(c.PodReason.FAILED_SCHEDULING)) == 9
    # Tried in the first repeat only (its writes went out together), then posted anew.
    assert w.fake.count("PATCH", "") - len(w.condition_patches()) == len(w.pods)
    assert w.signals.failures == 0
    said = [r for r in caplog.records if "posted anew" in r.getMessage()]
    assert len(said) == 1 and "grant patch on events" in said[0].getMessage()


async def test_a_gang_waiting_for_provisioning_is_not_unschedulable_and_gets_no_warning() -> None:
    """Its pods say WaitingForProvisioning (cluster-autoscaler does not scale for them one by
    one), and FailedScheduling is not posted; a later refusal for room says Unschedulable again
    (a new transition: lastTransitionTime set anew)."""
    world = World()
    world.signals.refused(GANG, world.pods, "asking", c.PodReason.WAITING_FOR_PROVISIONING)
    await world.signals.idle()
    for member in world.fake.objects(PODS, NS):
        (condition,) = member["status"]["conditions"]
        assert condition["reason"] == c.PodReason.WAITING_FOR_PROVISIONING
        assert "lastTransitionTime" in condition
    assert world.events(c.PodReason.FAILED_SCHEDULING) == []
    patches = len(world.condition_patches())
    world.signals.refused(GANG, world.pods, "asking", c.PodReason.WAITING_FOR_PROVISIONING)
    await world.signals.idle()
    assert len(world.condition_patches()) == patches  # the same word is not written again
    world.signals.refused(GANG, world.pods, "asking")
    await world.signals.idle()
    for member in world.fake.objects(PODS, NS):
        (condition,) = member["status"]["conditions"]
        assert condition["reason"] == c.PodReason.UNSCHEDULABLE
    assert len(world.events(c.PodReason.FAILED_SCHEDULING)) == len(world.pods)
