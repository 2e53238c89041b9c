"""podgroup-operator: gang scheduling for Kubernetes, built on Kopf."""

__version__ = "0.1.0"
