"""`kubectl podgroup`: every gang with its phase and, for the ones that wait, why.

`kubectl get podgroups` shows counters; the question operators actually ask is "why is my gang
stuck?". This plugin puts the Unschedulable condition's reason and message next to each group.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

from podgroup_operator import constants as c
from podgroup_operator.adapters.kube import PODGROUPS, KubeClient


def _waiting_reason(group: dict[str, Any]) -> str:
    for condition in group.get("status", {}).get("conditions") or []:
        if (
            condition.get("type") == c.ConditionType.UNSCHEDULABLE
            and condition.get("status") == "True"
        ):
            return f"{condition.get('reason', '')}: {condition.get('message', '')}"
    return ""


def render(groups: list[dict[str, Any]], wide: bool) -> str:
    header = ["NAMESPACE", "NAME", "PHASE", "MIN", "RUNNING", "SUCCEEDED", "FAILED", "SCHEDULED"]
    if wide:
        header.append("WAITING FOR")
    rows = [header]
    for group in sorted(groups, key=lambda g: (g["metadata"]["namespace"], g["metadata"]["name"])):
        status = group.get("status", {})
        row = [
            group["metadata"]["namespace"],
            group["metadata"]["name"],
            status.get("phase", "") or "-",
            str(group.get("spec", {}).get("minMember", "")),
            *(str(status.get(k, 0)) for k in ("running", "succeeded", "failed", "scheduled")),
        ]
        if wide:
            row.append(_waiting_reason(group))
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - (1 if wide else 0))]
    lines = []
    for row in rows:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[: len(widths)])]
        lines.append("   ".join([*cells, *row[len(widths) :]]).rstrip())
    return "\n".join(lines)


async def _list(namespace: str | None, name: str | None) -> list[dict[str, Any]]:
    async with KubeClient.from_kubeconfig(os.environ.get("KUBECONFIG")) as kube:
        if name:
            return [await kube.get(PODGROUPS, name, namespace or "default")]
        return list((await kube.list(PODGROUPS, namespace)).get("items", []))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="kubectl podgroup", description=__doc__)
    parser.add_argument("name", nargs="?")
    parser.add_argument("-n", "--namespace", default="default")
    parser.add_argument("-A", "--all-namespaces", action="store_true")
    parser.add_argument("--short", action="store_true", help="omit the WAITING FOR column")
    args = parser.parse_args(argv)
    namespace = None if args.all_namespaces else args.namespace
    groups = asyncio.run(_list(namespace, args.name))
    print(render(groups, wide=not args.short) if groups else "No PodGroups found.")
    return 0
