"""Validate a PodGroup body and report every problem at once, each with its field path.

The CRD schema refuses most bad input already (bounds included, see api/limits.py); what it
cannot express (totalResources below minResources, resource names, quantities too large in their
string form, unknown fields on a cluster whose CRD still keeps them) lands here, in the
validating webhook. Lightweight gangs' labels are checked with the same function
(domain/lightweight.py), so both speak with the same messages. Kueue's `field.ErrorList` is the
model: collect, then raise once at the edge, so a user fixes everything in one round trip.

A Topology is checked here the same way (`topology_errors`), and a PodGroup's
`spec.topologyConstraint` against the Topology it names (`constraint_findings`): what the schema
cannot know, since it needs another object.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from podgroup_operator.api.limits import MAX_SUB_GROUP_DEPTH, summarize
from podgroup_operator.api.models import (
    LevelOrderError,
    PodGroupSpec,
    PodGroupStatus,
    SubGroup,
    TopologyConstraint,
    TopologyInEffect,
    TopologySpec,
    ancestors,
    constraint_in_effect,
    level_problems,
    topology_in_effect,
)
from podgroup_operator.api.names import is_dns_subdomain
from podgroup_operator.api.quantity import coverage_errors
from podgroup_operator.api.subgroups import TreeNode, spec_tree
from podgroup_operator.constants import (
    ANNOTATION_PROVISIONING_CLASS,
    PROVISIONING_OFF,
    TOPOLOGY_PLURAL,
    ProvisioningClass,
)

LevelsOf = Callable[[str], tuple[str, ...] | None]
"""The levels (node label keys, coarse to fine) of the Topology of a name; None: none such."""

_ONE_YEAR = "one year; use a shorter duration"
LIMIT_REASONS: dict[str, str] = {
    "scheduleTimeoutSeconds": _ONE_YEAR,
    "maxRunSeconds": _ONE_YEAR,
    "backoffSeconds": _ONE_YEAR,
    "maxBackoffSeconds": _ONE_YEAR,
    "minMember": "no cluster holds more pods at once; use the gang's real size",
    "maxRestarts": "a gang that broke this often is crash-looping; allow fewer restarts",
    "gangGroup": "they are all placed in one decision; merge them into fewer, larger PodGroups",
    "levels": "no fabric has more tiers; keep the levels gangs are placed by",
}
"""Why each bounded field has its limit and what to do instead, keyed by API field name."""


def _path(loc: tuple[int | str, ...], root: str) -> str:
    path = root
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part.startswith("function-") or part in ("str", "int", "float", "bool"):
            continue  # union branch labels of pydantic, not fields
        else:
            path += f".{part}"
    return path


def _known_fields(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The API names allowed next to an unknown field, to suggest the likely intended one."""
    current: Any = model
    for part in loc[:-1]:
        field = next(
            (f for name, f in current.model_fields.items() if part in (name, f.alias)), None
        )
        annotation = getattr(field, "annotation", None)
        candidates = [a for a in getattr(annotation, "__args__", (annotation,)) if a is not None]
        current = next(
            (a for a in candidates if isinstance(a, type) and issubclass(a, BaseModel)), None
        )
        if current is None:
            return []
    return sorted(f.alias or name for name, f in current.model_fields.items())


def _message(error: Any, model: type[BaseModel]) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        known = _known_fields(model, error["loc"])
        return "unknown field; remove it" + (
            f" (known fields: {', '.join(known)})" if known else ""
        )
    if kind in ("greater_than_equal",):
        return f"must be >= {ctx.get('ge')}"
    if kind in ("greater_than",):
        return f"must be > {ctx.get('gt')}"
    if kind in ("less_than_equal", "too_long", "string_too_long"):
        return _too_large(error, kind, ctx)
    if kind == "too_short":
        return f"has {ctx.get('actual_length')} entries: at least {ctx.get('min_length')} needed"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"must be an integer, not {error.get('input')!r}"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"must be an object (a mapping), not {error.get('input')!r}"
    if kind == "list_type":
        return f"must be a list, not {error.get('input')!r}"
    if kind in ("string_type",):
        return f"must be a string, not {error.get('input')!r}"
    if kind == "enum":
        return f"must be one of {ctx.get('expected')}, not {error.get('input')!r}"
    if kind == "string_pattern_mismatch":
        return f"{error.get('input')!r} does not match {ctx.get('pattern')}"
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    return str(error["msg"][0].lower() + error["msg"][1:])


def _too_large(error: Any, kind: str, ctx: dict[str, Any]) -> str:
    """The limit, and why it exists: `1000000000000 is too large: at most 31536000 (...)`."""
    field = next((p for p in reversed(error["loc"]) if isinstance(p, str)), "")
    reason = LIMIT_REASONS.get(field)
    value = error.get("input")
    if kind == "less_than_equal":
        head = f"{value!r} is too large: must be at most {ctx.get('le')}"
    elif kind == "too_long":
        head = f"has {ctx.get('actual_length')} entries: at most {ctx.get('max_length')} allowed"
    else:
        head = f"is {len(str(value))} characters long: at most {ctx.get('max_length')} allowed"
    return f"{head} ({reason})" if reason else head


_API_FIELDS = {f.alias or name for name, f in PodGroupSpec.model_fields.items()}


def spec_errors(spec: Any) -> list[str]:
    """Every problem of a PodGroup spec as `spec.field.path: what is wrong and how to fix it`."""
    if not isinstance(spec, dict):
        return [f"spec: must be an object with at least minMember, not {spec!r}"]
    try:
        PodGroupSpec.model_validate(spec)
    except ValidationError as exc:
        errors = []
        for error in exc.errors(include_url=False):
            loc = tuple(error["loc"])
            if not loc and error["type"] == "value_error":
                continue  # the cross-field rule: reported below, even when other fields fail
            message = _message(error, PodGroupSpec)
            field, sep, rest = message.partition(": ")
            if not loc and sep and field in _API_FIELDS:
                # A cross-field rule names its own field first ("totalResources: ...").
                loc, message = (field,), rest
            errors.append(f"{_path(loc, 'spec')}: {message}")
        errors.extend(coverage_errors(spec.get("totalResources"), spec.get("minResources")))
        errors.extend(_sub_group_errors(spec))
        # pydantic may report one field through several union branches; keep each once.
        return _bounded(list(dict.fromkeys(errors)))
    return []


_SUB_GROUPS = TypeAdapter(list[SubGroup])


def _sub_group_errors(spec: Mapping[str, Any]) -> list[str]:
    """The tree's problems (`sub_group_problems`) once its entries parse on their own (their
    fields' own errors are reported by the model)."""
    raw = spec.get("subGroups")
    min_member, k = spec.get("minMember"), spec.get("minSubGroup")
    if not raw:
        if k is not None:
            return [NO_SUB_GROUPS]
        return []
    try:
        sub_groups = _SUB_GROUPS.validate_python(raw)
    except ValidationError:
        return []
    if not isinstance(min_member, int) or not (k is None or isinstance(k, int)):
        return []
    return sub_group_problems(
        min_member, k, sub_groups, _constraint(spec.get("topologyConstraint"))
    )


# --- the rules across fields, which the models' parsing raises too ------------------------------

NO_SUB_GROUPS = "spec.minSubGroup: counts sub-groups, and there are none; remove it"

NO_LEVEL = (
    "names no level: give requiredTopologyLevel (every member in one domain of that node "
    "label), preferredTopologyLevel (one domain when one fits), or both"
)


def constraint_rule_errors(constraint: TopologyConstraint) -> list[str]:
    """What a topologyConstraint's fields break together: it names no level at all.
    `TopologyConstraint` parsing raises it."""
    if constraint.required_topology_level is None and constraint.preferred_topology_level is None:
        return [NO_LEVEL]
    return []


def spec_rule_errors(spec: PodGroupSpec) -> list[str]:
    """What a parsed spec's fields break together, each as `spec.field: what and the fix`:
    totalResources below minResources, the sub-group tree's problems (`sub_group_problems`),
    minSubGroup without sub-groups. `PodGroupSpec` parsing raises them as one error."""
    errors = coverage_errors(spec.total_resources, spec.min_resources)
    if spec.sub_groups:
        errors += sub_group_problems(
            spec.min_member, spec.min_sub_group, spec.sub_groups, spec.topology_constraint
        )
    elif spec.min_sub_group is not None:
        errors.append(NO_SUB_GROUPS)
    return errors


def sub_group_problems(
    min_member: int,
    min_sub_group: int | None,
    sub_groups: Sequence[SubGroup],
    group: TopologyConstraint | None = None,
) -> list[str]:
    """What is wrong with a sub-group tree, each as `spec.subGroups[i].field: what and the fix`:
    a repeated name, an unknown parent, a cycle, a tree deeper than MAX_SUB_GROUP_DEPTH, a leaf
    without minMember, a parent with matchLabelKeys, a minSubGroup above the children there
    are, children whose counted minimums sum above their parent's minMember (the group's for
    the top), and a topology differing from the one the nearest constrained ancestor uses
    (`topology_in_effect`; `group` is the group's own constraint)."""
    problems: list[str] = []
    index: dict[str, int] = {}
    for i, sub in enumerate(sub_groups):
        if sub.name in index:
            problems.append(
                f"spec.subGroups[{i}].name: {sub.name!r} repeats subGroups[{index[sub.name]}]; "
                "give each sub-group its own name"
            )
        else:
            index[sub.name] = i
    for i, sub in enumerate(sub_groups):
        if sub.parent is not None and sub.parent not in index:
            problems.append(
                f"spec.subGroups[{i}].parent: {sub.parent!r} is not a sub-group of this group "
                f"(names: {summarize(index)}); name one of them or leave parent out"
            )
    if problems:
        return problems
    by_name = {sub.name: sub for sub in sub_groups}
    for i, sub in enumerate(sub_groups):
        chain = [sub, *ancestors(sub, by_name)]
        names = [each.name for each in chain]
        if chain[-1].parent is not None:  # every parent is known: the walk stopped at a cycle
            problems.append(
                f"spec.subGroups[{i}].parent: {' -> '.join([*names, chain[-1].parent])} is a "
                "cycle; a sub-group cannot be its own ancestor: break it by removing one parent"
            )
        elif len(chain) > MAX_SUB_GROUP_DEPTH:
            problems.append(
                f"spec.subGroups[{i}].parent: {sub.name!r} is {len(chain)} levels deep "
                f"({' -> '.join(reversed(names))}); at most {MAX_SUB_GROUP_DEPTH}: flatten "
                "the tree"
            )
    if problems:
        return problems
    tree = spec_tree(sub_groups)
    for i, sub in enumerate(sub_groups):
        [node] = tree.by_spec[sub.name]
        if node.leaf and sub.min_member is None:
            problems.append(
                f"spec.subGroups[{i}].minMember: is required of a leaf sub-group ({sub.name!r} "
                "has no children); give how many of its pods must be bound at once"
            )
        if not node.leaf and sub.match_label_keys:
            problems.append(
                f"spec.subGroups[{i}].matchLabelKeys: only a leaf forms sub-groups from pod "
                f"labels, and {sub.name!r} has children; move matchLabelKeys to a leaf"
            )
        if sub.min_sub_group is not None and node.leaf:
            problems.append(
                f"spec.subGroups[{i}].minSubGroup: {sub.name!r} has no children; remove "
                "minSubGroup or give it children"
            )
        problems.extend(
            _sum_problem(f"spec.subGroups[{i}]", sub.min_member, sub.min_sub_group, node.children)
        )
    problems.extend(_sum_problem("spec", min_member, min_sub_group, tree.roots))
    for i, sub in enumerate(sub_groups):
        constraint = sub.topology_constraint
        ancestor = _constrained_ancestor(sub, by_name)
        if constraint is None or constraint.topology is None or ancestor is None:
            continue  # naming no Topology, it inherits its ancestors' (`topology_in_effect`)
        above = topology_in_effect(ancestor, by_name, group).name
        if constraint.topology != above:
            problems.append(
                f"spec.subGroups[{i}].topologyConstraint.topology: {constraint.topology!r} "
                f"differs from parent {ancestor.name!r}'s {above!r}; a sub-group's domain lies "
                "inside its parent's, so both use the same Topology: use the same, or leave "
                "topology out to inherit it"
            )
    return problems


def _sum_problem(
    where: str, min_member: int | None, k: int | None, kids: Sequence[TreeNode[Any]]
) -> list[str]:
    """A parent's minSubGroup beyond its children, or its counted children's minimums (the k
    smallest, in the spec's own tree: `spec_tree`) summing above its minMember; a template
    child makes both unknowable (it forms as many sub-groups as its pods' label values), so
    neither is checked then."""
    if not kids:
        return []
    field = f"{where}.minSubGroup"
    fixed = [kid for kid in kids if not kid.spec.match_label_keys]
    if k is not None and k > len(kids) and len(fixed) == len(kids):
        return [
            f"{field}: {k} but only {len(kids)} direct children; lower it to at most {len(kids)}"
        ]
    if min_member is None or len(fixed) < len(kids):
        return []
    counted = sorted(kid.min_member for kid in fixed)[: k or len(fixed)]
    if sum(counted) > min_member:
        field = f"{where}.minMember"
        return [
            f"{field}: {min_member} is below the {sum(counted)} members its "
            f"{len(counted)} counted sub-groups need at least; raise it to {sum(counted)} or "
            "lower the sub-groups' minMember"
        ]
    return []


def _constrained_ancestor(sub: SubGroup, by_name: Mapping[str, SubGroup]) -> SubGroup | None:
    """The nearest sub-group above `sub` with a topologyConstraint (the one walk up the tree,
    `models.ancestors`, which stops at a cycle), or None."""
    return next((p for p in ancestors(sub, by_name) if p.topology_constraint is not None), None)


MAX_ERRORS = 20
"""Errors listed in one answer; a 1,000-entry list of bad names must not make a 1 MB message."""


def _bounded(errors: list[str]) -> list[str]:
    if len(errors) <= MAX_ERRORS:
        return errors
    return [*errors[:MAX_ERRORS], f"... and {len(errors) - MAX_ERRORS} more errors"]


SHOWN_INPUT = 80
"""Characters of a refused value repeated in a message about stored status (a phase can be a
100 KB string: the message must still say which field and what to do)."""


def status_errors(errors: list[dict[str, Any]]) -> list[str]:
    """The errors of `models.salvage_status` as `status.field.path: what was wrong`."""
    lines = []
    for error in errors:
        shown = error.get("input")
        if isinstance(shown, str) and len(shown) > SHOWN_INPUT:
            shown = f"{shown[:SHOWN_INPUT]}... ({len(shown)} chars)"
        elif isinstance(shown, dict | list):
            shown = f"a {type(shown).__name__} of {len(shown)}"
        message = _message({**error, "input": shown}, PodGroupStatus)
        lines.append(f"{_path(tuple(error['loc']), 'status')}: {message}")
    return _bounded(list(dict.fromkeys(lines)))


def update_errors(old: dict[str, Any] | None, body: dict[str, Any]) -> list[str]:
    """Every problem of a PodGroup created (`old` None) or updated: an update that leaves the
    spec as stored has none, whatever the spec holds.

    A PodGroup stored before these rules (or while the webhook was off) keeps its spec, and a
    label, an owner reference or a finalizer's removal must still be accepted on it, or it
    could not even be deleted cleanly; Kubernetes ratchets CRD validation the same way (from
    1.28). A change to the spec
    is checked whole, so the answer names what else must be fixed with it.
    """
    if old is not None and old.get("spec") == body.get("spec"):
        return []
    return podgroup_errors(body)


def podgroup_findings(
    old: dict[str, Any] | None, body: dict[str, Any], levels_of: LevelsOf
) -> tuple[list[str], list[str]]:
    """(errors, warnings) of a PodGroup created (`old` None) or updated: `update_errors`, and
    the topologyConstraint against the Topology it names (`constraint_findings`); an update
    that leaves the spec as stored has neither."""
    annotation = []
    if old is None or _provisioning_class(old) != _provisioning_class(body):
        annotation = provisioning_class_errors(_provisioning_class(body))
    if old is not None and old.get("spec") == body.get("spec"):
        return annotation, []
    errors, warnings = constraint_findings(body.get("spec"), levels_of)
    return podgroup_errors(body) + errors + annotation, warnings


def _provisioning_class(body: Mapping[str, Any]) -> Any:
    return ((body.get("metadata") or {}).get("annotations") or {}).get(
        ANNOTATION_PROVISIONING_CLASS
    )


def provisioning_class_errors(value: Any) -> list[str]:
    """The PodGroup annotation naming its ProvisioningRequest class (checked when it is set or
    changed, never holding a gang back once stored): a class name, or `none`."""
    if value is None:
        return []
    text = value if isinstance(value, str) else ""
    if text.strip() and len(text) <= MAX_CLASS_NAME and not any(ch.isspace() for ch in text):
        return []
    return [
        f"metadata.annotations[{ANNOTATION_PROVISIONING_CLASS}]: {value!r} is not a "
        f"provisioning class: use a class name of at most {MAX_CLASS_NAME} characters without "
        f"spaces, e.g. {ProvisioningClass.BEST_EFFORT_ATOMIC}, or {PROVISIONING_OFF} (off)"
    ]


MAX_CLASS_NAME = 253
"""A ProvisioningRequest's `provisioningClassName` is at most this long (upstream's bound)."""


def podgroup_errors(body: dict[str, Any]) -> list[str]:
    """Every problem of a whole PodGroup object."""
    if "spec" not in body:
        return ["spec: is required; a PodGroup needs at least spec.minMember"]
    return spec_errors(body["spec"])


def stored_podgroup_errors(body: Mapping[str, Any], exc: ValidationError) -> list[str]:
    """Why a stored PodGroup did not parse (`exc`): every problem of `podgroup_errors`, or the
    model's own words should those rules find none, so that the status reconciler and the
    scheduler never say nothing, and say the same."""
    return podgroup_errors(dict(body)) or [str(exc)]


_CONSTRAINT = "spec.topologyConstraint"


def constraint_findings(spec: Any, levels_of: LevelsOf) -> tuple[list[str], list[str]]:
    """(errors, warnings) of a PodGroup spec's `topologyConstraint`, and of each of its
    `subGroups[].topologyConstraint`, against the Topology each uses: the one it names, else
    the one it inherits (`models.topology_in_effect`: the nearest ancestor's, the group's for
    the top).

    An error: a level that is not one of that Topology's (named or inherited), a preferred
    level coarser than the required one, or a sub-group's level coarser than its nearest
    constrained ancestor's (the group's for the top) required level. A warning: a Topology
    named that does not exist (yet); controllers create objects in any order, so the PodGroup
    is admitted and its gang waits for it. A constraint in no Topology at all takes any node
    label keys, unchecked. A constraint that does not parse has neither: `spec_errors`
    reports it.
    """
    if not isinstance(spec, Mapping):
        return [], []
    errors: list[str] = []
    warnings: list[str] = []
    own = _constraint(spec.get("topologyConstraint"))
    if own is not None:
        _one_constraint(_CONSTRAINT, own, levels_of, errors, warnings)
    raw_subs = spec.get("subGroups")
    try:
        subs = _SUB_GROUPS.validate_python(raw_subs) if raw_subs else []
    except ValidationError:
        subs = []
    by_name = {sub.name: sub for sub in subs}
    for i, sub in enumerate(subs):
        if sub.topology_constraint is None:
            continue
        where = f"spec.subGroups[{i}].topologyConstraint"
        effect = topology_in_effect(sub, by_name, own)
        constraint = constraint_in_effect(sub, by_name, own)
        assert constraint is not None
        # A Topology that does not exist is warned of on the group's constraint only.
        if not _one_constraint(where, constraint, levels_of, errors, [], effect):
            continue
        above, above_name = _ancestor_constraint(sub, by_name, own)
        named = constraint.topology
        if above is None or named is None or above.topology != named:
            continue
        levels = levels_of(named) or ()
        coarsest = above.required_topology_level or above.preferred_topology_level
        if coarsest not in levels:
            continue
        for field, level in _levels(constraint):
            if level in levels and levels.index(level) < levels.index(coarsest):
                errors.append(
                    f"{where}.{field}: {level!r} is coarser than {above_name}'s level "
                    f"{coarsest!r}; a sub-group lies inside its parent's domain: use "
                    f"{coarsest!r} or a finer level ({', '.join(levels[levels.index(coarsest) :])})"
                )
    return errors, warnings


def _constraint(raw: Any) -> TopologyConstraint | None:
    if raw is None:
        return None
    try:
        return TopologyConstraint.model_validate(raw)
    except ValidationError:
        return None


def _levels(constraint: TopologyConstraint) -> list[tuple[str, str]]:
    fields = (
        ("requiredTopologyLevel", constraint.required_topology_level),
        ("preferredTopologyLevel", constraint.preferred_topology_level),
    )
    return [(field, level) for field, level in fields if level is not None]


def _ancestor_constraint(
    sub: SubGroup, by_name: Mapping[str, SubGroup], own: TopologyConstraint | None
) -> tuple[TopologyConstraint | None, str]:
    """The nearest constraint above `sub` (a parent's, else the group's), with the Topology it
    uses filled in (`constraint_in_effect`), and who holds it."""
    parent = _constrained_ancestor(sub, by_name)
    if parent is None:
        return own, "the group"
    return constraint_in_effect(parent, by_name, own), f"parent sub-group {parent.name!r}"


def _one_constraint(
    where: str,
    constraint: TopologyConstraint,
    levels_of: LevelsOf,
    errors: list[str],
    warnings: list[str],
    effect: TopologyInEffect | None = None,
) -> bool:
    """Append what is wrong with one constraint against its Topology (named, or inherited as
    `effect` says); True when it uses one that exists."""
    name = constraint.topology
    if name is None:
        return False
    levels = levels_of(name)
    if levels is None:
        warnings.append(
            f"{where}.topology: Topology {name!r} does not exist; the gang waits until it "
            f"does: create it, or correct the name (kubectl get {TOPOLOGY_PLURAL} lists them)"
        )
        return False
    listed = ", ".join(levels)
    inherited = effect is not None and effect.inherited
    for field, level in _levels(constraint):
        if level not in levels:
            if inherited:
                assert effect is not None
                errors.append(
                    f"{where}.{field}: {level!r} is not a level of Topology {name!r}, which "
                    f"this sub-group inherits from {effect.source} (levels, coarse to fine: "
                    f"{listed}); a sub-group lies inside its parent's domain, so its levels are "
                    f"that Topology's: use one of them, or add {level!r} to Topology {name!r}"
                )
                continue
            fix = (
                "leave out topology to use any node label"
                if effect is None or effect.above is None
                else f"add {level!r} to Topology {name!r}"
            )
            errors.append(
                f"{where}.{field}: {level!r} is not a level of Topology {name!r} (levels, "
                f"coarse to fine: {listed}); use one of them, or {fix}"
            )
    required, preferred = constraint.required_topology_level, constraint.preferred_topology_level
    if required in levels and preferred in levels:
        coarsest = levels.index(required)
        if levels.index(preferred) < coarsest:
            errors.append(
                f"{where}.preferredTopologyLevel: {preferred!r} is coarser than "
                f"requiredTopologyLevel {required!r} in Topology {name!r}; prefer the required "
                f"level or a finer one ({', '.join(levels[coarsest:])}), or require a coarser one"
            )
    return True


def topology_errors(body: Mapping[str, Any]) -> list[str]:
    """Every problem of a whole Topology object, each as `field.path: what and the fix`."""
    errors = []
    name = (body.get("metadata") or {}).get("name")
    if isinstance(name, str) and not is_dns_subdomain(name):
        errors.append(
            "metadata.name: a Topology's name is what PodGroups' spec.topologyConstraint."
            "topology names: use at most 253 lowercase letters, digits, '-' and '.', starting "
            "and ending with a letter or digit"
        )
    spec = body.get("spec")
    if spec is None:
        return [*errors, "spec: is required; a Topology needs spec.levels (node label keys)"]
    if not isinstance(spec, dict):
        return [*errors, f"spec: must be an object with levels, not {spec!r}"]
    try:
        TopologySpec.model_validate(spec)
    except ValidationError as exc:
        for error in exc.errors(include_url=False):
            if isinstance((error.get("ctx") or {}).get("error"), LevelOrderError):
                continue  # the order rules: reported below, one line per level
            errors.append(f"{_path(tuple(error['loc']), 'spec')}: {_message(error, TopologySpec)}")
    levels = spec.get("levels")
    if isinstance(levels, list):
        labels = [level.get("nodeLabel") if isinstance(level, dict) else None for level in levels]
        keys = [label for label in labels if isinstance(label, str)]
        if len(keys) == len(labels):  # else the types are wrong, and reported above
            errors.extend(
                f"spec.levels[{index}].nodeLabel: {problem}"
                for index, problem in level_problems(keys)
            )
    return _bounded(list(dict.fromkeys(errors)))


def topology_update_errors(old: Mapping[str, Any] | None, body: Mapping[str, Any]) -> list[str]:
    """`topology_errors`, for a Topology created (`old` None) or updated; an update that leaves
    the spec as stored has none (the ratchet of `update_errors`)."""
    if old is not None and old.get("spec") == body.get("spec"):
        return []
    return topology_errors(body)
