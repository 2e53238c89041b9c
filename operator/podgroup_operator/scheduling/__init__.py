"""The pure gang-scheduling core: requests, snapshot, filters, scores, queue, placement, preemption.

Nothing here talks to the API server or reads a clock, so every decision can be replayed in a
unit test or a benchmark from raw Node and Pod dicts. How the live scheduler uses it:

- Keep one `Snapshot(gang_of=domain.membership.group_key_of)` current from watch events:
  `add_node` / `remove_node`, `add_pod` / `remove_pod` (every pod holding a node, anyone's), and
  `set_volume(persistent_volume(raw))` / `remove_volume(name)` for PersistentVolumes.
- Build a `GangRequest` per waiting PodGroup. Besides the members, pass `priority` (the members'
  `spec.priority`), `preemption_policy`, and `claims`: every PVC the members mount, resolved with
  its StorageClass (`volume_claim(raw_pvc, raw_storage_class)`), keyed by (namespace, name).
- `place_group` / `place_gang_group` answer with a placement (left assumed; a pod whose bind
  fails is taken out alone with `remove_pod`, `undo` releases a placement bound not at all) or a
  `Refusal`. Before binding a pod, carry out its `Binding.volumes` (bind the chosen
  PV to the claim, or annotate the claim with `volume.kubernetes.io/selected-node`).
- When a gang is refused for room, `plan_preemption(gang, snapshot, budgets)` (budgets from
  `disruption_budget(raw_pdb)`) returns the whole gangs to evict and the nominated nodes, or a
  `PreemptionRefusal`. It leaves the snapshot unchanged.
"""

from podgroup_operator.scheduling.gang import (
    Binding,
    GangGroupPlacement,
    GangRequest,
    Placement,
    PreemptionPolicy,
    Refusal,
)
from podgroup_operator.scheduling.placement import place_gang_group, place_group, try_place
from podgroup_operator.scheduling.preemption import (
    DisruptionBudget,
    PreemptionPlan,
    PreemptionRefusal,
    Victim,
    VictimGang,
    disruption_budget,
    plan_preemption,
)
from podgroup_operator.scheduling.snapshot import Snapshot
from podgroup_operator.scheduling.volumes import (
    PersistentVolume,
    VolumeAction,
    VolumeClaim,
    VolumeDecision,
    persistent_volume,
    volume_claim,
)

__all__ = [
    "Binding",
    "DisruptionBudget",
    "GangGroupPlacement",
    "GangRequest",
    "PersistentVolume",
    "Placement",
    "PreemptionPlan",
    "PreemptionPolicy",
    "PreemptionRefusal",
    "Refusal",
    "Snapshot",
    "Victim",
    "VictimGang",
    "VolumeAction",
    "VolumeClaim",
    "VolumeDecision",
    "disruption_budget",
    "persistent_volume",
    "place_gang_group",
    "place_group",
    "plan_preemption",
    "try_place",
    "volume_claim",
]
