"""The sharding contract shared with GenSBI and heal_swin_nnx, and the plan at its centre: ``shard_model`` is
``plan_shardings``, ``Plan.warn``, ``place``. An *NNX node* (here and in every module): a Module, ``nnx.Optimizer``,
``nnx.State``, or a non-empty tuple, list or dict of them (``nodes.is_node``), concrete or abstract."""

import dataclasses
import difflib
import math
import warnings
from collections.abc import Mapping
from typing import Any

import jax
from flax import nnx
from jax.sharding import AbstractMesh, Mesh, NamedSharding, PartitionSpec as P

from gensbi_sharding.leaf_checks import check_values, host_view, in_memory_of
from gensbi_sharding.factory import MODEL_IN_FACTORY, refuse_in_factory
from gensbi_sharding.messages import shown
from gensbi_sharding.nodes import (abstract_state, array_leaves, array_variables, check_node, is_array, is_array_like,
                                   is_int, path_key, shape_of, value_of)
from gensbi_sharding.specs import (UNLIKE_PARAMETER, check_mesh, check_plan_fits, fallback_text, forgotten_comma,
                                   partition_spec_for)
from gensbi_sharding.annotations import logical_axes_of, raw_annotation
from gensbi_sharding.rules import (RULES, ExperimentalRuleWarning, Rule, RuleTable, ShardingFallbackWarning,
                                   resolve_rule, unknown_rule)

__all__ = ["Plan", "plan_shardings", "place", "shard_model", "shard_model_by_table"]

@dataclasses.dataclass(frozen=True)
class Plan:
    """Where every array variable of an NNX node goes; built by ``plan_shardings`` (big_vision's ``infer_sharding``).

    Parameters
    ----------
    mesh : jax.sharding.Mesh or jax.sharding.AbstractMesh
    rule : str or RuleTable or Rule
        Stored resolved (``resolve_rule``), so every reader of the plan sees one form.
    specs, fallbacks, shapes : dict of str to PartitionSpec, to str, to tuple (shapes optional)
        By ``"a/b/c"`` path of every variable that is or holds arrays: its spec; why it is replicated against its
        annotation (or is a bare ``nnx.Param``), warned by ``warn``; its shape (a pytree: one per array), checked.

    Raises
    ------
    TypeError, ValueError
        ``mesh`` not a Mesh or AbstractMesh, or a field no dict of the types above; ``rule`` refused (``resolve_rule``).
    """

    mesh: Mesh
    rule: Rule
    specs: dict[str, P]
    fallbacks: dict[str, str]
    shapes: dict[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        check_mesh(self.mesh, abstract=True, optional=False)
        object.__setattr__(self, "rule", resolve_rule(self.rule))  # any form plan_shardings takes
        for name, kind, what in (("specs", P, "PartitionSpec, e.g. P(None, 'model')"),
                                 ("fallbacks", str, "str, e.g. 'no annotation'"),
                                 ("shapes", (tuple, list), "tuple of sizes, e.g. (8, 16)")):
            if not isinstance(field := getattr(self, name), Mapping):
                raise TypeError(f"Plan {name}={shown(field)} must be a dict keyed by variable path, "
                                "e.g. {'up/kernel': ...}; plan_shardings(node, mesh, rule) builds one")
            if (odd := next(((path, v) for path, v in field.items() if not isinstance(v, kind)), None)) is not None:
                raise TypeError(f"Plan {name}[{odd[0]!r}]={shown(odd[1])} must be a {what}")

    def sharding(self, path: str | tuple) -> NamedSharding:
        """The ``NamedSharding`` of the variable at ``path``.

        Parameters
        ----------
        path : str or tuple
            ``"a/b"`` (a key of ``specs``), or its keys as ``nnx.to_flat_state`` or ``jax.tree_util`` give them.

        Returns
        -------
        jax.sharding.NamedSharding

        Raises
        ------
        KeyError
            No variable planned at ``path``, naming the nearest.
        """
        if isinstance(path, (tuple, list)):  # a jax.tree_util path ends at the Variable's .value: not part of its name
            path = path_key(path[:-1] if tuple(path[-1:]) == (jax.tree_util.GetAttrKey("value"),) else path)
        if not isinstance(path, str) or path not in self.specs:  # {} or an array: no path (and unhashable)
            near = difflib.get_close_matches(str(path), self.specs, n=3, cutoff=0.5) or list(self.specs)[:3]
            raise KeyError(f"Plan.sharding: no variable planned at {shown(path)}; nearest: {', '.join(near) or 'none'}")
        return NamedSharding(self.mesh, self.specs[path])

    def fallback_message(self, max_reasons: int | None = 6, max_paths: int | None = 3,
                         every: str = "Plan.fallbacks") -> str | None:
        """The warning's text (None without fallbacks): each reason once, most common first, ``UNLIKE_PARAMETER`` last.

        Parameters
        ----------
        max_reasons, max_paths : int or None, default 6 and 3
            Reasons shown, and paths per reason (None: all; 0 paths: each reason with its count).
        every : str, default "Plan.fallbacks"
            Where every path is, named when some are left out.

        Returns
        -------
        str or None

        Raises
        ------
        ValueError
            If ``max_reasons`` or ``max_paths`` is neither None nor a non-negative integer.
        """
        return fallback_text(self, max_reasons, max_paths, every)

    def warn(self, stacklevel: int = 2, every: str = "Plan.fallbacks") -> None:
        """Warn once each: ``ExperimentalRuleWarning`` (built-in splitting rule), ``UserWarning`` (``AxisType.Explicit``
        mesh axis), ``ShardingFallbackWarning`` (unless every fallback is ``UNLIKE_PARAMETER``).

        Parameters
        ----------
        stacklevel, every : int and str, default 2 and "Plan.fallbacks"
            As for ``warnings.warn``, from the caller of ``warn``; as for ``fallback_message``.

        Raises
        ------
        TypeError, ValueError
            ``stacklevel`` no int (``"2"``), or beyond 64 bits, before any warning.
        """
        if not is_int(stacklevel):  # checked before any warning
            raise TypeError(f"stacklevel={shown(stacklevel)} must be an int, as for warnings.warn: e.g. stacklevel=2")
        if not -2**63 <= stacklevel < 2**63 - 1:  # warnings.warn's OverflowError named no argument
            raise ValueError(f"stacklevel={stacklevel} is beyond 64 bits, which warnings.warn takes: e.g. stacklevel=2")
        if self.rule.builtin and self.rule.reads_annotations:
            warnings.warn(f"sharding rule {self.rule.name!r} is experimental: placements are checked, but the "
                          "contract gives no convergence guarantee", ExperimentalRuleWarning, stacklevel=stacklevel + 1)
        if explicit := self.mesh.explicit_axes:  # jax.make_mesh's default
            warnings.warn(f"mesh axes {tuple(self.mesh.axis_names)} include AxisType.Explicit ({', '.join(explicit)}); "
                          "only Auto axes are supported: the arrays are placed, but a model computing with them may "
                          "raise ShardingTypeError (the axis is in each array's type); build the mesh with make_mesh"
                          f"(...) or jax.make_mesh(..., axis_types=(AxisType.Auto,) * {len(self.mesh.axis_names)})",
                          UserWarning, stacklevel=stacklevel + 1)
        if any(not reason.startswith(UNLIKE_PARAMETER) for reason in self.fallbacks.values()):
            warnings.warn(self.fallback_message(every=every), ShardingFallbackWarning, stacklevel=stacklevel + 1)

    def abstract_state(self, node: Any) -> nnx.State:
        """``nnx.state(node)``, each planned variable a ``jax.ShapeDtypeStruct`` at its sharding; refusing as ``place``.

        Parameters
        ----------
        node : NNX node

        Returns
        -------
        nnx.State

        Raises
        ------
        ValueError, TypeError
            As ``place``: ``node`` not an NNX node, or not the node the plan was made for.
        """
        check_plan_fits(self, node, "Plan.abstract_state")
        return abstract_state(node, lambda path, value: self.sharding(path) if path in self.specs else None)


def plan_shardings(node: Any, mesh: Mesh, rule: str | RuleTable | Rule = "replicated") -> Plan:
    """Plan every array variable of ``node`` on ``mesh`` under ``rule``; moves nothing (an AbstractMesh's axes suffice).

    Parameters
    ----------
    node : NNX node
    mesh : jax.sharding.Mesh or jax.sharding.AbstractMesh
    rule : str or RuleTable or Rule, default "replicated"

    Returns
    -------
    Plan
        ``specs`` (path -> ``PartitionSpec``), ``fallbacks`` (path -> reason) and ``shapes`` of every array variable.

    Raises
    ------
    ValueError, TypeError
        ``rule`` rejected by ``resolve_rule``; ``mesh`` None or not a Mesh/AbstractMesh, ``node`` not an NNX node.
    """
    rule = resolve_rule(rule)
    check_mesh(mesh, abstract=True, optional=False)
    check_node(node, "plan_shardings")
    specs, fallbacks, shapes = {}, {}, {}
    for key, var in array_variables(node):
        value, spec, reason = value_of(var), P(), None
        if rule.reads_annotations:
            raw, one = raw_annotation(var), is_array_like(value)  # ("embed") is the str "embed", a forgotten comma
            if raw is None:  # warned for a parameter only, but a 0-d one: no split to miss (as describe's)
                reason = "no annotation" if isinstance(var, nnx.Param) and not (one and value.shape == ()) else None
            elif not one:  # an annotation names one array's dimensions
                reason = f"holds a {type(value).__name__} of arrays, not one array"
            else:
                spec, reason = partition_spec_for(raw, value.shape, rule, mesh)
                if reason and isinstance(var, nnx.OptState) and not forgotten_comma(raw, value.shape) and (
                        len(logical_axes_of(var)) != len(value.shape) or math.prod(value.shape) == 1):
                    reason = f"{UNLIKE_PARAMETER}; {reason}"  # a kernel's Adam moments carry its (copied) annotation
            if reason is not None:
                fallbacks[key] = reason
        specs[key], shapes[key] = spec, shape_of(value)
    return Plan(mesh, rule, specs, fallbacks, shapes)


def place(node: Any, plan: Plan) -> None:
    """Move every planned variable of ``node`` to its sharding, in place (abstract ones take it); warns nothing. An
    array offloaded (``memory_kind`` ``pinned_host``) stays in that memory where the plan's devices have it.

    Parameters
    ----------
    node : NNX node
    plan : Plan

    Raises
    ------
    ValueError, TypeError, RuntimeError
        Before anything moves: ``plan`` made for another node or on an AbstractMesh, or no Plan; ``node`` no node or
        traced; a NumPy value beyond its placed dtype (``check_placeable``); a variable's array deleted (donated).
    """
    _place(node, plan, "place")


def _place(node: Any, plan: Plan, caller: str) -> None:
    """``place``, its errors naming ``caller`` (the function the user called: ``place``, ``shard_model``, ...)."""
    refuse_in_factory(caller, MODEL_IN_FACTORY)
    variables = check_plan_fits(plan, node, caller)
    if isinstance(plan.mesh, AbstractMesh):  # JAX's device_put refused it naming no variable
        raise ValueError(f"{caller} got a plan on an AbstractMesh (axes, no devices): plan on a Mesh")
    check_values(variables, caller)  # before anything moves
    for key, var in variables:
        value, target = value_of(var), plan.sharding(key)
        if all(isinstance(v, jax.Array) and getattr(v.sharding, "mesh", None) == target.mesh
               and v.sharding.is_equivalent_to(in_memory_of(v, target), v.ndim) for v in array_leaves(value)):
            continue  # kept only if on the plan's mesh itself; abstract values (device_put refuses them) are placed
        placed = jax.tree.map(lambda v: v.update(sharding=target) if isinstance(v, jax.ShapeDtypeStruct)
                              else jax.device_put(host_view(v, target), in_memory_of(v, target)) if is_array(v)
                              else v, value)
        ref = isinstance(var.get_raw_value(), jax.Ref)  # ref=True: set_value writes into it, on its devices: refused
        var.set_raw_value(jax.new_ref(placed)) if ref else var.set_value(placed)


def shard_model(node: Any, mesh: Mesh | None, rule: str = "replicated") -> None:
    """Place every variable of ``node`` by a named rule, in place (idempotent): the contract's entry point.

    Parameters
    ----------
    node : NNX node
    mesh : jax.sharding.Mesh or None
        None: nothing moves, nothing warns; what ``place`` refuses is refused.
    rule : str, default "replicated"
        A key of ``RULES``; a rule table goes to ``shard_model_by_table``.

    Raises
    ------
    ValueError, TypeError, RuntimeError
        ``rule`` not in ``RULES`` (even when ``mesh`` is None); ``node`` or ``mesh`` of another type; else as ``place``.
    """
    if isinstance(rule, (Mapping, list, tuple, Rule)):  # the contract's shard_model takes names only
        raise unknown_rule(rule, " (a rule table, (logical axis, mesh axes) pairs or a Rule go to "
                                 "shard_model_by_table(node, mesh, rule))", None)
    if not isinstance(rule, str) or rule not in RULES:
        raise unknown_rule(rule, "; ", ", for shard_model_by_table")
    _plan_warn_place(node, mesh, rule, "shard_model")


def shard_model_by_table(node: Any, mesh: Mesh | None, table: RuleTable) -> None:
    """``shard_model`` under a user's rule table, e.g. ``{**dict(RULES["tensor"]), "embed": "data"}`` (and what
    ``resolve_rule`` rejects refused); no ``ExperimentalRuleWarning``.

    Parameters
    ----------
    node, mesh : as ``shard_model``
    table : RuleTable, or (logical axis, mesh axes) pairs, or Rule, or a rule name

    Raises
    ------
    ValueError, TypeError, RuntimeError
        As ``shard_model`` (a bad ``table``: ``resolve_rule``'s ``ValueError``).
    """
    _plan_warn_place(node, mesh, table, "shard_model_by_table")


def _plan_warn_place(node: Any, mesh: Mesh | None, rule: str | RuleTable, caller: str) -> None:
    """``shard_model(_by_table)``'s body: check, plan, warn (at its caller, who holds no Plan), place (with a mesh)."""
    # First: plan_shardings' message would name it, not the function called
    check_node(node, caller, hint="; for a pytree of arrays use shard_batch or replicate")
    rule = resolve_rule(rule)  # checked with or without a mesh: a bad table fails before the run gets one
    check_mesh(mesh)  # its message offers None (plan_shardings' does not)
    if mesh is None:  # nothing moves, but what a mesh's run refuses is refused: it passed on one device
        return check_values(array_variables(node), caller)
    refuse_in_factory(caller, MODEL_IN_FACTORY)  # before the plan's warnings
    plan = plan_shardings(node, mesh, rule)
    plan.warn(3, f"gs.plan_shardings(node, mesh, {'rule' if caller == 'shard_model' else 'table'}).fallbacks")
    _place(node, plan, caller)

