"""ElasticQuota's API surface on a real control plane: the CRDs, the upgrade over scheduler-plugins'
CRD, Koordinator's group, the validating webhooks, `kubectl get eq` and `kubectl podgroup queues`.

A control plane of its own (one for the module): the tests replace the ElasticQuota CRD and start
operators with `--dialect-crds install`, which must not disturb the session's. The tests
run in file order: the first two need no operator, the later ones share one
(`quota_operator`), started once the Koordinator CRD of the second test is gone.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import CRDS, NAMESPACES, ApiError, Kind, KubeClient
from podgroup_operator.api.dialect_crds import koordinator_elastic_quota_crd
from podgroup_operator.devcluster import cluster as devcluster
from podgroup_operator.devcluster.process import OperatorProcess
from podgroup_operator.manifests import OPERATOR_NAMESPACE
from tests.conftest import REPO
from tests.deploy_helpers import (
    DEPLOY,
    KUBECTL,
    ensure_operator_namespace,
    kubectl,
    render_component,
    roles_bound_to_user,
)
from tests.kube_helpers import apply_crd
from tests.waiting import wait_for

FIXTURES = REPO / "tests" / "fixtures" / "quotas"
OURS = Kind(c.GROUP, c.VERSION, c.ELASTIC_QUOTA_PLURAL)
KOORDINATOR = Kind(c.KOORD_QUOTA_GROUP, c.VERSION, c.ELASTIC_QUOTA_PLURAL)
GPU = "nvidia.com/gpu"
DIALECT_CRDS = DEPLOY / "components" / "dialect-crds"


@pytest.fixture(scope="module")
async def quota_kube(own_cluster: devcluster.ClusterState) -> AsyncIterator[KubeClient]:
    """A client of the module's control plane, no CRD applied yet."""
    kube = KubeClient.from_kubeconfig(str(own_cluster.kubeconfig))
    yield kube
    await kube.close()


async def _gone(kube: KubeClient, name: str) -> bool:
    try:
        await kube.get(CRDS, name)
    except ApiError as exc:
        if exc.not_found:
            return True
        raise
    return False


async def delete_crd(kube: KubeClient, name: str) -> None:
    """Delete a CRD (with every object of it) and wait until the API server has let it go."""
    try:
        await kube.delete(CRDS, name)
    except ApiError as exc:
        if not exc.not_found:
            raise
    await wait_for(lambda: _gone(kube, name), 60, f"the CRD {name} to be deleted")


async def established(kube: KubeClient, name: str) -> bool:
    try:
        crd = await kube.get(CRDS, name)
    except ApiError as exc:
        if exc.not_found:
            return False
        raise
    conditions = crd.get("status", {}).get("conditions") or []
    return any(x["type"] == "Established" and x["status"] == "True" for x in conditions)


async def new_namespace(kube: KubeClient) -> str:
    name = f"eq-{uuid.uuid4().hex[:8]}"
    await kube.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    return name


def kubectl_in(
    kubeconfig: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return kubectl(*args, kubeconfig=kubeconfig, stdin=stdin, check=False)


# --- the upgrade over scheduler-plugins' CRD -----------------------------------------------------


async def test_ours_applies_over_scheduler_plugins_crd_and_keeps_their_quotas(
    quota_kube: KubeClient, own_cluster: devcluster.ClusterState
) -> None:
    """scheduler-plugins' CRD and one of their quotas, status written as their scheduler writes
    it; then `kubectl apply -f crds/` (the install path: `kubectl apply -k deploy/` includes the
    same files): the quota still reads, every field kept, and `kubectl get eq` shows it."""
    kube, kubeconfig = quota_kube, own_cluster.kubeconfig
    await delete_crd(kube, c.ELASTIC_QUOTA_CRD_NAME)
    applied = kubectl_in(kubeconfig, "apply", "-f", str(FIXTURES / "scheduler-plugins-crd.yaml"))
    assert applied.returncode == 0, applied.stderr
    await wait_for(lambda: established(kube, c.ELASTIC_QUOTA_CRD_NAME), 30, "their CRD")
    namespace = await new_namespace(kube)
    created = kubectl_in(
        kubeconfig, "apply", "-n", namespace, "-f", str(FIXTURES / "scheduler-plugins-quota.yaml")
    )
    assert created.returncode == 0, created.stderr
    await kube.patch_status(OURS, "quota1", namespace, {"used": {"cpu": "1500m", "memory": "1Gi"}})
    before = await kube.get(OURS, "quota1", namespace)

    upgraded = kubectl_in(kubeconfig, "apply", "-f", str(REPO / "crds"))
    assert upgraded.returncode == 0, upgraded.stderr
    crd = await kube.get(CRDS, c.ELASTIC_QUOTA_CRD_NAME)
    assert (
        "guarantee"
        in crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
            "properties"
        ]
    )
    await wait_for(lambda: established(kube, c.ELASTIC_QUOTA_CRD_NAME), 30, "our CRD")

    after = await kube.get(OURS, "quota1", namespace)
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert (
        after["spec"]
        == before["spec"]
        == {
            "max": {"cpu": 6, "memory": "8Gi"},
            "min": {"cpu": 4, "memory": "4Gi"},
        }
    )
    assert after["status"] == before["status"] == {"used": {"cpu": "1500m", "memory": "1Gi"}}
    # Writable under our schema: a status write checks the whole stored object against it.
    await kube.patch_status(OURS, "quota1", namespace, {"used": {"cpu": "2"}, "gangsWaiting": 1})
    listed = kubectl_in(kubeconfig, "get", "eq", "-n", namespace)
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert header.split() == ["NAME", "MIN", "MAX", "USED", "BORROWED", "WAITING", "AGE"]
    assert row.startswith("quota1")
    assert '"cpu":4' in row and '"memory":"8Gi"' in row and '"cpu":"2"' in row
    assert row.split()[-2] == "1"
    # Koordinator's group is not served here: queues draws ours alone, numbers from spec and status.
    drawn = plugin(kubeconfig, "queues")
    assert drawn.returncode == 0, drawn.stderr
    rows = [line.split() for line in drawn.stdout.splitlines()]
    assert rows[0][:5] == ["QUOTA", "RESOURCE", "USED", "MIN", "MAX"]
    assert rows[1] == [f"{namespace}/quota1", "cpu", "2", "4", "6", "0", "-", "-", "-", "1"]
    assert rows[2] == ["memory", "1Gi", "4Gi", "8Gi", "0", "-", "-", "-"]  # merged, kept


# --- Koordinator's group -------------------------------------------------------------------------


def start_operator(kubeconfig: Path, log: Path, *extra: str) -> OperatorProcess:
    process = OperatorProcess(kubeconfig, log, ["--dialect-crds", "install", *extra])
    process.start()
    try:
        process.wait_ready()
    except BaseException:
        process.stop()
        raise
    return process


async def test_an_existing_koordinator_crd_is_never_replaced_and_koordinator_never_blocked(
    quota_kube: KubeClient, own_cluster: devcluster.ClusterState, tmp_path: Path
) -> None:
    """Koordinator's own CRD (no status subresource, its schema) stays as it is under an
    operator run with --dialect-crds install, which says so in its log. Our webhook
    checks the quotas that CRD serves, yet never blocks Koordinator: its internal quotas (a max
    near 2^63) and its runtime annotations on a quota stored before the webhook pass."""
    kube, kubeconfig = quota_kube, own_cluster.kubeconfig
    await apply_crd(kube, yaml.safe_load((FIXTURES / "koordinator-crd.yaml").read_text()))
    before = await kube.get(CRDS, c.KOORD_ELASTIC_QUOTA_CRD_NAME)
    namespace = await new_namespace(kube)
    stored = quota_body(KOORDINATOR, "stored", {"min": {"cpu": "8"}, "max": {"cpu": "4"}})
    await kube.create(KOORDINATOR, stored, namespace)  # before any webhook: min above max
    log = tmp_path / "operator.log"
    process = start_operator(kubeconfig, log)
    try:
        # Ready means started: the install step runs before the runtime starts.
        assert f"CRD {c.KOORD_ELASTIC_QUOTA_CRD_NAME} exists and is not ours; left as it is" in (
            log.read_text()
        )
        process.install_webhooks()
        await wait_for(lambda: admits(kubeconfig, KOORDINATOR, namespace), 60, "the webhook")
        huge = "9223372036854775807"
        system = quota_body(KOORDINATOR, "koordinator-system-quota", {"max": {"cpu": huge}})
        await kube.create(KOORDINATOR, system, namespace)
        runtime = {f"{c.KOORD_QUOTA_PREFIX}/runtime": '{"cpu":"4"}'}
        await kube.patch(KOORDINATOR, "stored", {"metadata": {"annotations": runtime}}, namespace)
        with pytest.raises(ApiError) as refused:
            await kube.patch(KOORDINATOR, "stored", {"spec": {"max": {"cpu": "5"}}}, namespace)
        assert "validate-koordinator-elasticquota" in refused.value.message
        assert "spec.min.cpu: 8 is above spec.max.cpu 5; lower min or raise max" in (
            refused.value.message
        )
    finally:
        process.uninstall_webhooks()
        process.stop()
    after = await kube.get(CRDS, c.KOORD_ELASTIC_QUOTA_CRD_NAME)
    # Its spec and marks as Koordinator wrote them (the API server may update its status).
    assert after["spec"] == before["spec"]
    assert after["metadata"]["annotations"] == before["metadata"]["annotations"]
    assert after["metadata"]["labels"] == {"app.kubernetes.io/name": "koordinator"}
    assert "subresources" not in after["spec"]["versions"][0]
    await delete_crd(kube, c.KOORD_ELASTIC_QUOTA_CRD_NAME)


@pytest.fixture(scope="module")
def quota_operator(
    own_cluster: devcluster.ClusterState, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    """Our CRDs applied, and an operator run with --dialect-crds install where no
    Koordinator CRD exists, its webhooks installed."""
    applied = kubectl("apply", "-f", str(REPO / "crds"), kubeconfig=own_cluster.kubeconfig)
    assert applied.returncode == 0
    log = tmp_path_factory.mktemp("quota-operator") / "operator.log"
    process = start_operator(own_cluster.kubeconfig, log)
    try:
        process.install_webhooks()
        yield process
    finally:
        process.uninstall_webhooks()
        process.stop()
        print(f"\noperator log: {log}")


def quota_body(kind: Kind, name: str, spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{kind.group}/{kind.version}",
        "kind": c.ELASTIC_QUOTA_KIND,
        "metadata": {"name": name, **meta},
        "spec": spec,
    }


async def test_the_flag_installs_koordinators_group_where_none_exists(
    quota_kube: KubeClient, quota_operator: OperatorProcess
) -> None:
    """Where no CRD of Koordinator's group exists, the operator creates ours: labelled as its
    own, approved as the group requires, with the status subresource and our schema."""
    await wait_for(
        lambda: established(quota_kube, c.KOORD_ELASTIC_QUOTA_CRD_NAME), 30, "the CRD installed"
    )
    crd = await quota_kube.get(CRDS, c.KOORD_ELASTIC_QUOTA_CRD_NAME)
    wanted = koordinator_elastic_quota_crd()
    assert crd["metadata"]["labels"] == wanted["metadata"]["labels"]
    assert crd["metadata"]["annotations"] == wanted["metadata"]["annotations"]
    assert crd["spec"]["group"] == c.KOORD_QUOTA_GROUP
    assert crd["spec"]["names"] == wanted["spec"]["names"]
    (version,) = crd["spec"]["versions"]
    (expected,) = wanted["spec"]["versions"]
    assert version["schema"] == expected["schema"]
    assert version["subresources"] == {"status": {}}
    assert version["additionalPrinterColumns"] == expected["additionalPrinterColumns"]


# --- the webhooks --------------------------------------------------------------------------------

KOORD_PARENT = c.LABEL_KOORD_QUOTA_PARENT
INVALID: list[tuple[str, dict[str, Any], dict[str, Any], list[tuple[str, str]]]] = [
    (
        "min above max",
        {"min": {GPU: 8}, "max": {GPU: 4}},
        {},
        [("spec.min.nvidia.com/gpu", "lower min or raise max")],
    ),
    (
        "guarantee above min",
        {"min": {GPU: 4}, "guarantee": {GPU: 6}},
        {},
        [("spec.guarantee.nvidia.com/gpu", "lower guarantee or raise min")],
    ),
    (
        "parent not a quota name",
        {"parent": "a/b/c"},
        {},
        [("spec.parent", "write `name`")],
    ),
    (
        "parent is itself",
        {"parent": "bad"},
        {},
        [("spec.parent", "name another quota or none")],
    ),
    (
        "alias disagrees",
        {"parent": "org-a"},
        {"labels": {KOORD_PARENT: "org-b"}},
        [("spec.parent", "keep one of the two")],
    ),
    (
        "koordinator keys malformed",
        {"weight": 2},
        {
            "labels": {c.LABEL_KOORD_QUOTA_IS_PARENT: "yes"},
            "annotations": {c.ANNOTATION_KOORD_SHARED_WEIGHT: '{"cpu": 4}'},
        },
        [
            (f'metadata.labels["{c.LABEL_KOORD_QUOTA_IS_PARENT}"]', 'use "true" or "false"'),
            ("spec.weight", "keep one of the two"),
        ],
    ),
    (
        "every problem at once",
        {"min": {GPU: 8}, "max": {GPU: 4}, "guarantee": {"cpu": "1"}, "parent": "x/y/z"},
        {},
        [
            ("spec.min.nvidia.com/gpu", "lower min or raise max"),
            ("spec.guarantee.cpu", "lower guarantee or raise min"),
            ("spec.parent", "namespace/name"),
        ],
    ),
]


@pytest.mark.parametrize("kind", [OURS, KOORDINATOR], ids=["ours", "koordinator"])
@pytest.mark.parametrize(
    ("spec", "meta", "expected"),
    [case[1:] for case in INVALID],
    ids=[case[0] for case in INVALID],
)
async def test_each_invalid_quota_is_refused_naming_the_field_and_the_fix(
    quota_kube: KubeClient,
    quota_operator: OperatorProcess,
    own_cluster: devcluster.ClusterState,
    kind: Kind,
    spec: dict[str, Any],
    meta: dict[str, Any],
    expected: list[tuple[str, str]],
) -> None:
    """kubectl apply is refused by our webhook, its message naming each field and its fix."""
    namespace = await new_namespace(quota_kube)
    await wait_for(lambda: admits(own_cluster.kubeconfig, kind, namespace), 60, f"{kind} served")
    body = quota_body(kind, "bad", spec, **meta)
    refused = kubectl_in(
        own_cluster.kubeconfig, "apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(body)
    )
    assert refused.returncode != 0
    message = refused.stderr
    webhook = "validate-elasticquota" if kind is OURS else "validate-koordinator-elasticquota"
    assert f'admission webhook "{webhook}.{c.GROUP}" denied the request' in message, message
    for field, fix in expected:
        assert f"{field}:" in message and fix in message, (field, fix, message)
    gone = kubectl_in(own_cluster.kubeconfig, "get", f"{kind.plural}.{kind.group}", "-n", namespace)
    assert "bad" not in gone.stdout


async def admits(kubeconfig: Path, kind: Kind, namespace: str) -> bool:
    """A valid quota of `kind` passes a server dry run: the CRD serves it and our webhook
    answers (Kopf learns of a CRD created after its start from its watch of CRDs)."""
    body = quota_body(kind, f"probe-{uuid.uuid4().hex[:6]}", {"min": {"cpu": "1"}})
    done = await asyncio.to_thread(
        kubectl_in,
        kubeconfig,
        "apply",
        "--dry-run=server",
        "-n",
        namespace,
        "-f",
        "-",
        stdin=yaml.safe_dump(body),
    )
    return done.returncode == 0


# --- manifests of both dialects, the example, and the views --------------------------------------


async def test_scheduler_plugins_and_koordinator_manifests_apply_unchanged(
    quota_kube: KubeClient, quota_operator: OperatorProcess, own_cluster: devcluster.ClusterState
) -> None:
    namespace = await new_namespace(quota_kube)
    kubeconfig = own_cluster.kubeconfig
    for kind in (OURS, KOORDINATOR):
        await wait_for(lambda kind=kind: admits(kubeconfig, kind, namespace), 60, f"{kind}")
    for manifest in ("scheduler-plugins-quota.yaml", "koordinator-quotas.yaml"):
        done = kubectl_in(kubeconfig, "apply", "-n", namespace, "-f", str(FIXTURES / manifest))
        assert done.returncode == 0, done.stderr
    written = {
        (doc["metadata"]["name"]): doc
        for manifest in ("scheduler-plugins-quota.yaml", "koordinator-quotas.yaml")
        for doc in yaml.safe_load_all((FIXTURES / manifest).read_text())
    }
    for name, doc in written.items():
        kind = OURS if doc["apiVersion"].startswith(c.GROUP) else KOORDINATOR
        stored = await quota_kube.get(kind, name, namespace)
        assert stored["spec"] == doc["spec"], name
        for part in ("labels", "annotations"):
            mine = doc["metadata"].get(part) or {}
            assert mine.items() <= (stored["metadata"].get(part) or {}).items(), (name, part)


def plugin(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`kubectl podgroup ARGS`: kubectl finds `kubectl-podgroup` beside it, as after pip install."""
    env = {**os.environ, "PATH": f"{KUBECTL.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env["KUBECONFIG"] = str(kubeconfig)
    return subprocess.run(
        [str(KUBECTL), "podgroup", *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


async def test_the_example_applies_and_queues_draws_the_tree(
    quota_kube: KubeClient, quota_operator: OperatorProcess, own_cluster: devcluster.ClusterState
) -> None:
    """examples/elastic-quota/ as its comment says: applied, then `kubectl get eq -A` and
    `kubectl podgroup queues` show the org over its two teams across namespaces."""
    kubeconfig = own_cluster.kubeconfig
    probe_namespace = await new_namespace(quota_kube)
    await wait_for(lambda: admits(kubeconfig, OURS, probe_namespace), 60, "ElasticQuota served")
    example = REPO / "examples" / "elastic-quota" / "two-teams.yaml"
    done = kubectl_in(kubeconfig, "apply", "-f", str(example))
    assert done.returncode == 0, done.stderr
    listed = kubectl_in(kubeconfig, "get", "eq", "-A", "-o", "wide")  # eq: ours, not Koordinator's
    assert listed.returncode == 0, listed.stderr
    rows = {tuple(line.split()[:2]): line for line in listed.stdout.splitlines()[1:]}
    assert {("platform", "org-ml"), ("team-a", "gpus"), ("team-b", "gpus")} <= set(rows)
    assert "platform/org-ml" in rows[("team-b", "gpus")]

    async def written() -> bool:
        """The leader has written each quota's status (within its 2 s round)."""
        for namespace, name in (("platform", "org-ml"), ("team-a", "gpus"), ("team-b", "gpus")):
            body = await quota_kube.get(OURS, name, namespace)
            if GPU not in ((body.get("status") or {}).get("used") or {}):
                return False
        return True

    await wait_for(written, 30, "the leader to write the example's quota statuses")
    drawn = plugin(kubeconfig, "queues")
    assert drawn.returncode == 0, drawn.stderr
    lines = drawn.stdout.splitlines()
    assert lines[0].split()[:3] == ["QUOTA", "RESOURCE", "USED"]
    rows: dict[tuple[str, str], list[str]] = {}
    quota = ""
    for line in lines[1:]:
        fields = line.split()
        if not line.startswith(" "):  # a quota's first row: its name (after the tree's branch)
            quota = next(f for f in fields if "/" in f and not f.startswith(("├", "└")))
            fields = fields[fields.index(quota) + 1 :]
        if fields and fields[0] == GPU:
            rows[quota, GPU] = fields[1:]
    assert rows["platform/org-ml", GPU][:3] == ["0", "16", "16"]  # no pod is charged to it
    # team-b's guarantee, held by the org too: what the org never lends.
    assert rows["platform/org-ml", GPU][3] == "4"
    assert rows["team-a/gpus", GPU][:4] == ["0", "8", "12", "0"]
    assert rows["team-b/gpus", GPU][:4] == ["0", "8", "12", "4"]
    assert lines.index(next(x for x in lines if "team-a/gpus" in x)) > lines.index(
        next(x for x in lines if x.startswith("platform/org-ml"))
    )
    assert any(x.startswith("├─ team-a/gpus") for x in lines)
    assert any(x.startswith("└─ team-b/gpus") for x in lines)
    # The Koordinator tree of the previous test, drawn by its labels.
    parent = next(i for i, line in enumerate(lines) if "/koord-parent" in line)
    child = next(line for line in lines[parent + 1 :] if not line.startswith(" "))
    assert child.startswith("└─ ") and "/koord-child" in child


# --- RBAC -----------------------------------------------------------------------------------------

USER = "podgroup-operator"
"""The dev cluster's non-admin identity the RBAC tests bind the install's roles to."""


async def test_the_install_roles_let_the_operator_install_read_and_write_quota_status(
    quota_kube: KubeClient,
    quota_operator: OperatorProcess,
    own_cluster: devcluster.ClusterState,
    tmp_path: Path,
) -> None:
    """As the non-admin identity bound to the roles of deploy/ with the component
    dialect-crds: the operator creates the Koordinator-group CRD at start, and that
    identity lists ElasticQuotas of both groups and patches their status."""
    kube = quota_kube
    documents = render_component(DEPLOY / "overlays" / "self-managed", DIALECT_CRDS)
    await ensure_operator_namespace(kube)
    namespace = await new_namespace(kube)
    kubeconfig = own_cluster.kubeconfig
    for kind in (OURS, KOORDINATOR):
        await wait_for(lambda kind=kind: admits(kubeconfig, kind, namespace), 60, f"{kind}")
        await kube.create(kind, quota_body(kind, "team", {"min": {"cpu": "1"}}), namespace)
    await delete_crd(kube, c.KOORD_ELASTIC_QUOTA_CRD_NAME)
    async with roles_bound_to_user(kube, documents, USER):
        log = tmp_path / "restricted.log"
        process = start_operator(
            own_cluster.kubeconfig_for(USER),
            log,
            "--webhooks",
            "off",
            "--leader-elect-namespace",
            OPERATOR_NAMESPACE,
        )
        try:
            assert f"CRD {c.KOORD_ELASTIC_QUOTA_CRD_NAME} installed" in log.read_text()
        finally:
            process.stop()
        await wait_for(
            lambda: established(kube, c.KOORD_ELASTIC_QUOTA_CRD_NAME), 30, "the CRD installed"
        )
        # An earlier release's (fewer columns): brought up to date at the next start.
        crd = await kube.get(CRDS, c.KOORD_ELASTIC_QUOTA_CRD_NAME)
        wanted = crd["spec"]["versions"][0]["additionalPrinterColumns"]
        crd["spec"]["versions"][0]["additionalPrinterColumns"] = wanted[:2]
        await kube.replace(CRDS, c.KOORD_ELASTIC_QUOTA_CRD_NAME, crd)
        process = start_operator(
            own_cluster.kubeconfig_for(USER),
            log,
            "--webhooks",
            "off",
            "--leader-elect-namespace",
            OPERATOR_NAMESPACE,
        )
        try:
            assert f"CRD {c.KOORD_ELASTIC_QUOTA_CRD_NAME} updated (ours" in log.read_text()
        finally:
            process.stop()
        crd = await kube.get(CRDS, c.KOORD_ELASTIC_QUOTA_CRD_NAME)
        assert crd["spec"]["versions"][0]["additionalPrinterColumns"] == wanted
        # Up to date: not written again (the API server's defaults do not count as a change).
        process = start_operator(
            own_cluster.kubeconfig_for(USER),
            log,
            "--webhooks",
            "off",
            "--leader-elect-namespace",
            OPERATOR_NAMESPACE,
        )
        try:
            assert f"CRD {c.KOORD_ELASTIC_QUOTA_CRD_NAME} exists, ours and up to date" in (
                log.read_text()
            )
        finally:
            process.stop()
        await kube.create(KOORDINATOR, quota_body(KOORDINATOR, "team", {}), namespace)
        restricted = KubeClient.from_kubeconfig(str(own_cluster.kubeconfig_for(USER)))
        try:
            for kind in (OURS, KOORDINATOR):
                listed = await restricted.list(kind)
                assert (namespace, "team") in {
                    (item["metadata"]["namespace"], item["metadata"]["name"])
                    for item in listed["items"]
                }
                written = await restricted.patch_status(
                    kind, "team", namespace, {"used": {"cpu": "1"}, "gangsWaiting": 2}
                )
                # Merged into what the running operator may have written meanwhile.
                assert written["status"]["used"]["cpu"] == "1"
                assert written["status"]["gangsWaiting"] == 2
                # Status only: the spec is the tenants' and administrators'.
                with pytest.raises(ApiError) as refused:
                    await restricted.patch(kind, "team", {"spec": {"weight": 2}}, namespace)
                assert refused.value.forbidden
        finally:
            await restricted.close()
