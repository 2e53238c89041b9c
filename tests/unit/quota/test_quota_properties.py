"""Properties over random admission histories: reservations are never overbooked, and the
incrementally kept ledger always equals one rebuilt from the final objects."""

from hypothesis import given
from hypothesis import strategies as st

from podgroup_operator.domain.quota import (
    GroupReservation,
    Ledger,
    PodUsage,
    admit_group,
    admit_group_update,
    admit_pod,
)
from tests.unit.quota.helpers import key, quota

GROUPS = ["a", "b", "c", "d"]
HARD = {"cpu": 8000, "pods": 6000}

ops = st.lists(
    st.one_of(
        st.tuples(st.just("group"), st.sampled_from(GROUPS), st.integers(0, 6)),
        st.tuples(st.just("resize"), st.sampled_from(GROUPS), st.integers(0, 6)),
        st.tuples(st.just("pod"), st.sampled_from([*GROUPS, None]), st.integers(0, 3)),
        st.tuples(st.just("finish-pod"), st.integers(0, 30), st.just(0)),
        st.tuples(st.just("release"), st.sampled_from(GROUPS), st.just(0)),
    ),
    max_size=40,
)


def _kubernetes_quota_admits(ledger: Ledger, pod: PodUsage, live: list[PodUsage]) -> bool:
    """Kubernetes' own quota admission: total live requests within the hard limit."""
    for resource, hard in HARD.items():
        used = sum(p.usage.get(resource, 0) for p in live)
        if used + pod.usage.get(resource, 0) > hard:
            return False
    return True


@given(ops)
def test_reservations_are_never_overbooked_and_rebuild_matches(history: list) -> None:
    quotas = [quota("compute", {"requests.cpu": "8", "pods": 6})]
    ledger = Ledger.build(quotas, [], [])
    groups: dict[str, GroupReservation] = {}
    pods: list[PodUsage] = []
    for op, target, amount in history:
        if op == "group" and target not in groups:
            total = {"cpu": amount * 1000}
            if admit_group(ledger, key(target), total).allowed:
                groups[target] = GroupReservation(key=key(target), total=total)
                ledger.add_reservation(groups[target])
        elif op == "resize" and target in groups and groups[target].active:
            total = {"cpu": amount * 1000}
            if admit_group_update(ledger, key(target), total).allowed:
                groups[target] = GroupReservation(key=key(target), total=total)
                ledger.add_reservation(groups[target])
        elif op == "pod":
            new = PodUsage(
                uid=f"p{len(pods)}",
                group_key=None if target is None else key(target),
                requests={"cpu": amount * 1000},
            )
            live = [p for p in pods if p.live]
            if admit_pod(ledger, new).allowed and _kubernetes_quota_admits(ledger, new, live):
                pods.append(new)
                ledger.add_pod(new)
        elif op == "finish-pod" and target < len(pods):
            done = pods[target]
            pods[target] = PodUsage(done.uid, done.group_key, done.requests, live=False)
            ledger.add_pod(pods[target])
        elif op == "release" and target in groups:
            groups[target] = GroupReservation(key(target), groups[target].total, active=False)
            ledger.release(key(target))

        # Recomputed here from the test's own records, not from the ledger's sums.
        live = [p for p in pods if p.live]
        used_cpu = sum(p.requests["cpu"] for p in live)
        unused_reserved = 0
        for group in groups.values():
            if group.reserves and group.total:
                members = sum(p.requests["cpu"] for p in live if p.group_key == group.key)
                assert members <= group.total["cpu"]
                unused_reserved += group.total["cpu"] - members
        assert used_cpu + unused_reserved <= HARD["cpu"]
        assert len(live) * 1000 <= HARD["pods"]
        assert ledger.free("cpu") == HARD["cpu"] - used_cpu - unused_reserved

    rebuilt = Ledger.build(quotas, list(groups.values()), pods)
    for resource in HARD:
        assert rebuilt.free(resource) == ledger.free(resource)
    for name in GROUPS:
        assert rebuilt.members_used(key(name)) == ledger.members_used(key(name))
