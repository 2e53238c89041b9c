"""CRDs of other projects' groups that the operator installs where none exists.

Created where no CRD of that name exists; brought up to date where the one there is ours (it
carries our `app.kubernetes.io/managed-by` label: an earlier release installed it); never
touched otherwise: a CRD of that name without our label belongs to whoever installed it
(Koordinator), and replacing its schema under a running Koordinator could prune the fields it
stores. Every replica may try at start; the first write wins and the others find it done. Why
optional and create-only for others': docs/decisions/028-elastic-quota-api.md.
"""

from __future__ import annotations

import logging
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import CRDS, ApiError, KubeClient
from podgroup_operator.api.crd import koordinator_elastic_quota_crd_manifest

logger = logging.getLogger(__name__)


async def install_crd_if_absent(kube: KubeClient, manifest: dict[str, Any]) -> bool:
    """Create `manifest` unless a CRD of its name exists, or bring ours up to date; True when
    this call wrote it.

    A refusal (RBAC, an invalid manifest) is logged, not raised: the operator runs on, without
    the kind, as it would if the flag were off."""
    name = manifest["metadata"]["name"]
    try:
        current = await kube.get(CRDS, name)
    except ApiError as exc:
        if not exc.not_found:
            logger.error("CRD %s not checked, so not installed: %s", name, exc)
            return False
    else:
        return await _update_ours(kube, manifest, current)
    try:
        await kube.create(CRDS, manifest)
    except ApiError as exc:
        if exc.conflict:
            logger.info("CRD %s was created meanwhile (another replica); left as it is", name)
        else:
            logger.error("CRD %s not installed: %s", name, exc)
        return False
    logger.info("CRD %s installed (none existed)", name)
    return True


def _ours(crd: dict[str, Any]) -> bool:
    labels = (crd.get("metadata") or {}).get("labels") or {}
    return labels.get(c.LABEL_MANAGED_BY) == c.OPERATOR_NAME


async def _update_ours(kube: KubeClient, manifest: dict[str, Any], current: dict[str, Any]) -> bool:
    """An existing CRD: ours and out of date, replaced (conditionally on its resourceVersion);
    anyone else's, left as it is."""
    name = manifest["metadata"]["name"]
    if not _ours(current):
        logger.info("CRD %s exists and is not ours; left as it is", name)
        return False
    wanted_spec = {**current["spec"], **manifest["spec"]}
    if wanted_spec == current["spec"] and _marks(current) == _marks(manifest):
        logger.info("CRD %s exists, ours and up to date", name)
        return False
    meta = current["metadata"]
    body = {
        **manifest,
        "metadata": {
            **manifest["metadata"],
            "resourceVersion": meta["resourceVersion"],
            "labels": {**(meta.get("labels") or {}), **manifest["metadata"].get("labels", {})},
            "annotations": {
                **(meta.get("annotations") or {}),
                **manifest["metadata"].get("annotations", {}),
            },
        },
        "spec": wanted_spec,
    }
    try:
        await kube.replace(CRDS, name, body)
    except ApiError as exc:
        if exc.conflict:
            logger.info("CRD %s was updated meanwhile (another replica); left as it is", name)
        else:
            logger.error("CRD %s not updated: %s", name, exc)
        return False
    logger.info("CRD %s updated (ours, from an earlier release)", name)
    return True


def _marks(crd: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Our labels and annotations as `crd` carries them (others' kept, not compared)."""
    meta = crd.get("metadata") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    return (
        {k: labels.get(k) for k in (c.LABEL_MANAGED_BY,)},
        {k: annotations.get(k) for k in (c.ANNOTATION_API_APPROVED,)},
    )


async def install_koordinator_quota_crd(kube: KubeClient) -> bool:
    """The ElasticQuota CRD of Koordinator's group (`run --install-koordinator-quota-crd`)."""
    return await install_crd_if_absent(kube, koordinator_elastic_quota_crd_manifest())
