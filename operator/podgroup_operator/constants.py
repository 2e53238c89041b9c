"""Every name the operator shares with the cluster: API coordinates, keys, phases, reasons.

One module, so that a typo in a label key or a phase is an import error rather than a silent
mismatch, and so that a newcomer can read the whole vocabulary in one place. String enums
compare equal to their values, which keeps them usable in JSON bodies and label selectors.
"""

from enum import StrEnum

# --- API coordinates -----------------------------------------------------------------------------
GROUP = "scheduling.x-k8s.io"
"""The scheduler-plugins API group; existing clients (Kubeflow and others) write to it."""
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "PodGroup"
PLURAL = "podgroups"
SINGULAR = "podgroup"
SHORT_NAME = "pg"
CRD_NAME = f"{PLURAL}.{GROUP}"

CRD_INSTALL_HINT = "kubectl apply -f crds/ of this repository, or kubectl apply -k deploy/"
"""How the PodGroup CRD is installed, for messages about a cluster that does not serve it."""

TOPOLOGY_KIND = "Topology"
"""Cluster-scoped: a data centre's fabric as node label keys, coarse to fine (Kueue's and
KAI-Scheduler's shape); a PodGroup's `spec.topologyConstraint` names one."""
TOPOLOGY_PLURAL = "topologies"
TOPOLOGY_SINGULAR = "topology"
TOPOLOGY_CRD_NAME = f"{TOPOLOGY_PLURAL}.{GROUP}"
LABEL_HOSTNAME = "kubernetes.io/hostname"
"""The node label naming each node; a Topology may use it only as its last (finest) level."""

OPERATOR_NAME = "podgroup-operator"
"""Field manager, event source component and the prefix of every object the operator owns."""
SCHEDULER_NAME = "podgroup-scheduler"
"""`spec.schedulerName` of the pods placed by the bundled gang scheduler."""
MAX_PD_VOLUMES_ENV = "KUBE_MAX_PD_VOLS"
"""kube-scheduler's environment variable for every node's limit of in-tree disks (EBS, GCE PD,
Azure Disk) where the node's allocatable sets none; the operator reads the same one."""
DEFAULT_SCHEDULER_NAME = "default-scheduler"

# --- Membership keys -----------------------------------------------------------------------------
LABEL_POD_GROUP = "scheduling.x-k8s.io/pod-group"
"""Pod label naming its PodGroup (scheduler-plugins coscheduling)."""
LABEL_SUB_GROUP = "scheduling.x-k8s.io/sub-group"
"""Pod label naming the leaf of its PodGroup's `spec.subGroups` the pod joins."""
ANNOTATION_GROUP_NAME = "scheduling.k8s.io/group-name"
"""Pod annotation naming its PodGroup (kube-batch and Volcano)."""
LABEL_LIGHTWEIGHT_NAME = "pod-group.scheduling.sigs.k8s.io/name"
"""Pod label of a lightweight gang without a PodGroup object (coscheduling's older API)."""
LABEL_LIGHTWEIGHT_MIN_AVAILABLE = "pod-group.scheduling.sigs.k8s.io/min-available"
ANNOTATION_KOORD_NAME = "gang.scheduling.koordinator.sh/name"
"""Koordinator's gang annotations; a PodGroup is created for them."""
ANNOTATION_KOORD_MIN_AVAILABLE = "gang.scheduling.koordinator.sh/min-available"
ANNOTATION_KOORD_WAITING_TIME = "gang.scheduling.koordinator.sh/waiting-time"
ANNOTATION_KOORD_MODE = "gang.scheduling.koordinator.sh/mode"
ANNOTATION_KOORD_GROUPS = "gang.scheduling.koordinator.sh/groups"
LABEL_KOORD_POD_GROUP = "pod-group.scheduling.sigs.k8s.io"
"""Pod label naming its PodGroup, Koordinator's primary key (the label of scheduler-plugins
before it moved to `scheduling.x-k8s.io/pod-group`); no `/name` suffix."""
LABEL_KUEUE_POD_GROUP_NAME = "kueue.x-k8s.io/pod-group-name"
"""Pod label of a Kueue plain-pod group; a PodGroup is created for it."""
ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT = "kueue.x-k8s.io/pod-group-total-count"
"""Pod annotation: how many pods a Kueue plain-pod group has (its minMember)."""
KUEUE_ADMISSION_GATE = "kueue.x-k8s.io/admission"
"""The scheduling gate Kueue puts on its pods until their workload is admitted."""
LABEL_KUEUE_MAX_EXEC_TIME = "kueue.x-k8s.io/max-exec-time-seconds"
"""Pod label: the most seconds its workload may run (a gang's maxRunSeconds when its spec has
none)."""

LEADER_LEASE_NAME = f"{OPERATOR_NAME}-leader"
"""The coordination.k8s.io Lease replicas elect their leader on."""

# --- Keys the operator writes --------------------------------------------------------------------
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
"""Set to OPERATOR_NAME on PodGroups the operator created for lightweight gangs."""
ANNOTATION_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
"""Set (to "yes") on a PersistentVolume the scheduler bound to a claim, as kube-scheduler's volume
binder does: the binding was made by a controller, not pre-bound by a person."""

# --- Namespace opt-ins ---------------------------------------------------------------------------
NAMESPACE_LABEL_GANG_SCHEDULING = f"{GROUP}/gang-scheduling"
"""`enabled` lets the mutating webhook route member pods to the bundled scheduler."""
NAMESPACE_LABEL_QUOTA_RESERVATION = f"{GROUP}/quota-reservation"
"""`enabled` lets the quota webhook reserve `totalResources` for PodGroups."""
OPT_IN_VALUE = "enabled"


class Phase(StrEnum):
    """PodGroup phases. Finished and Failed are terminal and latch."""

    PENDING = "Pending"
    """Accepted; fewer than minMember members running."""
    RUNNING = "Running"
    """At least minMember members running or succeeded."""
    UNKNOWN = "Unknown"
    """Was Running, dropped below minMember, and some members still run."""
    FINISHED = "Finished"
    """All members terminated and at least minMember succeeded."""
    FAILED = "Failed"
    """Terminal: members terminated short of minMember successes, or a policy gave up."""

    @property
    def terminal(self) -> bool:
        return self in (Phase.FINISHED, Phase.FAILED)


class ConditionType(StrEnum):
    UNSCHEDULABLE = "Unschedulable"
    """True while the gang cannot run as a whole; the reason says why."""
    SCHEDULED = "Scheduled"
    """True once at least minMember members are bound to nodes."""
    QUOTA_RESERVED = "QuotaReserved"
    """True while `totalResources` is reserved against the namespace's ResourceQuota."""
    PREEMPTED = "Preempted"
    """True once a higher-priority gang evicted this gang's pods; the message names it."""
    PROVISIONING = "Provisioning"
    """True while the gang waits for the nodes its ProvisioningRequest asks for; the message
    names the request and its state (docs/concepts/autoscaling.md)."""


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Reason(StrEnum):
    """Machine-readable reasons of conditions and Events."""

    NOT_ENOUGH_TASKS = "NotEnoughTasks"
    """Fewer member pods exist than minMember."""
    POD_FAILED = "PodFailed"
    """A member failed and the gang fell below minMember."""
    POD_DELETED = "PodDeleted"
    """A member was deleted and the gang fell below minMember."""
    NOT_ENOUGH_RESOURCES = "NotEnoughResources"
    """The cluster cannot hold minMember members at once."""
    UNSUPPORTED_CONSTRAINT = "UnsupportedConstraint"
    """A member asks for a constraint the gang scheduler cannot evaluate (the message names it)."""
    PREEMPTING = "Preempting"
    """Event: lower-priority gangs are being evicted to make room for this gang."""
    PREEMPTED = "Preempted"
    """Event on a victim pod and its PodGroup, and the reason of the victim's Preempted
    condition: a higher-priority gang evicted it (the message names that gang)."""
    SCHEDULE_TIMEOUT = "ScheduleTimeout"
    """scheduleTimeoutSeconds passed without a placement; the gang backs off."""
    GANG_SCHEDULABLE = "GangSchedulable"
    """Enough members are running; the gang is whole."""
    GANG_SCHEDULED = "GangScheduled"
    """At least minMember members are bound."""
    GANG_FINISHED = "GangFinished"
    """Unschedulable=False once the group is Finished: every member terminated, at least
    minMember of them succeeded."""
    GANG_FAILED = "GangFailed"
    """Unschedulable=True and a Warning Event: the restart policy failed the gang (`FailGang`,
    or a restart that cannot record its bare members); the message says why."""
    QUOTA_RESERVED = "QuotaReserved"
    """QuotaReserved=True: `totalResources` is held in the namespace's ResourceQuota."""
    QUOTA_RELEASED = "QuotaReleased"
    """QuotaReserved=False: the reservation was released; members still running count as
    ordinary usage."""
    RESTART_LIMIT_EXCEEDED = "RestartLimitExceeded"
    """Unschedulable=True and a Warning Event: the gang broke with `maxRestarts` restarts used,
    so it is Failed."""
    GANG_RESTARTED = "GangRestarted"
    """Warning Event: a whole-gang restart began (members deleted, bare members recreated)."""
    SUB_GROUP_RESTARTED = "SubGroupRestarted"
    """Warning Event: one sub-group was restarted alone (`spec.policy.scope: SubGroup`)."""
    RESTART_RECORD_REFUSED = "RestartRecordRefused"
    """Warning Event: the restart recorded in the status was not written by the operator for
    this group (unsigned, changed, copied, or naming another namespace): nothing is deleted or
    created from it, and it is cleared."""
    PHASE_CHANGED = "PhaseChanged"
    """Event reason for every phase transition."""
    MISSING_POD_GROUP = "MissingPodGroup"
    """Warning Event on a pod naming a PodGroup that does not exist."""
    MISSING_SUB_GROUP = "MissingSubGroup"
    """Warning Event on a pod whose sub-group label names no leaf of its PodGroup's subGroups."""
    CONFLICTING_MEMBERSHIP = "ConflictingMembership"
    """Warning Event on a pod whose membership keys name different PodGroups."""
    SCHEDULING_GATED = "SchedulingGated"
    """Unschedulable=True: a waiting member has `spec.schedulingGates` (kube-scheduler's reason;
    the message names the gates and pods); the gang is not placed until the last gate goes."""
    SCHEDULING_FAILED = "SchedulingFailed"
    """The scheduler raised while deciding this group; it backs off and the others go on."""
    INVALID_TOPOLOGY = "InvalidTopology"
    """The gang's topologyConstraint cannot be resolved: its Topology does not exist, or lacks a
    level it names (the message says which); it waits until that is mended."""
    VOLUME_BINDING_FAILED = "VolumeBindingFailed"
    """A placed gang's volumes could not be bound (a PV taken meanwhile, a claim not bound in
    time); its pods were not bound, and it is decided again after a backoff."""
    RECONCILE_FAILED = "ReconcileFailed"
    """Warning Event: the group's status could not be computed or written; retried with backoff."""
    STATUS_REWRITTEN = "StatusRewritten"
    """Warning Event: stored status fields this operator cannot read (a scheduler-plugins phase,
    a value another writer left) were rewritten from the members; the message names them."""
    STATUS_CONTESTED = "StatusContested"
    """Warning Event: another writer keeps changing the status this operator writes (two
    controllers own the PodGroup); the message names it, and the operator writes less often."""
    INVALID_GANG_LABELS = "InvalidGangLabels"
    """Warning Event on a pod whose lightweight-gang labels or annotations are invalid; no
    PodGroup is created for them until they are fixed."""
    INVALID_SPEC = "InvalidSpec"
    """Unschedulable=True, and a Warning Event on the PodGroup: its stored spec does not
    validate (stored before the webhook ran, with it off, or under a CRD without today's
    bounds); the message names each field and the fix. Its members are not scheduled until it
    is fixed, and each waiting member says so (`PodScheduled=False`, `FailedScheduling`)."""
    INVALID_GANG_GROUP = "InvalidGangGroup"
    """Unschedulable=True: the gang's `gangGroup` cannot be honoured: a PodGroup it names (or
    one their lists name) has a spec that does not validate (reason InvalidSpec on it), the
    lists joined name more than 64 PodGroups, or a list names a PodGroup of another namespace
    that does not list it back (domain/gang_groups.py). The gang group waits for the fix."""
    ENOUGH_TASKS = "EnoughTasks"
    """Unschedulable=False while Pending: minMember members exist and nothing is known to block
    them; the scheduler may still replace it with its own verdict."""
    WAITING_FOR_PROVISIONING = "WaitingForProvisioning"
    """Provisioning=True: the gang's ProvisioningRequest is in flight (created or Accepted)."""
    PROVISIONED = "Provisioned"
    """Provisioning=True: the autoscaler says the requested nodes are there; the gang is
    decided at once."""
    PROVISIONING_FAILED = "ProvisioningFailed"
    """Provisioning=False: the autoscaler refused or failed the request (its message follows);
    a new request is made after a backoff, a bounded number of times."""
    BOOKING_EXPIRED = "BookingExpired"
    """Provisioning=False: the capacity booked for the gang expired or was revoked before the
    gang was bound; the gang asks again at its next refusal."""
    PROVISIONING_ENDED = "ProvisioningEnded"
    """Provisioning=False: the request was deleted, because the gang was placed or no longer
    needs new nodes."""
    BACKFILLED = "Backfilled"
    """Event: the gang was placed on nodes reserved for an older gang, because its
    maxRunSeconds ends before that gang's estimated start (docs/concepts/reservation.md)."""
    RUN_TIME_EXCEEDED = "RunTimeExceeded"
    """Failed, and a Warning Event: the gang ran past its maxRunSeconds; its members were
    deleted."""
    WAITING_FOR_QUOTA = "WaitingForQuota"
    """Unschedulable=True: the gang does not fit its ElasticQuota now (at its max, or its min
    used and nothing left to borrow); the message names the quota, the numbers and the gang's
    position in its quota's queue. Not a lack of nodes: its members' PodScheduled reason is
    `PodReason.WAITING_FOR_QUOTA`, so autoscalers add none for it."""


class PodPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


class GangMode(StrEnum):
    STRICT = "Strict"
    """A failed attempt releases everything held for the group in this cycle (default)."""
    NON_STRICT = "NonStrict"
    """Members that fitted stay held across cycles (never bound), for at most the hold cap
    (scheduling/holds.py): two partial gangs cannot hold each other off for ever."""


class PolicyAction(StrEnum):
    RESTART_GANG = "RestartGang"
    FAIL_GANG = "FailGang"
    NONE = "None"


class RestartScope(StrEnum):
    """What a RestartGang policy restarts when a sub-group breaks (`spec.policy.scope`)."""

    GROUP = "Group"
    """Every member (the default)."""
    SUB_GROUP = "SubGroup"
    """The broken sub-group alone, while the group's minMember and minSubGroup hold."""


class EventType(StrEnum):
    """The `type` of a Kubernetes Event."""

    NORMAL = "Normal"
    """Progress as expected."""
    WARNING = "Warning"
    """Something failed or needs a person's attention."""


EVENT_MESSAGE_LIMIT = 1024
"""Characters of an Event message, and of a condition message that repeats one: the API server
caps an Event's note (events.k8s.io/v1) at 1 kB."""


class WatchEventType(StrEnum):
    """The `type` of a watch event, as the apiserver sends it."""

    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    BOOKMARK = "BOOKMARK"
    """Only a newer resourceVersion to resume from (asked for with allowWatchBookmarks)."""
    ERROR = "ERROR"
    """The object is a Status; 410 means the resourceVersion is too old: list again."""


class StatusReason(StrEnum):
    """The `reason` of the apiserver's Status answers (metav1.StatusReason) that code acts on:
    errors are told apart by these, never by their message text."""

    NOT_FOUND = "NotFound"
    ALREADY_EXISTS = "AlreadyExists"
    CONFLICT = "Conflict"
    EXPIRED = "Expired"
    """A watch or a continue token whose resourceVersion is too old (HTTP 410)."""
    GONE = "Gone"
    FORBIDDEN = "Forbidden"
    INVALID = "Invalid"


class StatusCause(StrEnum):
    """`details.causes[].reason` values of a Status (metav1.CauseType) that code acts on."""

    NAMESPACE_TERMINATING = "NamespaceTerminating"
    """NamespaceLifecycle admission refusing new objects in a namespace being deleted (403)."""


# --- Quota reservation record --------------------------------------------------------------------
QUOTA_LEDGER_CONFIG_MAP = "podgroup-quota-ledger"
"""ConfigMap in each opted-in namespace holding the durable record of admitted reservations."""


# --- What the scheduler writes on pods, in kube-scheduler's words --------------------------------
class PodConditionType(StrEnum):
    POD_SCHEDULED = "PodScheduled"
    """The pod condition kube-scheduler keeps; cluster-autoscaler reads it."""


class PodReason(StrEnum):
    """Reasons of the PodScheduled condition and of the scheduling Events on pods; exactly
    kube-scheduler's, since tools (cluster-autoscaler, dashboards) match them."""

    UNSCHEDULABLE = "Unschedulable"
    """PodScheduled=False: the pod's gang cannot be placed now (the message says why)."""
    FAILED_SCHEDULING = "FailedScheduling"
    """Warning Event on a waiting member when its gang is refused (rate-limited per gang)."""
    SCHEDULED = "Scheduled"
    """Normal Event on bind: "Successfully assigned ns/pod to node"."""
    WAITING_FOR_PROVISIONING = "WaitingForProvisioning"
    """PodScheduled=False while the gang's ProvisioningRequest is in flight: not
    `Unschedulable`, so that cluster-autoscaler does not also scale up for the pod alone."""
    WAITING_FOR_QUOTA = "WaitingForQuota"
    """PodScheduled=False: the pod's gang waits for its ElasticQuota, not for nodes; not
    `Unschedulable`, so cluster-autoscaler and Karpenter add no node for it."""
    WAITING_FOR_GANG = "WaitingForGang"
    """PodScheduled=False: the pod's gang has fewer members than minMember (the rest are not
    created yet); not `Unschedulable`, since nodes added for these pods alone would idle until
    the rest come."""


# --- ElasticQuota (issue 60; not served yet: the CRD and webhook are wired in later) -------------
ELASTIC_QUOTA_KIND = "ElasticQuota"
"""Namespaced, scheduler-plugins' kind: `spec.min`, `spec.max`, `status.used`, plus our additions
(guarantee, weight, parent, minRunSeconds, queueingStrategy)."""
ELASTIC_QUOTA_PLURAL = "elasticquotas"
ELASTIC_QUOTA_SINGULAR = "elasticquota"
ELASTIC_QUOTA_SHORT_NAMES = ("eq", "eqs")
ELASTIC_QUOTA_CRD_NAME = f"{ELASTIC_QUOTA_PLURAL}.{GROUP}"
KOORD_QUOTA_GROUP = "scheduling.sigs.k8s.io"
"""The API group Koordinator serves its ElasticQuota under (scheduler-plugins' older group)."""
LABEL_ELASTIC_QUOTA = f"{GROUP}/elastic-quota"
"""Pod label naming the ElasticQuota the pod is charged to (`name` or `namespace/name`)."""
KOORD_QUOTA_PREFIX = "quota.scheduling.koordinator.sh"
LABEL_KOORD_QUOTA_NAME = f"{KOORD_QUOTA_PREFIX}/name"
"""Koordinator's pod label naming its quota; read as an alias of LABEL_ELASTIC_QUOTA."""
LABEL_KOORD_QUOTA_PARENT = f"{KOORD_QUOTA_PREFIX}/parent"
"""Koordinator's quota label naming its parent quota; an alias of `spec.parent`."""
LABEL_KOORD_QUOTA_IS_PARENT = f"{KOORD_QUOTA_PREFIX}/is-parent"
"""`true`: the quota holds children only, never pods of its own."""
LABEL_KOORD_ALLOW_LENT = f"{KOORD_QUOTA_PREFIX}/allow-lent-resource"
"""`false`: none of the quota's min is lent (read as `spec.guarantee` equal to `spec.min`)."""
ANNOTATION_KOORD_SHARED_WEIGHT = f"{KOORD_QUOTA_PREFIX}/shared-weight"
"""JSON resource list: each resource's weight for the surplus (Koordinator's default: max)."""
KOORD_ROOT_QUOTA = "koordinator-root-quota"
"""Koordinator's implicit root; naming it as a parent means having none."""
KOORD_TRUE = "true"
KOORD_FALSE = "false"
KOORD_INTERNAL_QUOTAS = (KOORD_ROOT_QUOTA, "koordinator-system-quota", "koordinator-default-quota")
"""Quotas Koordinator's scheduler creates and keeps for itself (max near 2^63, annotations it
rewrites): never refused by our webhook, so a running Koordinator is never blocked."""
KOORD_ELASTIC_QUOTA_CRD_NAME = f"{ELASTIC_QUOTA_PLURAL}.{KOORD_QUOTA_GROUP}"
"""Koordinator's ElasticQuota CRD; ours in its group is installed (`run --dialect-crds install`)
only where none, or ours, is."""
ANNOTATION_API_APPROVED = "api-approved.kubernetes.io"
"""Required on a CRD of a `*.k8s.io` group: the review that approved the API."""
KOORD_API_APPROVAL = "https://github.com/kubernetes-sigs/scheduler-plugins/pull/52"
"""The approval Koordinator's own `scheduling.sigs.k8s.io` CRDs (PodGroup and ElasticQuota) and
scheduler-plugins' ElasticQuota CRD carry; every CRD we install in that group carries the same."""


class QueueingStrategy(StrEnum):
    """Order of the gangs waiting in one ElasticQuota (`spec.queueingStrategy`)."""

    PRIORITY = "Priority"
    """Priority, then creation time; a blocked gang does not hold back the ones behind it."""
    STRICT_FIFO = "StrictFIFO"
    """Creation time only; the head blocks the rest of its own quota (never other quotas)."""


# --- Gang-aware autoscaling: cluster-autoscaler's ProvisioningRequest (issue 63) -----------------
PROVISIONING_GROUP = "autoscaling.x-k8s.io"
"""cluster-autoscaler's API group; its CRD is not ours (tests/crds/ has one for the tests)."""
PROVISIONING_VERSION = "v1"
PROVISIONING_KIND = "ProvisioningRequest"
PROVISIONING_PLURAL = "provisioningrequests"
PROVISIONING_CRD_NAME = f"{PROVISIONING_PLURAL}.{PROVISIONING_GROUP}"
ANNOTATION_PROVISIONING_CLASS = f"{GROUP}/provisioning-class"
"""On a PodGroup: the ProvisioningRequest class for this gang (overrides `run
--provisioning-class`); `PROVISIONING_OFF` turns provisioning off for it."""
PROVISIONING_OFF = "none"
ANNOTATION_CONSUME_PROVISIONING = f"{PROVISIONING_GROUP}/consume-provisioning-request"
"""On a member pod: the ProvisioningRequest whose capacity it consumes (cluster-autoscaler
reads it, and scales for such pods only through the request)."""
ANNOTATION_PROVISIONING_CLASS_NAME = f"{PROVISIONING_GROUP}/provisioning-class-name"
"""On a member pod: the class of the request it consumes."""
ANNOTATION_PROVISIONING_ATTEMPT = f"{GROUP}/provisioning-attempt"
"""On a request the operator made: the how-many-th for its gang (an adopting leader goes on
counting from it)."""
PROVISIONING_MAX_POD_SETS = 32
"""`spec.podSets` holds 1 to 32 entries (the upstream API's bound)."""


class ProvisioningClass(StrEnum):
    """The classes cluster-autoscaler implements (others may be named; they are passed on)."""

    BEST_EFFORT_ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    """All the nodes or none."""
    CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
    """Whether the capacity is there now; nothing is added."""


class ProvisioningConditionType(StrEnum):
    """The conditions cluster-autoscaler sets on a ProvisioningRequest."""

    ACCEPTED = "Accepted"
    PROVISIONED = "Provisioned"
    FAILED = "Failed"
    BOOKING_EXPIRED = "BookingExpired"
    CAPACITY_REVOKED = "CapacityRevoked"


# --- Other schedulers' PodGroup kinds, read and mirrored (domain/dialects.py) --------------------
VOLCANO_GROUP = "scheduling.volcano.sh"
VOLCANO_VERSION = "v1beta1"
VOLCANO_SCHEDULER_NAME = "volcano"
"""`spec.schedulerName` of Volcano's pods: `run --scheduler-name volcano` takes them over."""
LABEL_VOLCANO_TASK_SPEC = "volcano.sh/task-spec"
"""The pod label (and annotation) naming a Volcano job's task: its `minTaskMember` key."""
KOORD_PODGROUP_GROUP = "scheduling.sigs.k8s.io"
KOORD_PODGROUP_VERSION = "v1alpha1"
ANNOTATION_KOORD_TOTAL_NUMBER = "gang.scheduling.koordinator.sh/total-number"
ANNOTATION_KOORD_MATCH_POLICY = "gang.scheduling.koordinator.sh/match-policy"
NATIVE_GROUP = "scheduling.k8s.io"
NATIVE_VERSIONS = ("v1beta1", "v1alpha2")
FIELD_SCHEDULING_GROUP = "spec.schedulingGroup.podGroupName"
"""The native pod field naming its PodGroup (dropped by API servers that predate it)."""
LABEL_MIRROR_OF = f"{GROUP}/mirror-of"
"""On a PodGroup the operator made from another scheduler's PodGroup: that dialect (`Dialect`).
Its spec is rewritten from the source on every change; delete or edit the source instead."""
DIALECT_CRD_LABEL = f"{GROUP}/dialect-crd"
"""On a CRD the operator installed for another scheduler's kind (`run --dialect-crds install`:
Volcano's and Koordinator's PodGroup, Koordinator's ElasticQuota): only such a CRD is ever
replaced; one without it belongs to that scheduler and is let be."""


class Dialect(StrEnum):
    """Another scheduler's PodGroup kind that the operator reads (`LABEL_MIRROR_OF`'s values)."""

    VOLCANO = "volcano"
    KOORDINATOR = "koordinator"
    NATIVE_V1BETA1 = "native-v1beta1"
    NATIVE_V1ALPHA2 = "native-v1alpha2"


class DialectCRDs(StrEnum):
    """`run --dialect-crds`: what to do about the CRDs of other schedulers' kinds we serve."""

    INSTALL = "install"
    """Install ours for each kind no CRD serves yet (never replacing one we did not install)."""
    OFF = "off"
    """Install nothing; read the kinds whose CRDs exist."""


class VolcanoPhase(StrEnum):
    """`status.phase` of a Volcano PodGroup, as Volcano's controllers read it."""

    PENDING = "Pending"
    INQUEUE = "Inqueue"
    """Admitted: its controller may create the pods (Volcano's job controller waits for it)."""
    RUNNING = "Running"
    UNKNOWN = "Unknown"
    COMPLETED = "Completed"


class KoordPhase(StrEnum):
    """`status.phase` of a `scheduling.sigs.k8s.io` PodGroup (scheduler-plugins v1alpha1)."""

    PENDING = "Pending"
    SCHEDULED = "Scheduled"
    RUNNING = "Running"
    FINISHED = "Finished"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


class NativeCondition(StrEnum):
    """The condition a native `scheduling.k8s.io` PodGroup gets, by version."""

    INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"
    """v1beta1: True once minCount members were first bound together; it latches."""
    SCHEDULED = "PodGroupScheduled"
    """v1alpha2: True while minCount members are bound."""


class DialectReason(StrEnum):
    """Reasons of the Events and conditions about other schedulers' PodGroups."""

    MIRRORED = "Mirrored"
    """Normal Event: the PodGroup the gang scheduler reads was made from this one."""
    NOT_MAPPED = "FieldNotMapped"
    """Normal Event: a field that has no counterpart here (the message names it and why)."""
    QUEUE_IGNORED = "QueueIgnored"
    """Normal Event: a Volcano `spec.queue` names no ElasticQuota; the gang is charged as if it
    named no queue."""
    INVALID = "InvalidPodGroup"
    """Warning Event: the PodGroup cannot be read; the message names each field and the fix."""
    NAME_TAKEN = "PodGroupNameTaken"
    """Warning Event: a scheduling.x-k8s.io PodGroup of that name exists and was not made from
    this one (a user's own, or another dialect's); that one governs the pods."""
    SCHEDULED = "Scheduled"
    """A native PodGroup's condition reason once minCount members are bound."""
    UNSCHEDULABLE = "Unschedulable"
    """A native PodGroup's condition reason while they are not."""
    QUEUE_MAPPED = "QueueMapped"
    """Normal Event: a Volcano `spec.queue` is charged to the ElasticQuota of its name."""
