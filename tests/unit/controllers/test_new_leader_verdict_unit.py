"""A new leader's verdict reaches the PodGroup's condition: the gang scheduler and the status
reconciler start afresh over a group whose status carries an earlier leader's refusal, the
scheduler refuses it again with another message, and the reconciler writes that message once
its hold (`domain.status_hold`, a change of message only: `COUNT_DELAY_SECONDS`) ends.

#683's case on ElasticQuotas, as the real-control-plane test kills the operator mid-reclaim
(tests/integration/test_elastic_quota.py): A's 1-GPU borrower is Terminating, B's 1-GPU gang
waits for its quota's min; the earlier leader said it was reclaiming, the new one says no gang
may be taken back. Both run over the in-memory API server, their clocks the test's.
"""

from __future__ import annotations

from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import PODGROUPS
from podgroup_operator.adapters.record_key import SecretRecordKey
from podgroup_operator.api.elastic_quota import QuotaKey, QuotaSpec
from podgroup_operator.controllers.status import StatusReconciler
from podgroup_operator.domain.scheduling_status import Verdict
from podgroup_operator.domain.status_hold import COUNT_DELAY_SECONDS
from podgroup_operator.scheduling.elastic.tree import build_tree
from tests.builders import node, pod, podgroup
from tests.unit.controllers.test_gang_scheduler_unit import Harness
from tests.unit.controllers.test_status_reconciler_unit import settle
from tests.waiting import until

GPU = "nvidia.com/gpu"
A, B = "team-a", "team-b"
KEY = (B, "b1")
EARLIER = "team-b/b1: quota team-b/b is below its min; reclaiming for quota team-b/b: a1"
"""The earlier leader's message on B's gang: it was evicting A's borrower."""
NEW_WORD = "no reclaim: taking back any gang"
"""What this leader says: the victim still terminates, and A is at its min."""

Body = dict[str, Any]


def quota(key: QuotaKey, min_: int, max_: int) -> QuotaSpec:
    return QuotaSpec(key=key, min={GPU: min_ * 1000}, max={GPU: max_ * 1000})


def gpu_pod(name: str, namespace: str, group: str, **kw: Any) -> Body:
    return pod(
        name,
        namespace,
        group=group,
        requests={GPU: 1, "cpu": "100m"},
        scheduler=c.SCHEDULER_NAME,
        **kw,
    )


class Restarted:
    """A new leader's scheduler and status reconciler over #683's cluster mid-reclaim."""

    def __init__(self) -> None:
        self.h = h = Harness(default_timeout_seconds=3600)
        (n0,) = h.fake.seed(node("n0", cpu=8, extended={GPU: 5}))
        h.scheduler.on_node("ADDED", n0)
        running = [gpu_pod(f"a4-{i}", A, "a4", node="n0", phase="Running") for i in range(4)]
        terminating = gpu_pod("a1-0", A, "a1", node="n0", phase="Running")
        terminating["metadata"].update(
            deletionTimestamp=h.clock().isoformat().replace("+00:00", "Z"),
            finalizers=["example.com/hold"],
        )
        for group, min_member in (("a4", 4), ("a1", 1)):
            self.group(A, group, min_member, {"phase": c.Phase.RUNNING})
        self.group(B, "b1", 1, {})
        for body in [*running, terminating, gpu_pod("b1-0", B, "b1")]:
            (stored,) = h.fake.seed(body)
            h.members.put(
                (stored["metadata"]["namespace"], body["metadata"]["labels"][c.LABEL_POD_GROUP]),
                stored,
            )
            h.scheduler.on_pod("ADDED", stored)
        tree = build_tree([quota((A, "a"), 4, 5), quota((B, "b"), 1, 5)], {GPU: 5000})
        h.scheduler.set_quota_tree(tree)
        self.earlier = self.reconciler_of_a_leader()
        self.refused_at = h.clock()
        self.reconciler = self.reconciler_of_a_leader()
        h.scheduler.publish = self.reconciler.set_verdict

    def reconciler_of_a_leader(self) -> StatusReconciler:
        h = self.h
        return StatusReconciler(
            h.kube,
            h.groups,  # type: ignore[arg-type]  # kopf.Index is read as a Mapping
            h.members,  # type: ignore[arg-type]
            record_key=SecretRecordKey(h.kube, "podgroup-operator"),
            settle=0,
            clock=h.clock,
            monotonic=h.clock.monotonic,  # the holds' timers run when the test moves time
        )

    async def earlier_leader_refused(self) -> None:
        """The earlier leader's reconciler wrote B's refusal; its successor starts 20 s on."""
        self.refused_at = self.h.clock()
        self.earlier.set_verdict(KEY, Verdict(False, c.Reason.WAITING_FOR_QUOTA, EARLIER))
        await self.earlier.reconcile(KEY)
        assert self.earlier.writes == 1
        stored = self.h.fake.get_object(PODGROUPS, KEY[1], KEY[0])
        assert stored is not None
        self.h.groups.put(KEY, stored)
        self.h.scheduler.on_group(KEY)
        self.h.clock.advance(20)

    def group(self, namespace: str, name: str, min_member: int, status: Body) -> None:
        (stored,) = self.h.fake.seed(
            {**podgroup(name, namespace, min_member=min_member), "status": status}
        )
        self.h.groups.put((namespace, name), stored)
        self.h.scheduler.on_group((namespace, name))

    def unschedulable(self) -> Body:
        stored = self.h.fake.get_object(PODGROUPS, KEY[1], KEY[0])
        assert stored is not None
        conditions = (stored.get("status") or {}).get("conditions") or []
        return next(x for x in conditions if x["type"] == c.ConditionType.UNSCHEDULABLE)


async def test_a_new_leaders_changed_refusal_is_written_once_the_count_delay_ends() -> None:
    world = Restarted()
    await world.earlier_leader_refused()
    assert world.unschedulable()["message"] == EARLIER
    reconciler = world.reconciler
    reconciler.start()
    try:
        await world.h.scheduler.cycle()
        verdict = reconciler.verdicts[KEY]
        assert (verdict.placed, verdict.reason) == (False, c.Reason.WAITING_FOR_QUOTA)
        assert NEW_WORD in verdict.message
        reconciler.touch(KEY)  # the informers' first list touches every group
        await settle()
        assert reconciler.writes == 0  # a change of its message only: held
        assert world.unschedulable()["message"] == EARLIER
        world.h.clock.advance(COUNT_DELAY_SECONDS - 0.01)
        await settle()
        assert reconciler.writes == 0
        world.h.clock.advance(0.01)
        await until(lambda: reconciler.writes == 1, "the new leader's verdict written", timeout=1.0)
    finally:
        await reconciler.stop()
    cond = world.unschedulable()
    assert (cond["status"], cond["reason"]) == ("True", c.Reason.WAITING_FOR_QUOTA)
    assert NEW_WORD in cond["message"]
    # The wait for placement goes on from the earlier leader's refusal.
    assert world.h.scheduler.queue.waiting[KEY].since == world.refused_at
