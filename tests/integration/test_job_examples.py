"""examples/jobs/ on the real control plane: each PodGroup through the CRD and the webhook, each
pod its controller would make through the pod webhooks.

Kubeflow Trainer, mpi-operator, JobSet, LeaderWorkerSet, Volcano, KubeRay and the Spark operator
are not installed here, and their kinds (TrainJob, JobSet, ...) are not served, so those objects
are not created: tests/unit/test_job_examples.py checks that their YAML parses and that the parts
the operator reads carry the right keys. Here, in a namespace opted in to pod routing:

* each PodGroup (the manifest's own, or the one its controller would create) is created for real,
  so the CRD schema and the validating webhook admit it;
* each pod built from the manifest's templates, with the labels its controller adds
  (tests/job_examples.py), is created with a server-side dry run: the routing webhook and the
  schema admit it, and it comes back a member of that PodGroup with its labels and the scheduler
  name the page runs the operator with (the webhook leaves a named scheduler alone).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import NAMESPACES, PODGROUPS, KubeClient
from podgroup_operator.domain.membership import group_name_of
from tests.deploy_helpers import kubectl
from tests.job_examples import EXAMPLES, Example

IDS = [example.file for example in EXAMPLES]


@pytest.mark.parametrize("example", EXAMPLES, ids=IDS)
async def test_the_example_passes_the_crd_and_the_webhooks(
    kube: KubeClient, kubeconfig: Path, operator: Any, namespace: str, example: Example
) -> None:
    await kube.patch(
        NAMESPACES,
        namespace,
        {"metadata": {"labels": {c.NAMESPACE_LABEL_GANG_SCHEDULING: c.OPT_IN_VALUE}}},
    )
    docs = example.documents()
    groups = example.podgroups(docs)
    for group in groups:
        created = await kube.create(PODGROUPS, group, namespace)
        assert created["spec"] == group["spec"], "the schema pruned or defaulted nothing"

    pods = example.pods(docs)
    assert pods
    for pod in pods:
        result = kubectl(
            "create",
            "--dry-run=server",
            "-n",
            namespace,
            "-o",
            "json",
            "-f",
            "-",
            kubeconfig=kubeconfig,
            stdin=json.dumps(pod),
        )
        admitted = json.loads(result.stdout)
        name = pod["metadata"]["name"]
        assert group_name_of(admitted) in {g["metadata"]["name"] for g in groups}, name
        assert admitted["metadata"]["labels"] == pod["metadata"]["labels"], name
        assert admitted["spec"]["schedulerName"] in example.schedulers, name
