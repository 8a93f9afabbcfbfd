"""Sharded initialisation: a model (and its optimizer) built group by group, each by ``jax.jit`` on one device (values
bit-identical on every mesh), then moved to its sharding while the next compiles (docs/memory.md says why)."""

import hashlib
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import AbstractMesh, Mesh, NamedSharding, SingleDeviceSharding

from gensbi_sharding.leaf_checks import check_placeable, host_view, in_memory_of
from gensbi_sharding.mesh import model_mesh
from gensbi_sharding.messages import shown
from gensbi_sharding.factory import (PLACE_EAGERLY, UNDER_TRANSFORM, build_unplaced, check_concrete, check_no_arguments,
                                     refuse_in_factory, trace_factory, under_transform)
from gensbi_sharding.annotations import logical_axes_of
from gensbi_sharding.rules import RULES, Rule, RuleTable, resolve_rule
from gensbi_sharding.nodes import (array_leaves, array_variables, check_filter, check_flag, check_node,
                                   check_value_leaves, is_scalar, is_prng_key, keep_scalars,
                                   named_leaves, path_key, stored_bytes, value_of)
from gensbi_sharding.sharding import Plan, plan_shardings
from gensbi_sharding.specs import check_mesh

__all__ = ["GROUP_BYTES", "init_sharded", "abstract_sharded", "init_optimizer_sharded"]

#: Bytes: groups hold up to ``max(GROUP_BYTES, model bytes / mesh size)``; each costs one trace and one compilation.
GROUP_BYTES = 64 * 2**20


def init_sharded(factory: Callable[[], Any], mesh: Mesh | None, rule: str | RuleTable | Rule = "replicated",
                 *, warn: bool = True) -> Any:
    """``factory()`` placed as ``shard_model(factory(), mesh, rule)`` places it, never whole on one device: traced,
    planned, computed group by group (module docstring; Flax's guide ``flax_gspmd``: jit with output shardings).

    Parameters
    ----------
    factory : callable
        ``factory() -> node``, traced once per group: deterministic, building its own ``nnx.Rngs(seed)``.
    mesh : jax.sharding.Mesh or None
        Holding a device of this process. None: ``factory()``, built eagerly, placed nowhere (its values checked alike).
    rule : str or RuleTable or Rule, default "replicated"
    warn : bool, default True
        Emit the plan's warnings (``Plan.warn``) at the caller, as ``shard_model`` does (the constructor's: once).

    Returns
    -------
    NNX node
        What ``factory()`` returns, each array variable a ``jax.Array`` at its plan's ``NamedSharding``.

    Raises
    ------
    ValueError
        ``factory`` (a non-callable too) or ``rule`` refused (``mesh=None`` too); under jax.jit, jax.grad; a
        constructor that reads back a value it computed, places an input, changes an outside ``nnx.Rngs`` or draws
        unseeded; a ``mesh`` with no local device.
    TypeError
        ``factory()`` returns no NNX node; ``mesh`` of another type; a leaf neither array nor number; ``warn`` not bool.
    """
    rule = _checked_rule(factory, rule, warn)
    if isinstance(mesh, AbstractMesh):  # planned without devices, then placing read them: JAX's "does not implement"
        raise TypeError(f"init_sharded places arrays, so it needs a concrete jax.sharding.Mesh, got {shown(mesh)}; "
                        "build one with make_mesh(...), or pass this mesh to abstract_sharded(factory, mesh, rule)")
    check_mesh(mesh)  # before the factory is traced; "or None", as this function takes None
    if mesh is None:
        check_node(node := build_unplaced(factory), "init_sharded (what the factory returned)")
        check_concrete(leaves := named_leaves(node))  # and what a mesh's run refuses
        for name, leaf in check_value_leaves(leaves, "init_sharded"):
            check_placeable(leaf, f"init_sharded: {name} (shape {np.shape(leaf)})")
        return node
    refuse_in_factory("init_sharded", "build that part unplaced there (e.g. Inner(rngs)): {caller} lays it all out")
    if under_transform():  # set_mesh (each group's program) raised JAX's words, "outside of `jax.jit`" under a grad too
        raise ValueError(f"init_sharded was called {UNDER_TRANSFORM}: call it outside, it compiles its own programs "
                         "(one per group of variables); pass the placed model to the transformed function")
    graphdef, state, plan = _trace_and_plan(factory, mesh, rule, warn, "init_sharded", flags := {})
    variables = dict((path_key(p), v) for p, v in nnx.to_flat_state(state) if path_key(p) in plan.specs)
    if not mesh.local_devices:
        raise ValueError(f"the mesh {dict(mesh.shape)} holds no device of this process ({jax.process_index()}); "
                         "build it over every process's devices, e.g. make_mesh() on each process")
    pending, groups = [], _groups(variables, mesh.size)
    for i, group in enumerate(groups):
        with warnings.catch_warnings(action="ignore"), jax.set_mesh(None):  # the constructor's warnings: once
            constants: dict = {}  # the leaves each variable's value holds built from no traced array
            traced = jax.jit(_select(factory, group, constants),
                             out_shardings=SingleDeviceSharding(mesh.local_devices[0])).trace()
            program = traced.lower().compile()
        digest = trace_digest(traced.jaxpr, constants) if len(groups) > 1 else None  # costly: one group, no need
        if i == 0:  # the first trace holds every value built from no traced array: checked before any is placed
            first = digest
            for path, sub, leaf in ((p, k, c) for p, v in constants.items() for k, c in jax.tree.leaves_with_path(v)):
                check_placeable(leaf, f"init_sharded: {path_key(sub, path)} (shape {np.shape(leaf)})")
        elif digest != first:  # each group's values come from its own trace: one construction's, or mixed
            raise ValueError(f"init_sharded traces the factory {getattr(factory, '__name__', factory)!r} once per "
                             "group of variables, and two traces built different values (a draw from NumPy's or "
                             "Python's global random state, the clock): each group would hold another draw. Seed it "
                             "inside the factory (np.random.default_rng(0)) or draw from nnx.Rngs, or build it eagerly "
                             f"and {PLACE_EAGERLY}")
        jax.block_until_ready(pending)  # compiled while the last group ran: one group whole at a time
        pending = [_place_whole(whole, constants[path], plan.sharding(path)) for path, whole in zip(group, program())]
        for path, value in zip(group, pending):  # scalars in a pytree value stay scalars, as factory() holds them
            variables[path].set_value(keep_scalars(variables[path].get_value(), value))
    jax.block_until_ready(pending)
    model = nnx.merge(graphdef, state)
    for kind, paths in flags.items():  # traced plain (trace_factory): made ref=True / hijax=True again, as factory()
        if paths:
            model = nnx.with_vars(model, **{kind: True}, only=lambda path, _, paths=paths: path in paths)
    return model


def abstract_sharded(factory: Callable[[], Any], mesh: Mesh | None,
                     rule: str | RuleTable | Rule = "replicated", *, warn: bool = True) -> Any:
    """``init_sharded``'s result (and errors), abstract (traced, for dry runs): arrays as ``jax.ShapeDtypeStruct``.

    Parameters
    ----------
    factory, rule, warn : as ``init_sharded``
    mesh : jax.sharding.Mesh or None
        None: no shardings (as ``nnx.eval_shape(factory)``, but scalar variables keep their values).

    Returns
    -------
    NNX node
        Its arrays ``jax.ShapeDtypeStruct`` (shape, dtype, planned ``sharding``); nothing allocated.

    Raises
    ------
    ValueError, TypeError
        As ``init_sharded``; an AbstractMesh is taken (``mesh`` neither None, Mesh nor AbstractMesh: ``TypeError``).
    """
    rule = _checked_rule(factory, rule, warn)
    if mesh is None:
        return nnx.merge(*trace_factory(factory, "abstract_sharded"))
    graphdef, state, plan = _trace_and_plan(factory, mesh, rule, warn, "abstract_sharded")
    return nnx.merge(graphdef, plan.abstract_state(nnx.merge(graphdef, state)))


def init_optimizer_sharded(model: Any, tx: Any, rule: str | RuleTable | Rule = "replicated", *,
                           wrt: Any = nnx.Param) -> nnx.Optimizer:
    """``nnx.Optimizer(model, tx, wrt=wrt)``, its state created by one jitted program at its plan under ``rule``, like
    the parameters it mirrors (under ``fsdp``: ZeRO, Rajbhandari et al. 2020, arXiv:1910.02054); no plan warnings.

    Parameters
    ----------
    model : nnx.Module
        Placed under ``rule`` on one mesh, abstract (then so is the state), or on no mesh (a plain ``nnx.Optimizer``).
    tx : optax.GradientTransformation
    rule : str or RuleTable or Rule, default "replicated"
        The rule ``model`` was placed under.
    wrt : nnx filter, default nnx.Param

    Returns
    -------
    nnx.Optimizer
        Its state (``opt_state``) placed as the parameters it mirrors.

    Raises
    ------
    ValueError, TypeError
        ``rule`` unknown or placing a parameter elsewhere than it is, the model's arrays not on one mesh or traced;
        ``model`` no NNX node, ``tx`` no optax ``GradientTransformation``, ``wrt`` no nnx filter.
    """
    refuse_in_factory("init_optimizer_sharded", "build nnx.Optimizer(model, tx, wrt=nnx.Param) there instead: "
                      "{caller} lays it out with the model")
    rule = resolve_rule(rule)
    check_node(model, "init_optimizer_sharded")
    if not (callable(getattr(tx, "init", None)) and callable(getattr(tx, "update", None))):
        raise TypeError(f"tx={shown(tx)} must be an optax GradientTransformation, e.g. optax.adam(1e-3)")
    check_filter(wrt)
    traced = next((name for name, v in named_leaves(model) if isinstance(v, jax.core.Tracer)), None)
    if traced is not None:  # a tracer has no mesh: a plain Optimizer came back, its state laid out as jit chose
        raise ValueError(f"init_optimizer_sharded got {traced} as a traced array: call it outside every JAX "
                         "transformation (jax.jit, nnx.jit, jax.grad, ...; "
                         "it compiles its own program, the state at its plan), on the placed model")
    mesh, abstract = model_mesh(model)
    if mesh is None and not abstract:  # no mesh set: a ref=True variable's copy is a jitted program it refused
        with jax.set_mesh(None):
            return nnx.Optimizer(model, tx, wrt=wrt)
    if mesh is not None:
        _check_placed_under(model, mesh, rule)
    model_graph, model_state = nnx.split(model)
    arrays = jax.tree.map(lambda v: 0 if is_scalar(v) else v, model_state)  # a jit argument 2**40: OverflowError

    def build(arrays):  # the model's arrays as arguments: inject_hyperparams' init read a closed-over abstract one
        return nnx.Optimizer(nnx.merge(model_graph, keep_scalars(model_state, arrays)), tx, wrt=wrt)  # scalars kept
    with jax.set_mesh(None):  # under a mesh Flax would read logical axes as mesh axes and raise
        optimizer = nnx.eval_shape(build, arrays)
    if mesh is None:
        return optimizer
    plan = plan_shardings(optimizer, mesh, rule)
    if abstract:
        return nnx.merge(nnx.graphdef(optimizer), plan.abstract_state(optimizer))

    def create(arrays):  # the values of the variables plan.specs lists, by path: a NumPy scalar optax copied (as
        built = {path_key(p): v for p, v in nnx.iter_graph(build(arrays)) if isinstance(v, nnx.Variable)}
        return [jax.tree.map(jnp.asarray, built[p].get_value()) for p in plan.specs]  # schedule_free's z) as planned

    created = jax.jit(create, out_shardings=[plan.sharding(p) for p in plan.specs])(arrays)
    for (_, var), value in zip(array_variables(optimizer), created):
        var.set_value(value)
    return optimizer


def _check_placed_under(model: Any, mesh: Mesh, rule: Rule) -> None:
    """Refuse ``rule`` when its plan puts a variable of ``model`` elsewhere than it is, naming a rule that fits."""
    variables = dict(array_variables(model))  # the walk plans make: plan.specs' paths

    def first_difference(plan: Plan) -> str | None:  # the first variable (an array of it) placed otherwise
        return next((path for path in plan.specs for leaf in array_leaves(value_of(variables[path]))
                     if getattr(leaf, "sharding", None) is None or not leaf.sharding.is_equivalent_to(
                         in_memory_of(leaf, plan.sharding(path)), len(leaf.shape))), None)  # offloaded: held alike

    path = first_difference(plan := plan_shardings(model, mesh, rule))
    if path is not None:
        held = getattr(array_leaves(value_of(variables[path]))[0].sharding, "spec", None)
        if logical_axes_of(variables[path]) is None and held is not None:  # no rule splits it: a jitted step did
            raise ValueError(f"init_optimizer_sharded: the model holds {path} at {held}, though it has no annotation, "
                             "so no rule placed it there: e.g. a jitted step laid it out anew (jit keeps no placement "
                             "without out_shardings); place the model again first (shard_model, shard_model_by_table)")
        fits = next((name for name in RULES if not (rule.builtin and name == rule.name)  # refused: not planned again
                     and first_difference(plan_shardings(model, mesh, name)) is None), None)
        hint = (f"the model is placed as rule {fits!r} places it: pass rule={fits!r}" if fits else "pass the rule "
                "table the model was placed under") + ", or place it under this rule first (shard_model)"
        raise ValueError(f"init_optimizer_sharded: {rule.label} places {path} at {plan.specs[path]}, but the model "
                         f"holds it at {held}; {hint}")


def _checked_rule(factory: Any, rule: Any, warn: Any) -> Rule:
    check_flag(warn, "warn")  # warn="no" would warn
    if not callable(factory) or isinstance(factory, (nnx.Pytree, nnx.Variable)):  # a Variable is callable
        name = type(factory).__name__  # the user's own class, not a harness model they may not have
        fix = (f" built already: pass lambda: {name}(...) to build it sharded, or place this one with "
               "shard_model(model, mesh, rule)" if isinstance(factory, nnx.Module) else
               "; pass e.g. lambda: MyModel(rngs=nnx.Rngs(0))")
        raise ValueError(f"factory must be a zero-argument callable building the module, got a {name}{fix}")
    check_no_arguments(factory)  # before the rule: its refusal named first, as before
    return resolve_rule(rule)


def _trace_and_plan(factory: Callable[[], Any], mesh: Mesh, rule: Rule, warn: bool, caller: str,
                    flags: dict | None = None) -> tuple:
    """``trace_factory`` (errors naming ``caller``, ``flags`` as it takes them); plan; warn at the caller's caller."""
    graphdef, state = trace_factory(factory, caller, flags)  # placing inside it refused (refuse_in_factory)
    plan = plan_shardings(nnx.merge(graphdef, state), mesh, rule)
    if warn:
        plan.warn(3, "gs.plan_shardings(node, mesh, rule).fallbacks")  # as shard_model's: its caller holds no Plan
    return graphdef, state, plan


def _groups(variables: dict[str, nnx.Variable], n_devices: int) -> list[list[str]]:
    """Paths in groups of at most ``max(GROUP_BYTES, total / n_devices)`` (a larger variable alone)."""
    sizes = {p: sum(stored_bytes(int(np.prod(a.shape)), a.dtype) for a in array_leaves(v.get_value()))
             for p, v in variables.items()}
    limit = max(GROUP_BYTES, sum(sizes.values()) // n_devices)
    groups, size = [], 0
    for path in sorted(sizes, key=lambda p: sizes[p]):  # stable: graph order among equal sizes
        if not groups or size + sizes[path] > limit:  # the first group opens on any size, 0 bytes too
            groups, size = groups + [[]], 0
        groups[-1].append(path)
        size += sizes[path]
    return groups


def _select(factory: Callable[[], Any], paths: list[str], constants: dict) -> Callable[[], list]:
    """Traceable ``factory()``'s values at ``paths``, leaves built from no traced array None (kept in ``constants``)."""
    def build():
        values = {path_key(p): v.get_value() for p, v in nnx.to_flat_state(nnx.state(build_unplaced(factory)))}
        check_concrete((p, leaf) for p, value in values.items() for leaf in jax.tree.leaves(value))
        constants.update((p, jax.tree.map(lambda v: None if isinstance(v, jax.core.Tracer) else v, value))
                         for p, value in values.items())
        return [jax.tree.map(lambda v: v if isinstance(v, jax.core.Tracer) else None, values[p]) for p in paths]
    return build


def _place_whole(out: Any, constant: Any, target: NamedSharding) -> Any:
    """``_select``'s value from one device, its None leaves from ``constant`` (scalars stay), moved to ``target``."""
    def put(c: Any, o: Any) -> Any:  # several processes: each computed the same value, and places its devices' shards
        w = o if c is None else c if is_scalar(c) else jnp.asarray(c)
        return w if is_scalar(w) else jax.device_put(host_view(w, target), target) if jax.process_count() == 1 else (
            jax.make_array_from_callback(w.shape, target, lambda index: w[index]))
    return jax.tree.map(put, constant, out, is_leaf=lambda c: c is None)


def trace_digest(jaxpr: Any, constants: dict[str, Any]) -> tuple:
    """A trace's operations and a digest of its and ``constants``' values: equal for traces building the same values."""
    def digest(c: Any) -> tuple:
        c = np.asarray(jax.random.key_data(c) if is_prng_key(c) else c)  # a Python number too (nnx.Variable(3))
        return c.shape, str(c.dtype), hashlib.sha1(np.ascontiguousarray(c)).hexdigest()
    return ([str(eqn) for eqn in jaxpr.jaxpr.eqns], [digest(c) for c in jaxpr.consts],
            sorted((name, [digest(c) for c in jax.tree.leaves(value)]) for name, value in constants.items()))
