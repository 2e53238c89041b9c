"""The pure PodGroup domain: membership, lifecycle and conditions as plain functions.

Kept apart from Kopf and the Kubernetes client so that every rule of the gang's lifecycle can be
read in one place and tested without a cluster: the caller passes pods, previous status and the
current time in, and gets a new status and the events to emit out. Nothing here reads a clock,
performs I/O or keeps state between calls.
"""
