"""Thin Kopf glue: admission webhooks, probes, and the one startup handler.

Importing this package registers every handler with Kopf. Pods, nodes and PodGroups reach the
operator through its informers (controllers/runtime.py), never through Kopf: Kopf's per-object
workers and index barrier do not scale to a cluster's pods.
"""

from podgroup_operator.handlers import admission, quota, routing, startup  # noqa: F401
