"""Labelled fabrics of sim nodes for topology tests: racks of nodes in blocks, each node with
`pool=<unique>` (its pods select it, so tests share the control plane without sharing capacity)
and `example.com/block` / `example.com/rack` labels."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from podgroup_operator.adapters.kube import KubeClient
from podgroup_operator.devcluster.simnodes import NodePool, SimCluster
from tests.kube_helpers import unique_prefix

BLOCK = "example.com/block"
RACK = "example.com/rack"


@asynccontextmanager
async def racks_sim(
    kube: KubeClient, layout: Sequence[tuple[str, str, int, str]]
) -> AsyncIterator[tuple[SimCluster, str]]:
    """Ready sim nodes per (block, rack, count, cpu) entry, named `<pool>-<block>-<rack>-<i>`;
    yields the sim nodes (to kill some) and the pool value."""
    name = unique_prefix()
    pools = [
        NodePool(
            count=count,
            cpu=cpu,
            memory="16Gi",
            name_prefix=f"{name}-{block}-{rack}",
            labels={"pool": name, BLOCK: block, RACK: rack},
        )
        for block, rack, count, cpu in layout
    ]
    async with SimCluster(kube, pools, start_delay=0.1, lease_interval=2.0) as sim:
        await sim.wait_ready(30)
        yield sim, name


@asynccontextmanager
async def racks(
    kube: KubeClient, layout: Sequence[tuple[str, str, int, str]]
) -> AsyncIterator[str]:
    """`racks_sim`, yielding the pool value only."""
    async with racks_sim(kube, layout) as (_, name):
        yield name


def uniform(
    blocks: int, racks_per_block: int, hosts: int, cpu: str
) -> list[tuple[str, str, int, str]]:
    """The layout of `blocks` x `racks_per_block` racks (`b<i>`, `r<j>`) of `hosts` nodes each."""
    return [(f"b{b}", f"r{r}", hosts, cpu) for b in range(blocks) for r in range(racks_per_block)]


def rack_of(node: str) -> str:
    """`<pool>-b0-r1-2` -> `b0-r1`."""
    parts = node.split("-")
    return f"{parts[-3]}-{parts[-2]}"
