"""The one key of a PodGroup, and so of a gang: (namespace, name).

It lives in `api/`, the layer every other one may import, so that the pure core (`scheduling/`,
`domain/`), the controllers and the adapters' indexes all key groups by the same type.
"""

GroupKey = tuple[str, str]
"""(namespace, name) of a PodGroup."""
