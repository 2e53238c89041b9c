"""The shapes of Kubernetes names, written once for every layer that checks one.

A namespace is a DNS-1123 label; a PodGroup's name, a `spec.schedulerName` and the domain of an
extended resource (`nvidia.com/gpu`) are DNS-1123 subdomains; a label key is a qualified name (an
optional DNS-1123 subdomain and `/`, then a name of at most 63 characters). The API server
refuses anything else there; checking the same shape first lets the operator say which value is
wrong, and how to fix it, before a request fails on it.
"""

from __future__ import annotations

import re

from podgroup_operator.api.limits import (
    MAX_LABEL_KEY_LENGTH,
    MAX_LABEL_NAME_LENGTH,
    MAX_NAME_LENGTH,
    MAX_NAMESPACE_LENGTH,
)

DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_SUBDOMAIN = rf"{DNS_LABEL}(\.{DNS_LABEL})*"
LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
"""The name part of a label key, and the shape of a non-empty label value."""
LABEL_KEY_PATTERN = (
    rf"^({DNS_SUBDOMAIN}/)?[A-Za-z0-9]([-A-Za-z0-9_.]{{0,{MAX_LABEL_NAME_LENGTH - 2}}}"
    r"[A-Za-z0-9])?$"
)
"""A label key as one pattern (for a CRD schema): the name part's length included, the
prefix's not (`label_key_problem` checks it)."""
LABEL_KEY_HINT = (
    "a node label key is an optional DNS subdomain prefix and '/', then a name of at most 63 "
    "letters, digits, '-', '_' or '.', starting and ending with a letter or digit (e.g. "
    "example.com/rack or topology.kubernetes.io/zone)"
)


def is_dns_label(value: str) -> bool:
    """A namespace name: at most 63 lowercase letters, digits and '-', alphanumeric at both ends."""
    return len(value) <= MAX_NAMESPACE_LENGTH and re.fullmatch(DNS_LABEL, value) is not None


def is_dns_subdomain(value: str) -> bool:
    """An object name: labels joined by '.', at most 253 characters."""
    return len(value) <= MAX_NAME_LENGTH and re.fullmatch(DNS_SUBDOMAIN, value) is not None


def label_key_problem(key: str) -> str | None:
    """What makes `key` no label key (Kubernetes' qualified name), or None when it is one."""
    if not key:
        return "is empty"
    if len(key) > MAX_LABEL_KEY_LENGTH:
        return f"is {len(key)} characters long: at most {MAX_LABEL_KEY_LENGTH}"
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return "has an empty prefix before '/'"
    if prefix and "/" in prefix:
        return "has more than one '/'"
    if prefix and not is_dns_subdomain(prefix):
        return (
            f"has the prefix {prefix!r}, which is no DNS subdomain (lowercase letters, digits, "
            "'-' and '.', at most 253 characters)"
        )
    if len(name) > MAX_LABEL_NAME_LENGTH:
        return f"has a name part of {len(name)} characters: at most {MAX_LABEL_NAME_LENGTH}"
    if re.fullmatch(LABEL_NAME, name) is None:
        what = f"has the name part {name!r}" if prefix else "is no label name"
        return (
            f"{what}: use letters, digits, '-', '_' or '.', starting and ending with a letter or "
            "digit"
        )
    return None


def is_label_key(key: str) -> bool:
    return label_key_problem(key) is None


def is_label_value(value: str) -> bool:
    """Empty, or at most 63 letters, digits, '-', '_', '.', alphanumeric at both ends."""
    return value == "" or (
        len(value) <= MAX_LABEL_NAME_LENGTH and re.fullmatch(LABEL_NAME, value) is not None
    )
