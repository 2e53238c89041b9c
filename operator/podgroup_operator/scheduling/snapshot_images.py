"""The snapshot's images: which names the nodes list, on how many nodes, and how big.

kube-scheduler's ImageLocality score needs, per image name, its size and the share of nodes
that list it. Each node's names are on its `NodeState.images`; here are how many nodes list each
name and its size. Which nodes list an image is found by a pass over the nodes (`holders`), not
kept: a set of nodes per name costs far more memory than the names
(docs/decisions/010-placement-keeps-what-a-shape-learnt.md). Image scores are cached per image
epoch (`cached`), so a node pulling an image leaves the node-epoch caches (verdicts, domains)
alone.

The `Snapshot` owns one `ImageState` (`snapshot.images`) and tells it each node's image list as
the node comes, changes or goes (`set_node`, `node_count_changed`); rules only read it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

from podgroup_operator.scheduling.snapshot_classes import memoized
from podgroup_operator.scheduling.snapshot_nodes import NodeState


def node_images(node: Mapping[str, Any]) -> dict[str, int]:
    """Bytes, by each name under which the node's `status.images` lists an image."""
    images: dict[str, int] = {}
    for image in (node.get("status") or {}).get("images") or ():
        if not isinstance(image, Mapping):
            continue
        try:
            size = int(image.get("sizeBytes") or 0)
        except (TypeError, ValueError):
            size = 0
        for name in image.get("names") or ():
            if isinstance(name, str):
                images[sys.intern(name)] = max(size, 0)
    return images


class ImageState:
    """Image name -> how many nodes list it and its size; image scores cached per image epoch.

    `nodes` is the snapshot's own node store (read, never changed here)."""

    def __init__(self, nodes: Mapping[str, NodeState]) -> None:
        self._nodes = nodes
        self._counts: dict[str, int] = {}
        """Image name -> how many nodes list it."""
        self._sizes: dict[str, int] = {}
        """Image name -> its size, as the node that listed it last says."""
        self._epoch = 0
        """Bumped when a node comes, goes or lists other images: image scores cached before
        (`cached`) are stale. Apart from the node epoch, whose caches images do not touch."""
        self._cache: dict[Any, tuple[int, Any]] = {}

    # --- bookkeeping (the Snapshot calls these) --------------------------------------------------
    def set_node(self, state: NodeState, images: Mapping[str, int]) -> None:
        """Count the node under `images` (name -> bytes) instead of what it listed before."""
        counts, sizes = self._counts, self._sizes
        names = tuple(images)
        changed = names != state.images
        if changed:
            for name in state.images:
                left = counts.get(name, 0) - 1
                if left > 0:
                    counts[name] = left
                else:
                    counts.pop(name, None)
                    sizes.pop(name, None)
            for name in names:
                counts[name] = counts.get(name, 0) + 1
            state.images = names
        for name, size in images.items():
            if sizes.get(name) != size:
                sizes[name] = size
                changed = True
        if changed:
            self._epoch += 1

    def node_count_changed(self) -> None:
        """A node came or went: every image's share of the nodes changed."""
        self._epoch += 1

    # --- queries ---------------------------------------------------------------------------------
    def count(self, name: str) -> int:
        """How many nodes list image `name` (see `scores.image_name`)."""
        return self._counts.get(name, 0)

    def holders(self, name: str) -> list[str]:
        """The nodes that list image `name`: a pass over every node (see the module docstring)."""
        if not self._counts.get(name):
            return []
        return [state.name for state in self._nodes.values() if name in state.images]

    def size(self, name: str) -> int:
        return self._sizes.get(name, 0)

    def cached(self, key: Any, compute: Callable[[], Any]) -> Any:
        """`compute()` once per image epoch for `key` (the image scores of a shape)."""
        return memoized(self._cache, self._epoch, key, compute)
