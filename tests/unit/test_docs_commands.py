"""Every shell command that README.md, docs/README.md, docs/guides/ (its subdirectories too), the
glossary and the FAQ show is run by a test or by `make demo`.

`RUN_BY` maps each command, as the docs print it, to the file that runs it and the text in that
file that does. `SHOWN_ONLY` lists the few that no test can run on the dev cluster (they read the
installed operator's own pods), each with that reason. The tests fail on a command in a ```sh or
```bash block that neither table lists (run it somewhere, then list it), on a table entry no page
shows any more, and on an entry whose file no longer holds its evidence (the test that ran it
changed)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO

PAGES = [
    REPO / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
    *sorted((REPO / "docs" / "guides").rglob("*.md")),
]
SHELL_BLOCK = re.compile(r"^[ \t]*```(?:sh|bash)\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE)


@dataclass(frozen=True)
class RunBy:
    """Where a documented command runs: `path` (from the repository's root) holds every string
    of `evidence`; `how` says in what form, where it differs from the docs' line."""

    path: str
    evidence: tuple[str, ...]
    how: str = ""


DEPLOY_TEST = "tests/integration/test_deploy.py"
HELM_TEST = "tests/integration/test_helm_chart.py"
PLUGIN_TEST = "tests/integration/test_kubectl_plugin.py"
DEMO = "examples/demo.sh"
QUICKSTART = "deploy/quickstart.sh"
QUICKSTART_TEST = "tests/integration/test_quickstart.py"
TROUBLE_TEST = "tests/integration/test_troubleshooting.py"

RUN_BY: dict[str, RunBy] = {
    "make demo": RunBy(
        "Makefile", ("demo: $(STAMP) control-plane", 'bash examples/demo.sh "$(DEMO_STATE)"')
    ),
    "make test": RunBy("Makefile", ("test: $(STAMP) control-plane lint",)),
    "kubectl apply -k deploy/overlays/cert-manager": RunBy(
        DEPLOY_TEST,
        (
            "def test_server_dry_run_accepts_the_cert_manager_overlay_but_its_own_kinds",
            "CERT_MANAGER",
        ),
        "rendered with kubectl kustomize and applied with --dry-run=server, all but cert-manager's "
        "own kinds (the dev cluster has no cert-manager)",
    ),
    "kubectl apply -k deploy/overlays/self-managed": RunBy(
        DEPLOY_TEST,
        ('"apply", "--dry-run=server", "-k"', "[BASE, SELF_MANAGED]"),
        "applied with --dry-run=server; tests/integration/test_self_managed_certs.py runs the "
        "operator as the overlay's identity",
    ),
    "kubectl delete -k deploy/overlays/self-managed": RunBy(
        DEPLOY_TEST,
        ('kubectl("apply", "-k", str(target)', 'kubectl("delete", "-k", str(target)'),
        "the base (which the overlay extends with the certificate mode) installed with apply -k "
        "and removed with delete -k; then a PodGroup write must succeed",
    ),
    "helm install podgroup-operator deploy/helm/podgroup-operator -n podgroup-operator "
    "--create-namespace": RunBy(
        HELM_TEST,
        ("config.install(CHART, RELEASE, create_namespace=True)",),
        "through Helm's Go SDK (helm-python-sdk)",
    ),
    "helm upgrade podgroup-operator deploy/helm/podgroup-operator -n podgroup-operator "
    "--set replicas=3": RunBy(
        HELM_TEST, ('"replicas": 3', "config.upgrade(CHART, RELEASE, changed)"), "Helm's Go SDK"
    ),
    "helm uninstall podgroup-operator -n podgroup-operator": RunBy(
        HELM_TEST, ('config.uninstall(RELEASE, wait="watcher"',), "Helm's Go SDK"
    ),
    "helm package deploy/helm/podgroup-operator": RunBy(
        HELM_TEST, ("helm.package(CHART, destination=tmp_path)",), "Helm's Go SDK"
    ),
    "pip install .": RunBy(
        "Makefile",
        ("pip install -q -e '.[dev]'",),
        "the venv of every test run installs the package (editable, with its dev tools); the "
        "tests call its podgroup-operator and kubectl-podgroup entry points",
    ),
    "kubectl apply -f crds/": RunBy(DEMO, ('kubectl apply -f "$repo/crds/"',)),
    "podgroup-operator run": RunBy(
        "tests/integration/test_own_cluster.py", ('with_name("podgroup-operator")), "run"]',)
    ),
    "podgroup-operator run --scheduler-name scheduler-plugins-scheduler": RunBy(
        "tests/integration/test_own_cluster.py",
        (
            'KUBEFLOW_SCHEDULER = "scheduler-plugins-scheduler"',
            '"--scheduler-name", KUBEFLOW_SCHEDULER',
        ),
    ),
    "podgroup-operator webhooks install --url https://127.0.0.1:18443 --cert-dir "
    "~/.cache/podgroup-operator/webhook-certs": RunBy(
        DEMO,
        (
            "webhook_port=18443",
            "webhook_certs=$HOME/.cache/podgroup-operator/webhook-certs",
            'podgroup-operator webhooks install --url "https://127.0.0.1:$webhook_port" '
            '--cert-dir "$webhook_certs"',
        ),
    ),
    "podgroup-operator webhooks uninstall": RunBy(DEMO, ("podgroup-operator webhooks uninstall",)),
    "kubectl podgroup -A": RunBy(PLUGIN_TEST, ('plugin("-A", "-o", "wide"',), "with -o wide"),
    "kubectl podgroup describe train": RunBy(PLUGIN_TEST, ('plugin("describe", name',)),
    "kubectl podgroup fabric --topology fabric --pod cpu=8,nvidia.com/gpu=1": RunBy(
        PLUGIN_TEST,
        ('("fabric", "--topology", fabric_name, "--pod", "cpu=4")',),
        "on the demo's fabric, with -l for the test's own nodes and --pod cpu=4",
    ),
    "kubectl get podgroups -o wide": RunBy(DEMO, ("kubectl get podgroups -o wide",)),
    "kubectl describe pod train-0": RunBy(
        "tests/integration/test_pod_signals.py", ('"describe", "pod", "wait-0"',)
    ),
    "kubectl create rolebinding team-a-podgroups -n team-a "
    "--clusterrole=podgroup-operator-tenant-edit --group=team-a": RunBy(
        "tests/integration/test_tenancy.py",
        (
            '"create", "rolebinding", "team-a-podgroups"',
            "--clusterrole=podgroup-operator-tenant-edit",
        ),
        "in the test's namespace, for its tenant's ServiceAccount instead of a group",
    ),
    # docs/guides/quickstart.md: the steps of deploy/quickstart.sh (IMAGE=podgroup-operator:dev,
    # KIND_CLUSTER=podgroup, WORKDIR=my-install by default); the parts a cluster without a
    # kubelet can run are tested too.
    "deploy/quickstart.sh": RunBy(
        QUICKSTART,
        ("    all)\n      step_cluster\n      step_image\n      step_install\n",),
        "the script itself; tests/integration/test_quickstart.py runs its `overlay` step",
    ),
    "kind create cluster --name podgroup": RunBy(
        QUICKSTART,
        ("KIND_CLUSTER=${KIND_CLUSTER:-podgroup}", 'kind create cluster --name "$KIND_CLUSTER"'),
        "step `cluster`",
    ),
    "docker build -t podgroup-operator:dev .": RunBy(
        QUICKSTART,
        ("IMAGE=${IMAGE:-podgroup-operator:dev}", 'docker build -t "$IMAGE" "$repo"'),
        "step `image`",
    ),
    "kind load docker-image podgroup-operator:dev --name podgroup": RunBy(
        QUICKSTART, ('kind load docker-image "$IMAGE" --name "$KIND_CLUSTER"',), "step `image`"
    ),
    "docker push registry.example.com/team/podgroup-operator:dev": RunBy(
        QUICKSTART, ('docker push "$IMAGE"',), "step `image` with LOAD=push"
    ),
    "kubectl apply -f https://github.com/cert-manager/cert-manager/releases/download/v1.16.2/"
    "cert-manager.yaml": RunBy(
        QUICKSTART,
        (
            "CERT_MANAGER_VERSION=${CERT_MANAGER_VERSION:-v1.16.2}",
            'kubectl apply -f "https://github.com/cert-manager/cert-manager/releases/download/'
            '$CERT_MANAGER_VERSION/cert-manager.yaml"',
        ),
        "step `install` with CERTS=cert-manager",
    ),
    "kubectl -n cert-manager rollout status deployment/cert-manager-webhook --timeout=5m": RunBy(
        QUICKSTART,
        (
            "for deployment in cert-manager cert-manager-cainjector cert-manager-webhook; do",
            'kubectl -n cert-manager rollout status "deployment/$deployment" --timeout=5m',
        ),
        "step `install` with CERTS=cert-manager, for each of cert-manager's Deployments",
    ),
    "deploy/quickstart.sh overlay my-install": RunBy(
        QUICKSTART_TEST,
        ('quickstart("overlay", str(tmp_path / "my-install"), IMAGE=IMAGE',),
        "into a temporary directory, then rendered and dry-run on the server",
    ),
    "kubectl apply -k my-install": RunBy(
        QUICKSTART,
        ("WORKDIR=${WORKDIR:-$repo/my-install}", 'kubectl apply -k "$WORKDIR"'),
        "step `install`; tests/integration/test_quickstart.py applies the same overlay with "
        "--dry-run=server",
    ),
    "helm install podgroup-operator deploy/helm/podgroup-operator -n podgroup-operator "
    "--create-namespace --set image.repository=podgroup-operator --set image.tag=dev": RunBy(
        QUICKSTART,
        (
            'helm install podgroup-operator "$repo/deploy/helm/podgroup-operator" -n "$namespace"',
            '--create-namespace --set image.repository="$(image_name)" --set image.tag='
            '"$(image_tag)"',
        ),
        "step `install` with INSTALL=helm; tests/integration/test_quickstart.py renders the chart "
        "with these values",
    ),
    "kubectl -n podgroup-operator rollout status deployment/podgroup-operator --timeout=5m": RunBy(
        QUICKSTART,
        ('kubectl -n "$namespace" rollout status deployment/podgroup-operator --timeout=5m',),
        "step `install`",
    ),
    "kubectl -n podgroup-operator get pods": RunBy(
        QUICKSTART, ('kubectl -n "$namespace" get pods\n',), "step `check`"
    ),
    "kubectl get --raw /api/v1/namespaces/podgroup-operator/pods/POD:8081/proxy/readyz": RunBy(
        QUICKSTART,
        ('kubectl get --raw "/api/v1/namespaces/$namespace/pods/${pod#pod/}:8081/proxy/readyz"',),
        "step `check`, for every operator pod",
    ),
    "kubectl apply --dry-run=server -f examples/quickstart-gang.yaml": RunBy(
        QUICKSTART_TEST,
        ('"apply", "--dry-run=server", "-n", namespace, "-f", str(GANG)',),
        "in the test's namespace, with the operator's webhooks; also the script's step `check`",
    ),
    "python3 -m venv ~/.local/share/podgroup-operator/venv": RunBy(
        QUICKSTART,
        (
            "PLUGIN_VENV=${PLUGIN_VENV:-$HOME/.local/share/podgroup-operator/venv}",
            'python3 -m venv "$PLUGIN_VENV"',
        ),
        "step `plugin`",
    ),
    "~/.local/share/podgroup-operator/venv/bin/pip install .": RunBy(
        QUICKSTART, ('"$PLUGIN_VENV/bin/pip" install -q "$repo"',), "step `plugin`"
    ),
    "export PATH=~/.local/share/podgroup-operator/venv/bin:$PATH": RunBy(
        QUICKSTART,
        ('PATH="$PLUGIN_VENV/bin:$PATH" kubectl podgroup describe hello',),
        "step `gang`, for the one command that needs it",
    ),
    "kubectl apply -f examples/quickstart-gang.yaml": RunBy(
        "tests/e2e/test_examples.py",
        ('("quickstart-gang.yaml", "hello", 2)', '"apply", "-n", namespace, "-f"'),
        "in the test's namespace, on sim nodes, until the gang is Running; also the script's "
        "step `gang`",
    ),
    "kubectl get podgroup hello": RunBy(
        QUICKSTART,
        ("kubectl get podgroup hello -o jsonpath='{.status.phase}'",),
        "step `gang`, for the phase, until Running",
    ),
    "kubectl podgroup describe hello": RunBy(
        QUICKSTART, ("kubectl podgroup describe hello",), "step `gang`"
    ),
    "kubectl delete -f examples/quickstart-gang.yaml": RunBy(
        QUICKSTART,
        ('kubectl delete --ignore-not-found -f "$repo/examples/quickstart-gang.yaml"',),
        "step `down`",
    ),
    "kubectl delete -k my-install": RunBy(
        QUICKSTART, ('kubectl delete -k "$WORKDIR"',), "step `down`"
    ),
    "kind delete cluster --name podgroup": RunBy(
        QUICKSTART, ('kind delete cluster --name "$KIND_CLUSTER"',), "step `down` with LOAD=kind"
    ),
    # docs/guides/troubleshooting.md and docs/guides/jobs/topology-labels.md: each situation made
    # on the dev cluster, and the command run there (in the test's namespace, for `team-a`).
    "make help": RunBy("Makefile", ("help: ## this list",)),
    "kubectl get podgroups -A": RunBy(TROUBLE_TEST, ('"get", "podgroups", "-A"',)),
    "kubectl get validatingwebhookconfiguration,mutatingwebhookconfiguration "
    "podgroup-operator.scheduling.x-k8s.io": RunBy(
        TROUBLE_TEST,
        (
            '"validatingwebhookconfiguration,mutatingwebhookconfiguration"',
            '"podgroup-operator.scheduling.x-k8s.io"',
        ),
        "against the session operator's configurations",
    ),
    "kubectl -n podgroup-operator get lease podgroup-operator-leader -o yaml": RunBy(
        TROUBLE_TEST,
        ('"-n", "kube-system", "get", "lease", LEASE, "-o", "yaml"',),
        "in kube-system, where an operator outside a cluster keeps its Lease",
    ),
    "kubectl get crd podgroups.scheduling.x-k8s.io topologies.scheduling.x-k8s.io": RunBy(
        TROUBLE_TEST, ('"crd",\n        "podgroups.scheduling.x-k8s.io",',)
    ),
    "kubectl get podgroup train -o wide": RunBy(
        TROUBLE_TEST,
        ('"get", "podgroup", "train", "-n", namespace, "-o", "wide"',),
        "for a gang bound to sim nodes that do not start its pods",
    ),
    "kubectl get pods -l scheduling.x-k8s.io/pod-group=train -o wide": RunBy(
        TROUBLE_TEST, ('f"{c.LABEL_POD_GROUP}=train",\n            "-o",\n            "wide"',)
    ),
    "kubectl get nodes": RunBy(TROUBLE_TEST, ('kubectl_ok, kubeconfig, "get", "nodes")',)),
    "kubectl get events -n team-a --field-selector reason=FailedCreate": RunBy(
        TROUBLE_TEST,
        ('"--field-selector",\n        "reason=FailedCreate"',),
        "for a ReplicaSet held back by a ResourceQuota",
    ),
    "kubectl describe resourcequota -n team-a": RunBy(
        TROUBLE_TEST, ('"describe", "resourcequota", "-n", namespace',)
    ),
    "kubectl get nodes -L topology.kubernetes.io/zone -L nvidia.com/gpu.clique": RunBy(
        TROUBLE_TEST,
        (
            '"-L",\n            "topology.kubernetes.io/zone",\n            "-L",\n'
            '            "nvidia.com/gpu.clique"',
        ),
    ),
}

SHOWN_ONLY: dict[str, str] = {
    "kubectl -n podgroup-operator logs deployment/podgroup-operator": (
        "reads the installed operator's pods, which the dev cluster cannot run (no kubelet); the "
        "log lines it shows are the operator's own, tested where they are written"
    ),
    "kubectl -n podgroup-operator get deployment podgroup-operator -o "
    "jsonpath='{.spec.template.spec.containers[0].args}'": (
        "reads the installed Deployment; tests/integration/test_deploy.py and test_helm_chart.py "
        "check the arguments on the rendered install"
    ),
    "kubectl -n podgroup-operator get endpoints podgroup-operator-webhook": (
        "the webhook Service has endpoints only when operator pods run, which needs a kubelet"
    ),
}
"""Commands the docs show that no test can run on the dev cluster, each with the reason. Keep
this short: a command that can run somewhere belongs in RUN_BY."""


def commands(text: str) -> list[str]:
    """The commands of a page's shell blocks: one per line (a trailing backslash joins the next),
    comments and blank lines dropped, spaces collapsed."""
    found = []
    for block in SHELL_BLOCK.findall(text):
        joined = re.sub(r"\\\n", " ", block)
        for line in joined.splitlines():
            command = re.split(r"(?:^|\s)#", line, maxsplit=1)[0]
            command = " ".join(command.split())
            if command:
                found.append(command)
    return found


def shown() -> dict[str, list[str]]:
    """command -> the pages that show it."""
    pages: dict[str, list[str]] = {}
    for page in PAGES:
        for command in commands(page.read_text()):
            pages.setdefault(command, []).append(str(page.relative_to(REPO)))
    return pages


def test_the_parser_finds_commands_with_comments_and_continuations() -> None:
    text = "```sh\nmake demo   # a comment\n# only a comment\n\nhelm install a \\\n  b\n```\n"
    text += "  ```bash\n  kubectl get pods\n  ```\n```yaml\nkind: Pod\n```\n"
    assert commands(text) == ["make demo", "helm install a b", "kubectl get pods"]


def test_the_pages_show_commands() -> None:
    assert "make demo" in commands((REPO / "README.md").read_text())
    assert len(shown()) >= 10


def test_every_command_shown_is_run_by_a_test_or_make_demo() -> None:
    unlisted = {
        command: pages
        for command, pages in shown().items()
        if command not in RUN_BY and command not in SHOWN_ONLY
    }
    assert not unlisted, (
        "commands in the docs that no test runs (run each in a test or examples/demo.sh, then "
        f"add it to RUN_BY): {unlisted}"
    )


def test_every_table_entry_is_still_shown() -> None:
    stale = (set(RUN_BY) | set(SHOWN_ONLY)) - set(shown())
    assert not stale, f"RUN_BY or SHOWN_ONLY list commands no page shows any more: {sorted(stale)}"


def test_a_command_is_either_run_or_shown_only_with_a_reason() -> None:
    assert not set(RUN_BY) & set(SHOWN_ONLY)
    assert all(len(reason) > 40 for reason in SHOWN_ONLY.values())


@pytest.mark.parametrize("command", sorted(RUN_BY))
def test_the_file_named_still_runs_the_command(command: str) -> None:
    run_by = RUN_BY[command]
    path = REPO / run_by.path
    assert path.is_file(), f"{command!r}: {run_by.path} is gone"
    text = path.read_text()
    missing = [evidence for evidence in run_by.evidence if evidence not in text]
    assert not missing, f"{command!r}: {run_by.path} no longer holds {missing}"


def test_the_demo_is_what_make_demo_runs() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^demo:.*\n\t@bash examples/demo\.sh ", makefile, re.MULTILINE)
    assert Path(REPO / DEMO).is_file()
