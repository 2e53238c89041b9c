"""Latency of the quota admission webhooks, measured where the apiserver calls them.

It prints p50/p99 under 200 concurrent requests (a burst of gang pods). The apiserver adds
its own queueing and TLS on top, and its webhook client is not ours to tune, so this benchmark
plays the apiserver: it reads the running operator's webhook URL and CA from the
ValidatingWebhookConfiguration, then POSTs N AdmissionReview requests at once over HTTPS (one
connection each) and times every answer.

Setup: a temporary namespace opted in to quota reservation, a ResourceQuota, and one PodGroup
reserving part of it (through the apiserver, so the operator records it like any other). The
reviews are pod creations, half members of that group and half not, so both admission paths are
taken; with `--target quota-podgroup` they are dry-run PodGroup creations instead (decided, never
recorded). The first few requests (which load the namespace's ledger) are a warm-up, not counted.

Usage: `python -m podgroup_operator.bench.webhook --requests 200` (KUBECONFIG names the cluster).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import ssl
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

import aiohttp

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import (
    NAMESPACES,
    PODGROUPS,
    RESOURCE_QUOTAS,
    VALIDATING_WEBHOOKS,
    KubeClient,
)
from podgroup_operator.bench.stats import percentile

WARM_UP = 5


def _review(namespace: str, target: str, index: int, group: str) -> dict[str, Any]:
    uid = str(uuid.uuid4())
    name = f"bench-{index}"
    if target == "quota-podgroup":
        resource = {"group": c.GROUP, "version": c.VERSION, "resource": c.PLURAL}
        kind = {"group": c.GROUP, "version": c.VERSION, "kind": c.KIND}
        obj: dict[str, Any] = {
            "apiVersion": c.API_VERSION,
            "kind": c.KIND,
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "spec": {"minMember": 1, "totalResources": {"cpu": "100m"}},
        }
    else:
        resource = {"group": "", "version": "v1", "resource": "pods"}
        kind = {"group": "", "version": "v1", "kind": "Pod"}
        labels = {c.LABEL_POD_GROUP: group} if index % 2 else {}
        obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": uid, "labels": labels},
            "spec": {
                "containers": [
                    {"name": "main", "image": "sim", "resources": {"requests": {"cpu": "1m"}}}
                ]
            },
            "status": {"phase": "Pending"},
        }
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": kind,
            "resource": resource,
            "requestKind": kind,
            "requestResource": resource,
            "name": name,
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {"username": "bench", "groups": ["system:authenticated"]},
            "object": obj,
            "oldObject": None,
            "dryRun": target == "quota-podgroup",
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


async def _webhook_endpoint(kube: KubeClient, target: str) -> tuple[str, ssl.SSLContext]:
    # handlers.webhooks.VALIDATING_CONFIG_NAME (bench sits below handlers in the layers)
    config = await kube.get(VALIDATING_WEBHOOKS, f"{c.OPERATOR_NAME}.{c.GROUP}")
    hook = next(h for h in config["webhooks"] if h["name"] == f"{target}.{c.GROUP}")
    client = hook["clientConfig"]
    if "url" not in client:
        raise SystemExit("the webhook is served behind a Service; run this on the dev cluster")
    context = ssl.create_default_context(cadata=base64.b64decode(client["caBundle"]).decode())
    return client["url"], context


async def bench_webhook(
    kube: KubeClient,
    *,
    requests: int = 200,
    target: str = "quota-pod",
    keepalive: bool = False,
    concurrency: int | None = None,
) -> dict[str, Any]:
    """Fire `requests` AdmissionReviews at once at the running operator; latency percentiles (ms).

    Without `keepalive` each request opens its own TLS connection (a cold burst); with it, the
    requests reuse the connections the warm-up opened where they can, as the apiserver's
    keep-alive client does in steady state.
    """
    namespace = f"bench-quota-{uuid.uuid4().hex[:6]}"
    await kube.create(
        NAMESPACES,
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": namespace,
                "labels": {c.NAMESPACE_LABEL_QUOTA_RESERVATION: c.OPT_IN_VALUE},
            },
        },
    )
    try:
        await kube.create(
            RESOURCE_QUOTAS,
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": "compute", "namespace": namespace},
                "spec": {"hard": {"requests.cpu": "1000", "pods": "100000"}},
            },
            namespace,
        )
        group = "reserving"
        for attempt in range(100):  # the apiserver learns the namespace label asynchronously
            try:
                await kube.create(
                    PODGROUPS,
                    {
                        "apiVersion": c.API_VERSION,
                        "kind": c.KIND,
                        "metadata": {"name": group, "namespace": namespace},
                        "spec": {"minMember": 1, "totalResources": {"cpu": "10"}},
                    },
                    namespace,
                )
                break
            except Exception:
                if attempt == 99:
                    raise
                await asyncio.sleep(0.1)
        url, context = await _webhook_endpoint(kube, target)
        endpoint = url
        connector = aiohttp.TCPConnector(ssl=context, limit=0, force_close=not keepalive)
        async with aiohttp.ClientSession(connector=connector) as session:

            async def one(index: int) -> tuple[float, bool]:
                body = json.dumps(_review(namespace, target, index, group))
                start = time.perf_counter()
                async with session.post(
                    endpoint, data=body, headers={"Content-Type": "application/json"}
                ) as response:
                    answer = await response.json()
                elapsed = (time.perf_counter() - start) * 1000
                return elapsed, bool(answer["response"]["allowed"])

            for index in range(WARM_UP):
                await one(-1 - index)
            wall = time.perf_counter()
            gate = asyncio.Semaphore(concurrency or requests)

            async def gated(index: int) -> tuple[float, bool]:
                async with gate:
                    return await one(index)

            results = await asyncio.gather(*(gated(i) for i in range(requests)))
            wall_ms = (time.perf_counter() - wall) * 1000
    finally:
        await kube.delete(NAMESPACES, namespace)
    latencies = sorted(ms for ms, _ in results)

    return {
        "target": target,
        "requests": requests,
        "concurrency": concurrency or requests,
        "allowed": sum(ok for _, ok in results),
        "p50_ms": round(percentile(latencies, 0.50), 2),
        "p99_ms": round(percentile(latencies, 0.99), 2),
        "mean_ms": round(statistics.fmean(latencies), 2),
        "max_ms": round(latencies[-1], 2),
        "wall_ms": round(wall_ms, 2),
        "connections": "keep-alive" if keepalive else "one new TLS connection per request",
    }


def build_parser() -> argparse.ArgumentParser:
    """The options of `podgroup-operator bench webhook`."""
    parser = argparse.ArgumentParser(
        prog="podgroup-operator bench webhook",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--target", choices=["quota-pod", "quota-podgroup"], default="quota-pod")
    parser.add_argument("--kubeconfig", default=None)
    parser.add_argument(
        "--both", action="store_true", help="measure new connections and keep-alive, one each"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)

    async def run() -> dict[str, Any]:
        async with KubeClient.from_kubeconfig(args.kubeconfig) as kube:
            return await bench_webhook(kube, requests=args.requests, target=args.target)

    async def both() -> list[dict[str, Any]]:
        async with KubeClient.from_kubeconfig(args.kubeconfig) as kube:
            return [
                await bench_webhook(kube, requests=args.requests, target=args.target, keepalive=k)
                for k in (False, True)
            ]

    print(json.dumps(asyncio.run(both()) if args.both else [asyncio.run(run())], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
