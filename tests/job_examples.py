"""The manifests of examples/jobs/ and what their controllers make of them, for the tests.

Each job controller (Kubeflow Trainer, mpi-operator, JobSet, LeaderWorkerSet, Volcano, KubeRay,
the Spark operator) turns its object into pods, adding labels of its own, and some create the
PodGroup too. None of them runs on the dev cluster, so `Example.podgroups` and `Example.pods`
build what each would make from the manifest, from the parts the docs say it reads: the pod
templates, the replica counts, and the labels it adds (the keys the task pages, and
`matchLabelKeys`, rely on). tests/unit/test_job_examples.py checks them in memory;
tests/integration/test_job_examples.py sends them through the CRD and the webhooks.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from podgroup_operator import constants as c
from tests.conftest import REPO

JOBS = REPO / "examples" / "jobs"
PAGES = REPO / "docs" / "guides" / "jobs"

Body = dict[str, Any]


def documents(path: Path) -> list[Body]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def of_kind(docs: list[Body], kind: str) -> Body:
    (only,) = [d for d in docs if d["kind"] == kind]
    return only


def podgroup(name: str, spec: Body) -> Body:
    return {
        "apiVersion": f"{c.GROUP}/{c.VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": spec,
    }


def pod(name: str, template: Body, labels: dict[str, str], annotations: dict[str, str]) -> Body:
    """A pod as a controller makes it from `template`, its own labels and annotations added."""
    metadata = template.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {**(metadata.get("labels") or {}), **labels},
            "annotations": {**(metadata.get("annotations") or {}), **annotations},
        },
        "spec": copy.deepcopy(template["spec"]),
    }


# --- what each controller makes ------------------------------------------------------------------


def trainjob_podgroups(docs: list[Body]) -> list[Body]:
    """Trainer's coscheduling plugin: a PodGroup named after the TrainJob, minMember its nodes."""
    job, runtime = of_kind(docs, "TrainJob"), of_kind(docs, "TrainingRuntime")
    timeout = runtime["spec"]["podGroupPolicy"]["coscheduling"]["scheduleTimeoutSeconds"]
    nodes = job["spec"]["trainer"]["numNodes"]
    return [
        podgroup(job["metadata"]["name"], {"minMember": nodes, "scheduleTimeoutSeconds": timeout})
    ]


def trainjob_pods(docs: list[Body]) -> list[Body]:
    """The runtime's JobSet template, `numNodes` pods of its `node` Job, labelled by Trainer with
    the TrainJob's PodGroup and by JobSet with its own keys."""
    job, runtime = of_kind(docs, "TrainJob"), of_kind(docs, "TrainingRuntime")
    name = job["metadata"]["name"]
    (replicated,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    template = replicated["template"]["spec"]["template"]
    return [
        pod(
            f"{name}-node-0-{index}",
            template,
            {
                c.LABEL_POD_GROUP: name,
                "jobset.sigs.k8s.io/jobset-name": name,
                "jobset.sigs.k8s.io/replicatedjob-name": replicated["name"],
                "jobset.sigs.k8s.io/job-index": "0",
            },
            {},
        )
        for index in range(job["spec"]["trainer"]["numNodes"])
    ]


MPI_SCHEDULER = c.SCHEDULER_NAME
"""mpi-operator's `--gang-scheduling`, as docs/guides/jobs/kubeflow.md sets it."""


def mpijob_podgroups(docs: list[Body]) -> list[Body]:
    job = of_kind(docs, "MPIJob")
    policy = job["spec"]["runPolicy"]["schedulingPolicy"]
    workers = job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
    return [
        podgroup(
            job["metadata"]["name"],
            {
                "minMember": policy.get("minAvailable", workers + 1),
                "scheduleTimeoutSeconds": policy["scheduleTimeoutSeconds"],
            },
        )
    ]


def mpijob_pods(docs: list[Body]) -> list[Body]:
    """The launcher and the workers, labelled with the MPIJob's PodGroup, their schedulerName
    set to `--gang-scheduling`'s."""
    job = of_kind(docs, "MPIJob")
    name = job["metadata"]["name"]
    made = []
    for role, spec in job["spec"]["mpiReplicaSpecs"].items():
        for index in range(spec["replicas"]):
            member = pod(
                f"{name}-{role.lower()}-{index}",
                spec["template"],
                {
                    c.LABEL_POD_GROUP: name,
                    "training.kubeflow.org/job-name": name,
                    "training.kubeflow.org/job-role": role.lower(),
                    "training.kubeflow.org/replica-index": str(index),
                },
                {},
            )
            member["spec"]["schedulerName"] = MPI_SCHEDULER
            made.append(member)
    return made


def own_podgroups(docs: list[Body]) -> list[Body]:
    """The PodGroups the manifest holds (JobSet, LeaderWorkerSet, Volcano, Spark make none)."""
    return [d for d in docs if d["kind"] == "PodGroup"]


def jobset_pods(docs: list[Body]) -> list[Body]:
    jobset = of_kind(docs, "JobSet")
    name = jobset["metadata"]["name"]
    made = []
    for replicated in jobset["spec"]["replicatedJobs"]:
        job = replicated["template"]["spec"]
        for job_index in range(replicated["replicas"]):
            for index in range(job["parallelism"]):
                made.append(
                    pod(
                        f"{name}-{replicated['name']}-{job_index}-{index}",
                        job["template"],
                        {
                            "jobset.sigs.k8s.io/jobset-name": name,
                            "jobset.sigs.k8s.io/replicatedjob-name": replicated["name"],
                            "jobset.sigs.k8s.io/job-index": str(job_index),
                        },
                        {},
                    )
                )
    return made


def lws_pods(docs: list[Body]) -> list[Body]:
    """Per replica g, the leader (worker-index 0) from leaderTemplate and the workers from
    workerTemplate, every one labelled with its group index."""
    lws = of_kind(docs, "LeaderWorkerSet")
    name = lws["metadata"]["name"]
    spec = lws["spec"]["leaderWorkerTemplate"]
    made = []
    for group in range(lws["spec"]["replicas"]):
        for worker in range(spec["size"]):
            template = spec["leaderTemplate"] if worker == 0 else spec["workerTemplate"]
            made.append(
                pod(
                    f"{name}-{group}" + (f"-{worker}" if worker else ""),
                    template,
                    {
                        "leaderworkerset.sigs.k8s.io/name": name,
                        "leaderworkerset.sigs.k8s.io/group-index": str(group),
                        "leaderworkerset.sigs.k8s.io/worker-index": str(worker),
                    },
                    {},
                )
            )
    return made


VOLCANO_PODGROUP = "tf-dist-3f2a"
"""The name Volcano's job controller gives its own PodGroup (the job's name and UID)."""


def volcano_pods(docs: list[Body]) -> list[Body]:
    job = of_kind(docs, "Job")
    name = job["metadata"]["name"]
    made = []
    for task in job["spec"]["tasks"]:
        for index in range(task["replicas"]):
            member = pod(
                f"{name}-{task['name']}-{index}",
                task["template"],
                {"volcano.sh/job-name": name, "volcano.sh/task-spec": task["name"]},
                {c.ANNOTATION_GROUP_NAME: VOLCANO_PODGROUP, "volcano.sh/task-spec": task["name"]},
            )
            member["spec"]["schedulerName"] = job["spec"]["schedulerName"]
            made.append(member)
    return made


RAY_SCHEDULER = "scheduler-plugins-scheduler"
"""The schedulerName KubeRay's scheduler-plugins integration sets on the pods."""


def ray_podgroups(docs: list[Body]) -> list[Body]:
    """KubeRay's scheduler-plugins integration: the head and every group's replicas (times its
    hosts)."""
    cluster = of_kind(docs, "RayCluster")
    workers = sum(
        group["replicas"] * group.get("numOfHosts", 1)
        for group in cluster["spec"]["workerGroupSpecs"]
    )
    return [podgroup(cluster["metadata"]["name"], {"minMember": 1 + workers})]


def ray_pods(docs: list[Body]) -> list[Body]:
    cluster = of_kind(docs, "RayCluster")
    name = cluster["metadata"]["name"]
    labels = {c.LABEL_POD_GROUP: name, "ray.io/cluster": name}
    made = [
        pod(
            f"{name}-head",
            cluster["spec"]["headGroupSpec"]["template"],
            {**labels, "ray.io/node-type": "head"},
            {},
        )
    ]
    for group in cluster["spec"]["workerGroupSpecs"]:
        made += [
            pod(
                f"{name}-{group['groupName']}-worker-{index}",
                group["template"],
                {**labels, "ray.io/node-type": "worker", "ray.io/group": group["groupName"]},
                {},
            )
            for index in range(group["replicas"] * group.get("numOfHosts", 1))
        ]
    for member in made:
        member["spec"]["schedulerName"] = RAY_SCHEDULER
    return made


def spark_pods(docs: list[Body]) -> list[Body]:
    """The driver and its executors, with the labels of `spec.driver` / `spec.executor` and the
    scheduler of `spark.kubernetes.scheduler.name`."""
    app = of_kind(docs, "SparkApplication")
    name = app["metadata"]["name"]
    scheduler = app["spec"]["sparkConf"]["spark.kubernetes.scheduler.name"]
    made = []
    roles = [("driver", 1), ("executor", app["spec"]["executor"]["instances"])]
    for role, count in roles:
        for index in range(count):
            template = {
                "metadata": {"labels": app["spec"][role]["labels"]},
                "spec": {
                    "schedulerName": scheduler,
                    "containers": [
                        {"name": f"spark-kubernetes-{role}", "image": app["spec"]["image"]}
                    ],
                },
            }
            made.append(pod(f"{name}-{role}-{index}", template, {"spark-role": role}, {}))
    return made


@dataclass(frozen=True)
class Example:
    """One manifest of examples/jobs/ and its task page."""

    file: str
    page: str
    kinds: tuple[tuple[str, str], ...]
    """(apiVersion, kind) of each document, in order."""
    podgroups: Callable[[list[Body]], list[Body]]
    pods: Callable[[list[Body]], list[Body]]
    schedulers: tuple[str, ...] = (c.SCHEDULER_NAME,)
    """The `schedulerName` the pods carry: a `run --scheduler-name` value the page asks for."""
    sub_groups: dict[str, int] = field(default_factory=dict)
    """Sub-group instance -> members, where the PodGroup has sub-groups."""

    def documents(self) -> list[Body]:
        return documents(JOBS / self.file)


PODGROUP_KIND = (f"{c.GROUP}/{c.VERSION}", "PodGroup")

EXAMPLES = [
    Example(
        "trainjob.yaml",
        "kubeflow.md",
        (
            ("trainer.kubeflow.org/v1alpha1", "TrainingRuntime"),
            ("trainer.kubeflow.org/v1alpha1", "TrainJob"),
        ),
        trainjob_podgroups,
        trainjob_pods,
    ),
    Example(
        "mpijob.yaml",
        "kubeflow.md",
        (("kubeflow.org/v2beta1", "MPIJob"),),
        mpijob_podgroups,
        mpijob_pods,
    ),
    Example(
        "jobset.yaml",
        "jobset.md",
        (PODGROUP_KIND, ("jobset.x-k8s.io/v1alpha2", "JobSet")),
        own_podgroups,
        jobset_pods,
        sub_groups={"worker-worker-0": 4, "worker-worker-1": 4},
    ),
    Example(
        "leaderworkerset.yaml",
        "leaderworkerset.md",
        (PODGROUP_KIND, ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")),
        own_podgroups,
        lws_pods,
        sub_groups={"replica-0": 4, "replica-1": 4},
    ),
    Example(
        "volcano-job.yaml",
        "volcano.md",
        (PODGROUP_KIND, ("batch.volcano.sh/v1alpha1", "Job")),
        own_podgroups,
        volcano_pods,
        schedulers=("volcano",),
    ),
    Example(
        "raycluster.yaml",
        "ray.md",
        (("ray.io/v1", "RayCluster"),),
        ray_podgroups,
        ray_pods,
        schedulers=(RAY_SCHEDULER,),
    ),
    Example(
        "spark.yaml",
        "spark.md",
        (PODGROUP_KIND, ("sparkoperator.k8s.io/v1beta2", "SparkApplication")),
        own_podgroups,
        spark_pods,
    ),
]
