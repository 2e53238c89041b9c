"""One sample pod per (rule, pod field) that scheduling/registry.py declares: a pod that asks for
the rule through that field (tests/unit/scheduling/test_sched_registry.py checks that every
declared pair has one)."""

from __future__ import annotations

from typing import Any

from podgroup_operator.scheduling.podinfo import PREFERRED, REQUIRED

Pod = dict[str, Any]
OWNER = {
    "apiVersion": "apps/v1",
    "kind": "ReplicaSet",
    "name": "rs",
    "uid": "u",
    "controller": True,
}


def sample(spec: dict[str, Any] | None = None, **metadata: Any) -> Pod:
    """A pod of a ReplicaSet (slimmed as such) with `spec` and `metadata`, one plain container
    unless `spec` names its own."""
    body_spec = {"containers": [{"name": "app", "image": "busybox"}], **(spec or {})}
    meta = {"name": "p-0", "namespace": "default", **metadata}
    return {"metadata": meta, "spec": body_spec}


def term(**labels: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": "kubernetes.io/hostname"}


def expressions(key: str = "zone") -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": "In", "values": ["a", "b"]}]}


REQUIRED_NODE_AFFINITY = {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [expressions()]}}}
POD_AFFINITY = {"podAffinity": {REQUIRED: [term(app="db")]}}
SPREAD = [
    {
        "maxSkew": 1,
        "topologyKey": "zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}},
        "matchLabelKeys": ["pod-template-hash"],
    }
]
SIDECAR = {
    "name": "proxy",
    "restartPolicy": "Always",
    "resources": {"requests": {"cpu": "100m"}},
    "ports": [{"containerPort": 15000, "hostPort": 15000}],
}
CLAIM = {"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}}
EPHEMERAL = {
    "name": "scratch",
    "ephemeral": {"volumeClaimTemplate": {"spec": {"resources": {"requests": {"storage": "1Gi"}}}}},
}
DISKS = {
    "awsElasticBlockStore": {"volumeID": "vol-1"},
    "azureDisk": {"diskName": "d1", "diskURI": "uri"},
    "gcePersistentDisk": {"pdName": "pd-1"},
    "iscsi": {"targetPortal": "10.0.0.1:3260", "iqn": "iqn.x", "lun": 0},
    "rbd": {"monitors": ["10.0.0.1"], "image": "img"},
}

_CLAIMS = sample({"volumes": [CLAIM, EPHEMERAL]})
_TOLERATIONS = sample({"tolerations": [{"key": "gpu", "operator": "Exists"}]})

SAMPLES: dict[tuple[str, str], Pod] = {
    ("NodeUnschedulable", "spec.tolerations"): sample(
        {"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]}
    ),
    ("TaintToleration", "spec.tolerations"): _TOLERATIONS,
    ("NodeSelector", "spec.nodeSelector"): sample({"nodeSelector": {"zone": "a"}}),
    ("NodeAffinity", f"spec.affinity.nodeAffinity.{REQUIRED}"): sample(
        {"affinity": REQUIRED_NODE_AFFINITY}
    ),
    ("NodeResourcesFit", "spec.containers[].resources"): sample(
        {"containers": [{"name": "app", "resources": {"requests": {"cpu": "1"}}}]}
    ),
    ("NodeResourcesFit", "spec.initContainers[].resources"): sample(
        {"initContainers": [{"name": "init", "resources": {"requests": {"cpu": "2"}}}]}
    ),
    ("NodeResourcesFit", "spec.initContainers[].restartPolicy"): sample(
        {"initContainers": [{key: v for key, v in SIDECAR.items() if key != "ports"}]}
    ),
    ("NodeResourcesFit", "spec.overhead"): sample({"overhead": {"cpu": "250m"}}),
    ("NodePorts", "spec.containers[].ports"): sample(
        {"containers": [{"name": "app", "ports": [{"containerPort": 80, "hostPort": 8080}]}]}
    ),
    ("NodePorts", "spec.initContainers[].ports"): sample({"initContainers": [SIDECAR]}),
    ("NodePorts", "spec.initContainers[].restartPolicy"): sample({"initContainers": [SIDECAR]}),
    ("InterPodAffinity", f"spec.affinity.podAffinity.{REQUIRED}"): sample(
        {"affinity": POD_AFFINITY}
    ),
    ("InterPodAffinity", f"spec.affinity.podAntiAffinity.{REQUIRED}"): sample(
        {"affinity": {"podAntiAffinity": {REQUIRED: [term(app="web")]}}}
    ),
    ("InterPodAffinity", "metadata.namespace"): sample(
        {"affinity": POD_AFFINITY}, namespace="team-a"
    ),
    ("InterPodAffinity", "metadata.labels"): sample(
        {"affinity": POD_AFFINITY}, labels={"app": "db"}
    ),
    ("InterPodAffinity/existing", "metadata.labels"): sample(labels={"app": "web"}),
    ("InterPodAffinity/existing", "metadata.namespace"): sample(namespace="team-a"),
    ("PodTopologySpread", "spec.topologySpreadConstraints"): sample(
        {"topologySpreadConstraints": SPREAD}
    ),
    ("PodTopologySpread", "metadata.labels"): sample(
        {"topologySpreadConstraints": SPREAD}, labels={"pod-template-hash": "abc"}
    ),
    ("PodTopologySpread", "metadata.namespace"): sample(
        {"topologySpreadConstraints": SPREAD}, namespace="team-a"
    ),
    **{
        (rule, path): _CLAIMS
        for rule in ("VolumeBinding", "VolumeZone", "NodeVolumeLimits")
        for path in (
            "spec.volumes[].persistentVolumeClaim",
            "spec.volumes[].ephemeral",
            "spec.volumes[].persistentVolumeClaim.claimName",
            "spec.volumes[].name",
            "metadata.name",
        )
    },
    **{
        (rule, f"spec.volumes[].{source}"): sample({"volumes": [{"name": "disk", source: disk}]})
        for rule in ("NodeVolumeLimits", "VolumeRestrictions")
        for source, disk in DISKS.items()
    },
    ("NodeAffinity/preferred", f"spec.affinity.nodeAffinity.{PREFERRED}"): sample(
        {"affinity": {"nodeAffinity": {PREFERRED: [{"weight": 5, "preference": expressions()}]}}}
    ),
    ("TaintToleration/preferred", "spec.tolerations"): _TOLERATIONS,
    ("InterPodAffinity/preferred", f"spec.affinity.podAffinity.{PREFERRED}"): sample(
        {"affinity": {"podAffinity": {PREFERRED: [{"weight": 5, "podAffinityTerm": term()}]}}}
    ),
    ("InterPodAffinity/preferred", f"spec.affinity.podAntiAffinity.{PREFERRED}"): sample(
        {"affinity": {"podAntiAffinity": {PREFERRED: [{"weight": 5, "podAffinityTerm": term()}]}}}
    ),
    ("ImageLocality", "spec.containers[].image"): sample(
        {"containers": [{"name": "app", "image": "registry.example/app:1"}]}
    ),
}
