"""What the operator needs to know to run next to a local apiserver (the dev cluster's).

Kept out of `devcluster/`, which holds developer tools that production code never imports:
recognising the dev cluster's kubeconfig (so `run` serves webhooks on loopback there) and
picking a free loopback port are things the operator itself does.
"""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path

import yaml

DEV_CLUSTER_MARKER = "podgroup-operator.dev-cluster"
"""Name of the kubeconfig extension `dev-cluster up` writes, so the operator can recognise it."""


PORT_FLOOR = 20_000
"""The lowest port `free_port` picks: above the well-known and most registered services."""
PORT_TRIES = 200
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _ephemeral_floor() -> int:
    """Where the kernel's range for outgoing connections begins (Linux; 32768 elsewhere)."""
    try:
        low, _high = EPHEMERAL_RANGE.read_text().split()
        return int(low)
    except (OSError, ValueError):
        return 32_768


def free_port() -> int:
    """A TCP port free on loopback right now, below the range the kernel hands out to
    outgoing connections.

    Not the port the OS picks for a bind to 0: that comes from the same range, so one picked
    and listened on seconds later could be taken meanwhile by any of the thousands of
    connections a busy dev cluster opens. A port below the range is only ever taken by another
    explicit bind."""
    floor = _ephemeral_floor()
    if floor - PORT_FLOOR > PORT_TRIES:
        for _ in range(PORT_TRIES):
            port = random.randrange(PORT_FLOOR, floor)
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def is_dev_cluster_kubeconfig(path: str | os.PathLike[str]) -> bool:
    """True when the kubeconfig was written by `dev-cluster up` (it carries our marker)."""
    try:
        config = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError):
        return False
    return any(ext.get("name") == DEV_CLUSTER_MARKER for ext in config.get("extensions") or [])
