"""Which pods belong to which gang: the one module that knows every membership key.

Several ecosystems name a pod's gang differently (scheduler-plugins labels, Koordinator's label
and annotations, Volcano annotations, coscheduling's lightweight labels, Kueue's plain-pod
groups). If each handler read keys on its own, two of them would sooner or later disagree about
a pod; so every question "whose member is this pod?" goes through the functions below, and
selectors are built from `membership_keys()`.

Rules, in the words of the user documentation:

* A pod only ever belongs to a group in its own namespace.
* The keys are read in this order of precedence, and the first one with a non-empty value wins:
  0. the pod field `spec.schedulingGroup.podGroupName` (the native PodGroup, `scheduling.k8s.io`;
     API servers older than the field drop it, so it is only ever seen where it is served),
  1. label `scheduling.x-k8s.io/pod-group` (scheduler-plugins),
  2. label `pod-group.scheduling.sigs.k8s.io` (Koordinator's primary key, no `/name`),
  3. annotation `scheduling.k8s.io/group-name` (Volcano, kube-batch),
  4. label `pod-group.scheduling.sigs.k8s.io/name` (coscheduling's lightweight gang),
  5. annotation `gang.scheduling.koordinator.sh/name` (Koordinator gang),
  6. label `kueue.x-k8s.io/pod-group-name` (Kueue plain-pod group).
  Keys naming a user-written PodGroup (0 to 3) come before the lightweight ones (4 to 6), which
  make a PodGroup of their own; the API's own field first (the API server validates it and it
  cannot change once set), then labels before annotations: an explicit PodGroup is what the
  pod's author meant. `membership_conflict()` reports a disagreement so
  the caller can warn (naming both keys and groups) instead of silently picking one.
* An empty value counts as absent.
* A lightweight gang (4 to 6) is a group without a user-written PodGroup object: the operator
  creates one with the gang's name. `lightweight_gang_of()` says what to create, and only when a
  lightweight key is the one that decides membership. Its minimum is the coscheduling label
  `min-available`, Koordinator's annotation `min-available`, or Kueue's annotation
  `pod-group-total-count` (a Kueue group is admitted whole, so all its pods are its minimum).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from podgroup_operator import constants as c
from podgroup_operator.api.keys import GroupKey
from podgroup_operator.api.limits import MAX_NAME_LENGTH
from podgroup_operator.api.names import is_dns_subdomain

Pod = Mapping[str, Any]
"""A raw pod as the apiserver sends it (a JSON object)."""


@dataclass(frozen=True)
class _MembershipKey:
    name: str
    is_label: bool
    """Labels can be used in label selectors; annotations cannot."""
    lightweight: bool
    """True for keys of gangs that have no user-written PodGroup object."""
    is_field: bool = False
    """The native pod field `spec.schedulingGroup.podGroupName` (`name` is its path)."""

    @property
    def kind(self) -> str:
        """How a message names it: label, annotation or field."""
        return "field" if self.is_field else "label" if self.is_label else "annotation"


_KEYS_BY_PRECEDENCE: tuple[_MembershipKey, ...] = (
    _MembershipKey(c.FIELD_SCHEDULING_GROUP, is_label=False, lightweight=False, is_field=True),
    _MembershipKey(c.LABEL_POD_GROUP, is_label=True, lightweight=False),
    _MembershipKey(c.LABEL_KOORD_POD_GROUP, is_label=True, lightweight=False),
    _MembershipKey(c.ANNOTATION_GROUP_NAME, is_label=False, lightweight=False),
    _MembershipKey(c.LABEL_LIGHTWEIGHT_NAME, is_label=True, lightweight=True),
    _MembershipKey(c.ANNOTATION_KOORD_NAME, is_label=False, lightweight=True),
    _MembershipKey(c.LABEL_KUEUE_POD_GROUP_NAME, is_label=True, lightweight=True),
)

# The keys that travel with each lightweight name key: where its minimum comes from, and the
# other settings of the same family, handed back untouched as `LightweightGang.extra`. Each is
# (key, is_label): Kueue names its group by a label and counts it by an annotation.
_LIGHTWEIGHT_MIN_AVAILABLE_KEY = {
    c.LABEL_LIGHTWEIGHT_NAME: c.LABEL_LIGHTWEIGHT_MIN_AVAILABLE,
    c.ANNOTATION_KOORD_NAME: c.ANNOTATION_KOORD_MIN_AVAILABLE,
    c.LABEL_KUEUE_POD_GROUP_NAME: c.ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT,
}
_LIGHTWEIGHT_EXTRA_KEYS: dict[str, tuple[tuple[str, bool], ...]] = {
    c.LABEL_LIGHTWEIGHT_NAME: ((c.LABEL_LIGHTWEIGHT_MIN_AVAILABLE, True),),
    c.ANNOTATION_KOORD_NAME: (
        (c.ANNOTATION_KOORD_MIN_AVAILABLE, False),
        (c.ANNOTATION_KOORD_WAITING_TIME, False),
        (c.ANNOTATION_KOORD_MODE, False),
        (c.ANNOTATION_KOORD_GROUPS, False),
    ),
    c.LABEL_KUEUE_POD_GROUP_NAME: ((c.ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT, False),),
}


def membership_keys() -> tuple[str, ...]:
    """Every key that can make a pod a member, labels and annotations, highest precedence first."""
    return tuple(key.name for key in _KEYS_BY_PRECEDENCE)


def declares_membership(pod: Pod) -> bool:
    """True when any membership key has a non-empty value, whatever the pod's namespace.

    Admission sees pods before the apiserver fills in `metadata.namespace`, so this asks only
    about the keys, not about a group key.
    """
    return bool(_present(pod))


def routed_scheduler(pod: Pod, scheduler_names: Sequence[str]) -> str | None:
    """The schedulerName the routing webhook gives a new pod, or None to leave it alone.

    Only a member (a membership key) that names no scheduler or the default one is routed, to
    the first of `scheduler_names`: a pod naming any other scheduler, ours included, was
    addressed on purpose.
    """
    scheduler = (pod.get("spec") or {}).get("schedulerName")
    if not scheduler_names or not declares_membership(pod):
        return None
    if scheduler in (None, "", c.DEFAULT_SCHEDULER_NAME):
        return scheduler_names[0]
    return None


def _metadata(pod: Pod) -> Mapping[str, Any]:
    return pod.get("metadata") or {}


def _value(pod: Pod, key: _MembershipKey) -> str | None:
    """The key's non-empty value on the pod, or None."""
    if key.is_field:
        group = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
        return group if isinstance(group, str) and group else None
    metadata = _metadata(pod)
    source = metadata.get("labels" if key.is_label else "annotations") or {}
    value = source.get(key.name)
    return value if isinstance(value, str) and value else None


def _present(pod: Pod) -> list[tuple[_MembershipKey, str]]:
    """The membership keys set on the pod with their values, highest precedence first."""
    found = []
    for key in _KEYS_BY_PRECEDENCE:
        value = _value(pod, key)
        if value is not None:
            found.append((key, value))
    return found


def group_name_of(pod: Pod) -> str | None:
    """The name of the pod's group by the precedence rules, or None when it names none."""
    present = _present(pod)
    return present[0][1] if present else None


def group_key_of(pod: Pod) -> GroupKey | None:
    """(namespace, name) of the pod's group, always in the pod's own namespace; None if none.

    A pod without `metadata.namespace` belongs to no group: guessing a namespace could count it
    in a stranger's gang.
    """
    name = group_name_of(pod)
    namespace = _metadata(pod).get("namespace")
    if name is None or not namespace:
        return None
    return (namespace, name)


SHOWN_NAME = 60
"""Characters of a group name quoted in a message (an annotation may hold 256 kB)."""


def missing_group_message(pod: Pod) -> str | None:
    """The Warning for a pod whose group does not exist, naming the key that names it and the
    fix; None for a pod that names no group.

    A name no PodGroup can have (capitals, '_', over 253 characters: a label value or an
    annotation may hold them) is said to be one: "create it" could not help there.
    """
    present = _present(pod)
    if not present:
        return None
    found, name = present[0]
    key = f"{found.kind} {found.name}"
    if not is_dns_subdomain(name):
        shown = repr(name if len(name) <= SHOWN_NAME else name[:SHOWN_NAME] + "...")
        return (
            f"{key}: {shown} is not a valid PodGroup name, so no PodGroup can have it; use at "
            f"most {MAX_NAME_LENGTH} lowercase letters, digits, '-' and '.', starting and ending "
            "with a letter or digit. The pod is not counted in any gang."
        )
    namespace = _metadata(pod).get("namespace")
    return (
        f"PodGroup {name} does not exist in namespace {namespace}; create it or fix the pod's "
        f"{key}. The pod is not counted."
    )


@dataclass(frozen=True)
class MembershipConflict:
    """A pod whose membership keys name different groups; the first key (by precedence) won."""

    pod: GroupKey
    """(namespace, name) of the pod itself."""
    key: str
    """The key that decided membership."""
    group: str
    """The group it names, the one the pod is counted in."""
    ignored: tuple[tuple[str, str], ...]
    """(key, group name) of every other key that names a different group."""

    @property
    def message(self) -> str:
        """A sentence for a Warning Event on the pod."""
        others = ", ".join(f"{name!r} by {key}" for key, name in self.ignored)
        return (
            f"pod names PodGroup {self.group!r} by {self.key} but also {others}; "
            f"counted in {self.group!r} because {self.key} takes precedence"
        )


def membership_conflict(pod: Pod) -> MembershipConflict | None:
    """The disagreement between the pod's membership keys, or None when they agree (or are few).

    Keys repeating the winning name are not a conflict: setting both the label and the
    annotation to the same group is common and harmless.
    """
    present = _present(pod)
    if not present:
        return None
    winner, group = present[0]
    ignored = tuple((key.name, value) for key, value in present[1:] if value != group)
    if not ignored:
        return None
    metadata = _metadata(pod)
    return MembershipConflict(
        pod=(metadata.get("namespace", ""), metadata.get("name", "")),
        key=winner.name,
        group=group,
        ignored=ignored,
    )


class LightweightGang(NamedTuple):
    """A gang declared on its pods alone, from which the operator creates a PodGroup."""

    name: str
    """The gang's name, which is also the name of the PodGroup to create."""
    min_available: int | None
    """The gang's minimum (the PodGroup's minMember); None when missing or not a positive
    integer, so the caller decides between a default and a warning."""
    extra: Mapping[str, str]
    """The other keys of the same family found on the pod (min-available included, raw), e.g.
    Koordinator's waiting-time, mode and groups, for the caller to translate."""


def lightweight_gang_of(pod: Pod) -> LightweightGang | None:
    """The lightweight gang the pod declares, or None.

    None also when a PodGroup key (label or annotation) decides membership: such a pod belongs
    to a user-written PodGroup, and creating another object for it would be wrong.
    """
    present = _present(pod)
    if not present or not present[0][0].lightweight:
        return None
    key, name = present[0]
    metadata = _metadata(pod)
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    extra = {}
    for extra_key, is_label in _LIGHTWEIGHT_EXTRA_KEYS[key.name]:
        value = (labels if is_label else annotations).get(extra_key)
        if isinstance(value, str):
            extra[extra_key] = value
    return LightweightGang(
        name=name,
        min_available=_positive_int(extra.get(_LIGHTWEIGHT_MIN_AVAILABLE_KEY[key.name])),
        extra=extra,
    )


def lightweight_keys_of(pod: Pod) -> tuple[str, str] | None:
    """(the key naming the pod's lightweight gang, the key of its minimum), for messages that
    name the label or annotation to fix; None when no lightweight key decides membership."""
    present = _present(pod)
    if not present or not present[0][0].lightweight:
        return None
    key = present[0][0].name
    return key, _LIGHTWEIGHT_MIN_AVAILABLE_KEY[key]


def _positive_int(text: str | None) -> int | None:
    digits = (text or "").strip()
    # An annotation may hold 256 kB of digits; int() refuses more than 4,300 (ValueError).
    if not (digits.isascii() and digits.isdecimal()) or len(digits) > 64:
        return None
    number = int(digits)
    return number if number > 0 else None
