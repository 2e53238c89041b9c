"""API paths: names and namespaces are one path segment each, or refused before any request.

A group name read from a pod's annotation is free text, and aiohttp's URL library resolves "."
and ".." segments (escaped ones too), so without this check "../../api/v1/..." would reach
another path with the operator's credentials. The rule is the API server's own for names, which
client-go also checks before sending.
"""

from __future__ import annotations

import pytest
import yarl

from podgroup_operator.adapters.kube import PODGROUPS, PODS, InvalidNameError

BAD_NAMES = [
    (".", "may not be '.' or '..'"),
    ("..", "may not be '.' or '..'"),
    ("../../../../api/v1/namespaces/kube-system/secrets/token", "may not contain '/'"),
    ("a/b", "may not contain '/'"),
    ("%2E%2E", "may not contain '%'"),
    ("a%2Fb", "may not contain '%'"),
]


def test_valid_names_make_the_paths_the_api_serves() -> None:
    assert PODS.path("team-a", "p-0", "binding") == "/api/v1/namespaces/team-a/pods/p-0/binding"
    assert PODGROUPS.path("team-a", "train") == (
        "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/team-a/podgroups/train"
    )
    assert PODS.path() == "/api/v1/pods"


def test_what_the_url_library_would_do_with_dots_unchecked() -> None:
    """Why the check exists: six ".." leave the PodGroups for a Secret's path."""
    name = "../" * 6 + "api/v1/namespaces/kube-system/secrets/token"
    url = yarl.URL("https://127.0.0.1/apis/g/v1/namespaces/ns/podgroups/" + name)
    assert url.raw_path == "/api/v1/namespaces/kube-system/secrets/token"


@pytest.mark.parametrize(("name", "why"), BAD_NAMES)
def test_a_name_that_is_not_one_path_segment_is_refused_saying_why(name: str, why: str) -> None:
    with pytest.raises(InvalidNameError, match="invalid resource name") as refused:
        PODGROUPS.path("team-a", name)
    assert why in str(refused.value)
    assert repr(name) in str(refused.value)


@pytest.mark.parametrize(("namespace", "why"), BAD_NAMES)
def test_a_namespace_that_is_not_one_path_segment_is_refused_saying_why(
    namespace: str, why: str
) -> None:
    with pytest.raises(InvalidNameError, match="invalid namespace") as refused:
        PODS.path(namespace)
    assert why in str(refused.value)
