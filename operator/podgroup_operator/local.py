"""What the operator needs to know to run next to a local apiserver (the dev cluster's).

Kept out of `devcluster/`, which holds developer tools that production code never imports:
recognising the dev cluster's kubeconfig (so `run` serves webhooks on loopback there) and
picking a free loopback port are things the operator itself does.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import yaml

DEV_CLUSTER_MARKER = "podgroup-operator.dev-cluster"
"""Name of the kubeconfig extension `dev-cluster up` writes, so the operator can recognise it."""


def free_port() -> int:
    """A TCP port free on loopback right now (the OS picks it)."""
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
