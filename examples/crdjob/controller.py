"""CRDJob: a job controller of your own that gets gang scheduling by embedding a PodGroup.

Run it next to the operator (see README.md)::

    kopf run examples/crdjob/controller.py --all-namespaces

A CRDJob runs `spec.replicas` pods from `spec.template`, all or nothing. For each job the
controller creates one PodGroup (minMember = `spec.minAvailable`, default replicas) and the pods
`<job>-0 ... <job>-N`, all owned by the job, so deleting the job deletes them through the
garbage collector. The PodGroup has no `policy`, so failures are this controller's business:
the operator only reports them. When a running gang loses a member, the PodGroup goes to phase
Unknown, and the controller deletes the job's failed pods and recreates them (and any missing
ones) under the same names; the gang scheduler places them and the gang runs again.

Reaction is prompt (an event handler on the job's PodGroup) and level-triggered (a timer on the
job retries what could not be done at once, e.g. a pod that was still terminating). The job's
status mirrors the PodGroup's phase.

The handlers are synchronous and use the official `kubernetes` client; Kopf runs them in its
thread pool, and one lock keeps the two handlers from repairing a job at the same time.
"""

import copy
import threading
from collections.abc import Callable
from typing import Any

import kopf
import kubernetes
from kubernetes.client.rest import ApiException

from podgroup_operator.api import embed

GROUP, VERSION, PLURAL = "example.podgroup.dev", "v1", "crdjobs"
CRDJOBS = {"group": GROUP, "version": VERSION, "plural": PLURAL}
PODGROUPS = {"group": embed.GROUP, "version": embed.VERSION, "plural": embed.PLURAL}
JOB_LABEL = "example.podgroup.dev/job"
"""On the job's pods and PodGroup: the name of the CRDJob they belong to."""
RESYNC_SECONDS = 3.0

_repairing = threading.Lock()


@kopf.on.startup()
def login(**_: Any) -> None:
    try:
        kubernetes.config.load_incluster_config()
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config()


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
def start(
    body: kopf.Body, spec: kopf.Spec, name: str, namespace: str, logger: kopf.Logger, **_: Any
) -> None:
    """Create the job's PodGroup and pods; idempotent, so resuming after a restart is safe."""
    if _terminal(body.get("status", {}).get("phase")):
        return
    replicas = spec["replicas"]
    min_available = spec.get("minAvailable", replicas)
    if min_available > replicas:
        raise kopf.PermanentError(f"minAvailable {min_available} > replicas {replicas}")
    group = embed.podgroup_for(body, min_member=min_available, labels={JOB_LABEL: name})
    custom, core = kubernetes.client.CustomObjectsApi(), kubernetes.client.CoreV1Api()
    _create(custom.create_namespaced_custom_object, **PODGROUPS, namespace=namespace, body=group)
    created = sum(
        _create(core.create_namespaced_pod, namespace=namespace, body=_pod(body, i))
        for i in range(replicas)
    )
    logger.info(f"PodGroup {name} ready; {created} of {replicas} pods created")


@kopf.on.event(embed.GROUP, embed.VERSION, embed.PLURAL, labels={JOB_LABEL: kopf.PRESENT})
def gang_changed(
    event: kopf.RawEvent, namespace: str, labels: kopf.Labels, logger: kopf.Logger, **_: Any
) -> None:
    """The job's PodGroup changed: mirror its status, and repair the gang if it broke."""
    if event["type"] != "DELETED":
        reconcile(namespace, labels[JOB_LABEL], logger)


@kopf.timer(GROUP, VERSION, PLURAL, interval=RESYNC_SECONDS)
def resync(name: str, namespace: str, logger: kopf.Logger, **_: Any) -> None:
    """Retry what an event could not finish (a deleted pod still terminating, a lost write)."""
    reconcile(namespace, name, logger)


def reconcile(namespace: str, name: str, logger: kopf.Logger) -> None:
    """Mirror the PodGroup's status into the job; replace failed and missing pods if broken."""
    custom = kubernetes.client.CustomObjectsApi()
    with _repairing:
        try:
            job = custom.get_namespaced_custom_object(**CRDJOBS, namespace=namespace, name=name)
            group = custom.get_namespaced_custom_object(**PODGROUPS, namespace=namespace, name=name)
        except ApiException as exc:
            if exc.status == 404:
                return  # not created yet, or deleted: nothing to repair
            raise
        previous = job.get("status") or {}
        if job["metadata"].get("deletionTimestamp") or _terminal(previous.get("phase")):
            return
        gang = embed.read_status(group)
        why = _why(gang)
        recreated = previous.get("recreated", 0)
        if embed.is_broken(gang):
            replaced = _replace_lost_pods(job, namespace)
            if replaced:
                logger.info(f"gang broken ({why}); recreated {', '.join(replaced)}")
            recreated += len(replaced)
        status = {
            "phase": (gang.phase or embed.Phase.PENDING).value,
            "running": gang.running,
            "recreated": recreated,
            "message": why,  # None removes it
        }
        if {key: previous.get(key) for key in status} != status:
            custom.patch_namespaced_custom_object_status(
                **CRDJOBS, namespace=namespace, name=name, body={"status": status}
            )


def _replace_lost_pods(job: dict[str, Any], namespace: str) -> list[str]:
    """Delete the job's failed pods (only the incarnation seen: a uid precondition) and create
    the missing ones. Terminating pods are left to finish; the timer comes back for them."""
    core = kubernetes.client.CoreV1Api()
    name = job["metadata"]["name"]
    listed = core.list_namespaced_pod(namespace, label_selector=f"{JOB_LABEL}={name}").items
    pods = {pod.metadata.name: pod for pod in listed}
    replaced = []
    for index in range(job["spec"]["replicas"]):
        pod = pods.get(f"{name}-{index}")
        if pod is not None and pod.status.phase != "Failed":
            continue  # pending, running, succeeded, or still terminating
        if pod is not None:
            options = kubernetes.client.V1DeleteOptions(
                preconditions=kubernetes.client.V1Preconditions(uid=pod.metadata.uid)
            )
            try:
                # A terminated pod is deleted at once, which frees its name for the replacement.
                core.delete_namespaced_pod(pod.metadata.name, namespace, body=options)
            except ApiException as exc:
                if exc.status not in (404, 409):  # gone already, or a newer namesake
                    raise
        if _create(core.create_namespaced_pod, namespace=namespace, body=_pod(job, index)):
            replaced.append(f"{name}-{index}")
    return replaced


def _pod(job: Any, index: int) -> dict[str, Any]:
    """Pod `index` of the job: its template, owned by the job, a member of its PodGroup."""
    name = job["metadata"]["name"]
    template = copy.deepcopy(job["spec"]["template"])
    metadata = template.get("metadata") or {}
    spec = template.get("spec") or {}
    spec.setdefault("restartPolicy", "Never")  # a crash shows as phase Failed, not a restart
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            **metadata,
            "name": f"{name}-{index}",
            "labels": {**(metadata.get("labels") or {}), JOB_LABEL: name},
            "ownerReferences": [embed.owner_reference(job)],
        },
        "spec": spec,
    }
    return embed.as_member(pod, name)


def _create(create: Callable[..., Any], **kwargs: Any) -> bool:
    """Create; False when it exists already (a retry, or the other handler was first)."""
    try:
        create(**kwargs)
    except ApiException as exc:
        if exc.status != 409:
            raise
        return False
    return True


def _terminal(phase: str | None) -> bool:
    return phase is not None and embed.Phase(phase).terminal


def _why(gang: embed.PodGroupStatus) -> str | None:
    """The operator's explanation, e.g. "a member failed; 2 of minMember 3 members running"."""
    unschedulable = embed.condition(gang, embed.ConditionType.UNSCHEDULABLE)
    return unschedulable.message if unschedulable else None
