"""Which `gangGroup` entries the scheduler honours: a gang group never crosses a namespace on one
side's word.

A PodGroup's `spec.gangGroup` makes the groups it names start with it, so a decision about them
waits for it and its refusals. Within a namespace one tenant owns both sides. Across namespaces
an entry counts only when both sides consent: the named PodGroup's own list names the lister
back, or an admin trusts both namespaces to act as one (`run --gang-group-trust`). An entry that
does not count is never followed: the named group is decided as if unlisted, and the lister
waits, saying which entry lacks consent (docs/decisions/017-gang-groups-need-consent.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from podgroup_operator.api.keys import GroupKey, gang_group_key


@dataclass(frozen=True)
class GangGroupTrust:
    """Sets of namespaces whose PodGroups may name one another in `gangGroup` without the named
    group listing them back: one team working over several namespaces. Empty by default."""

    sets: tuple[frozenset[str], ...] = ()

    @classmethod
    def of(cls, raw: Iterable[str]) -> GangGroupTrust:
        """From `run --gang-group-trust` values, each a comma-separated list of namespaces."""
        sets = (frozenset(filter(None, (n.strip() for n in value.split(",")))) for value in raw)
        return cls(tuple(s for s in sets if len(s) > 1))

    def trusts(self, lister: str, listed: str) -> bool:
        """Whether a PodGroup of namespace `lister` may name one of `listed` on its own word."""
        return lister == listed or any(lister in s and listed in s for s in self.sets)


NO_TRUST = GangGroupTrust()
"""Only both sides' consent joins namespaces."""


def entry_of(key: GroupKey) -> str:
    """The `gangGroup` entry naming `key` (the inverse of `gang_group_key`)."""
    return f"{key[0]}/{key[1]}"


def consents(
    lister: GroupKey,
    listed: GroupKey,
    listed_list: Sequence[str] | None,
    trust: GangGroupTrust = NO_TRUST,
) -> bool:
    """Whether `lister`'s entry naming `listed` counts: the two share a namespace, or `trust`
    joins their namespaces, or `listed_list` (the named group's own `gangGroup`; None when that
    group does not exist) names `lister` back."""
    if trust.trusts(lister[0], listed[0]):
        return True
    return listed_list is not None and any(gang_group_key(e) == lister for e in listed_list)


def lacking_consent_message(lister: GroupKey, listed: str) -> str:
    """What a gang whose (joined) lists hold an entry without consent says while it waits."""
    return (
        f"gangGroup of PodGroup {entry_of(lister)} names {listed}, a PodGroup of another "
        f"namespace that does not list {entry_of(lister)} back: PodGroups of two namespaces "
        f"start together only when each lists the other (or an admin trusts both namespaces, "
        f"run --gang-group-trust); add {entry_of(lister)} to {listed}'s gangGroup, or remove "
        f"the entry"
    )


def unconsented_warnings(
    old: Mapping[str, Any] | None, body: Mapping[str, Any], trust: GangGroupTrust = NO_TRUST
) -> list[str]:
    """Admission warnings for a PodGroup created (`old` None) or whose spec changed: one for each
    `gangGroup` entry naming another namespace that `trust` does not join to its own, which
    counts only once the named group lists this one back."""
    spec = body.get("spec")
    if not isinstance(spec, Mapping) or (old is not None and old.get("spec") == spec):
        return []
    metadata = body.get("metadata") or {}
    namespace = str(metadata.get("namespace") or "")
    own = entry_of((namespace, str(metadata.get("name") or "")))
    entries = spec.get("gangGroup")
    warnings = []
    for index, entry in enumerate(entries if isinstance(entries, list) else ()):
        if not isinstance(entry, str) or "/" not in entry:
            continue  # the schema and `spec_errors` name it
        if not trust.trusts(namespace, gang_group_key(entry)[0]):
            warnings.append(
                f"spec.gangGroup[{index}]: {entry} is a PodGroup of another namespace; it counts "
                f"only once its own gangGroup lists {own}, and until then this gang waits"
            )
    return warnings
