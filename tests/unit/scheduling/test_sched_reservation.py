"""The head gang's reservation and backfill around it (scheduling/reservation.py), and the burst
replay on the pure core (bench/replay.py) with EASY backfill's guarantee as a property."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podgroup_operator.api.run_time import declared_run_seconds
from podgroup_operator.bench.burst import burst_jobs, burst_nodes, run_burst
from podgroup_operator.bench.replay import Job, replay
from podgroup_operator.constants import LABEL_KUEUE_MAX_EXEC_TIME, Reason
from podgroup_operator.scheduling.gang import Placement, Refusal
from podgroup_operator.scheduling.reservation import (
    ReservationBook,
    RunningGang,
    fence,
    plan_reservation,
)
from podgroup_operator.scheduling.snapshot import Snapshot
from tests.builders import node, pod
from tests.unit.scheduling.helpers import gang, members

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _cluster(count: int = 4) -> Snapshot:
    return Snapshot.build([node(f"n{i}", cpu=8) for i in range(count)], [])


def _run(
    snapshot: Snapshot, name: str, nodes: list[str], ends: datetime | None, cpu: str = "8"
) -> RunningGang:
    """A gang of one pod of `cpu` on each of `nodes`, bound."""
    uids = []
    for i, where in enumerate(nodes):
        body = pod(f"{name}-{i}", group=name, requests={"cpu": cpu}, node=where, phase="Running")
        snapshot.add_pod(body)
        uids.append(body["metadata"]["uid"])
    return RunningGang(("default", name), tuple(uids), ends)


def _head(size: int = 2, created: datetime = T0):
    return gang("head", members("head", size, requests={"cpu": "8"}), created=created)


# --- declared run times --------------------------------------------------------------------------
def test_the_spec_limit_wins_else_every_member_must_declare_one() -> None:
    deadline = pod("a", activeDeadlineSeconds=30)
    labelled = pod("b", labels={LABEL_KUEUE_MAX_EXEC_TIME: "90"})
    silent = pod("c")
    assert declared_run_seconds(10, [silent]) == 10
    assert declared_run_seconds(None, [deadline, labelled]) == 90
    assert declared_run_seconds(None, [deadline, silent]) is None
    assert declared_run_seconds(None, []) is None
    assert declared_run_seconds(None, [pod("d", labels={LABEL_KUEUE_MAX_EXEC_TIME: "x"})]) is None


# --- planning ------------------------------------------------------------------------------------
def test_the_head_reserves_the_nodes_that_free_first_from_their_latest_end() -> None:
    snapshot = _cluster(4)
    late = _run(snapshot, "late", ["n0", "n1"], T0 + timedelta(seconds=500))
    soon = _run(snapshot, "soon", ["n2"], T0 + timedelta(seconds=50))
    sooner = _run(snapshot, "sooner", ["n3"], T0 + timedelta(seconds=20))
    before = snapshot.state()
    reservation = plan_reservation(_head(2), snapshot, [late, soon, sooner], T0)
    assert reservation is not None
    assert reservation.nodes == {"n2", "n3"}
    assert reservation.start == T0 + timedelta(seconds=50)
    assert snapshot.state() == before  # a what-if: the snapshot is as it was


def test_no_limit_makes_the_start_unknown_and_a_gang_too_big_reserves_nothing() -> None:
    snapshot = _cluster(2)
    forever = _run(snapshot, "forever", ["n0", "n1"], None)
    reservation = plan_reservation(_head(2), snapshot, [forever], T0)
    assert reservation is not None and reservation.start is None
    assert reservation.unknown_since == T0
    assert plan_reservation(_head(3), snapshot, [forever], T0) is None


def test_backfill_only_when_the_later_gang_ends_before_the_start() -> None:
    snapshot = _cluster(2)
    running = _run(snapshot, "running", ["n0"], T0 + timedelta(seconds=100))
    book = ReservationBook()
    head = _head(2)
    assert isinstance(place_refused := book.place(head, snapshot, None)[0], Refusal)
    assert place_refused.reason is Reason.NOT_ENOUGH_RESOURCES
    held = book.refused(head, snapshot, [running], T0)
    assert held is not None and held.nodes == {"n0", "n1"}
    later = gang(
        "later", members("later", 1, requests={"cpu": "8"}), created=T0 + timedelta(seconds=1)
    )
    # No limit: the only free node is reserved, so it is refused without preemption.
    outcome, backfills, fenced = book.place(later, snapshot, None)
    assert isinstance(outcome, Refusal) and fenced and not backfills
    assert "reserved for default/head" in outcome.message
    # Ends after the start: refused too.
    outcome, _, fenced = book.place(later, snapshot, T0 + timedelta(seconds=101))
    assert isinstance(outcome, Refusal) and fenced
    # Ends before it: backfills.
    outcome, backfills, fenced = book.place(later, snapshot, T0 + timedelta(seconds=90))
    assert isinstance(outcome, Placement) and not fenced
    assert [b.nodes for b in backfills] == [frozenset({"n1"})]
    assert "before that gang's estimated start" in backfills[0].describe(T0)


def test_a_gang_without_a_limit_still_runs_on_nodes_the_reservation_does_not_need() -> None:
    snapshot = _cluster(3)
    running = _run(snapshot, "running", ["n0"], T0 + timedelta(seconds=100))
    half = _run(snapshot, "half", ["n1"], None, cpu="4")
    book = ReservationBook()
    head = _head(2)
    held = book.refused(head, snapshot, [running, half], T0)
    assert held is not None and held.nodes == {"n0", "n2"}
    later = gang("later", members("later", 1, requests={"cpu": "4"}), created=T0 + timedelta(1))
    outcome, backfills, _ = book.place(later, snapshot, None)
    assert isinstance(outcome, Placement) and not backfills
    assert {b.node for b in outcome.bindings}.isdisjoint(held.nodes)


def test_a_higher_priority_or_older_gang_ignores_the_reservation() -> None:
    snapshot = _cluster(2)
    running = _run(snapshot, "running", ["n0"], T0 + timedelta(seconds=100))
    book = ReservationBook()
    book.refused(_head(2, created=T0 + timedelta(seconds=5)), snapshot, [running], T0)
    urgent = gang(
        "urgent",
        members("urgent", 1, requests={"cpu": "8"}),
        priority=10,
        created=T0 + timedelta(seconds=9),
    )
    older = gang("older", members("older", 1, requests={"cpu": "8"}), created=T0)
    assert not book.restricting((-10, True, T0 + timedelta(seconds=9), "default", "u", ""))
    outcome, backfills, _ = book.place(urgent, snapshot, None)
    assert isinstance(outcome, Placement) and not backfills
    outcome.undo()
    outcome, _, _ = book.place(older, snapshot, None)
    assert isinstance(outcome, Placement)


def test_one_reservation_per_priority_the_oldest_refused_holds_it() -> None:
    snapshot = _cluster(2)
    running = _run(snapshot, "running", ["n0", "n1"], T0 + timedelta(seconds=100))
    book = ReservationBook()
    young = _head(2, created=T0 + timedelta(seconds=5))
    old = gang("old", members("old", 2, requests={"cpu": "8"}), created=T0)
    assert book.refused(young, snapshot, [running], T0) is not None
    assert book.refused(old, snapshot, [running], T0) is not None
    assert book.of(old.key) is not None and book.of(young.key) is None
    assert book.refused(young, snapshot, [running], T0) is None  # the older one holds it
    assert book.release(old.key) is not None and not book


def test_a_reservation_of_unknown_start_is_released_at_the_timeout_and_not_taken_again() -> None:
    snapshot = _cluster(2)
    forever = _run(snapshot, "forever", ["n0", "n1"], None)
    book = ReservationBook()
    head = _head(2)
    book.refused(head, snapshot, [forever], T0)
    later = book.refused(head, snapshot, [forever], T0 + timedelta(seconds=100))
    assert later is not None and later.unknown_since == T0  # kept across refusals
    assert book.expire(T0 + timedelta(seconds=299), timedelta(seconds=300)) == []
    assert [r.gang for r in book.expire(T0 + timedelta(seconds=300), timedelta(seconds=300))] == [
        head.key
    ]
    assert book.refused(head, snapshot, [forever], T0 + timedelta(seconds=301)) is None
    # Once what runs there declares an end, it reserves again.
    known = RunningGang(forever.key, forever.uids, T0 + timedelta(seconds=900))
    assert book.refused(head, snapshot, [known], T0 + timedelta(seconds=302)) is not None


def test_the_fence_takes_the_free_room_and_gives_it_back() -> None:
    snapshot = _cluster(2)
    before = snapshot.state()
    undo = fence(snapshot, ["n0", "gone"])
    assert snapshot.free("n0").get("cpu", 0) == 0 and snapshot.free("n1")["cpu"] == 8000
    undo()
    assert snapshot.state() == before


# --- the burst replay ----------------------------------------------------------------------------
@pytest.mark.timeout(30)  # two replays of 53 gangs, each some 60 cycles: about 3 s
def test_the_burst_starts_the_big_gang_in_the_first_wave_that_can_hold_it() -> None:
    result = run_burst()
    with_reservation = result["reservation"]
    assert with_reservation["unplaced"] == []
    assert with_reservation["ideal_over_makespan"] >= 0.97
    assert with_reservation["mean_gpu_occupancy"] >= 0.97
    # Whole at 2 s, after the first wave's small gangs took the nodes: it starts when they end.
    assert with_reservation["big_gang_start_s"] <= 60 + 1
    assert result["no_reservation"]["big_gang_start_s"] > with_reservation["big_gang_start_s"]


def test_the_burst_jobs_fill_the_cluster_exactly_in_nine_waves() -> None:
    jobs = burst_jobs()
    assert len(jobs) == 53
    assert sum(job.size for job in jobs) == 9 * len(burst_nodes())


@st.composite
def bursts(draw: st.DrawFn) -> tuple[int, list[Job]]:
    nodes = draw(st.integers(2, 6))
    count = draw(st.integers(1, 12))
    jobs = []
    for i in range(count):
        limit = draw(st.one_of(st.none(), st.integers(1, 50)))
        run = draw(st.integers(1, limit if limit is not None else 50))
        jobs.append(
            Job(
                f"j{i:02d}",
                draw(st.integers(1, nodes)),
                {"cpu": "8"},
                run,
                created=draw(st.integers(0, 40)) + i / 100,
                limit_seconds=limit,
            )
        )
    return nodes, jobs


@given(bursts())
def test_no_later_gang_delays_the_head_past_its_reserved_start(
    burst: tuple[int, list[Job]],
) -> None:
    """EASY backfill's guarantee: a gang that reserved with a known start starts by then
    (run times never exceed the declared limits), whatever later gangs backfilled meanwhile;
    and every gang eventually runs."""
    count, jobs = burst
    nodes = [node(f"n{i}", cpu=8) for i in range(count)]
    result = replay(nodes, jobs)
    assert result.unplaced == []
    for name, estimate in result.reserved.items():
        if estimate is not None:
            assert result.starts[name] <= estimate + 1e-9, (name, estimate, result.starts)
