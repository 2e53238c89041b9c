"""The Helm chart (deploy/helm/podgroup-operator), through Helm's own code (helm-python-sdk).

* Lint and render offline: the default values render the kustomize install (deploy/base with
  deploy/overlays/self-managed; certificates.mode=cert-manager: overlays/cert-manager) object for
  object, so the two cannot drift; each value lands where it should and the operator's own
  argument parser accepts what the chart passes it; a wrong value is refused, naming it.
* On the dev cluster: install (the API versions the server serves are chosen), a gang reaching
  Running under an operator run with the chart's ServiceAccount and the Deployment's arguments,
  an upgrade that leaves every PodGroup untouched, and an uninstall after which nothing refuses
  PodGroup writes.

No pod runs on the dev cluster (no kubelet for the operator's image), so the operator runs as a
local process: the rendered Deployment's arguments and environment, its webhook server and
probes on local ports, authenticated as the chart's ServiceAccount by a token. The chart's webhook
configurations, which call the Service, are pointed at that process (rules and failure policies
kept) while it runs, and put back as Helm wrote them before Helm touches them again.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import CRDS, PODGROUPS, ApiError, Kind, KubeClient
from podgroup_operator.adapters.webhook_configs import CONFIGURATION_KINDS
from podgroup_operator.api.dialect_crds import DIALECT_CRDS as DIALECT_CRD_MANIFESTS
from podgroup_operator.cli import build_parser
from podgroup_operator.devcluster.process import OperatorProcess
from podgroup_operator.manifests import CONFIG_NAMES, OPERATOR_NAMESPACE, uninstall_local
from podgroup_operator.settings import OperatorSettings
from podgroup_operator.tls import ensure_ca
from tests.builders import podgroup
from tests.conftest import CRD_FILE, REPO, ClusterUnderTest
from tests.deploy_helpers import (
    DEPLOY,
    components_for,
    configurations_of_ours,
    find,
    kubectl,
    render,
    webhook_configurations_restored,
)
from tests.kube_helpers import apply_crd, gang_pods, pool
from tests.waiting import wait_for

CHART = DEPLOY / "helm" / "podgroup-operator"
RELEASE = "podgroup-operator"
SELF_MANAGED = DEPLOY / "overlays" / "self-managed"
CERT_MANAGER = DEPLOY / "overlays" / "cert-manager"
AGGREGATE = DEPLOY / "components" / "aggregate-tenant-roles"
MONITORING = DEPLOY / "components" / "monitoring"
DIALECT_CRDS = DEPLOY / "components" / "dialect-crds"


def render_aggregated() -> list[dict[str, Any]]:
    """The self-managed install with the aggregation component, added as its comment says."""
    return render_with(AGGREGATE)


def render_with(component: Path) -> list[dict[str, Any]]:
    """The self-managed install with one component, added as the components' comments say."""
    with tempfile.TemporaryDirectory() as tmp:
        overlay = Path(tmp)
        (overlay / "kustomization.yaml").write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "kustomize.config.k8s.io/v1beta1",
                    "kind": "Kustomization",
                    "resources": [os.path.relpath(SELF_MANAGED, overlay)],
                    "components": [os.path.relpath(component, overlay)],
                }
            )
        )
        return render(overlay)


ACCOUNT = "podgroup-operator"
DEPLOYMENTS = Kind("apps", "v1", "deployments")
CLUSTER_ROLES = Kind("rbac.authorization.k8s.io", "v1", "clusterroles")
WARNING = 2
"""Severity of a lint finding that is a warning (3: an error; 1: information)."""


# --- rendering -----------------------------------------------------------------------------------


def render_chart(values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The chart's templates rendered offline, as `helm template -n podgroup-operator` does."""
    with helm.Chart.load(CHART) as chart:
        rendered = chart.render(values, name=RELEASE, namespace=OPERATOR_NAMESPACE)
    return [
        document
        for path, text in sorted(rendered.items())
        if path.endswith(".yaml")
        for document in yaml.safe_load_all(text)
        if document
    ]


def chart_crds() -> list[dict[str, Any]]:
    with helm.Chart.load(CHART) as chart:
        return [yaml.safe_load(crd["data"]) for crd in chart.crds]


def container(documents: list[dict[str, Any]]) -> dict[str, Any]:
    (only,) = find(documents, "Deployment")["spec"]["template"]["spec"]["containers"]
    return only


def pod_spec(documents: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = find(documents, "Deployment")["spec"]["template"]["spec"]
    return spec


def run_settings(args: list[str]) -> dict[str, Any]:
    """What `podgroup-operator run ARGS` runs with: the CLI's own parser decides (a flag the
    chart passes that the operator does not know fails here)."""
    parsed = vars(build_parser().parse_args(["run", *args]))
    parsed.pop("func")
    return parsed


def by_name(documents: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["kind"], d["metadata"]["name"]): d for d in documents}


def without_labels_and_args(document: dict[str, Any]) -> dict[str, Any]:
    """The object but its metadata.labels (Helm adds its own) and the operator's arguments
    (compared by what they set, `run_settings`)."""
    body = copy.deepcopy(document)
    body["metadata"].pop("labels", None)
    if body["kind"] == "Deployment":
        for each in body["spec"]["template"]["spec"]["containers"]:
            each.pop("args", None)
    return body


MONITORING_ON = {
    "monitoring": {"dashboard": {"enabled": True}, "prometheusRule": {"enabled": True}}
}


@pytest.mark.parametrize(
    ("values", "kustomize"),
    [
        ({}, lambda: render(SELF_MANAGED)),
        ({"certificates": {"mode": "cert-manager"}}, lambda: render(CERT_MANAGER)),
        (MONITORING_ON, lambda: render_with(MONITORING)),
        ({"dialects": {"installCRDs": True}}, lambda: render_with(DIALECT_CRDS)),
    ],
    ids=["self-managed", "cert-manager", "monitoring", "dialect-crds"],
)
def test_the_chart_renders_the_kustomize_install(values: dict[str, Any], kustomize: Any) -> None:
    """Object for object: kinds, names, RBAC rules, webhook rules and failure policies, security
    context, probes, volumes, the dashboard and the alerts, everything but the labels Helm adds
    and the order of arguments."""
    rendered = kustomize()
    kustomized = by_name(rendered)
    charted = by_name(render_chart(values) + chart_crds())
    # The namespace is made by `helm install --create-namespace`; Helm cannot own the namespace
    # its release is stored in.
    assert set(kustomized) - set(charted) == {("Namespace", OPERATOR_NAMESPACE)}
    assert set(charted) - set(kustomized) == set()
    for key, chart_object in charted.items():
        kustomize_object = kustomized[key]
        assert without_labels_and_args(chart_object) == without_labels_and_args(kustomize_object), (
            key
        )
        if key[0] != "CustomResourceDefinition":  # Helm installs crds/ as they are, unlabelled
            labels = chart_object["metadata"]["labels"]
            assert kustomize_object["metadata"].get("labels", {}).items() <= labels.items(), key
    assert run_settings(container(render_chart(values))["args"]) == run_settings(
        container(rendered)["args"]
    )


def test_the_chart_is_the_release_the_package_is() -> None:
    """The chart installs the package's version (the image tag by default) and the CRD that
    `podgroup-operator crd` generates (tests/unit/api/test_api_crd.py keeps the copy current)."""
    with helm.Chart.load(CHART) as chart:
        metadata = chart.metadata
        defaults = chart.values
    package = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert metadata["appVersion"] == package
    assert defaults["image"]["tag"] == ""
    assert container(render_chart())["image"] == f"podgroup-operator:{package}"
    assert sorted(chart_crds(), key=lambda crd: crd["metadata"]["name"]) == [
        yaml.safe_load(path.read_text()) for path in sorted((REPO / "crds").glob("*.yaml"))
    ]


def test_lint_is_clean() -> None:
    report = helm.lint(CHART, namespace=OPERATOR_NAMESPACE, strict=True)
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= WARNING] == []


DIGEST = "sha256:" + "0123456789abcdef" * 4


def _image(documents: list[dict[str, Any]]) -> None:
    operator = container(documents)
    assert operator["image"] == f"registry.example/batch/podgroup-operator:1.2.3@{DIGEST}"
    assert operator["imagePullPolicy"] == "Always"


def _replicas(documents: list[dict[str, Any]]) -> None:
    assert find(documents, "Deployment")["spec"]["replicas"] == 5


def _resources(documents: list[dict[str, Any]]) -> None:
    assert container(documents)["resources"] == {
        "requests": {"cpu": "1", "memory": "1Gi"},
        "limits": {"memory": "8Gi"},
    }


def _scheduler_names(documents: list[dict[str, Any]]) -> None:
    settings = run_settings(container(documents)["args"])
    assert settings["scheduler_name"] == ["podgroup-scheduler", "volcano"]


def _namespaces(documents: list[dict[str, Any]]) -> None:
    assert run_settings(container(documents)["args"])["namespace"] == ["team-a", "team-b"]


def _dialect_crds(documents: list[dict[str, Any]]) -> None:
    """`--dialect-crds install`, with create on CRDs and get and update on exactly the CRDs
    the operator installs (api/dialect_crds.py), so a CRD added there cannot be left out."""
    assert run_settings(container(documents)["args"])["dialect_crds"] == "install"
    rules = find(documents, "ClusterRole", "podgroup-operator")["rules"]
    crd_rules = [r for r in rules if "customresourcedefinitions" in r["resources"]]
    assert {
        "apiGroups": ["apiextensions.k8s.io"],
        "resources": ["customresourcedefinitions"],
        "verbs": ["create"],
    } in crd_rules
    (named,) = [r for r in crd_rules if "resourceNames" in r]
    assert sorted(named["resourceNames"]) == sorted(DIALECT_CRD_MANIFESTS)
    assert named["verbs"] == ["get", "update"]


def _gang_group_trust(documents: list[dict[str, Any]]) -> None:
    settings = run_settings(container(documents)["args"])
    assert settings["gang_group_trust"] == ["team-a,team-a-eval", "x,y,z"]


def _provisioning_class(documents: list[dict[str, Any]]) -> None:
    settings = run_settings(container(documents)["args"])
    assert settings["provisioning_class"] == "best-effort-atomic-scale-up.autoscaling.x-k8s.io"


def _reservation_timeout(documents: list[dict[str, Any]]) -> None:
    settings = run_settings(container(documents)["args"])
    assert settings["reservation_timeout"] == 600


def _tenant_roles_aggregated(documents: list[dict[str, Any]]) -> None:
    edit = find(documents, "ClusterRole", "podgroup-operator-tenant-edit")["metadata"]["labels"]
    view = find(documents, "ClusterRole", "podgroup-operator-tenant-view")["metadata"]["labels"]
    aggregate = "rbac.authorization.k8s.io/aggregate-to-"
    assert edit[f"{aggregate}edit"] == edit[f"{aggregate}admin"] == "true"
    assert view[f"{aggregate}view"] == "true" and f"{aggregate}edit" not in view
    kustomized = by_name(render_aggregated())
    for name in ("podgroup-operator-tenant-edit", "podgroup-operator-tenant-view"):
        charted = find(documents, "ClusterRole", name)
        labels = kustomized["ClusterRole", name]["metadata"]["labels"]
        assert labels.items() <= charted["metadata"]["labels"].items()
        assert without_labels_and_args(charted) == without_labels_and_args(
            kustomized["ClusterRole", name]
        )


def _logging(documents: list[dict[str, Any]]) -> None:
    settings = run_settings(container(documents)["args"])
    assert (settings["log_level"], settings["log_format"]) == ("debug", "json")


def _cert_manager(documents: list[dict[str, Any]]) -> None:
    settings = run_settings(container(documents)["args"])
    assert settings["webhook_certs"] == "mounted"
    volumes = {v["name"]: v for v in pod_spec(documents)["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "podgroup-operator-webhook-tls"
    certificate = find(documents, "Certificate", "podgroup-operator-webhook")
    assert certificate["spec"]["secretName"] == "podgroup-operator-webhook-tls"
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        annotations = find(documents, kind)["metadata"]["annotations"]
        assert annotations["cert-manager.io/inject-ca-from"] == (
            f"{OPERATOR_NAMESPACE}/podgroup-operator-webhook"
        )
    assert not [d for d in documents if d["metadata"]["name"] == "podgroup-operator-webhook-tls"]


def _metrics(documents: list[dict[str, Any]]) -> None:
    operator = container(documents)
    assert run_settings(operator["args"])["metrics_address"] == "0.0.0.0:9090"
    ports = {p["name"]: p["containerPort"] for p in operator["ports"]}
    assert ports["metrics"] == 9090
    assert operator["readinessProbe"]["httpGet"]["port"] == "metrics"
    assert not [d for d in documents if d["kind"] == "ServiceMonitor"]


def _service_monitor(documents: list[dict[str, Any]]) -> None:
    monitor = find(documents, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    service = find(documents, "Service", "podgroup-operator-metrics")
    (port,) = service["spec"]["ports"]
    assert (port["port"], port["targetPort"]) == (8081, "metrics")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= (
        service["metadata"]["labels"].items()
    )
    assert monitor["spec"]["endpoints"] == [
        {"port": "metrics", "path": "/metrics", "interval": "15s"}
    ]
    pod_labels = find(documents, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    # The webhook Service is not scraped.
    webhook = find(documents, "Service", "podgroup-operator-webhook")["metadata"]["labels"]
    assert not monitor["spec"]["selector"]["matchLabels"].items() <= webhook.items()


def _monitoring(documents: list[dict[str, Any]]) -> None:
    dashboard = find(documents, "ConfigMap", "podgroup-operator-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = (MONITORING / "podgroup-operator.json").read_text()
    assert dashboard["data"] == {"podgroup-operator.json": shipped}
    assert json.loads(shipped)["uid"] == "podgroup-operator"
    rule = find(documents, "PrometheusRule", "podgroup-operator")
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    alerts = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    assert rule["spec"] == alerts["spec"]
    assert "{{ $labels.reason }}" in json.dumps(rule["spec"])  # Prometheus' templates kept
    assert not [d for d in render_chart() if d["kind"] in ("PrometheusRule", "ConfigMap")]


PLACEMENT = {
    "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
    "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "arch", "operator": "In", "values": ["x"]}]}
                ]
            }
        }
    },
    "priorityClassName": "system-cluster-critical",
}


def _placement(documents: list[dict[str, Any]]) -> None:
    spec = pod_spec(documents)
    assert {key: spec[key] for key in PLACEMENT} == PLACEMENT


def _labels_and_annotations(documents: list[dict[str, Any]]) -> None:
    for document in documents:
        meta = document["metadata"]
        assert meta["labels"]["team"] == "batch", document["kind"]
        assert meta["annotations"]["owner"] == "platform", document["kind"]
    template = find(documents, "Deployment")["spec"]["template"]["metadata"]
    assert template["labels"]["sidecar"] == "off"
    assert template["annotations"] == {"scrape": "no"}
    # Selectors stay the base's: a label of the user's never moves what the Deployment owns.
    selector = find(documents, "Deployment")["spec"]["selector"]["matchLabels"]
    assert selector == {
        "app.kubernetes.io/name": "podgroup-operator",
        "app.kubernetes.io/component": "operator",
    }


OPTIONS = [
    pytest.param(
        {
            "image": {
                "repository": "registry.example/batch/podgroup-operator",
                "tag": "1.2.3",
                "digest": DIGEST,
                "pullPolicy": "Always",
            }
        },
        _image,
        id="image",
    ),
    pytest.param({"replicas": 5}, _replicas, id="replicas"),
    pytest.param(
        {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "8Gi"}}},
        _resources,
        id="resources",
    ),
    pytest.param(
        {"schedulerNames": ["podgroup-scheduler", "volcano"]}, _scheduler_names, id="schedulers"
    ),
    pytest.param({"watchNamespaces": ["team-a", "team-b"]}, _namespaces, id="namespaces"),
    pytest.param(
        {"gangGroupTrust": ["team-a,team-a-eval", "x,y,z"]}, _gang_group_trust, id="trust"
    ),
    pytest.param(
        {"provisioningClass": "best-effort-atomic-scale-up.autoscaling.x-k8s.io"},
        _provisioning_class,
        id="provisioning",
    ),
    pytest.param({"reservationTimeoutSeconds": 600}, _reservation_timeout, id="reservation"),
    pytest.param({"tenantRoles": {"aggregate": True}}, _tenant_roles_aggregated, id="aggregate"),
    pytest.param({"logLevel": "debug", "logFormat": "json"}, _logging, id="logging"),
    pytest.param({"certificates": {"mode": "cert-manager"}}, _cert_manager, id="cert-manager"),
    pytest.param({"metrics": {"port": 9090}}, _metrics, id="metrics-port"),
    pytest.param(
        {
            "metrics": {
                "serviceMonitor": {
                    "enabled": True,
                    "interval": "15s",
                    "labels": {"release": "prometheus"},
                }
            }
        },
        _service_monitor,
        id="service-monitor",
    ),
    pytest.param(
        {
            "monitoring": {
                "dashboard": {"enabled": True},
                "prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}},
            }
        },
        _monitoring,
        id="monitoring",
    ),
    pytest.param(PLACEMENT, _placement, id="placement"),
    pytest.param({"dialects": {"installCRDs": True}}, _dialect_crds, id="dialect-crds"),
    pytest.param(
        {
            "labels": {"team": "batch"},
            "annotations": {"owner": "platform"},
            "podLabels": {"sidecar": "off"},
            "podAnnotations": {"scrape": "no"},
        },
        _labels_and_annotations,
        id="labels-annotations",
    ),
]


@pytest.mark.parametrize(("values", "check"), OPTIONS)
def test_each_value_renders_where_it_should(values: dict[str, Any], check: Any) -> None:
    documents = render_chart(values)
    check(documents)
    report = helm.lint(CHART, values, namespace=OPERATOR_NAMESPACE, strict=True)
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= WARNING] == []


@pytest.mark.parametrize(
    ("kube_version", "deprecated"),
    [
        ("v1.20.0", []),
        ("v1.25.0", []),
        ("v1.28.0", ["flowcontrol.apiserver.k8s.io/v1beta2 FlowSchema is deprecated"] * 2),
        ("v1.30.0", []),
    ],
)
def test_api_versions_follow_the_kubernetes_version(
    kube_version: str, deprecated: list[str]
) -> None:
    """As deploy/components choose them: FlowSchemas v1beta1 before 1.23, v1beta2 before 1.29,
    then v1; PodDisruptionBudget policy/v1beta1 before 1.21. Helm's lint renders for a version
    and names any API it deprecates there: v1beta1 at 1.25, or policy/v1beta1 at 1.25, would be
    named; v1beta2, which the components use up to 1.28, is named at 1.28. (On a live cluster
    the served versions decide too: the install test below.)"""
    report = helm.lint(CHART, namespace=OPERATOR_NAMESPACE, kube_version=kube_version)
    warnings = [m["error"] for m in report["messages"] if m["severity"] >= WARNING]
    assert [w.split(" in v")[0] for w in warnings] == deprecated


def test_helm_package_makes_the_archive_of_the_same_chart(tmp_path: Path) -> None:
    archive = helm.package(CHART, destination=tmp_path)
    assert Path(archive).name == "podgroup-operator-0.1.0.tgz"
    with helm.Chart.load(archive) as packaged, helm.Chart.load(CHART) as directory:
        assert packaged.crds == directory.crds
        assert packaged.schema == directory.schema
        assert packaged.render(name=RELEASE, namespace=OPERATOR_NAMESPACE) == directory.render(
            name=RELEASE, namespace=OPERATOR_NAMESPACE
        )


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"replicas": 0}, "at '/replicas': minimum: got 0, want 1"),
        ({"replica": 2}, "additional properties 'replica' not allowed"),
        # The one switch for other schedulers' CRDs is dialects.installCRDs.
        (
            {"elasticQuota": {"installKoordinatorCRD": True}},
            "additional properties 'elasticQuota' not allowed",
        ),
        ({"image": {"pullPolicy": "Sometimes"}}, "at '/image/pullPolicy'"),
        ({"image": {"digest": "sha256:abc"}}, "at '/image/digest'"),
        ({"image": {"repository": "Registry/Op"}}, "at '/image/repository'"),
        ({"resources": {"limits": {"memory": "2 GB"}}}, "at '/resources/limits/memory'"),
        ({"schedulerNames": ["Volcano"]}, "at '/schedulerNames/0'"),
        ({"watchNamespaces": ["team_a"]}, "at '/watchNamespaces/0'"),
        ({"gangGroupTrust": ["team-a"]}, "at '/gangGroupTrust/0'"),
        ({"reservationTimeoutSeconds": 0}, "at '/reservationTimeoutSeconds'"),
        ({"tenantRoles": {"aggregate": "yes"}}, "at '/tenantRoles/aggregate'"),
        ({"logLevel": "verbose"}, "at '/logLevel': value must be one of"),
        ({"logFormat": "xml"}, "at '/logFormat'"),
        ({"certificates": {"mode": "vault"}}, "at '/certificates/mode'"),
        ({"metrics": {"port": 70000}}, "at '/metrics/port'"),
        ({"metrics": {"serviceMonitor": {"interval": "often"}}}, "/serviceMonitor/interval'"),
        ({"nodeSelector": {"zone": 1}}, "at '/nodeSelector/zone': got number, want string"),
        ({"tolerations": "all"}, "at '/tolerations'"),
        ({"labels": {"team": True}}, "at '/labels/team': got boolean, want string"),
    ],
)
def test_a_wrong_value_is_refused_naming_it(values: dict[str, Any], named: str) -> None:
    with pytest.raises(helm.HelmValuesError) as refused:
        render_chart(values)
    assert named in str(refused.value)


def test_a_metrics_port_the_operator_uses_otherwise_is_refused() -> None:
    with pytest.raises(helm.HelmRenderError) as refused:
        render_chart({"metrics": {"port": 9443}})
    assert "metrics.port: 9443 is taken" in str(refused.value)


def test_another_namespace_is_refused_with_the_command_to_use() -> None:
    with helm.Chart.load(CHART) as chart, pytest.raises(helm.HelmRenderError) as refused:
        chart.render(name=RELEASE, namespace="default")
    assert 'namespace "default": install into the namespace podgroup-operator' in str(refused.value)


# --- on the dev cluster --------------------------------------------------------------------------


@pytest.fixture
def session_operator_paused(
    cluster: ClusterUnderTest, operator: OperatorProcess
) -> Iterator[ClusterUnderTest]:
    """The session operator stopped (one operator schedules at a time), restarted afterwards."""
    operator.stop()
    try:
        yield cluster
    finally:
        operator.start()
        operator.wait_ready()


def service_account_kubeconfig(admin: Path, target: Path) -> Path:
    """A kubeconfig for the chart's ServiceAccount, with a token the API server issues for it
    (TokenRequest): the operator gets exactly what the chart grants, as in a pod."""
    token = kubectl(
        "create", "token", ACCOUNT, "-n", OPERATOR_NAMESPACE, "--duration=3600s", kubeconfig=admin
    ).stdout.strip()
    config = yaml.safe_load(admin.read_text())
    config["users"] = [{"name": ACCOUNT, "user": {"token": token}}]
    for context in config["contexts"]:
        context["context"]["user"] = ACCOUNT
    target.write_text(yaml.safe_dump(config))
    target.chmod(0o600)
    return target


def local_arguments(manifest: str) -> list[str]:
    """The rendered Deployment's arguments for a process on this machine: webhooks served on a
    local port with the local CA (the apiserver calls a URL here, not the Service), and the
    probes' and metrics' addresses left to OperatorProcess's free ports."""
    documents = [d for d in yaml.safe_load_all(manifest) if d]
    args = container(documents)["args"]
    pairs = list(zip(args[::2], args[1::2], strict=True))
    local = []
    for flag, value in pairs:
        if flag in ("--liveness", "--metrics-address", "--webhook-certs"):
            continue
        local += [flag, "local" if flag == "--webhooks" else value]
    return local


async def point_webhooks_at(kube: KubeClient, url: str) -> None:
    """The installed configurations calling `url` + each webhook's Service path, trusting the
    local CA; everything else (rules, failure policies, selectors, Helm's metadata) kept."""
    ca = base64.b64encode(ensure_ca(OperatorSettings().webhook_cert_dir).read_bytes()).decode()
    for kind in CONFIGURATION_KINDS:
        for name in CONFIG_NAMES:
            body = await kube.get(kind, name)
            for hook in body["webhooks"]:
                path = hook["clientConfig"]["service"]["path"]
                hook["clientConfig"] = {"url": f"{url}{path}", "caBundle": ca}
            await kube.replace(kind, name, body)


async def installed_configurations(kube: KubeClient) -> list[tuple[Kind, dict[str, Any]]]:
    """Our webhook configurations as they are now, to be put back with `put_back`."""
    saved = []
    for kind in CONFIGURATION_KINDS:
        for name in CONFIG_NAMES:
            body = await kube.get(kind, name)
            for field in ("resourceVersion", "uid", "creationTimestamp", "managedFields"):
                body["metadata"].pop(field, None)
            saved.append((kind, body))
    return saved


async def put_back(kube: KubeClient, saved: list[tuple[Kind, dict[str, Any]]]) -> None:
    for kind, body in saved:
        await kube.apply_json(kind, body)


def _podgroup(name: str, namespace: str, min_member: int = 2) -> dict[str, Any]:
    body = podgroup(name, namespace, min_member=min_member)
    for field in ("uid", "creationTimestamp"):
        body["metadata"].pop(field, None)
    body.pop("status", None)
    return body


async def _phase(kube: KubeClient, name: str, namespace: str) -> str | None:
    status = (await kube.get(PODGROUPS, name, namespace)).get("status") or {}
    phase: str | None = status.get("phase")
    return phase


def _clear_leftovers(kubeconfig: Path) -> None:
    """Objects of the chart's names that no release owns (the kustomize install's, or roles a
    test bound to a user) are removed first, as on a cluster the chart was never installed on:
    Helm refuses to adopt them."""
    for document in render_chart():
        kind, meta = document["kind"], document["metadata"]
        if kind.endswith("WebhookConfiguration"):
            continue  # put back afterwards by webhook_configurations_restored
        scope = ["-n", meta["namespace"]] if "namespace" in meta else []
        kubectl(
            "delete", f"{kind}/{meta['name']}", *scope, "--ignore-not-found", kubeconfig=kubeconfig
        )


async def test_install_runs_gangs_upgrade_keeps_podgroups_uninstall_unblocks_writes(
    kube: KubeClient,
    kubeconfig: Path,
    namespace: str,
    session_operator_paused: ClusterUnderTest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The Deployment's environment, as the downward API gives it to the operator's pod.
    monkeypatch.setenv("POD_NAMESPACE", OPERATOR_NAMESPACE)
    monkeypatch.setenv("POD_NAME", "podgroup-operator-helm-test")
    process: OperatorProcess | None = None
    config = helm.Config(kubeconfig_path=kubeconfig, namespace=OPERATOR_NAMESPACE)
    async with webhook_configurations_restored(kube):
        await uninstall_local(kube)  # the session's, pointing at its stopped operator
        _clear_leftovers(kubeconfig)
        try:
            # The session's CRDs were applied from crds/ by kubectl: Helm installs the chart's
            # crds/ over them without a conflict (every schema bound survives the API server's
            # float64 as it was written: api/limits.py MAX_QUANTITY_SCHEMA).
            # A wrong value is refused, naming it, and no release is recorded.
            with pytest.raises(helm.HelmError, match="at '/replicas': minimum"):
                config.install(CHART, RELEASE, {"replicas": 0}, create_namespace=True)
            assert config.list(all_states=True) == []
            assert await configurations_of_ours(kube) == []

            release = config.install(CHART, RELEASE, create_namespace=True)
            assert release["status"] == "deployed", release
            await wait_for(lambda: _crd_established(kube), 30, "the chart's CRD")
            # The API versions this server serves, as the kustomize components choose them.
            served = {
                d["kind"]: d["apiVersion"] for d in yaml.safe_load_all(release["manifest"]) if d
            }
            expected = {
                "PodDisruptionBudget": "policy/v1",
                "FlowSchema": "flowcontrol.apiserver.k8s.io/v1",
            }
            older = {
                "pdb-policy-v1beta1": ("PodDisruptionBudget", "policy/v1beta1"),
                "flowcontrol-v1beta1": ("FlowSchema", "flowcontrol.apiserver.k8s.io/v1beta1"),
                "flowcontrol-v1beta2": ("FlowSchema", "flowcontrol.apiserver.k8s.io/v1beta2"),
            }
            for component in components_for(kubeconfig):
                kind, version = older[component]
                expected[kind] = version
            assert {kind: served[kind] for kind in expected} == expected

            # Installed and failing closed: no pod serves the webhooks yet.
            with pytest.raises(ApiError) as refused:
                await kube.create(PODGROUPS, _podgroup("while-unserved", namespace), namespace)
            assert "validate-podgroup" in refused.value.message
            as_helm_wrote_them = await installed_configurations(kube)

            # The operator, as the chart's ServiceAccount with the Deployment's arguments.
            account = service_account_kubeconfig(kubeconfig, tmp_path / "account-kubeconfig")
            process = OperatorProcess(
                account, tmp_path / "operator.log", local_arguments(release["manifest"])
            )
            await point_webhooks_at(kube, process.webhook_url)
            process.start()
            process.wait_ready()
            async with pool(kube, count=1, cpu="8", memory="16Gi") as (_, nodes):
                await kube.create(PODGROUPS, _podgroup("first", namespace), namespace)
                await gang_pods(kube, namespace, "first", 2, nodes, group="first")
                await wait_for(
                    lambda: _phase_is(kube, "first", namespace, c.Phase.RUNNING),
                    60,
                    "the gang to run under the chart's ServiceAccount",
                )
                process.stop()
                denied = [
                    line
                    for line in process.log_path.read_text().splitlines()
                    if f'"system:serviceaccount:{OPERATOR_NAMESPACE}:{ACCOUNT}" cannot' in line
                ]
                assert not denied, process.log_tail()

                # Upgrade with other values; Helm's own configurations back first.
                await put_back(kube, as_helm_wrote_them)
                before = await kube.get(PODGROUPS, "first", namespace)
                crd_before = await kube.get(CRDS, c.CRD_NAME)
                changed = {
                    "replicas": 3,
                    "logLevel": "debug",
                    "logFormat": "json",
                    "schedulerNames": [c.SCHEDULER_NAME, "volcano"],
                    "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}},
                    "labels": {"team": "batch"},
                }
                upgraded = config.upgrade(CHART, RELEASE, changed)
                assert (upgraded["revision"], upgraded["status"]) == (2, "deployed")
                deployment = await kube.get(DEPLOYMENTS, "podgroup-operator", OPERATOR_NAMESPACE)
                assert deployment["spec"]["replicas"] == 3
                assert deployment["metadata"]["labels"]["team"] == "batch"
                after = await kube.get(PODGROUPS, "first", namespace)
                # Untouched: not written at all, so its status is the same.
                assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
                assert after["status"] == before["status"]
                crd_after = await kube.get(CRDS, c.CRD_NAME)
                assert (
                    crd_after["metadata"]["resourceVersion"]
                    == crd_before["metadata"]["resourceVersion"]
                )

                # The upgraded arguments run: JSON logs, and a second gang is placed.
                process = OperatorProcess(
                    account, tmp_path / "upgraded.log", local_arguments(upgraded["manifest"])
                )
                await point_webhooks_at(kube, process.webhook_url)
                process.start()
                process.wait_ready()
                await kube.create(PODGROUPS, _podgroup("second", namespace), namespace)
                await gang_pods(kube, namespace, "second", 2, nodes, group="second")
                await wait_for(
                    lambda: _phase_is(kube, "second", namespace, c.Phase.RUNNING),
                    60,
                    "a gang to run under the upgraded arguments",
                )
                assert await _phase(kube, "first", namespace) == c.Phase.RUNNING
                process.stop()
                first_line = process.log_path.read_text().splitlines()[0]
                assert "level" in json.loads(first_line)

            config.uninstall(RELEASE, wait="watcher", timeout=60)
            assert config.list(all_states=True) == []
            assert await configurations_of_ours(kube) == []
            with pytest.raises(ApiError) as gone:
                await kube.get(CLUSTER_ROLES, "podgroup-operator")
            assert gone.value.not_found
            # Helm keeps the CRD it installed from crds/, and with it every PodGroup; nothing
            # is left to refuse a write.
            assert (await kube.get(PODGROUPS, "first", namespace))["status"] == after["status"]
            created = await kube.create(PODGROUPS, _podgroup("after", namespace, 1), namespace)
            assert created["metadata"]["name"] == "after"
        finally:
            if process is not None:
                process.stop()
            config.uninstall(RELEASE, ignore_not_found=True)
            config.close()
            # The CRD as the session's `crds` fixture left it, whatever failed above.
            await apply_crd(kube, yaml.safe_load(CRD_FILE.read_text()))


async def _crd_established(kube: KubeClient) -> bool:
    conditions = (await kube.get(CRDS, c.CRD_NAME)).get("status", {}).get("conditions") or []
    return any(x["type"] == "Established" and x["status"] == "True" for x in conditions)


async def _phase_is(kube: KubeClient, name: str, namespace: str, phase: str) -> bool:
    return await _phase(kube, name, namespace) == phase
