"""NonStrict holds (scheduling/holds.py): bounded by the cap, a rest after it, named in messages,
and the what-if that tells whether a hold is what stopped another gang."""

from __future__ import annotations

import datetime as dt

import pytest

from podgroup_operator.api.times import rfc3339
from podgroup_operator.constants import GangMode
from podgroup_operator.scheduling.gang import Refusal
from podgroup_operator.scheduling.holds import MAX_NAMED_NODES, Hold, Holds, stopped_by
from podgroup_operator.scheduling.placement import place_group
from podgroup_operator.scheduling.snapshot import Snapshot
from tests.builders import node
from tests.clock import T0
from tests.unit.scheduling.helpers import gang, members

HOLDER = ("team-a", "big")
OTHER = ("team-b", "small")
THIRD = ("team-c", "third")


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


class Undone:
    """An undo that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1


def book(holds: Holds, key: tuple[str, str], now: dt.datetime, **kwargs: object) -> Undone:
    undo = Undone()
    holds.book(key, {"n1": {"cpu": 4000}}, ["u1"], undo, now, **kwargs)  # type: ignore[arg-type]
    return undo


def test_a_hold_ends_a_cap_after_it_began_however_often_it_is_booked_again() -> None:
    holds = Holds(30)
    first = book(holds, HOLDER, at(0))
    before = holds.take(HOLDER)  # decided again at t=10: released, then booked afresh
    assert first.calls == 1 and before is not None
    book(holds, HOLDER, at(10), before=before)

    assert holds.held[HOLDER].until == at(30)
    assert holds.next_expiry() == at(30)
    assert holds.expire(at(29.9), [HOLDER]) == []
    assert HOLDER in holds


def test_past_the_cap_the_hold_is_released_and_the_gang_rests_until_the_others_are_decided() -> (
    None
):
    holds = Holds(30)
    undo = book(holds, HOLDER, at(0))

    released = holds.expire(at(30), [HOLDER, OTHER, THIRD])

    assert [hold.gang for hold in released] == [HOLDER] and undo.calls == 1
    assert HOLDER not in holds and holds.next_expiry() is None
    assert not holds.may_hold(HOLDER, at(31))
    holds.decided([OTHER])
    assert not holds.may_hold(HOLDER, at(31))  # the third gang waits to be decided too
    holds.decided([THIRD, HOLDER])
    assert holds.may_hold(HOLDER, at(31))
    assert holds.resting == {}


def test_a_rest_ends_a_cap_after_the_release_even_if_a_gang_is_never_decided() -> None:
    holds = Holds(30)
    book(holds, HOLDER, at(0))
    holds.expire(at(30), [HOLDER, OTHER])

    assert not holds.may_hold(HOLDER, at(59))
    assert holds.may_hold(HOLDER, at(60))


def test_a_gang_placed_or_gone_is_forgotten_and_owed_nothing() -> None:
    holds = Holds(30)
    book(holds, HOLDER, at(0))
    undo = book(holds, OTHER, at(5))
    holds.expire(at(30), [HOLDER, OTHER])  # only the holder's cap is reached

    holds.forget(OTHER)

    assert undo.calls == 1 and OTHER not in holds
    assert holds.may_hold(HOLDER, at(31))  # the gang it waited for went
    holds.forget(HOLDER)
    assert holds.held == {} and holds.resting == {}


def test_others_are_the_holds_of_other_gangs() -> None:
    holds = Holds(30)
    book(holds, HOLDER, at(0))
    book(holds, OTHER, at(0))
    assert [hold.gang for hold in holds.others(HOLDER)] == [OTHER]


@pytest.mark.parametrize("seconds", [0, -5])
def test_a_cap_that_is_not_positive_is_refused(seconds: float) -> None:
    with pytest.raises(ValueError, match="positive seconds"):
        Holds(seconds)


def test_the_holders_line_and_the_others_line_name_nodes_resources_holder_and_time() -> None:
    hold = Hold(
        gang=HOLDER,
        since=at(0),
        until=at(30),
        nodes=(("node-a", {"cpu": 4000, "pods": 1}), ("node-b", {"cpu": 2000, "pods": 1})),
        uids=frozenset({"u1", "u2", "u3"}),
        undo=Undone(),
    )
    assert hold.describe() == "holds 3 member(s) on node-a, node-b until 2026-03-01T12:00:30Z"
    assert hold.on({"node-a"}) == (
        "{cpu: 4} on node-a held by NonStrict gang team-a/big until 2026-03-01T12:00:30Z"
    )
    assert rfc3339(at(30)) == "2026-03-01T12:00:30Z"


def test_a_hold_on_many_nodes_names_a_few_and_counts_the_rest() -> None:
    names = [f"n{i:02d}" for i in range(MAX_NAMED_NODES + 3)]
    hold = Hold(
        gang=HOLDER,
        since=at(0),
        until=at(30),
        nodes=tuple((name, {"cpu": 1000}) for name in names),
        uids=frozenset(names),
        undo=Undone(),
    )
    assert hold.describe().endswith(f"n07 and 3 more node(s) until {rfc3339(at(30))}")
    assert "and 3 more node(s) held by" in hold.on(names)


def held_on(snapshot: Snapshot, key: tuple[str, str]) -> Hold:
    """A NonStrict gang of 3 x 4 cpu refused on the snapshot, its 2 members that fit held."""
    pods = members(key[1], 3, key[0], requests={"cpu": "4"})
    refusal = place_group(gang(key[1], pods, namespace=key[0], mode=GangMode.NON_STRICT), snapshot)
    assert isinstance(refusal, Refusal) and len(refusal.partial) == 2
    nodes = {binding.node: {"cpu": 4000} for binding in refusal.partial}
    uids = [binding.pod_uid for binding in refusal.partial]
    return Holds(30).book(key, nodes, uids, refusal.undo, at(0))


def test_a_gang_that_fits_without_the_holds_is_stopped_by_the_hold_on_its_node() -> None:
    snapshot = Snapshot.build([node("n1", cpu=4), node("n2", cpu=4)], [])
    hold = held_on(snapshot, HOLDER)
    before = snapshot.state()
    small = gang("small", members("small", 2, "team-b", requests={"cpu": "1"}), namespace="team-b")
    assert isinstance(place_group(small, snapshot), Refusal)
    assert snapshot.state() == before

    found = stopped_by(small, snapshot, [hold])

    assert len(found) == 1 and found[0][0] is hold
    assert len(found[0][1]) == 1  # both small members go on one node: that one is named
    assert snapshot.state() == before  # the what-if left the snapshot as it was
    assert all(snapshot.is_assumed(uid) for uid in hold.uids)


def test_a_gang_that_fits_nowhere_even_without_the_holds_is_not_stopped_by_them() -> None:
    snapshot = Snapshot.build([node("n1", cpu=4), node("n2", cpu=4)], [])
    hold = held_on(snapshot, HOLDER)
    before = snapshot.state()
    huge = gang("huge", members("huge", 2, "team-b", requests={"cpu": "6"}), namespace="team-b")

    assert stopped_by(huge, snapshot, [hold]) == []
    assert stopped_by(huge, snapshot, []) == []
    assert snapshot.state() == before
