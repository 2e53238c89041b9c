"""One declaration per placement rule: what it reads of a pod, and what can lift it.

Each filter and score of placement is declared here once (`RULES`), as kube-scheduler's plugins
declare themselves in its registry and `EventsToRegister`: its name (the upstream plugin's,
where there is one), the exclusions it yields (`filters.Exclusion`), the pod fields it reads,
whether its verdict stays as members are placed (`Lasting`), the cluster events after which a
pod it refused may fit (`Event`), and what it adds to a decision's cost (`Cost`).

Whether a pod's placement depends on other pods is read from these declarations
(`depends_on_pods`). Three lists elsewhere name pod fields by hand, each for speed on its own
path; the unit tests (tests/unit/scheduling/test_sched_registry.py) check each against these
declarations, field by field:

- `adapters/slim.py`: the informer keeps every field a rule reads;
- `scheduling/gang.py`, `decision_cost`: counts a field exactly when its rule declares a cost;
- `scheduling/shapes.py`, `raw_shape_key`: covers every field read into the member's shape
  (`Rule.reads`), so that two pods that differ in one never share a shape.

The scheduler makes a gang it refused due again after each event a rule whose field its members
set declares can lift it (tests/unit/controllers/test_scheduler_lift_events_unit.py).

A field path is dotted from the pod's root; `[]` stands for each item of a list
(`spec.containers[].ports`).

Beside the rules, the registry lists the placement framework's other steps
(scheduling/framework.py): the placement generators (`GENERATORS`), where a gang or a sub-group
may go, and the member steps (`MEMBER_STEPS`), how a gang's members are placed in a candidate
when they are not one flat set. A new kind of candidate set is a generator class and a line
here; the gang's placement, the sub-group search and preemption ask `generator_for`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from podgroup_operator.scheduling.filters import Exclusion
from podgroup_operator.scheduling.framework import MemberStep, PlacementGenerator
from podgroup_operator.scheduling.gang import GangRequest
from podgroup_operator.scheduling.generators import TopologyDomains, WholeCluster
from podgroup_operator.scheduling.podinfo import PREFERRED, REQUIRED
from podgroup_operator.scheduling.subgroup_search import SubGroupStep
from podgroup_operator.scheduling.volumes import DISK_SOURCES


class Kind(StrEnum):
    """What a rule does with a node."""

    FILTER = "filter"
    """Keeps the pod off the node (an `Exclusion`)."""
    SCORE = "score"
    """Orders the nodes that pass the filters."""


class Lasting(StrEnum):
    """How a rule's verdict on a node moves as the members of a gang are placed."""

    STATIC = "static"
    """It depends on the pod and the node alone: the same for every member, however many are
    placed, until the node changes."""
    GROWS = "grows"
    """It depends on the pods on the node too, and a rejection stays as members are placed
    (they only take room, ports, volumes, domains)."""
    EITHER = "either"
    """It depends on other pods' labels and places, and may change either way as members are
    placed."""


class Event(StrEnum):
    """A change in the cluster after which a pod a rule refused may fit: kube-scheduler's
    `ClusterEvent` (resource/action)."""

    NODE_ADDED = "Node/Add"
    NODE_LABELS = "Node/UpdateNodeLabel"
    NODE_TAINTS = "Node/UpdateNodeTaint"
    NODE_ALLOCATABLE = "Node/UpdateNodeAllocatable"
    NODE_CONDITION = "Node/UpdateNodeCondition"
    NODE_UNSCHEDULABLE = "Node/UpdateNodeSpecUnschedulable"
    POD_DELETED = "Pod/Delete"
    """A pod left its node: deleted, or finished."""
    POD_BOUND = "Pod/Add"
    """A pod was bound to a node, by anyone."""
    POD_LABELS = "Pod/UpdatePodLabel"
    """A bound pod's labels changed."""
    PV_ADDED = "PersistentVolume/Add"
    PV_UPDATED = "PersistentVolume/Update"
    PVC_ADDED = "PersistentVolumeClaim/Add"
    PVC_UPDATED = "PersistentVolumeClaim/Update"
    STORAGE_CLASS_ADDED = "StorageClass/Add"
    CSI_NODE = "CSINode/Add|Update"


POD_EVENTS = frozenset({Event.POD_BOUND, Event.POD_LABELS})
"""What other pods' placement does: a filter these lift depends on other pods
(`Rule.depends_on_pods`)."""


class Cost(StrEnum):
    """What a rule adds to the cost of a decision (`gang.decision_cost`)."""

    NONE = "none"
    """Nothing that grows with the cluster beyond the node classes."""
    NODES = "nodes"
    """A walk of the nodes for each of its items (host ports, node-affinity expressions)."""
    PLACED_PODS = "placed pods"
    """A walk of the placed pods for each of its terms (pod affinity, spread)."""


@dataclass(frozen=True)
class Rule:
    """One placement rule's declaration (see the module docstring)."""

    name: str
    kind: Kind
    exclusions: frozenset[Exclusion]
    """The reasons it refuses a node; none for a score."""
    reads: tuple[str, ...]
    """The pod fields parsed into the member's shape (`shapes.member_shape`), shared by the
    pods of a shape."""
    lasting: Lasting
    lifted_by: frozenset[Event]
    """The events after which a pod it refused may fit; none for a score."""
    reads_each: tuple[str, ...] = ()
    """The pod fields read from each member itself, never through its shape."""
    cost: Cost = Cost.NONE

    @property
    def depends_on_pods(self) -> bool:
        """A filter that other pods being placed, or relabelled, can lift (`POD_EVENTS`)."""
        return self.kind is Kind.FILTER and not self.lifted_by.isdisjoint(POD_EVENTS)

    @property
    def fields(self) -> tuple[str, ...]:
        """Every pod field it reads."""
        return (*self.reads, *self.reads_each)


_NODE_AFFINITY = "spec.affinity.nodeAffinity"
_POD_AFFINITY = "spec.affinity.podAffinity"
_POD_ANTI_AFFINITY = "spec.affinity.podAntiAffinity"
_CLAIM_VOLUMES = ("spec.volumes[].persistentVolumeClaim", "spec.volumes[].ephemeral")
_DISK_VOLUMES = tuple(f"spec.volumes[].{source}" for source in sorted(DISK_SOURCES))
_PER_CLAIM = (
    "spec.volumes[].persistentVolumeClaim.claimName",
    "spec.volumes[].name",
    "metadata.name",
)
"""A claim's name: given, or the pod's and the volume's for a generic ephemeral volume."""
_NODE_CHANGES = frozenset({Event.NODE_ADDED, Event.NODE_LABELS})
_VOLUME_CHANGES = frozenset(
    {Event.PV_ADDED, Event.PV_UPDATED, Event.PVC_ADDED, Event.PVC_UPDATED, Event.NODE_ADDED}
)

RULES: tuple[Rule, ...] = (
    # --- static filters, in kube-scheduler's order (`filters.check_node`) ----------------------
    Rule(
        name="NodeReady",
        kind=Kind.FILTER,
        exclusions=frozenset({Exclusion.NOT_READY}),
        reads=(),
        lasting=Lasting.STATIC,
        lifted_by=frozenset({Event.NODE_ADDED, Event.NODE_CONDITION}),
    ),
    Rule(
        name="NodeUnschedulable",
        kind=Kind.FILTER,
        exclusions=frozenset({Exclusion.UNSCHEDULABLE}),
        reads=("spec.tolerations",),
        lasting=Lasting.STATIC,
        lifted_by=frozenset({Event.NODE_ADDED, Event.NODE_UNSCHEDULABLE}),
    ),
    Rule(
        name="TaintToleration",
        kind=Kind.FILTER,
        exclusions=frozenset({Exclusion.TAINT}),
        reads=("spec.tolerations",),
        lasting=Lasting.STATIC,
        lifted_by=frozenset({Event.NODE_ADDED, Event.NODE_TAINTS}),
    ),
    Rule(
        name="NodeSelector",
        kind=Kind.FILTER,
        exclusions=frozenset({Exclusion.NODE_SELECTOR}),
        reads=("spec.nodeSelector",),
        lasting=Lasting.STATIC,
        lifted_by=_NODE_CHANGES,
    ),
    Rule(
        name="NodeAffinity",
        kind=Kind.FILTER,
        exclusions=frozenset({Exclusion.NODE_AFFINITY}),
        reads=(f"{_NODE_AFFINITY}.{REQUIRED}",),
        lasting=Lasting.STATIC,
        lifted_by=_NODE_CHANGES,
        cost=Cost.NODES,
    ),
    # --- filters that read the pods on the node ------------------------------------------------
    Rule(
        name="NodeResourcesFit",
        kind=Kind.FILTER,
        exclusions=frozenset({Exclusion.INSUFFICIENT}),
        reads=(
            "spec.containers[].resources",
            "spec.initContainers[].resources",
            "spec.initContainers[].restartPolicy",
            "spec.overhead",
        ),
        lasting=Lasting.GROWS,
        lifted_by=frozenset({Event.NODE_ADDED, Event.NODE_ALLOCATABLE, Event.POD_DELETED}),
    ),
    Rule(
        name="NodePorts",
        kind=Kind.FILTER,
        exclusions=frozenset({Exclusion.PORTS}),
        reads=(
            "spec.containers[].ports",
            "spec.initContainers[].ports",
            "spec.initContainers[].restartPolicy",
        ),
        lasting=Lasting.GROWS,
        lifted_by=frozenset({Event.NODE_ADDED, Event.POD_DELETED}),
        cost=Cost.NODES,
    ),
    Rule(
        name="InterPodAffinity",
        kind=Kind.FILTER,
        exclusions=frozenset({Exclusion.POD_AFFINITY, Exclusion.POD_ANTI_AFFINITY}),
        reads=(
            f"{_POD_AFFINITY}.{REQUIRED}",
            f"{_POD_ANTI_AFFINITY}.{REQUIRED}",
            "metadata.namespace",  # the terms' namespace when they name none
        ),
        reads_each=("metadata.labels",),  # a first pod matching its own terms
        lasting=Lasting.EITHER,
        lifted_by=_NODE_CHANGES | {Event.POD_BOUND, Event.POD_LABELS, Event.POD_DELETED},
        cost=Cost.PLACED_PODS,
    ),
    Rule(
        name="InterPodAffinity/existing",
        kind=Kind.FILTER,
        exclusions=frozenset({Exclusion.EXISTING_ANTI_AFFINITY}),
        reads=(),
        reads_each=("metadata.labels", "metadata.namespace"),
        lasting=Lasting.EITHER,
        lifted_by=_NODE_CHANGES | {Event.POD_DELETED},
    ),
    Rule(
        name="PodTopologySpread",
        kind=Kind.FILTER,
        exclusions=frozenset({Exclusion.SPREAD, Exclusion.SPREAD_LABEL}),
        reads=(
            "spec.topologySpreadConstraints",
            "metadata.labels",  # matchLabelKeys
            "metadata.namespace",
        ),
        lasting=Lasting.EITHER,
        lifted_by=_NODE_CHANGES | {Event.POD_BOUND, Event.POD_LABELS, Event.POD_DELETED},
        cost=Cost.PLACED_PODS,
    ),
    # --- volumes (scheduling/volumes.py): the shape knows each volume's kind, each member its own
    Rule(
        name="VolumeBinding",
        kind=Kind.FILTER,
        exclusions=frozenset({Exclusion.VOLUME_BINDING, Exclusion.VOLUME_NODE_AFFINITY}),
        reads=_CLAIM_VOLUMES,
        reads_each=_PER_CLAIM,
        lasting=Lasting.GROWS,
        lifted_by=_VOLUME_CHANGES | {Event.NODE_LABELS, Event.STORAGE_CLASS_ADDED},
    ),
    Rule(
        name="VolumeZone",
        kind=Kind.FILTER,
        exclusions=frozenset({Exclusion.VOLUME_ZONE}),
        reads=_CLAIM_VOLUMES,
        reads_each=_PER_CLAIM,
        lasting=Lasting.STATIC,
        lifted_by=_VOLUME_CHANGES | {Event.NODE_LABELS},
    ),
    Rule(
        name="NodeVolumeLimits",
        kind=Kind.FILTER,
        exclusions=frozenset({Exclusion.VOLUME_LIMITS}),
        reads=(*_CLAIM_VOLUMES, *_DISK_VOLUMES),
        reads_each=_PER_CLAIM,
        lasting=Lasting.GROWS,
        lifted_by=_VOLUME_CHANGES | {Event.POD_DELETED, Event.CSI_NODE},
    ),
    Rule(
        name="VolumeRestrictions",
        kind=Kind.FILTER,
        exclusions=frozenset({Exclusion.DISK_CONFLICT}),
        reads=_DISK_VOLUMES,
        lasting=Lasting.GROWS,
        lifted_by=frozenset({Event.NODE_ADDED, Event.POD_DELETED}),
    ),
    # --- scores (scheduling/scores.py, interpod.py) ----------------------------------------------
    Rule(
        name="NodeAffinity/preferred",
        kind=Kind.SCORE,
        exclusions=frozenset(),
        reads=(f"{_NODE_AFFINITY}.{PREFERRED}",),
        lasting=Lasting.STATIC,
        lifted_by=frozenset(),
        cost=Cost.NODES,
    ),
    Rule(
        name="TaintToleration/preferred",
        kind=Kind.SCORE,
        exclusions=frozenset(),
        reads=("spec.tolerations",),
        lasting=Lasting.STATIC,
        lifted_by=frozenset(),
    ),
    Rule(
        name="InterPodAffinity/preferred",
        kind=Kind.SCORE,
        exclusions=frozenset(),
        reads=(f"{_POD_AFFINITY}.{PREFERRED}", f"{_POD_ANTI_AFFINITY}.{PREFERRED}"),
        lasting=Lasting.EITHER,
        lifted_by=frozenset(),
        cost=Cost.PLACED_PODS,
    ),
    Rule(
        name="ImageLocality",
        kind=Kind.SCORE,
        exclusions=frozenset(),
        reads=("spec.containers[].image",),
        lasting=Lasting.STATIC,
        lifted_by=frozenset(),
    ),
)


def rule_of(exclusion: Exclusion) -> Rule:
    """The filter that yields `exclusion`."""
    for rule in RULES:
        if exclusion in rule.exclusions:
            return rule
    raise KeyError(f"no rule declares {exclusion!r}")


def read_fields() -> Iterator[tuple[Rule, str]]:
    """Every (rule, pod field) pair the rules declare, in declaration order."""
    for rule in RULES:
        for path in rule.fields:
            yield rule, path


POD_DEPENDENT_FIELDS: tuple[str, ...] = tuple(
    dict.fromkeys(
        path
        for rule in RULES
        if rule.depends_on_pods
        for path in rule.reads
        if path.startswith("spec.")
    )
)
"""The fields through which a pod asks for a filter that depends on other pods (required pod
affinity and anti-affinity, topology spread). The `metadata` fields those filters read are on
every pod and ask for nothing by themselves."""
assert POD_DEPENDENT_FIELDS and not any("[]" in path for path in POD_DEPENDENT_FIELDS)


def depends_on_pods(pod: Mapping[str, Any]) -> bool:
    """Does where `pod` may go depend on other pods' labels and places: does it set a field of a
    filter that a pod bound elsewhere, or a bound pod's new labels, can lift
    (`Rule.depends_on_pods`)? The one definition; the scheduler's queue keeps such gangs in
    `pod_dependent`."""
    for path in POD_DEPENDENT_FIELDS:
        value: Any = pod
        for part in path.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        if value:
            return True
    return False


# --- the placement framework's generators and member steps ---------------------------------------
GENERATORS: tuple[PlacementGenerator, ...] = (TopologyDomains(), WholeCluster())
"""The placement generators, most specific first: the first that applies to a gang (or to a
sub-group, inside its parent's domain) is used; the last applies to every gang."""

MEMBER_STEPS: tuple[MemberStep, ...] = (SubGroupStep(),)
"""The member steps: the first that applies to a gang places its members in each candidate;
with none, the filters place them as one set."""


def generator_for(gang: GangRequest) -> PlacementGenerator:
    """The generator of `gang`'s candidates, read from `GENERATORS` at each call."""
    for generator in GENERATORS:
        if generator.applies(gang):
            return generator
    raise LookupError(
        f"{gang.label}: no placement generator applies; end GENERATORS with one that always does"
    )


def member_step_for(gang: GangRequest) -> MemberStep | None:
    """The member step of `gang`, read from `MEMBER_STEPS` at each call; None: the filters'."""
    for step in MEMBER_STEPS:
        if step.applies(gang):
            return step
    return None
