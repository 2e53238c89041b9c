"""CRDs of other projects' groups that the operator installs where none exists.

Only create, never update or delete: a CRD of that name already there belongs to whoever
installed it (Koordinator, an earlier run of ours), and replacing its schema under a running
Koordinator could prune the fields it stores. Every replica may try at start; the first create
wins and the others find it there. Why optional and create-only:
docs/decisions/0XX-elastic-quota-api.md.
"""

from __future__ import annotations

import logging
from typing import Any

from podgroup_operator.adapters.kube import CRDS, ApiError, KubeClient
from podgroup_operator.api.crd import koordinator_elastic_quota_crd_manifest

logger = logging.getLogger(__name__)


async def install_crd_if_absent(kube: KubeClient, manifest: dict[str, Any]) -> bool:
    """Create `manifest` unless a CRD of its name exists; True when this call created it.

    A refusal (RBAC, an invalid manifest) is logged, not raised: the operator runs on, without
    the kind, as it would if the flag were off."""
    name = manifest["metadata"]["name"]
    try:
        await kube.get(CRDS, name)
    except ApiError as exc:
        if not exc.not_found:
            logger.error("CRD %s not checked, so not installed: %s", name, exc)
            return False
    else:
        logger.info("CRD %s exists; left as it is", name)
        return False
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


async def install_koordinator_quota_crd(kube: KubeClient) -> bool:
    """The ElasticQuota CRD of Koordinator's group (`run --install-koordinator-quota-crd`)."""
    return await install_crd_if_absent(kube, koordinator_elastic_quota_crd_manifest())
