"""The sharding contract shared with GenSBI and heal_swin_nnx, and the plan at its centre.

Models annotate variables with *logical* axis names and need no mesh to be built; ``shard_model``
(the contract) is ``plan_shardings``, ``Plan.warn``, ``place``.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np
from flax import nnx
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P

from gensbi_sharding.rules import RULES, Rule, RuleTable, partition_spec_for, resolve_rule

__all__ = ["Plan", "ShardingFallbackWarning", "ExperimentalRuleWarning", "axes", "partitioned",
           "logical_axes_of", "plan_shardings", "place", "shard_model", "shard_model_by_table", "sharding_of",
           "is_int", "is_array", "path_name", "check_mesh", "abstract_state"]


class ShardingFallbackWarning(UserWarning):
    """Variables that could not be placed as annotated and were replicated instead."""


class ExperimentalRuleWarning(UserWarning):
    """A splitting rule is in force; the contract calls every such rule experimental."""


def axes(*names: str | None) -> dict:
    """``nnx.Variable`` keyword arguments (or a layer's ``*_metadata``) naming one logical axis per dimension."""
    return {"out_sharding": names, "eager_sharding": False}


def partitioned(init, names: tuple[str | None, ...]):
    """Wrap an initialiser so its variable carries ``names``, without eager placement."""
    return nnx.with_partitioning(init, names, eager_sharding=False)


def logical_axes_of(var: nnx.Variable) -> tuple[str | None, ...] | None:
    """The logical axis names on ``var``, or None: the one reader of Flax's key (renamed twice, to ``out_sharding``)."""
    metadata = var.get_metadata()
    for key in ("out_sharding", "sharding_names", "sharding"):
        names = metadata.get(key)
        if names is not None:
            return tuple(names)
    return None


@dataclasses.dataclass(frozen=True)
class Plan:
    """Where every array variable of an NNX graph goes: ``specs`` ("a/b/c" path -> PartitionSpec).

    ``fallbacks``: path -> reason, for each variable replicated against its annotation (or a bare ``nnx.Param``).
    """

    mesh: Mesh
    rule: Rule
    specs: dict[str, P]
    fallbacks: dict[str, str]

    def sharding(self, path: str) -> NamedSharding:
        """The ``NamedSharding`` of the variable at ``path``."""
        return NamedSharding(self.mesh, self.specs[path])

    def fallback_message(self) -> str | None:
        """The text of the one ``ShardingFallbackWarning`` (None when nothing fell back)."""
        if not self.fallbacks:
            return None
        return (f"{len(self.fallbacks)} variable(s) replicated instead of split under {self.rule.label} "
                f"on mesh {dict(self.mesh.shape)}: "
                + "; ".join(f"{path} ({reason})" for path, reason in self.fallbacks.items()))

    def warn(self, stacklevel: int = 2) -> None:
        """The contract's warnings, ``stacklevel`` up: ``ExperimentalRuleWarning`` (built-in splitting rule),
        ``UserWarning`` (``AxisType.Explicit`` mesh axes), the one ``ShardingFallbackWarning``."""
        if self.rule.builtin and self.rule.reads_annotations:
            warnings.warn(f"sharding rule {self.rule.name!r} is experimental: placements are checked, but the "
                          "contract gives no convergence guarantee", ExperimentalRuleWarning, stacklevel=stacklevel + 1)
        if any(t == AxisType.Explicit for t in getattr(self.mesh, "axis_types", ())):
            warnings.warn(f"mesh axes {tuple(self.mesh.axis_names)} include AxisType.Explicit; only Auto axes are "
                          "supported, placements follow the Auto semantics", UserWarning, stacklevel=stacklevel + 1)
        if self.fallbacks:
            warnings.warn(self.fallback_message(), ShardingFallbackWarning, stacklevel=stacklevel + 1)

    def abstract_state(self, node: Any) -> nnx.State:
        """``nnx.state(node)``, each planned variable a ``jax.ShapeDtypeStruct`` at its sharding."""
        return abstract_state(node, lambda path, value: self.sharding(path) if path in self.specs else None)


def plan_shardings(node: Any, mesh: Mesh, rule: str | RuleTable | Rule = "replicated") -> Plan:
    """The ``Plan`` of every array variable of ``node`` on ``mesh`` under ``rule``; moves nothing.

    ``node`` may be abstract. A variable ``partition_spec_for`` cannot place (or a bare ``nnx.Param``) is
    replicated, and listed in ``fallbacks`` unless the rule is "replicated". Raises ``TypeError`` for a
    non-Mesh or non-node, ``ValueError`` for an unknown rule.
    """
    rule = resolve_rule(rule)
    check_mesh(mesh)
    check_node(node, "plan_shardings")
    specs, fallbacks = {}, {}
    for path, var in nnx.graph.iter_graph(node):
        if not isinstance(var, nnx.Variable):
            continue
        value, key, spec = var.get_value(), path_name(path), P()
        if not (is_array(value) or isinstance(value, jax.ShapeDtypeStruct)):
            continue
        if rule.reads_annotations:
            names = logical_axes_of(var)
            spec, reason = partition_spec_for(names, value.shape, rule.table, mesh)
            if names is None and isinstance(var, nnx.Param):
                reason = "no annotation"
            if reason is not None:
                fallbacks[key] = reason
        specs[key] = spec
    return Plan(mesh, rule, specs, fallbacks)


def place(node: Any, plan: Plan) -> None:
    """Move every planned variable of ``node`` to its sharding, in place; warns nothing.

    Variables already placed as planned keep their very buffers; values never change."""
    for path, var in nnx.graph.iter_graph(node):
        key = path_name(path)
        if not isinstance(var, nnx.Variable) or key not in plan.specs:
            continue
        value, target = var.get_value(), plan.sharding(key)
        if isinstance(value, jax.Array) and value.sharding.is_equivalent_to(target, value.ndim):
            continue
        var.set_value(jax.device_put(value, target))


def shard_model(node: Any, mesh: Mesh | None, rule: str = "replicated") -> None:
    """Place every variable of an NNX graph node (Module, ``nnx.Optimizer``, EMA) by a named rule, in place.

    ``plan_shardings``, ``Plan.warn``, ``place``: idempotent. Raises ``ValueError`` if ``rule`` is not a key of
    ``RULES`` (even when ``mesh`` is None), ``TypeError`` if ``node`` is not an NNX graph node.
    """
    if not isinstance(rule, str) or rule not in RULES:
        table = " (a rule table goes to shard_model_by_table(node, mesh, table))" if isinstance(rule, Mapping) else ""
        raise ValueError(f"unknown sharding rule {rule!r}; choose one of {tuple(RULES)}{table}")
    _plan_warn_place(node, mesh, rule)


def shard_model_by_table(node: Any, mesh: Mesh | None, table: RuleTable) -> None:
    """``shard_model`` under a rule table (logical names it lacks are not split), annotations honoured."""
    _plan_warn_place(node, mesh, table)


def _plan_warn_place(node: Any, mesh: Mesh | None, rule: str | RuleTable) -> None:
    if not nnx.graph.is_graph_node(node):
        raise TypeError(f"shard_model places NNX graph nodes (a Module, nnx.Optimizer, ...), got "
                        f"{type(node).__name__}; for a pytree of arrays use shard_batch or replicate")
    if mesh is not None:
        plan = plan_shardings(node, mesh, rule)
        plan.warn(stacklevel=3)  # at the caller of shard_model(_by_table)
        place(node, plan)


def abstract_state(node: Any, sharding_for: Callable[[str, Any], jax.sharding.Sharding | None]) -> nnx.State:
    """``nnx.state(node)``, each value ``sharding_for("a/b/c", value)`` places a ``jax.ShapeDtypeStruct`` there."""
    flat = []
    for path, var in nnx.to_flat_state(nnx.state(node)):
        value = var.get_value()
        sharding = sharding_for(path_name(path), value)
        flat.append((path, var.replace(value if sharding is None else
                                       jax.ShapeDtypeStruct(value.shape, value.dtype, sharding=sharding))))
    return nnx.from_flat_state(flat)


def sharding_of(node: Any) -> dict[str, jax.sharding.Sharding | None]:
    """``{"a/b/c": sharding}`` for every state leaf of ``node`` (None for non-JAX values)."""
    return {path_name(path): getattr(var.get_value(), "sharding", None)
            for path, var in nnx.to_flat_state(nnx.state(node))}


def is_int(x: Any) -> bool:
    """True for Python and NumPy integers, not for ``bool``: the one integer check of the package."""
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def is_array(x: Any) -> bool:
    """True for ``jax.Array`` and ``numpy.ndarray`` only (not Python or NumPy scalars)."""
    return isinstance(x, (jax.Array, np.ndarray))


def path_name(path: Sequence[Any]) -> str:
    """A graph or state path as the "a/b/c" key plans and reports use."""
    return "/".join(str(part) for part in path)


def check_mesh(mesh: Any) -> None:
    """``TypeError`` unless ``mesh`` is a ``jax.sharding.Mesh``."""
    if not isinstance(mesh, Mesh):
        raise TypeError(f"mesh must be a jax.sharding.Mesh or None, got {mesh!r}; build one with "
                        "make_mesh(...) or resolve_mesh(spec)")


def is_node(node: Any) -> bool:
    """An NNX graph node or ``nnx.State``, or a non-empty tuple, list or dict of them."""
    if nnx.graph.is_graph_node(node) or isinstance(node, nnx.State):
        return True
    items = list(node.values() if isinstance(node, dict) else node if isinstance(node, (tuple, list)) else ())
    return bool(items) and all(is_node(item) for item in items)


def check_node(node: Any, caller: str, *, factory: bool = False) -> None:
    """``TypeError`` naming ``caller`` unless ``node`` passes ``is_node`` (or, with ``factory``, is callable)."""
    if is_node(node) or (factory and callable(node)):
        return
    also = ", or a zero-argument factory building one" if factory else ""
    raise TypeError(f"{caller} takes an NNX graph node (a Module, nnx.Optimizer, nnx.State, or a tuple or "
                    f"dict of them{also}), got {type(node).__name__} {node!r:.60}")
