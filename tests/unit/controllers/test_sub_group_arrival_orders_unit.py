"""A k-of-n sub-group gang is placed, and its placement reaches the status, whatever the order
in which its members, the scheduler's cycles, the answers to its binds and the status writes
come.

The gang scheduler (over the in-memory API server, as in test_gang_scheduler_unit.py) decides
in pipelined cycles, its binds held in flight until a step lets them be answered; it hands its
verdicts to a real `StatusReconciler`, which keeps one verdict per group, and the status
written is that verdict folded by `apply_verdict`, at moments Hypothesis picks (a write may
come between any two verdicts, or only after the last).
"""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import PODGROUPS, PODS
from podgroup_operator.adapters.record_key import SecretRecordKey
from podgroup_operator.api.models import PodGroupStatus
from podgroup_operator.controllers.status import StatusReconciler
from podgroup_operator.domain.scheduling_status import Verdict, apply_verdict
from tests.builders import node
from tests.fakes import FakeIndex
from tests.unit.controllers.test_gang_scheduler_unit import NS, Harness

BLOCK = "example.com/block"
RACK = "example.com/rack"
SUBS = ("s0", "s1", "s2")
KEY = (NS, "kofn")


def levels_of(name: str) -> tuple[str, ...] | None:
    return (BLOCK, RACK) if name == "fabric" else None


class World:
    """Two racks of two 4-cpu nodes, a gang of three 2 x 4-cpu sub-groups of which two must
    run (`minSubGroup: 2`), the scheduler and a status reconciler fed its verdicts."""

    def __init__(self) -> None:
        self.h = Harness(default_timeout_seconds=3600)
        self.h.scheduler.requests.topology_levels = levels_of
        self.reconciler = StatusReconciler(
            self.h.kube,
            FakeIndex(),  # type: ignore[arg-type]  # read as a Mapping; never reconciled here
            FakeIndex(),  # type: ignore[arg-type]
            record_key=SecretRecordKey(self.h.kube, "podgroup-operator"),  # never asked here
            settle=0,
            count_delay=0,
            clock=self.h.clock,
        )
        self.h.scheduler.publish = self.published
        for rack in ("r0", "r1"):
            for host in range(2):
                (stored,) = self.h.fake.seed(
                    node(f"b0-{rack}-h{host}", cpu=4, labels={BLOCK: "b0", RACK: rack})
                )
                self.h.scheduler.on_node("ADDED", stored)
        self.h.add_group(
            "kofn",
            min_member=4,
            minSubGroup=2,
            subGroups=[
                {
                    "name": sub,
                    "minMember": 2,
                    "topologyConstraint": {"topology": "fabric", "requiredTopologyLevel": RACK},
                }
                for sub in SUBS
            ],
        )
        self.status = PodGroupStatus()
        self.gate = self.h.fake.hold("POST", lambda r: r.path.endswith("/binding"))

    def published(self, key: tuple[str, str], verdict: Verdict) -> None:
        self.h.verdicts.append((key, verdict))
        self.reconciler.set_verdict(key, verdict)

    def arrive(self, index: int) -> None:
        sub = SUBS[index // 2]
        self.h.add_pod(
            f"kofn-{sub}-{index % 2}",
            group="kofn",
            cpu=4,
            labels={c.LABEL_SUB_GROUP: sub},
        )

    async def cycle(self) -> None:
        """A pipelined cycle: its binds go out, and stay in flight until `land`."""
        self.h.clock.advance(120)  # past any backoff: every cycle may decide the gang
        await self.h.scheduler.cycle(pipeline=True)

    async def land(self) -> None:
        """The binds in flight are answered; later ones are held again."""
        self.gate.set()
        while self.h.scheduler.binder.batches:
            await asyncio.gather(*self.h.scheduler.binder.batches)
        self.gate = self.h.fake.hold("POST", lambda r: r.path.endswith("/binding"))

    async def write_status(self) -> None:
        """What the status reconciler writes now: the phase its members give (Running once
        minMember are bound), and the verdict it keeps folded in; the scheduler sees it."""
        self.h.watch_catches_up()
        bound = len(self.h.bound_pods("kofn"))
        phase = c.Phase.RUNNING if bound >= 4 else c.Phase.PENDING
        base = self.status.model_copy(update={"phase": phase, "scheduled": bound})
        self.status = apply_verdict(
            base, self.reconciler.verdicts.get(KEY), 4, self.h.clock(), id_seed="kofn"
        )
        await self.h.kube.patch_status(
            PODGROUPS, "kofn", NS, self.status.model_dump(by_alias=True, mode="json")
        )
        stored = self.h.fake.get_object(PODGROUPS, "kofn", NS)
        assert stored is not None
        self.h.groups.put(KEY, stored)
        self.h.scheduler.on_group(KEY)

    def racks(self) -> dict[str, set[str]]:
        """Sub-group -> the racks its bound members are on."""
        out: dict[str, set[str]] = {}
        for stored in self.h.fake.objects(PODS, NS):
            where = (stored.get("spec") or {}).get("nodeName")
            if where:
                sub = stored["metadata"]["labels"][c.LABEL_SUB_GROUP]
                out.setdefault(sub, set()).add(where.split("-")[1])
        return out


Step = tuple[bool, bool, bool]
"""After a member arrives: a scheduler cycle, the binds in flight answered, a status write."""


async def _arrive(order: list[int], steps: list[Step]) -> World:
    world = World()
    for index, (cycle, land, write) in zip(order, steps, strict=True):
        world.arrive(index)
        if cycle:
            await world.cycle()
        if land:
            await world.land()
        if write:
            await world.write_status()
    for _ in range(3):  # the members are all in: the scheduler and the status settle
        await world.cycle()
        await world.land()
        await world.write_status()
    return world


@given(
    order=st.permutations(range(6)),
    steps=st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()), min_size=6, max_size=6),
)
@settings(max_examples=100, deadline=None)
def test_k_of_n_sub_groups_are_placed_and_the_status_says_where_in_every_order(
    order: list[int], steps: list[Step]
) -> None:
    world = asyncio.run(_arrive(order, steps))
    racks = world.racks()
    assert len(racks) == 2, racks
    assert all(len(where) == 1 for where in racks.values()), racks
    assert {r for where in racks.values() for r in where} == {"r0", "r1"}, racks
    placement = world.status.placement
    assert placement is not None and placement.sub_groups is not None, (
        world.status.placement,
        world.h.verdicts,
    )
    assert {(p.name, p.level, p.domain) for p in placement.sub_groups} == {
        (sub, RACK, next(iter(where))) for sub, where in racks.items()
    }


async def test_members_that_come_while_the_placements_binds_fly_see_them_as_bound() -> None:
    """s0 and s1 are placed; s2's members come before those binds are answered: the next
    cycle counts the four in flight as bound (no false NotEnoughTasks), and keeps where s0 and
    s1 lie."""
    world = World()
    for index in range(4):
        world.arrive(index)
    await world.cycle()
    assert [v.placed for _, v in world.h.verdicts] == [True]
    world.arrive(4)
    world.arrive(5)
    await world.cycle()  # the four binds are still in flight
    reasons = [v.reason for _, v in world.h.verdicts]
    assert c.Reason.NOT_ENOUGH_TASKS not in reasons, world.h.verdicts
    kept = world.reconciler.verdicts[KEY]
    assert kept.placement is not None and kept.placement.sub_groups is not None
    assert {p.name for p in kept.placement.sub_groups} == {"s0", "s1"}
    await world.land()
    assert sorted(world.racks().items()) == [("s0", {"r0"}), ("s1", {"r1"})]
