"""The rules' declarations (scheduling/registry.py) against the three lists that name pod fields
by hand (the slim informer fields, `gang.decision_cost` and `shapes.raw_shape_key`), and
`registry.depends_on_pods` against the declarations it reads, field by field.

Each declared (rule, field) pair has a sample pod (rule_samples.py) that asks for the rule through
that field; a rule or field declared without a sample fails
`test_every_declared_field_has_a_sample_that_asks_for_it`.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from podgroup_operator.adapters.slim import slim_pod
from podgroup_operator.scheduling import placement
from podgroup_operator.scheduling.filters import Exclusion
from podgroup_operator.scheduling.gang import GangRequest, decision_cost
from podgroup_operator.scheduling.placement import place_group
from podgroup_operator.scheduling.registry import (
    RULES,
    Cost,
    Kind,
    Rule,
    depends_on_pods,
    read_fields,
    rule_of,
)
from podgroup_operator.scheduling.shapes import raw_shape_key
from podgroup_operator.scheduling.snapshot import Snapshot
from tests.builders import node
from tests.unit.scheduling.rule_samples import OWNER, SAMPLES, Pod, sample

PAIRS = [(rule, path) for rule, path in read_fields()]
IDS = [f"{rule.name}:{path}" for rule, path in PAIRS]
SHAPE_PAIRS = [(rule, path) for rule in RULES for path in rule.reads]
SHAPE_IDS = [f"{rule.name}:{path}" for rule, path in SHAPE_PAIRS]


# --- paths -------------------------------------------------------------------------------------
def values(obj: Any, path: str) -> list[Any]:
    """What `path` names in `obj`: one value per list item for each `[]`, absent ones left out."""
    found = [obj]
    for part in path.split("."):
        each = part.endswith("[]")
        key = part.removesuffix("[]")
        found = [o[key] for o in found if isinstance(o, dict) and key in o]
        if each:
            found = [item for items in found for item in items]
    return found


def without(pod: Pod, path: str) -> Pod:
    """A copy of `pod` without what `path` names."""
    body = copy.deepcopy(pod)
    *parents, last = path.split(".")
    holders = values(body, ".".join(parents)) if parents else [body]
    for holder in holders:
        holder.pop(last, None)
    return body


def test_the_path_helpers_find_and_remove_each_item() -> None:
    pod = sample({"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]})
    assert values(pod, "spec.containers[].image") == ["x", "y"]
    assert values(without(pod, "spec.containers[].image"), "spec.containers[].image") == []
    assert values(pod, "spec.nodeSelector") == []


# --- the declarations themselves ---------------------------------------------------------------
def test_every_declared_field_has_a_sample_that_asks_for_it() -> None:
    declared = {(rule.name, path) for rule, path in PAIRS}
    assert declared == set(SAMPLES)
    for (_, path), pod in SAMPLES.items():
        assert values(pod, path), f"the sample for {path} does not set it"


def test_each_exclusion_is_declared_by_one_filter_and_scores_exclude_nothing() -> None:
    for exclusion in Exclusion:
        declaring = [rule.name for rule in RULES if exclusion in rule.exclusions]
        assert len(declaring) == 1, (exclusion, declaring)
        assert rule_of(exclusion).kind is Kind.FILTER
    for rule in RULES:
        if rule.kind is Kind.SCORE:
            assert not rule.exclusions and not rule.lifted_by, rule.name
        else:
            assert rule.exclusions and rule.lifted_by, rule.name
    assert len({rule.name for rule in RULES}) == len(RULES)


def test_field_paths_start_at_the_pods_metadata_or_spec() -> None:
    for rule, path in PAIRS:
        assert path.split(".")[0] in ("metadata", "spec"), (rule.name, path)


# --- the three lists and depends_on_pods ----------------------------------------------------------
@pytest.mark.parametrize(("rule", "path"), PAIRS, ids=IDS)
def test_the_slim_informer_keeps_every_field_a_rule_reads(rule: Rule, path: str) -> None:
    pod = SAMPLES[rule.name, path]
    owned = copy.deepcopy(pod)
    owned["metadata"]["ownerReferences"] = [OWNER]
    assert values(slim_pod(owned), path) == values(pod, path)


@pytest.mark.parametrize(("rule", "path"), SHAPE_PAIRS, ids=SHAPE_IDS)
def test_the_shape_key_covers_every_field_read_into_the_shape(rule: Rule, path: str) -> None:
    """Two pods that differ in a field their shape reads never share a cached shape."""
    pod = SAMPLES[rule.name, path]
    assert raw_shape_key(pod) != raw_shape_key(without(pod, path))


@pytest.mark.parametrize(("rule", "path"), PAIRS, ids=IDS)
def test_decision_cost_counts_a_field_exactly_when_its_rule_declares_a_cost(
    rule: Rule, path: str
) -> None:
    pod = SAMPLES[rule.name, path]
    request = GangRequest(namespace="default", name="g", min_member=1, pending=(pod,))
    cost = decision_cost([request], pods=1_000, nodes=1_000)
    assert (cost > 0) == (rule.cost is not Cost.NONE), cost


@pytest.mark.parametrize(("rule", "path"), PAIRS, ids=IDS)
def test_depends_on_pods_is_true_exactly_for_the_filters_other_pods_can_lift(
    rule: Rule, path: str
) -> None:
    assert depends_on_pods(SAMPLES[rule.name, path]) is rule.depends_on_pods


def test_a_plain_pod_costs_nothing_and_depends_on_no_pod() -> None:
    pod = sample()
    request = GangRequest(namespace="default", name="g", min_member=1, pending=(pod,))
    assert decision_cost([request], pods=1_000, nodes=1_000) == 0
    assert not depends_on_pods(pod)


# --- the declarations are complete: what the shape parse reads is declared ----------------------
class Recorded(dict[str, Any]):
    """A pod (or part of one) that notes the path of every field read through it."""

    def __init__(self, body: dict[str, Any], path: str, seen: set[str]) -> None:
        super().__init__(body)
        self.path, self.seen = path, seen

    def _wrapped(self, key: str, value: Any) -> Any:
        path = f"{self.path}.{key}" if self.path else key
        self.seen.add(path)
        if isinstance(value, dict):
            return Recorded(value, path, self.seen)
        if isinstance(value, list):
            return [
                Recorded(v, f"{path}[]", self.seen) if isinstance(v, dict) else v for v in value
            ]
        return value

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return self._wrapped(key, super().get(key, default))

    def __getitem__(self, key: str) -> Any:
        return self._wrapped(key, super().__getitem__(key))


def covered(path: str, declared: set[str]) -> bool:
    """Whether `path` is a declared field, inside one, or on the way to one."""
    return any(
        path == field
        or path.startswith((f"{field}.", f"{field}[]"))
        or field.startswith((f"{path}.", f"{path}[]"))
        for field in declared
    )


def test_every_field_the_shape_parse_reads_is_declared() -> None:
    """`member_shape` reads nothing the rules do not declare (so the shape key test covers it)."""
    seen: set[str] = set()
    for pod in [sample(), *SAMPLES.values()]:
        placement.member_shape(Recorded(pod, "", seen))
    declared = {path for _, path in PAIRS}
    assert {path for path in seen if not covered(path, declared)} == set()


def test_the_recorder_sees_what_is_read() -> None:
    seen: set[str] = set()
    pod = Recorded(sample({"nodeSelector": {"zone": "a"}}), "", seen)
    assert placement.member_shape(pod).constraints.node_selector == (("zone", "a"),)
    assert "spec.nodeSelector" in seen and "spec.containers[].resources" in seen
    assert not covered("spec.hostNetwork", {path for _, path in PAIRS})


NOT_RULES = {"metadata.uid", "metadata.name", "spec.priority"}
"""What placement reads of a member besides its rules: who it is (a binding names it) and the
priority the snapshot books it with (preemption reads it)."""


def test_every_field_placement_reads_of_a_member_is_declared() -> None:
    """Placing each sample reads nothing of its members beyond the rules' fields and who they
    are (`NOT_RULES`): what each member is read for is declared (`reads_each` included)."""
    seen: set[str] = set()
    for pod in [sample(), *SAMPLES.values()]:
        body = copy.deepcopy(pod)
        body["metadata"]["uid"] = "uid-0"
        snapshot = Snapshot.build([node("n1"), node("n2")], [])
        member = Recorded(body, "", seen)
        place_group(
            GangRequest(namespace="default", name="g", min_member=1, pending=(member,)), snapshot
        )
    declared = {path for _, path in PAIRS} | NOT_RULES
    assert {path for path in seen if not covered(path, declared)} == set()
    assert "spec.tolerations" in seen
