"""examples/jobs/: each manifest parses, and the parts the operator reads carry the right keys.

The job controllers (Kubeflow Trainer, mpi-operator, JobSet, LeaderWorkerSet, Volcano, KubeRay,
the Spark operator) and their kinds are not installed on the dev cluster, so their objects cannot
be created there. Here, in memory: the YAML parses into the kinds the page names; each PodGroup,
the manifest's own or the one its controller would create (tests/job_examples.py), passes the
webhook's validation; each pod the controller would make from the manifest's templates, with the
labels it adds, is a member of that PodGroup, names a scheduler the page runs the operator with,
and falls into the sub-groups the page promises (`matchLabelKeys` read from the controller's
labels). tests/integration/test_job_examples.py sends the PodGroups and those pods through the
CRD and the webhooks of the real control plane.
"""

from __future__ import annotations

import re

import pytest

from podgroup_operator import constants as c
from podgroup_operator.api.models import PodGroupSpec
from podgroup_operator.api.validation import spec_errors
from podgroup_operator.domain.membership import group_name_of, membership_conflict
from podgroup_operator.domain.subgroups import sub_group_members
from tests.job_examples import EXAMPLES, JOBS, PAGES, VOLCANO_PODGROUP, Example

IDS = [example.file for example in EXAMPLES]


def test_every_manifest_is_an_example_here() -> None:
    assert sorted(p.name for p in JOBS.glob("*.yaml")) == sorted(IDS)


@pytest.mark.parametrize("example", EXAMPLES, ids=IDS)
def test_the_manifest_holds_the_kinds_its_page_names(example: Example) -> None:
    docs = example.documents()
    assert tuple((d["apiVersion"], d["kind"]) for d in docs) == example.kinds
    for document in docs:
        assert document["metadata"]["name"], document["kind"]
        assert "namespace" not in document["metadata"], "applied to the user's namespace"


@pytest.mark.parametrize("example", EXAMPLES, ids=IDS)
def test_the_page_shows_the_manifest(example: Example) -> None:
    page = (PAGES / example.page).read_text()
    assert f"examples/jobs/{example.file}" in page
    for _api_version, kind in example.kinds:
        assert f"`{kind}`" in page or kind == "PodGroup", (example.page, kind)


@pytest.mark.parametrize("example", EXAMPLES, ids=IDS)
def test_each_podgroup_passes_the_webhooks_validation(example: Example) -> None:
    groups = example.podgroups(example.documents())
    assert groups
    for group in groups:
        assert spec_errors(group["spec"]) == [], group["metadata"]["name"]


@pytest.mark.parametrize("example", EXAMPLES, ids=IDS)
def test_each_pod_joins_a_podgroup_of_the_manifest(example: Example) -> None:
    docs = example.documents()
    groups = {g["metadata"]["name"]: g for g in example.podgroups(docs)}
    pods = example.pods(docs)
    members: dict[str, int] = {}
    for pod in pods:
        name = group_name_of(pod)
        assert name in groups, (pod["metadata"]["name"], name)
        members[name] = members.get(name, 0) + 1
        assert pod["spec"].get("schedulerName", "") in example.schedulers, pod["metadata"]["name"]
    for name, group in groups.items():
        assert members.get(name, 0) >= group["spec"]["minMember"], name


def test_volcanos_own_annotation_loses_to_the_label_and_is_reported() -> None:
    (example,) = [e for e in EXAMPLES if e.file == "volcano-job.yaml"]
    for pod in example.pods(example.documents()):
        assert pod["metadata"]["annotations"][c.ANNOTATION_GROUP_NAME] == VOLCANO_PODGROUP
        assert group_name_of(pod) == "tf-dist"
        conflict = membership_conflict(pod)
        assert conflict is not None and "tf-dist" in conflict.message


@pytest.mark.parametrize("example", [e for e in EXAMPLES if e.sub_groups], ids=lambda e: e.file)
def test_match_label_keys_form_the_sub_groups_the_page_promises(example: Example) -> None:
    docs = example.documents()
    (group,) = example.podgroups(docs)
    spec = PodGroupSpec.model_validate(group["spec"])
    formed = sub_group_members(spec, example.pods(docs))
    assert {m.name: len(m.pods) for m in formed} == example.sub_groups
    assert all(len(m.pods) >= m.least for m in formed)
    for sub in group["spec"]["subGroups"]:
        for key in sub.get("matchLabelKeys", []):
            assert all(key in p["metadata"]["labels"] for p in example.pods(docs)), key


def test_the_index_lists_every_task_page() -> None:
    index = (PAGES / "README.md").read_text()
    for page in sorted(PAGES.glob("*.md")):
        if page.name != "README.md":
            assert f"({page.name}" in index, page.name


def test_the_topology_page_names_labels_and_no_placeholder_domains() -> None:
    page = (PAGES / "topology-labels.md").read_text()
    for label in (
        "nvidia.com/gpu.clique",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "kubernetes.io/hostname",
    ):
        assert f"`{label}`" in page, label
    assert not re.search(r"example\.com/(rack|block)", page.split("## Without such labels")[0])
