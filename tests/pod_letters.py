"""Member pods written one letter each, so a test's gang reads as a story.

P pending (unbound), B pending but bound to a node, R running, S succeeded, F failed (crashed),
E evicted (Failed, reason Evicted), O rejected by the kubelet (Failed, reason OutOfcpu), D running
and being deleted, U pod phase Unknown (node unreachable), and `-` for a member that is gone.
Member i is named m<i> in every step, so `"RRF"` then `"RR-"` is the same gang losing m2. The
lifecycle tables (tests/unit/domain) and the restart stories (tests/unit/restart) share it.
"""

from __future__ import annotations

from typing import Any

from podgroup_operator.constants import PodPhase
from tests.builders import pod

GONE = "-"

LETTERS: dict[str, dict[str, Any]] = {
    "P": {"phase": PodPhase.PENDING},
    "B": {"phase": PodPhase.PENDING, "node": "node-a"},
    "R": {"phase": PodPhase.RUNNING, "node": "node-a"},
    "S": {"phase": PodPhase.SUCCEEDED, "node": "node-a"},
    "F": {"phase": PodPhase.FAILED, "node": "node-a"},
    "E": {"phase": PodPhase.FAILED, "node": "node-a"},
    "O": {"phase": PodPhase.FAILED, "node": "node-a"},
    "D": {"phase": PodPhase.RUNNING, "node": "node-a", "deleting": True},
    "U": {"phase": PodPhase.UNKNOWN, "node": "node-a"},
}
REASONS = {"E": "Evicted", "O": "OutOfcpu"}
"""status.reason of the letters that are Failed for a reason other than a crash."""


def member(
    index: int, letter: str, *, group: str = "gang", namespace: str = "default", **extra: Any
) -> dict[str, Any]:
    """Member m<index> in the state its letter names; `extra` goes to builders.pod."""
    body = pod(f"m{index}", namespace, group=group, **LETTERS[letter], **extra)
    if letter in REASONS:
        body["status"]["reason"] = REASONS[letter]
    return body


def members(
    letters: str, *, group: str = "gang", namespace: str = "default", **extra: Any
) -> list[dict[str, Any]]:
    """One member per letter (none for `-`), named by position."""
    return [
        member(index, letter, group=group, namespace=namespace, **extra)
        for index, letter in enumerate(letters)
        if letter != GONE
    ]
