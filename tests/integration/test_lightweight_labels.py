"""A lightweight gang with a bad label value gets one Warning Event and no PodGroup.

`pod-group.scheduling.sigs.k8s.io/min-available: "99999999999999999999"` once made the operator
try to create an invalid PodGroup every second, forever, with nothing said on the pod.
"""

from __future__ import annotations

from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import EVENTS, PODGROUPS, PODS, ApiError, KubeClient
from tests.kube_helpers import create_pod
from tests.waiting import wait_for


async def test_an_absurd_min_available_gets_one_warning_and_no_podgroup(
    kube: KubeClient, operator: Any, namespace: str
) -> None:
    bad = {c.LABEL_LIGHTWEIGHT_NAME: "bad", c.LABEL_LIGHTWEIGHT_MIN_AVAILABLE: "9" * 20}
    await create_pod(kube, namespace, "bad-0", labels=bad)

    async def warnings() -> list[dict[str, Any]]:
        found = await kube.list(EVENTS, namespace, field_selector="involvedObject.name=bad-0")
        return [e for e in found["items"] if e["reason"] == c.Reason.INVALID_GANG_LABELS]

    (warning,) = await wait_for(warnings, 15, "an InvalidGangLabels warning on the pod")
    assert warning["type"] == c.EventType.WARNING
    assert f"{c.LABEL_LIGHTWEIGHT_MIN_AVAILABLE}: {'9' * 20} is too large" in warning["message"]
    assert "must be at most 1000000" in warning["message"]

    # The bad pod is touched (a new reconcile of its gang, which must not warn again), then a
    # valid gang is declared: its PodGroup is the barrier showing the reconciler kept working.
    await kube.patch(PODS, "bad-0", {"metadata": {"labels": {"touch": "1"}}}, namespace)
    good = {c.LABEL_LIGHTWEIGHT_NAME: "good", c.LABEL_LIGHTWEIGHT_MIN_AVAILABLE: "2"}
    await create_pod(kube, namespace, "good-0", labels=good)

    async def good_group() -> bool:
        try:
            await kube.get(PODGROUPS, "good", namespace)
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        return True

    await wait_for(good_group, 15, "the valid lightweight gang's PodGroup")
    names = [g["metadata"]["name"] for g in (await kube.list(PODGROUPS, namespace))["items"]]
    assert names == ["good"]
    assert len(await warnings()) == 1
    assert operator.process.poll() is None, operator.log_tail()
