"""Operator settings: what `podgroup-operator run` was told, handed to handlers through Kopf's memo.

Kept apart from main.py so handlers can read them without importing the entry point.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from podgroup_operator import constants as c
from podgroup_operator import tuning


class WebhookMode(StrEnum):
    AUTO = "auto"
    """LOCAL when the kubeconfig is the dev cluster's, CLUSTER otherwise."""
    LOCAL = "local"
    """Serve on 127.0.0.1 where a local kube-apiserver can call us."""
    CLUSTER = "cluster"
    """Serve on 0.0.0.0 behind the Service of deploy/; certificates mounted from a Secret."""
    OFF = "off"
    """No admission webhooks (validation by the CRD schema only)."""


class WebhookCerts(StrEnum):
    """Where a CLUSTER-mode operator's serving certificate comes from."""

    MOUNTED = "mounted"
    """Files mounted from a Secret somebody else keeps (cert-manager, or your own CA)."""
    SELF_MANAGED = "self-managed"
    """The operator keeps the Secret itself: makes it, rotates it before expiry, and writes
    the CA into the caBundle of its webhook configurations (deploy/overlays/self-managed)."""


@dataclass
class OperatorSettings:
    namespaces: list[str] = field(default_factory=list)
    webhook_mode: WebhookMode = WebhookMode.AUTO
    webhook_host: str | None = None
    webhook_port: int | None = None
    webhook_cert_dir: Path = Path.home() / ".cache" / c.OPERATOR_NAME / "webhook-certs"
    webhook_certs: WebhookCerts = WebhookCerts.MOUNTED
    cluster_cert_dir: Path = Path("/etc/podgroup-operator/tls")
    """CLUSTER mode's certificate files: where deploy/ mounts the Secret (tls.crt, tls.key,
    ca.crt), or, self-managed, an emptyDir the operator writes them into."""
    webhook_secret_name: str = f"{c.OPERATOR_NAME}-webhook-tls"
    """The Secret holding the serving certificate (mounted, or kept when self-managed)."""
    webhook_cert_check_seconds: float = 3600.0
    """How often a self-managed operator re-reads its Secret, rotating what is due and picking
    up what another replica rotated (Kopf reloads its server when the files change)."""
    service_namespace: str = c.OPERATOR_NAME
    service_name: str = f"{c.OPERATOR_NAME}-webhook"
    operator_namespace: str = c.OPERATOR_NAME
    """Never intercepted by our webhooks, so the operator can always be repaired."""
    default_schedule_timeout_seconds: int = 60
    """scheduleTimeoutSeconds for groups that set none."""
    status_workers: int = 16
    """PodGroup status reconciles that may run at once, at least (see `status_worker_count`),
    and the routine ones (no member changed phase) that may run at once, at most
    (`StatusReconciler.touch`)."""
    write_process: bool = True
    """Send the leader's binds and pod Events from a child process, the operator's second CPU
    (adapters/writer.py; `run --write-process`)."""
    bind_concurrency: int | None = None
    """Binds in flight at once (`run --bind-concurrency N`); None paces them by their latency,
    from tuning.BIND_CONCURRENCY to tuning.BIND_CONCURRENCY_CEILING (scheduling/pacing.py)."""
    nonstrict_hold_seconds: float = tuning.NONSTRICT_HOLD_SECONDS
    """The longest a NonStrict gang holds room it is not bound on (`run
    --nonstrict-hold-seconds`; scheduling/holds.py)."""
    reservation_timeout_seconds: float = tuning.RESERVATION_TIMEOUT_SECONDS
    """How long a reservation of unknown start holds its nodes (`run --reservation-timeout`)."""
    metrics_address: str = "0.0.0.0:8081"
    """host:port of /metrics, /readyz and /livez; empty to serve none."""
    scheduler_names: list[str] = field(default_factory=lambda: [c.SCHEDULER_NAME])
    """`spec.schedulerName`s whose pods the gang scheduler places (`run --scheduler-name`);
    the routing webhook gives the first to member pods that name the default scheduler."""
    leader_election: bool = True
    """Campaign for the Lease and lead only while holding it (several replicas may run)."""
    lease_namespace: str = field(
        default_factory=lambda: os.environ.get("POD_NAMESPACE") or "kube-system"
    )
    """Where the Lease lives: the operator's own namespace in a cluster (deploy/ sets
    POD_NAMESPACE), else kube-system, which every cluster has (as kube-scheduler's)."""

    gang_group_trust: list[str] = field(default_factory=list)
    """Sets of namespaces, each comma-separated, whose PodGroups may name one another in
    `gangGroup` without being listed back (`run --gang-group-trust`; domain/gang_groups.py)."""

    provisioning_class: str | None = None
    """The ProvisioningRequest class of gangs refused for room (`run --provisioning-class`);
    None: off, unless a PodGroup's annotation names one (controllers/provisioning.py)."""
    dialect_crds: c.DialectCRDs = c.DialectCRDs.OFF
    """Whether to install CRDs for other schedulers' kinds that none serves (Volcano's and
    Koordinator's PodGroup, Koordinator's ElasticQuota; `run --dialect-crds`;
    controllers/dialects.py)."""

    max_pd_volumes: int | None = None
    """Every node's limit of in-tree disks where its allocatable sets none (`KUBE_MAX_PD_VOLS`,
    as kube-scheduler reads it: `max_pd_volumes_from_env`); None keeps upstream's defaults."""

    @property
    def status_worker_count(self) -> int:
        """Status reconciles of groups whose members changed phase (the urgent lane) that may
        run at once: `status_workers`, or half the binds in flight if that is more.

        A worker holds a status PATCH as long as the API server takes to answer it, about as
        long as a bind on a busy control plane; binding faster means more gangs per second whose
        status changes (docs/decisions/007-bind-pacing.md). Paced binds count
        with the most the pacer may allow, since it can get there within a few seconds.
        """
        return max(self.status_workers, self.most_binds_in_flight // 2)

    @property
    def most_binds_in_flight(self) -> int:
        """The fixed `bind_concurrency`, or the most the pacer may allow."""
        return self.bind_concurrency or tuning.BIND_CONCURRENCY_CEILING


def max_pd_volumes_from_env(raw: str | None) -> int | None:
    """`KUBE_MAX_PD_VOLS` as a limit, None when unset or empty.

    kube-scheduler logs a bad value and goes on with its defaults; the operator refuses to
    start instead, since running with limits other than the scheduler beside it was told to
    use is the kind of quiet difference nobody finds.
    """
    if raw is None or not raw.strip():
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(
            f"{c.MAX_PD_VOLUMES_ENV}={raw!r}: must be a positive whole number (how many in-tree "
            "disks a node attaches, where its allocatable does not say); unset it for "
            "kube-scheduler's defaults"
        )
    return value
