"""Writes of the operator's admission webhook configurations: install, uninstall, caBundle.

Who writes them, and when:

* In a cluster, the configurations are part of the install (deploy/, generated from
  handlers/webhooks.py) and go with `kubectl delete -k deploy/`. The operator only keeps their
  `caBundle` in step with the CA it serves with (`set_ca_bundle`), which needs `get` and `update`
  on the two named objects and nothing else.
* On the dev cluster, `podgroup-operator webhooks install|uninstall` writes them pointing at a
  local URL (`install`, `uninstall`), so that stopping an operator never has to clean up after
  itself and an operator that died cannot leave the apiserver calling a dead port unnoticed:
  `make demo-down` and the tests uninstall explicitly.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from podgroup_operator.adapters.kube import (
    JSON,
    MUTATING_WEBHOOKS,
    VALIDATING_WEBHOOKS,
    ApiError,
    Kind,
    KubeClient,
)

CONFIGURATION_KINDS: tuple[Kind, ...] = (VALIDATING_WEBHOOKS, MUTATING_WEBHOOKS)

_KIND_OF_API_KIND = {
    "ValidatingWebhookConfiguration": VALIDATING_WEBHOOKS,
    "MutatingWebhookConfiguration": MUTATING_WEBHOOKS,
}

_CONFLICT_RETRIES = 5


@dataclass(frozen=True)
class Written:
    """One configuration and what happened to it, in kubectl's words (`created`, `deleted`...)."""

    kind: Kind
    name: str
    action: str

    def __str__(self) -> str:
        return f"{self.kind.plural[:-1]}/{self.name} {self.action}"


def kind_of(body: Mapping[str, object]) -> Kind:
    """The API collection of a webhook configuration body, from its `kind`."""
    api_kind = str(body.get("kind"))
    if api_kind not in _KIND_OF_API_KIND:
        raise ValueError(
            f"kind: {api_kind!r} is not a webhook configuration "
            f"(expected one of {sorted(_KIND_OF_API_KIND)})"
        )
    return _KIND_OF_API_KIND[api_kind]


def with_ca_bundle(body: JSON, ca_pem: bytes) -> JSON:
    """`body` with every webhook's clientConfig trusting `ca_pem` (the value is base64 PEM)."""
    encoded = base64.b64encode(ca_pem).decode()
    return {
        **body,
        "webhooks": [
            {**hook, "clientConfig": {**hook.get("clientConfig", {}), "caBundle": encoded}}
            for hook in body.get("webhooks") or []
        ],
    }


async def install(kube: KubeClient, bodies: Iterable[JSON]) -> list[Written]:
    """Create each configuration, or replace the one of the same name (it is ours by name)."""
    written = []
    for body in bodies:
        kind, name = kind_of(body), body["metadata"]["name"]
        try:
            await kube.get(kind, name)
            action = "configured"
        except ApiError as exc:
            if not exc.not_found:
                raise
            action = "created"
        await kube.apply_json(kind, body)
        written.append(Written(kind, name, action))
    return written


async def uninstall(kube: KubeClient, names: Iterable[str]) -> list[Written]:
    """Delete the validating and mutating configurations of these names; absent ones are fine."""
    written = []
    for name in names:
        for kind in CONFIGURATION_KINDS:
            try:
                await kube.delete(kind, name)
                written.append(Written(kind, name, "deleted"))
            except ApiError as exc:
                if not exc.not_found:
                    raise
                written.append(Written(kind, name, "not found"))
    return written


async def set_ca_bundle(kube: KubeClient, names: Iterable[str], ca_pem: bytes) -> list[Written]:
    """Make every webhook of the named configurations trust `ca_pem`; write only what differs.

    Validating and mutating configurations of each name are both looked at; a kind that has no
    configuration of that name is skipped (the mutating one may be absent). A full PUT with the
    read resourceVersion, retried on conflict, so a concurrent writer (another replica, or
    cert-manager's CA injector writing the same CA) is never overwritten blindly.
    """
    written = []
    for name in names:
        for kind in CONFIGURATION_KINDS:
            for _ in range(_CONFLICT_RETRIES):
                try:
                    current = await kube.get(kind, name)
                except ApiError as exc:
                    if exc.not_found:
                        break
                    raise
                desired = with_ca_bundle(current, ca_pem)
                if desired == current:
                    written.append(Written(kind, name, "unchanged"))
                    break
                try:
                    await kube.replace(kind, name, desired)
                except ApiError as exc:
                    if exc.conflict:
                        continue
                    raise
                written.append(Written(kind, name, "configured"))
                break
            else:
                raise RuntimeError(
                    f"{kind.plural}/{name}: caBundle not written after {_CONFLICT_RETRIES} "
                    "conflicting updates; another writer keeps changing it"
                )
    return written
