"""The phase table as stories, shared by the phase tests and the idempotence tests.

Each story lists the members seen at each step and the phase the group must then be in. Letters
are explained in lifecycle_helpers (P pending, B bound, R running, S succeeded, F failed,
D being deleted, U pod phase Unknown).
"""

from __future__ import annotations

from podgroup_operator.constants import Phase

PENDING, RUNNING, UNKNOWN = Phase.PENDING, Phase.RUNNING, Phase.UNKNOWN
FINISHED, FAILED = Phase.FINISHED, Phase.FAILED

# (story name, minMember, [(members, expected phase), ...])
STORIES = [
    ("new group without members is pending", 3, [("", PENDING)]),
    ("pending to running", 3, [("PPP", PENDING), ("BBB", PENDING), ("RRR", RUNNING)]),
    ("partly running stays pending", 3, [("PPP", PENDING), ("RRP", PENDING)]),
    ("running to unknown via a failure", 3, [("RRR", RUNNING), ("RRF", UNKNOWN)]),
    ("running to unknown via a deletion", 3, [("RRR", RUNNING), ("RR", UNKNOWN)]),
    (
        "a terminating member keeps the gang running until its pod is gone",
        3,
        [("RRR", RUNNING), ("RRD", RUNNING), ("RR", UNKNOWN)],
    ),
    ("running to unknown via a lost node", 3, [("RRR", RUNNING), ("RRU", UNKNOWN)]),
    ("unknown stays while short", 3, [("RRR", RUNNING), ("RRF", UNKNOWN), ("RRFP", UNKNOWN)]),
    ("unknown back to running", 3, [("RRR", RUNNING), ("RRF", UNKNOWN), ("RRFR", RUNNING)]),
    ("unknown to pending when all gone", 3, [("RRR", RUNNING), ("RR", UNKNOWN), ("", PENDING)]),
    (
        "unknown to pending when nothing runs",
        3,
        [("RRR", RUNNING), ("RR", UNKNOWN), ("PPP", PENDING)],
    ),
    ("running to pending when all deleted at once", 3, [("RRR", RUNNING), ("", PENDING)]),
    ("running survives losing a spare member", 3, [("RRRR", RUNNING), ("RRR", RUNNING)]),
    ("running with a failed spare", 3, [("RRRR", RUNNING), ("RRRF", RUNNING)]),
    ("succeeded members count toward running", 3, [("RRR", RUNNING), ("SSR", RUNNING)]),
    ("first seen half done is running", 3, [("SSRP", RUNNING)]),
    ("running to finished", 3, [("RRR", RUNNING), ("SRR", RUNNING), ("SSS", FINISHED)]),
    ("finished despite a failed spare", 3, [("RRRR", RUNNING), ("SSSF", FINISHED)]),
    ("running to failed", 3, [("RRR", RUNNING), ("SSF", FAILED)]),
    ("unknown to failed", 3, [("RRR", RUNNING), ("RRF", UNKNOWN), ("SSF", FAILED)]),
    ("quick job: pending straight to finished", 3, [("PPP", PENDING), ("SSS", FINISHED)]),
    ("first seen finished", 2, [("SS", FINISHED)]),
    ("pending straight to failed", 2, [("PP", PENDING), ("FF", FAILED)]),
    ("an early failure is no verdict", 3, [("PPP", PENDING), ("FPP", PENDING)]),
    (
        "a replacement completes the gang",
        3,
        [("FPP", PENDING), ("FPPP", PENDING), ("FRRR", RUNNING)],
    ),
    (
        "fewer than minMember terminated is no verdict",
        3,
        [("RRR", RUNNING), ("RR", UNKNOWN), ("SS", PENDING), ("SSP", PENDING), ("SSS", FINISHED)],
    ),
    ("minMember above the member count", 5, [("RRR", PENDING), ("SSS", PENDING)]),
    ("minMember of one", 1, [("P", PENDING), ("R", RUNNING), ("S", FINISHED)]),
    (
        "terminating members count as running until gone",
        2,
        [("DD", RUNNING), ("D", UNKNOWN), ("", PENDING)],
    ),
    ("finished latches against new pods", 3, [("SSS", FINISHED), ("SSSPPP", FINISHED)]),
    ("finished latches against running pods", 3, [("SSS", FINISHED), ("RRR", FINISHED)]),
    ("finished latches when pods vanish", 3, [("SSS", FINISHED), ("", FINISHED)]),
    ("failed latches against a fresh gang", 2, [("FF", FAILED), ("RRRR", FAILED), ("SS", FAILED)]),
]
