"""The operator's moving parts: they do I/O through the adapters but know nothing of Kopf.

`status.StatusReconciler` writes PodGroup status; `scheduler.GangScheduler` places gangs. The
handlers wire Kopf's events to them; unit tests drive them over the in-memory fake API server.
"""
