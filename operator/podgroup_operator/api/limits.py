"""Upper bounds of every number a PodGroup (or a lightweight gang's labels) may carry.

Without them one object could break the operator for everyone: `scheduleTimeoutSeconds:
300000000000` made every scheduling cycle raise OverflowError (a datetime past year 9999), a huge
`policy.maxBackoffSeconds` froze its group's status with a traceback per second, and a 1,000-entry
`gangGroup` wrote megabytes of log per cycle. The CRD schema carries these bounds (so the
apiserver refuses such objects even without our webhook), the models enforce them with a message
naming the limit, and the pure code clamps to them again, for objects stored before the bounds.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal

MAX_SECONDS = 31_536_000
"""One year: the longest timeout or backoff a PodGroup may ask for. A gang that waits longer
than a year waits forever in practice, and every datetime + this stays far below year 9999."""

MAX_MIN_MEMBER = 1_000_000
"""The largest gang: no cluster can hold a million pods at once (Kubernetes' tested limit is
150,000 pods per cluster, and an etcd of the recommended 8 GB holds about a million of the
smallest pod objects), so a larger minMember can never be met and is a typo. It also keeps
minMember far inside the int32 of scheduler-plugins' PodGroup API, which we stay compatible with."""

MAX_RESTARTS = 1_000
"""The most whole-gang restarts a policy may allow. Each restart deletes and recreates every
member; a gang that broke a thousand times is a crash loop, not bad luck, and should fail."""

MAX_GANG_GROUP = 64
"""The most PodGroups a `gangGroup` may name. All of them are placed in one decision on one
snapshot and named in its refusal message; larger co-scheduled sets are better one PodGroup."""

MAX_SUB_GROUPS = 64
"""Sub-groups one PodGroup lists (`spec.subGroups`): each is a placement decision of its own."""
MAX_SUB_GROUP_DEPTH = 4
"""Levels of the sub-group tree, as native Kubernetes' CompositePodGroup allows."""
MAX_MATCH_LABEL_KEYS = 8
"""Pod label keys one sub-group's `matchLabelKeys` lists."""
MAX_RESOURCE_NAMES = 64
"""The most resource names a `minResources` or `totalResources` may list. A node offers cpu,
memory, ephemeral-storage, pods and a few extended resources; a real list has a handful. Without
a bound one PodGroup with thousands of names passed the schema, and every refusal it got named
each of them three times in its status condition."""

MAX_NAMESPACE_LENGTH = 63
"""A namespace name is a DNS label."""

MAX_NAME_LENGTH = 253
"""A PodGroup name is a DNS subdomain."""

MAX_GANG_GROUP_ENTRY = MAX_NAMESPACE_LENGTH + 1 + MAX_NAME_LENGTH
"""`namespace/name`: a namespace is a DNS label (63), a PodGroup name a DNS subdomain (253)."""

MAX_TOPOLOGY_LEVELS = 16
"""The most levels a Topology may have, as Kueue's: a fabric deeper than 16 tiers is not one a
data centre has, and every gang with a constraint may be tried at each level."""

MAX_LABEL_NAME_LENGTH = 63
"""The name part of a label key (after the optional `prefix/`), and a label value."""

MAX_LABEL_KEY_LENGTH = MAX_NAME_LENGTH + 1 + MAX_LABEL_NAME_LENGTH
"""`prefix/name`: the prefix is a DNS subdomain (253), the name at most 63 characters."""

MAX_MILLI = 2**63 - 1
"""The largest amount in milli-units: Kubernetes computes quantities as int64 milli-values
(`MilliValue`), so nothing larger can ever be requested, offered or reserved."""

MAX_QUANTITY = Decimal(MAX_MILLI).scaleb(-3)
"""MAX_MILLI in whole units (9223372036854775.807, about 8 PiB of memory): the largest
quantity `minResources` and `totalResources` accept."""

MAX_QUANTITY_INT = int(MAX_QUANTITY)
"""The same bound as an integer."""

MAX_QUANTITY_SCHEMA = MAX_QUANTITY_INT - MAX_QUANTITY_INT % 2
"""The CRD schema's `maximum` for the integer form: the largest integer up to MAX_QUANTITY_INT
that a float64 holds exactly (between 2**53 and 2**54 those are the even ones). The API server
stores schema numbers as float64, so an odd bound comes back one higher, and a client that
compares the stored CRD with the one it applied (Helm's server-side apply) sees a change."""

SUMMARY_NAMES = 5
"""Names listed in a message before the rest are only counted (see `summarize`)."""


def clamp_seconds(seconds: float) -> float:
    """`seconds` limited to [0, MAX_SECONDS], so a timedelta built from it can be added to any
    real datetime without OverflowError, even for an object stored before the CRD had bounds."""
    return min(max(seconds, 0), MAX_SECONDS)


def summarize(names: Iterable[str], limit: int = SUMMARY_NAMES) -> str:
    """`a, b, c and 997 more`: a list of names bounded for messages and logs."""
    items = list(names)
    if len(items) <= limit:
        return ", ".join(items)
    return f"{', '.join(items[:limit])} and {len(items) - limit} more"
