"""Thin Kopf glue: admission webhooks, probes, and the one startup handler.

Importing a module registers its handlers with Kopf. `main.run` imports `startup` always and
the admission modules (`admission`, `quota`, `routing`) only when webhooks are served: Kopf
refuses to run admission handlers without a server. Pods, nodes and PodGroups reach the
operator through its informers (controllers/runtime.py), never through Kopf: Kopf's per-object
workers and index barrier do not scale to a cluster's pods.
"""
