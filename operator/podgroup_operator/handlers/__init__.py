"""Thin Kopf glue: parse the body into a model, call one domain function, patch or raise.

Importing this package registers every handler with Kopf. Kopf runs startup handlers in
registration order, so `startup` (which creates the shared API client) is imported first.
"""

from podgroup_operator.handlers import startup  # noqa: F401, I001 (must register first)
from podgroup_operator.handlers import admission, podgroups, routing, scheduler, quota  # noqa: F401
