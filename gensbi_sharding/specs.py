"""PartitionSpecs: a variable's from its logical axes (``partition_spec_for``), the checks every placing module shares
(a spec entry's mesh axes, a spec on a shape, a plan on a node, a mesh), a plan's fallback text. ``rules``: no JAX."""

import math
from itertools import combinations
from collections.abc import Mapping, Sequence
from typing import Any

from jax.sharding import AbstractMesh, Mesh, PartitionSpec as P

from gensbi_sharding.messages import shown
from gensbi_sharding.nodes import (array_leaves, array_variables, check_node, is_int, listing, prefixes_holding,
                                   shape_of, value_of)
from gensbi_sharding.rules import (ABSENT_AXIS, LOGICAL_AXES, Rule, check_table, RuleTable, is_sequence, mapped_onto,
                                   resolve_rule, typo_of)

__all__ = ["partition_spec_for", "check_mesh", "check_plan_fits", "fallback_text", "forgotten_comma", "mesh_axes_of",
           "spec_misfit"]

#: Fallback reason of optimizer state shaped unlike the parameter whose annotation it carries: not warned.
UNLIKE_PARAMETER = ("optimizer state shaped unlike its parameter, e.g. Adafactor's factored moments: small, nothing "
                    "to fix")


def mesh_axes_of(entry: Any) -> tuple:
    """A PartitionSpec entry's mesh axes (None: (), "data": ("data",)); ``ValueError`` naming its odd one."""
    axes = (() if entry is None else tuple(entry) if isinstance(entry, Sequence) and not isinstance(entry, str)
            else (entry,))
    if not (odd := [axis for axis in axes if not isinstance(axis, str)]):
        return axes
    if all(axis is None for axis in odd):  # None replicates as the whole entry; in a tuple JAX reads it as an axis
        kept = tuple(dict.fromkeys(filter(None, axes))) or None  # the fix passes: (None, "a", "a") is ("a",), not twice
        raise ValueError(f"PartitionSpec entry {shown(entry, 40)} holds None inside a tuple, read as a mesh "
                         f"axis name: leave it out ({shown(kept, 40)}), or give None to leave it unsplit")
    odd = [axis for axis in odd if axis is not None]  # (None, 3): 3 first, as "leave None out" would leave (3,)
    what = "names no mesh axis" if len(odd) == len(axes) else f"holds {shown(odd[0], 20)}, not a mesh axis name"
    raise ValueError(f"PartitionSpec entry {shown(entry, 40)} {what}: give a mesh axis name (e.g. 'data'), "
                     "a tuple of them, or None")


def spec_misfit(spec: Any, shape: Sequence[int], mesh: Any) -> str | None:
    """Why PartitionSpec ``spec`` cannot split a ``shape`` array on ``mesh``, else None (JAX's name no variable)."""
    try:
        names = [a for entry in spec for a in mesh_axes_of(entry)]
    except ValueError as err:  # UNCONSTRAINED too, named as such
        return ("PartitionSpec.UNCONSTRAINED leaves a layout to jit's compiler, and a placed array has one: give None"
                if any(entry is P.UNCONSTRAINED for entry in spec) else str(err))
    missing, twice = [a for a in names if a not in mesh.shape], [a for a in names if names.count(a) > 1]
    if missing or twice:  # twice: JAX's DuplicateSpecError named no variable
        return (f"mesh axis {missing[0]!r} is not in the mesh {tuple(mesh.axis_names)}" if missing else
                f"it names mesh axis {twice[0]!r} twice (a mesh axis splits one dimension at most)")
    if len(spec) > len(shape):
        return f"it has {len(spec)} entries for an array of shape {tuple(shape)}"
    sizes = [math.prod(mesh.shape[a] for a in mesh_axes_of(entry)) for entry in spec]
    bad = next(((n, e, k) for n, e, k in zip(shape, spec, sizes) if n % k), None)
    return None if bad is None else f"size {bad[0]} is not divisible by mesh axes {bad[1]!r} of size {bad[2]}"


def check_mesh(mesh: Any, *, abstract: bool = False, optional: bool = True) -> None:
    """``TypeError`` unless ``mesh`` is a Mesh (``abstract``: or AbstractMesh), or None if ``optional``."""
    if not (isinstance(mesh, (Mesh, AbstractMesh) if abstract else Mesh) or (optional and mesh is None)):
        kind = "a jax.sharding.Mesh" + (" or AbstractMesh" if abstract else "") + (" or None" if optional else "")
        got = "None: it reads the mesh's axes, so it needs one" if mesh is None and not optional else shown(mesh)
        raise TypeError(f"mesh must be {kind}, got {got}; build one with make_mesh(...) or resolve_mesh(spec)")


def split_twice(names: tuple, first: int, at: int, axis: str, table: Mapping) -> str:
    """Why ``names`` falls back: dimension ``at`` splits over ``axis`` as ``first`` does; the fix splits the rest."""
    if first == at:
        return (f"logical axis {names[at]!r} maps to mesh axis {axis!r} twice ({table.get(names[at])!r}); map it "
                f"onto {axis!r} once in the rule table")
    later = [j for j, name in enumerate(names) if j > first and axis in mesh_axes_of(table.get(name))]
    fix = tuple(None if j in later else name for j, name in enumerate(names))
    unsplit = {names[j]: None for j in later}
    return (f"logical axes {names[first]!r} and {names[at]!r} both map to mesh axis {axis!r}; annotate one of "
            f"those dimensions with another logical axis or None (unsplit), e.g. {fix}"
            + f", or a rule table with {unsplit}" * (names[first] not in unsplit))  # two names: or the rule moves one


def _divisible_fix(name: str, dim: int, mesh: Any) -> str:
    """Fixes of a size ``dim`` ``name``'s mesh axes do not divide: ``mesh``'s axis products that do, else a mesh's."""
    made = {math.prod(c) for k in range(1, len(mesh.shape) + 1) for c in combinations(mesh.shape.values(), k)}
    fit = [str(k) for k in sorted(made) if k > 1 and not dim % k]
    fix = f"; map {name!r} to None" + f" or to mesh axes of total size {' or '.join(fit)}" * bool(fit)
    fix += ", or annotate this dimension None"
    g = math.gcd(dim, mesh.size)  # a mesh axis's size divides the device count: 3 of 8 devices is no mesh's axis
    other = [str(k) for k in range(2, g + 1) if not g % k]
    here = ", ".join(f"{axis}={n}" for axis, n in mesh.shape.items())
    return fix + (f", or use a mesh with an axis of size {' or '.join(other)} (here: {here})"
                  if other and not fit else "")


def forgotten_comma(names: Any, shape: Sequence[int]) -> bool:
    """An annotation that is one str on an array of rank > 1: ``("embed")``, a tuple's forgotten comma."""
    return isinstance(names, str) and len(shape) > 1


def partition_spec_for(names: Sequence[str | None] | str | None, shape: Sequence[int],
                       table: RuleTable | str | Rule, mesh: Mesh) -> tuple[P, str | None]:
    """``(spec, None)``: the PartitionSpec of one variable under ``table`` on ``mesh`` (Flax's ``logical_to_mesh_axes``
    plus checks); or ``(P(), why)`` it must be replicated (an unknown axis, another rank, an indivisible size...).

    Parameters
    ----------
    names : sequence of str or None, or str, or None
        Logical axis per dimension (``logical_axes_of``; a bare str: one entry); None: not annotated (``P()``).
    shape : sequence of int >= 0, or a 1-d integer array (``np.array(x.shape)``)
    table : RuleTable, or anything ``resolve_rule`` takes (its keys and values checked as ``resolve_rule`` checks
        them; a mesh axis named twice falls back)
    mesh : jax.sharding.Mesh or jax.sharding.AbstractMesh

    Returns
    -------
    tuple of (jax.sharding.PartitionSpec, str or None)
        The spec, and why it fell back to ``P()`` (None when it did not).

    Raises
    ------
    TypeError, ValueError
        A ``mesh`` no Mesh or a ``shape`` no sequence of int sizes; a ``table`` whose keys or values
        ``resolve_rule`` rejects.
    """
    check_mesh(mesh, abstract=True, optional=False)
    shape = shape.tolist() if getattr(shape, "ndim", 0) == 1 and hasattr(shape, "tolist") else shape  # np.array(...)
    if not (is_sequence(shape) and all(is_int(n) and n >= 0 for n in shape)):  # shape=8: TypeError "no len()"
        raise TypeError(f"shape={shown(shape)} must be a sequence of sizes (int >= 0), e.g. (8,) or value.shape")
    if isinstance(table, Mapping):  # checked as shard_model_by_table's (a mesh axis twice: a fallback, below)
        check_table(table, repeats=False)
    else:  # RULES["fsdp"]'s pairs have no .get
        table = resolve_rule(table).table
    if names is None:
        return P(), None
    comma, names = forgotten_comma(names, shape), tuple(names) if is_sequence(names) else (names,)  # "embed": one
    if odd := [n for n in names if not (n is None or isinstance(n, str))]:  # a list: unhashable; an int: in no table
        return P(), (f"annotation entry {shown(odd[0])} ({type(odd[0]).__name__}) is no logical axis name: give one "
                     f"str (e.g. 'embed') or None per dimension, got {shown(names)}")
    if len(names) != len(shape):
        stacked = (f": the annotation is the string {names[0]!r}, not a tuple: write "  # ("embed"): a forgotten comma
                   f"{(names[0],) + (None,) * (len(shape) - 1)!r}" if comma else  # not stacked layers
                   f": one leading dimension more (size {shape[0]}): layers stacked by nnx.vmap/nnx.scan without "
                   "transform_metadata get no name for the stacked axis; pass the vmap transform_metadata="
                   "{nnx.PARTITION_NAME: None} (the stacked axis left unsplit), or {nnx.PARTITION_NAME: 'layers'} "
                   "with a rule table mapping it, e.g. {**dict(gs.RULES['fsdp']), 'layers': None}"
                   if len(shape) == len(names) + 1 else "")
        return P(), f"annotation rank {len(names)} != array rank {len(shape)}{stacked}"
    entries, owner = [], {}
    for at, (name, dim) in enumerate(zip(names, shape)):
        if name is not None and name not in table and name not in LOGICAL_AXES:  # a mesh axis: Flax's GSPMD guide's
            return P(), (f"{name!r} is a mesh axis, not a logical axis: a rule maps logical axes onto mesh axes; "
                         f"annotate that dimension with a logical axis this rule maps onto {name!r} "
                         f"({mapped_onto(table, name)})" if name in mesh.shape else f"unknown logical axis {name!r} "
                         f"(known: {', '.join(LOGICAL_AXES)}); {typo_of(name)}to split the other dimensions, leave it "
                         f"unsplit: a rule table with {{{name!r}: None}}")
        target = None if name is None else table.get(name)
        mesh_axes = mesh_axes_of(target)  # () unsplit: P(()) is P(None)
        for axis in mesh_axes:
            if axis not in mesh.shape:
                return P(), ABSENT_AXIS.format(name=name, axis=axis, axes=tuple(mesh.axis_names))
            if (first := owner.setdefault(axis, at)) != at or mesh_axes.count(axis) > 1:  # split over it twice
                return P(), split_twice(names, first, at, axis, table)  # with the fix that splits the rest
        size = math.prod(mesh.shape[axis] for axis in mesh_axes)
        if dim % size:
            return P(), (f"size {dim} of logical axis {name!r} is not divisible by mesh axis {target!r} of size {size}"
                         + (_divisible_fix(name, dim, mesh) if dim > 1 else "; annotate this dimension None: "
                            f"size 1 splits over no mesh axis (mapping {name!r} to None would leave every {name!r} "
                            "dimension unsplit)"))
        entries.append(target if isinstance(target, str) else mesh_axes)
    return P(*entries), None


def check_plan_fits(plan: Any, node: Any, caller: str) -> list[tuple[str, Any]]:
    """``array_variables(node)``, once ``plan`` fits it; else the error naming the variables not planned, or not so."""
    if not (hasattr(plan, "specs") and hasattr(plan, "shapes")):
        raise TypeError(f"{caller} takes a Plan (plan_shardings(node, mesh, rule)), got {type(plan).__name__} "
                        f"{shown(plan)}; to place by a rule at once: shard_model(node, mesh, rule)")
    check_node(node, caller)
    planned = {path: plan.shapes.get(path) for path in plan.specs}  # None: a plan built by hand, no shapes
    variables = array_variables(node)
    missing = [path for path, _ in variables if path not in planned]
    reshaped = [f"{path} is {shape_of(value_of(var))}, planned {planned[path]}" for path, var in variables
                if planned.get(path) is not None and shape_of(value_of(var)) != tuple(planned[path])]
    if not (missing or reshaped):
        misfit = next(((key, why) for key, var in variables for a in array_leaves(value_of(var))
                       if (why := spec_misfit(plan.specs[key], a.shape, plan.mesh))), None)
        if misfit is not None:
            raise ValueError(f"{caller}: the plan splits {misfit[0]} as {plan.specs[misfit[0]]}, but {misfit[1]}; "
                             "plan it with plan_shardings(node, mesh, rule), whose specs fit, or fix that spec")
        return variables
    mine = {path for path, _ in variables}
    others = listing([path for path in planned if path not in mine]) or "none other"
    parts = [f"{len(missing)} of the node's {len(variables)} array variable(s) are not in the plan "
             f"({listing(missing)}; the plan's paths: {others})"] * bool(missing)
    parts += [f"{len(reshaped)} of another shape ({listing(reshaped)})"] * bool(reshaped)
    within = next((head for head in prefixes_holding(missing, planned) if "opt_state" not in head.split("/")), None)
    held = "" if within is None else (f"; the plan holds each under '{within}/': it was made for a tuple, list or "
                                      "dict holding this node (e.g. (model, optimizer)); place that, or")
    raise ValueError(f"{caller}: the plan was made for another node: " + "; ".join(parts) + (held or ";") +
                     " plan this node instead: plan_shardings(node, plan.mesh, plan.rule)")


def fallback_text(plan: Any, max_reasons: int | None, max_paths: int | None, every: str) -> str | None:
    """``Plan.fallback_message`` (its arguments checked here: ``ValueError``), for a ``Plan`` ``plan``."""
    for name, n in (("max_reasons", max_reasons), ("max_paths", max_paths)):
        if n is not None and (not is_int(n) or n < 0):  # a negative n would slice from the end
            raise ValueError(f"{name} must be a non-negative integer or None (all), got {shown(n)}; pass e.g. "
                             f"{name}=3")
    if not plan.fallbacks:
        return None
    groups = {r: [p for p, q in plan.fallbacks.items() if q == r] for r in dict.fromkeys(plan.fallbacks.values())}
    reasons, paths_each = (len(plan.fallbacks) if n is None else n for n in (max_reasons, max_paths))
    ordered = sorted(groups.items(), key=lambda group: (group[0].startswith(UNLIKE_PARAMETER), -len(group[1])))
    listed, hidden = ordered[:reasons], [paths for _, paths in ordered[reasons:]]
    parts = [(listing(paths, paths_each) if paths_each else f"{len(paths)} variable(s)") + f" ({reason})"
             for reason, paths in listed]
    parts += [f"{sum(map(len, hidden))} more for {len(hidden)} other reason(s)"] if hidden else []
    cut = bool(hidden) or any(len(paths) > paths_each for _, paths in listed)
    return (f"{len(plan.fallbacks)} variable(s) replicated instead of split under {plan.rule.label} "
            f"on mesh {dict(plan.mesh.shape)}: " + "; ".join(parts) + (f" (every one: {every})" if cut else ""))
