"""The only code that talks to the Kubernetes API server.

Everything above (handlers, the scheduler loop, sim nodes) goes through `kube.KubeClient`;
everything below (domain, scheduling) never sees a client at all.
"""
