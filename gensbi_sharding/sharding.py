"""The sharding contract shared with GenSBI and heal_swin_nnx, and the plan at its centre.

``shard_model`` is ``plan_shardings``, ``Plan.warn``, ``place``. The annotations (``axes``, ``partitioned``,
``logical_axes_of``) live in ``rules``, re-exported here where the published contract's ``sharding`` has them.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping
from typing import Any

import jax
from flax import nnx
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P

from gensbi_sharding.nodes import (abstract_state, array_leaves, array_variables, check_mesh, check_node, check_plan_fits,
                                   is_array, is_array_like, is_int, is_node, leaf_paths, path_name, shape_of)
from gensbi_sharding.rules import (RULES, ExperimentalRuleWarning, Rule, RuleTable, ShardingFallbackWarning, axes,
                                   logical_axes_of, partition_spec_for, partitioned, resolve_rule)

__all__ = ["Plan", "ShardingFallbackWarning", "ExperimentalRuleWarning", "axes", "partitioned",
           "logical_axes_of", "plan_shardings", "place", "shard_model", "shard_model_by_table", "sharding_of"]

#: The fallback reason of optimizer state shaped unlike the parameter whose annotation it carries (Adafactor's
#: factored moments: a row and a column vector of a matrix, (1,) placeholders): nothing to fix, so not warned.
UNLIKE_PARAMETER = "optimizer state shaped unlike its parameter, e.g. Adafactor's factored moments: small, nothing to fix"


@dataclasses.dataclass(frozen=True)
class Plan:
    """Where every array variable of an NNX graph goes: the one plan placement, init, restore and reports read.

    Made by ``plan_shardings`` (as big_vision's ``infer_sharding``); fallbacks are data until ``warn``.

    Parameters
    ----------
    mesh : jax.sharding.Mesh
    rule : Rule
    specs : dict of str to jax.sharding.PartitionSpec
        ``"a/b/c"`` graph path -> spec, for every variable whose value is or holds arrays (``jax.ShapeDtypeStruct``
        too; a pytree of them, e.g. ``nnx.BatchStat({"mean": ...})``, gets ``P()`` for each).
    fallbacks : dict of str to str
        Path -> reason, for each variable replicated against its annotation (or a bare ``nnx.Param``).
    shapes : dict of str to tuple of int, optional
        Path -> the shape planned, so ``place`` and ``abstract_state`` refuse a node of other shapes.
    """

    mesh: Mesh
    rule: Rule
    specs: dict[str, P]
    fallbacks: dict[str, str]
    shapes: dict[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)

    def sharding(self, path: str) -> NamedSharding:
        """The ``NamedSharding`` of the variable at ``path`` (a key of ``specs``; else ``KeyError``).

        Parameters
        ----------
        path : str

        Raises
        ------
        KeyError
        """
        return NamedSharding(self.mesh, self.specs[path])

    def fallback_message(self, max_reasons: int | None = 6, max_paths: int | None = 3,
                         every: str = "Plan.fallbacks") -> str | None:
        """The one ``ShardingFallbackWarning``'s text, each reason once, those to fix first (Adafactor's many factored
        moments, ``UNLIKE_PARAMETER``, hid them), then the most common; None without fallbacks.

        Parameters
        ----------
        max_reasons, max_paths : int or None, default 6 and 3
            Reasons shown, and paths per reason (``None``: all; one annotation fails alike in every block; 0
            paths: each reason with its count).
        every : str, default "Plan.fallbacks"
            Where every path and reason is, named when some are left out.

        Raises
        ------
        ValueError
            If ``max_reasons`` or ``max_paths`` is neither None nor a non-negative integer.
        """
        for name, n in (("max_reasons", max_reasons), ("max_paths", max_paths)):
            if n is not None and (not is_int(n) or n < 0):  # a negative n sliced from the end: reasons went missing
                raise ValueError(f"{name} must be a non-negative integer or None (all), got {n!r}; pass e.g. {name}=3")
        if not self.fallbacks:
            return None
        groups: dict[str, list[str]] = {}
        for path, reason in self.fallbacks.items():
            groups.setdefault(reason, []).append(path)
        reasons, paths_each = (len(self.fallbacks) if n is None else n for n in (max_reasons, max_paths))  # None: all
        ordered = sorted(groups.items(), key=lambda group: (group[0].startswith(UNLIKE_PARAMETER), -len(group[1])))
        shown, hidden = ordered[:reasons], [paths for _, paths in ordered[reasons:]]
        parts = [(", ".join(paths[:paths_each]) + (f" and {len(paths) - paths_each} more" if len(paths) > paths_each
                 else "") if paths_each else f"{len(paths)} variable(s)") + f" ({reason})" for reason, paths in shown]
        parts += [f"{sum(map(len, hidden))} more for {len(hidden)} other reason(s)"] if hidden else []
        cut = bool(hidden) or any(len(paths) > paths_each for _, paths in shown)
        return (f"{len(self.fallbacks)} variable(s) replicated instead of split under {self.rule.label} "
                f"on mesh {dict(self.mesh.shape)}: " + "; ".join(parts) + (f" (every one: {every})" if cut else ""))

    def warn(self, stacklevel: int = 2) -> None:
        """Emit the contract's warnings, each at most once.

        ``ExperimentalRuleWarning`` for a built-in splitting rule, ``UserWarning`` for an ``AxisType.Explicit``
        mesh axis (naming the fix: an Auto mesh), the one ``ShardingFallbackWarning`` (not when every fallback
        is optimizer state shaped unlike its parameter, ``UNLIKE_PARAMETER``: nothing to fix).

        Parameters
        ----------
        stacklevel : int, default 2
            As for ``warnings.warn``, counted from the caller of ``warn``.
        """
        if self.rule.builtin and self.rule.reads_annotations:
            warnings.warn(f"sharding rule {self.rule.name!r} is experimental: placements are checked, but the "
                          "contract gives no convergence guarantee", ExperimentalRuleWarning, stacklevel=stacklevel + 1)
        names, types = tuple(self.mesh.axis_names), getattr(self.mesh, "axis_types", ())
        explicit = [name for name, t in zip(names, types) if t == AxisType.Explicit]
        if explicit:  # jax.make_mesh's default: the arrays are placed, but GenSBI's Simformer then failed in a multiply
            warnings.warn(f"mesh axes {names} include AxisType.Explicit ({', '.join(explicit)}); only Auto axes are "
                          "supported: the arrays are placed, but a model computing with them may raise "
                          "ShardingTypeError (the axis is in each array's type); build the mesh with make_mesh(...) "
                          f"or jax.make_mesh(..., axis_types=(AxisType.Auto,) * {len(names)})",
                          UserWarning, stacklevel=stacklevel + 1)
        if any(not reason.startswith(UNLIKE_PARAMETER) for reason in self.fallbacks.values()):
            warnings.warn(self.fallback_message(), ShardingFallbackWarning, stacklevel=stacklevel + 1)

    def abstract_state(self, node: Any) -> nnx.State:
        """``nnx.state(node)``, each planned variable a ``jax.ShapeDtypeStruct`` at its sharding; others unchanged.

        Parameters
        ----------
        node : NNX graph node
            The node planned (or one with the same paths and shapes), concrete or abstract.

        Raises
        ------
        ValueError, TypeError
            A variable of ``node`` not in the plan or at another shape (a plan made for another node); a non-node.
        """
        check_plan_fits(self, node, "Plan.abstract_state")
        return abstract_state(node, lambda path, value: self.sharding(path) if path in self.specs else None)


def plan_shardings(node: Any, mesh: Mesh, rule: str | RuleTable | Rule = "replicated") -> Plan:
    """Plan every array variable of ``node`` on ``mesh`` under ``rule``; moves nothing.

    A variable ``partition_spec_for`` cannot place, or a bare ``nnx.Param``, gets ``P()`` and a ``fallbacks``
    entry; other unannotated variables (RNG state, step counts) get ``P()`` silently, as all do under "replicated".

    Parameters
    ----------
    node : NNX graph node
        A Module, ``nnx.Optimizer``, ``nnx.State``, or a non-empty tuple, list or dict of them; may be abstract.
    mesh : jax.sharding.Mesh
    rule : str or RuleTable or Rule, default "replicated"
        As ``resolve_rule`` takes it.

    Raises
    ------
    ValueError
        If ``resolve_rule`` rejects ``rule``.
    TypeError
        If ``mesh`` is not a ``jax.sharding.Mesh`` or ``node`` is none of the above.
    """
    rule = resolve_rule(rule)
    check_mesh(mesh, optional=False)
    check_node(node, "plan_shardings")
    specs, fallbacks, shapes = {}, {}, {}
    for key, var in array_variables(node):
        value, spec = var.get_value(), P()
        shapes[key] = shape_of(value)
        if rule.reads_annotations:
            names, one = logical_axes_of(var), is_array_like(value)
            spec, reason = partition_spec_for(names if one else None, value.shape if one else (), rule.table, mesh)
            if names is None and isinstance(var, nnx.Param):
                reason = "no annotation"
            elif not one and (names is not None or isinstance(var, nnx.Param)):  # its annotation is for one array
                reason = f"holds a {type(value).__name__} of arrays, not one array"
            elif reason and isinstance(var, nnx.optimizer.OptState) and names is not None and (
                    len(names) != len(value.shape) or math.prod(value.shape) == 1):
                reason = f"{UNLIKE_PARAMETER}; {reason}"  # the annotation was copied from a parameter
            if reason is not None:
                fallbacks[key] = reason
        specs[key] = spec
    return Plan(mesh, rule, specs, fallbacks, shapes)


def place(node: Any, plan: Plan) -> None:
    """Move every planned variable of ``node`` to its sharding, in place; warns nothing.

    Variables placed as planned keep their arrays (equivalently on another mesh: their buffers, put on the plan's);
    abstract ones (``jax.ShapeDtypeStruct``, e.g. of ``abstract_sharded``) take the planned sharding.

    Parameters
    ----------
    node : NNX graph node
        The node ``plan`` was made for (or one with the same paths and shapes).
    plan : Plan

    Raises
    ------
    ValueError, TypeError
        ``plan`` made for another node (a variable it lacks, or at another shape: nothing moves); no Plan; a non-node.
    """
    for key, var in check_plan_fits(plan, node, "place"):
        value, target = var.get_value(), plan.sharding(key)
        # Kept only on the plan's mesh: one equivalent elsewhere (a 1-device mesh's SingleDeviceSharding, an Explicit
        # twin) stayed off it. An abstract value takes the sharding (device_put refuses it).
        if all(isinstance(v, jax.Array) and getattr(v.sharding, "mesh", None) == target.mesh
               and v.sharding.is_equivalent_to(target, v.ndim) for v in array_leaves(value)):
            continue
        var.set_value(jax.tree.map(lambda v: v.update(sharding=target) if isinstance(v, jax.ShapeDtypeStruct)
                                   else jax.device_put(v, target) if is_array(v) else v, value))


def shard_model(node: Any, mesh: Mesh | None, rule: str = "replicated") -> None:
    """Place every variable of an NNX graph node by a named rule, in place: the contract's entry point.

    ``plan_shardings``, ``Plan.warn``, ``place``; idempotent. Without a mesh, nothing moves and nothing warns.

    Parameters
    ----------
    node : nnx.Module or nnx.Optimizer or any NNX graph node, or nnx.State, or a tuple, list or dict of them
        What ``plan_shardings`` plans, e.g. ``(model, optimizer)`` or an EMA kept as an ``nnx.State`` of variables
        carrying the parameters' metadata; its variables are set in place.
    mesh : jax.sharding.Mesh or None
    rule : str, default "replicated"
        A key of ``RULES``; a rule table goes to ``shard_model_by_table``.

    Raises
    ------
    ValueError
        If ``rule`` is not a key of ``RULES``, even when ``mesh`` is None.
    TypeError
        If ``node`` is none of the above, or ``mesh`` is neither None nor a ``jax.sharding.Mesh``.
    """
    if not isinstance(rule, str) or rule not in RULES:
        # A table, RULES' (axis, mesh axes) pairs or a Rule: all placeable, by the other entry point.
        table = (" (a rule table, (logical axis, mesh axes) pairs or a Rule go to shard_model_by_table(node, mesh, "
                 "rule))") if isinstance(rule, (Mapping, list, tuple, Rule)) else ""
        raise ValueError(f"unknown sharding rule {rule!r}; choose one of {tuple(RULES)}{table}")
    _plan_warn_place(node, mesh, rule)


def shard_model_by_table(node: Any, mesh: Mesh | None, table: RuleTable) -> None:
    """``shard_model`` under a user's rule table: annotations honoured, logical axes it lacks not split.

    Never warns ``ExperimentalRuleWarning``; ``table`` is checked even without a mesh (its mesh axes: with one).

    Parameters
    ----------
    node : nnx.Module or nnx.Optimizer or any NNX graph node, or nnx.State, or a tuple, list or dict of them
    mesh : jax.sharding.Mesh or None
    table : RuleTable, or (logical axis, mesh axes) pairs, or Rule
        As ``resolve_rule`` takes it, e.g. ``{**dict(RULES["tensor"]), "embed": "data"}`` or ``RULES["tensor"]``.

    Raises
    ------
    ValueError
        If ``resolve_rule`` rejects ``table``, even when ``mesh`` is None.
    TypeError
        If ``node`` is none of the above, or ``mesh`` is neither None nor a ``jax.sharding.Mesh``.
    """
    _plan_warn_place(node, mesh, table)


def _plan_warn_place(node: Any, mesh: Mesh | None, rule: str | RuleTable) -> None:
    """The body of ``shard_model(_by_table)``: check ``node``, then plan, warn, place (nothing without a mesh)."""
    if not is_node(node):  # an nnx.State (e.g. an EMA's) is placed by its variables' annotations, as a Module is
        raise TypeError(f"shard_model places NNX graph nodes (a Module, nnx.Optimizer, nnx.State, or a tuple or dict "
                        f"of them), got {type(node).__name__}; for a pytree of arrays use shard_batch or replicate")
    rule = resolve_rule(rule)  # checked with or without a mesh: a bad table fails before the run gets one
    if mesh is not None:
        check_mesh(mesh)  # shard_model takes None: its message offers it (plan_shardings' does not)
        plan = plan_shardings(node, mesh, rule)
        plan.warn(stacklevel=3)  # at the caller of shard_model(_by_table)
        place(node, plan)


def sharding_of(node: Any) -> dict[str, jax.sharding.Sharding | None]:
    """Where every state leaf of ``node`` lives now: ``"a/b/c"`` path -> ``.sharding`` (None if it has none); a
    variable holding a pytree of arrays by each of its arrays, ``"stats/mean"``.

    Parameters
    ----------
    node : NNX graph node
        Or ``nnx.State``, or a tuple, list or dict of them.

    Raises
    ------
    TypeError
        If ``node`` is none of these (a pytree of arrays: ``jax.tree.map(lambda a: a.sharding, tree)``).
    """
    check_node(node, "sharding_of")
    return {path_name(path): getattr(leaf, "sharding", None) for path, leaf in leaf_paths(node)}
