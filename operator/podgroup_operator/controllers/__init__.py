"""The operator's moving parts: they do I/O through the adapters but know nothing of Kopf.

`runtime` wires them: the informers feed `scheduler.GangScheduler` (places gangs),
`status.StatusReconciler` (the one writer of PodGroup status, whose `restarts.Restarts` carries
out the restart policy's plan) and `quota.QuotaService`; `leader` decides which replica runs the
first two. A `scheduling/x.py` decides; the `controllers/x.py` of the same name carries it out.
Unit tests drive them over the in-memory fake API server.
"""
