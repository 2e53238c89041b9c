"""The webhook configurations we install: the committed YAML is the generated one, says what
the table of docs/concepts/admission.md says, and the dev cluster's install/uninstall write
exactly our two objects.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from podgroup_operator.adapters.kube import MUTATING_WEBHOOKS, VALIDATING_WEBHOOKS, KubeClient
from podgroup_operator.adapters.webhook_configs import set_ca_bundle
from podgroup_operator.cli import main as cli_main
from podgroup_operator.handlers.webhooks import WEBHOOKS
from podgroup_operator.manifests import (
    CONFIG_NAMES,
    cluster_webhooks,
    install_local,
    local_webhooks,
    render_cluster_webhooks,
    uninstall_local,
)
from tests.fakes import FakeApiServer

REPO = Path(__file__).resolve().parents[3]
WEBHOOKS_FILE = "deploy/base/webhooks.yaml"
"""Where `render_cluster_webhooks` is committed, relative to the repository."""
REGENERATE = f"run `podgroup-operator manifests webhooks -o {WEBHOOKS_FILE}`"
CA = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def hooks(bodies: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every webhook of the configurations, by handler id."""
    return {hook["name"].split(".")[0]: hook for body in bodies for hook in body["webhooks"]}


def test_the_committed_webhooks_are_the_generated_ones() -> None:
    committed = (REPO / WEBHOOKS_FILE).read_text()
    assert committed == render_cluster_webhooks(), f"{WEBHOOKS_FILE} is stale; {REGENERATE}"
    assert list(yaml.safe_load_all(committed)) == cluster_webhooks()


def test_the_cli_writes_the_committed_file(tmp_path: Path) -> None:
    target = tmp_path / "webhooks.yaml"
    assert cli_main(["manifests", "webhooks", "-o", str(target)]) == 0
    assert target.read_text() == (REPO / WEBHOOKS_FILE).read_text()


def docs_table() -> dict[str, tuple[str, str]]:
    """webhook -> (what it intercepts, failure policy), from docs/concepts/admission.md's table."""
    page = (REPO / "docs" / "concepts" / "admission.md").read_text()
    rows = re.findall(
        r"^\| `([a-z-]+)`(?: \(mutating\))? \| ([^|]+) \| (Fail|Ignore) \|", page, re.M
    )
    return {name: (intercepts.strip(), policy) for name, intercepts, policy in rows}


def test_every_webhook_is_in_the_docs_with_its_failure_policy_and_scope() -> None:
    table = docs_table()
    assert set(table) == {spec.handler_id for spec in WEBHOOKS}
    installed = hooks(cluster_webhooks())
    for spec in WEBHOOKS:
        intercepts, policy = table[spec.handler_id]
        hook = installed[spec.handler_id]
        assert hook["failurePolicy"] == policy, spec.handler_id
        assert 1 <= hook["timeoutSeconds"] <= 10, spec.handler_id
        if spec.scope == "Cluster":
            # A cluster-scoped object has no namespace to select by: every one is intercepted.
            assert "(cluster-scoped)" in intercepts, spec.handler_id
            assert "namespaceSelector" not in hook, spec.handler_id
            assert hook["rules"][0]["scope"] == "Cluster", spec.handler_id
            continue
        assert hook["rules"][0]["scope"] == "Namespaced", spec.handler_id
        expressions = hook["namespaceSelector"]["matchExpressions"]
        # kube-system and the operator's namespace are excluded by name everywhere.
        assert {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": ["kube-system", "podgroup-operator"],
        } in expressions
        opt_in = [e for e in expressions if e["operator"] == "In"]
        if "every namespace" in intercepts:
            assert opt_in == [], spec.handler_id
        else:
            assert [e["key"].split("/")[-1] for e in opt_in] == [
                intercepts.split("`")[1].split(":")[0]
            ], spec.handler_id


def test_cluster_webhooks_call_the_service_on_the_handler_path_without_a_ca_bundle() -> None:
    for name, hook in hooks(cluster_webhooks()).items():
        assert hook["clientConfig"] == {
            "service": {
                "namespace": "podgroup-operator",
                "name": "podgroup-operator-webhook",
                "port": 443,
                "path": f"/{name}",
            }
        }


def test_local_webhooks_call_the_url_and_trust_the_ca() -> None:
    encoded = base64.b64encode(CA).decode()
    for name, hook in hooks(local_webhooks("https://127.0.0.1:9443", CA)).items():
        assert hook["clientConfig"] == {
            "url": f"https://127.0.0.1:9443/{name}",
            "caBundle": encoded,
        }


def test_a_plain_http_url_is_refused_naming_the_option() -> None:
    with pytest.raises(ValueError, match=r"--url: 'http://127.0.0.1:1' must start with https://"):
        local_webhooks("http://127.0.0.1:1", CA)


async def test_install_then_uninstall_leaves_no_configuration() -> None:
    fake = FakeApiServer()
    kube = KubeClient(fake)
    done = await install_local(kube, "https://127.0.0.1:9443", CA)
    assert [w.action for w in done] == ["created", "created"]
    assert fake.get_object(VALIDATING_WEBHOOKS, CONFIG_NAMES[0]) is not None
    assert fake.get_object(MUTATING_WEBHOOKS, CONFIG_NAMES[0]) is not None

    again = await install_local(kube, "https://127.0.0.1:9555", CA)
    assert [w.action for w in again] == ["configured", "configured"]
    validating = fake.get_object(VALIDATING_WEBHOOKS, CONFIG_NAMES[0])
    assert validating is not None
    assert validating["webhooks"][0]["clientConfig"]["url"].startswith("https://127.0.0.1:9555/")

    removed = await uninstall_local(kube)
    assert [str(w) for w in removed] == [
        f"validatingwebhookconfiguration/{CONFIG_NAMES[0]} deleted",
        f"mutatingwebhookconfiguration/{CONFIG_NAMES[0]} deleted",
    ]
    assert fake.objects(VALIDATING_WEBHOOKS) == []
    assert fake.objects(MUTATING_WEBHOOKS) == []
    # Uninstalling twice is fine and says so.
    assert {w.action for w in await uninstall_local(kube)} == {"not found"}


async def test_set_ca_bundle_writes_only_what_differs() -> None:
    fake = FakeApiServer()
    fake.seed(*cluster_webhooks())
    kube = KubeClient(fake)
    first = await set_ca_bundle(kube, CONFIG_NAMES, CA)
    assert {w.action for w in first} == {"configured"}
    fake.clear_requests()
    second = await set_ca_bundle(kube, CONFIG_NAMES, CA)
    assert {w.action for w in second} == {"unchanged"}
    assert fake.writes == []


async def test_set_ca_bundle_retries_a_conflicting_write() -> None:
    fake = FakeApiServer()
    fake.seed(*cluster_webhooks())
    fake.inject_error("PUT", f"/validatingwebhookconfigurations/{CONFIG_NAMES[0]}", 409, "Conflict")
    await set_ca_bundle(KubeClient(fake), CONFIG_NAMES, CA)
    body = fake.get_object(VALIDATING_WEBHOOKS, CONFIG_NAMES[0])
    assert body is not None
    assert {h["clientConfig"]["caBundle"] for h in body["webhooks"]} == {
        base64.b64encode(CA).decode()
    }


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--ca-file", "x"], "error: webhooks install needs --url https://HOST:PORT"),
        (
            ["--url", "https://127.0.0.1:1"],
            "error: webhooks install needs --ca-file PATH or --cert-dir DIR "
            "(the CA the apiserver must trust for --url)",
        ),
        (
            ["--url", "https://127.0.0.1:1", "--ca-file", "/nonexistent/ca.crt"],
            "error: --ca-file: cannot read /nonexistent/ca.crt: No such file or directory",
        ),
    ],
)
def test_webhooks_install_names_what_is_missing_in_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["webhooks", "install", *argv]) == 1
    assert capsys.readouterr().err.strip() == message


def test_webhooks_install_refuses_a_file_that_is_no_certificate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "ca.crt").write_text("hello")
    argv = ["webhooks", "install", "--url", "https://127.0.0.1:1", "--ca-file"]
    assert cli_main([*argv, str(tmp_path / "ca.crt")]) == 1
    assert capsys.readouterr().err.strip() == (
        f"error: --ca-file: {tmp_path / 'ca.crt'} holds no PEM certificate"
    )
