"""The shapes of Kubernetes names, written once for every layer that checks one.

A namespace is a DNS-1123 label; a PodGroup's name, a `spec.schedulerName` and the domain of an
extended resource (`nvidia.com/gpu`) are DNS-1123 subdomains. The API server refuses anything
else there; checking the same shape first lets the operator say which value is wrong, and how to
fix it, before a request fails on it.
"""

from __future__ import annotations

import re

from podgroup_operator.api.limits import MAX_NAME_LENGTH, MAX_NAMESPACE_LENGTH

DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_SUBDOMAIN = rf"{DNS_LABEL}(\.{DNS_LABEL})*"


def is_dns_label(value: str) -> bool:
    """A namespace name: at most 63 lowercase letters, digits and '-', alphanumeric at both ends."""
    return len(value) <= MAX_NAMESPACE_LENGTH and re.fullmatch(DNS_LABEL, value) is not None


def is_dns_subdomain(value: str) -> bool:
    """An object name: labels joined by '.', at most 253 characters."""
    return len(value) <= MAX_NAME_LENGTH and re.fullmatch(DNS_SUBDOMAIN, value) is not None
