"""Sharded initialisation: build a model (and its optimizer) group by group, each group then placed.

The constructor is traced abstractly (``jax.eval_shape``), the abstract state planned
(``plan_shardings``), and the variables computed by ``jax.jit`` in groups of up to
``max(GROUP_BYTES, model bytes / mesh size)`` (a larger variable alone), each on one device,
then moved to its planned sharding while the next group is traced and compiled. A device holds
its shards plus one group, never the whole model (``benchmarks/init.py``).

Why one device, not ``jax.jit(..., out_shardings=plan)``: computed straight into their shards,
values depend on the mesh: a reduction over a variable (``w / norm(w)``) sums in another order
when split, and XLA:CPU rounds ``erf_inv``/``log`` in a block's short rows by another code path
(re-checked 2026-11-30). Computed on one device, values are bit-identical for every mesh, rule
and device count, and equal eager construction up to float rounding (``tests/test_init.py``)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding, SingleDeviceSharding

from gensbi_sharding.rules import Rule, RuleTable, resolve_rule
from gensbi_sharding.sharding import Plan, check_node, is_array, path_name, plan_shardings

__all__ = ["GROUP_BYTES", "init_sharded", "abstract_sharded", "init_optimizer_sharded"]

#: Groups hold up to ``max(GROUP_BYTES, model bytes / mesh size)`` (a larger variable alone);
#: each costs one trace of the constructor and one compilation: at most ~2 x mesh size of them.
GROUP_BYTES = 64 * 2**20

_READS_TRACED_VALUE = (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError,
                       jax.errors.TracerBoolConversionError, jax.errors.TracerIntegerConversionError)


def init_sharded(factory: Callable[[], Any], mesh: Mesh | None, rule: str | RuleTable | Rule = "replicated",
                 *, warn: bool = True) -> Any:
    """Build ``factory()`` with its variables computed group by group and placed as planned.

    Parameters
    ----------
    factory : callable
        ``factory() -> node`` (a Module, or e.g. a ``(model, optimizer)`` tuple),
        deterministic and free of outside state: it is traced once per group, so it
        must build its own ``nnx.Rngs(seed)``, not draw from a shared one.
    mesh : jax.sharding.Mesh or None
        None builds the node eagerly, unplaced (``factory()``).
    rule : str, mapping or Rule
        A key of ``RULES`` (as ``shard_model``) or a rule table (as ``shard_model_by_table``).
    warn : bool, default True
        Emit the warnings ``shard_model`` emits (``Plan.warn``); the harness logs the plan
        instead.

    Returns
    -------
    The node, placed as ``shard_model(factory(), mesh, rule)`` places it. Python and
    NumPy scalar leaves are kept as they are, as ``shard_model`` keeps them.

    Raises
    ------
    ValueError
        If ``factory`` is not a callable (a module instance is not), the rule is unknown,
        or the constructor cannot be traced (it converts a computed array to a Python
        value or NumPy): then build it eagerly and place it with ``shard_model``.
    """
    rule = _check(factory, rule)
    if mesh is None:
        return factory()
    graphdef, state, plan = _trace_and_plan(factory, mesh, rule)
    if warn:
        plan.warn(stacklevel=2)
    variables = dict((path_name(p), v) for p, v in nnx.to_flat_state(state) if path_name(p) in plan.specs)
    device = next(d for d in mesh.devices.flat if d.process_index == jax.process_index())
    pending: list = []
    for group in _groups(variables, mesh.size):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the constructor's own warnings were shown once
            program = jax.jit(_select(factory, group), out_shardings=SingleDeviceSharding(device)).lower().compile()
        # Traced and compiled while the previous group computed and moved; run only once that
        # group is placed (its whole copies then freed), so one group exists whole at a time.
        jax.block_until_ready(pending)
        pending = [_place_whole(whole, plan.sharding(path)) for path, whole in zip(group, program())]
        for path, value in zip(group, pending):
            variables[path].set_value(value)
    jax.block_until_ready(pending)
    return nnx.merge(graphdef, state)


def abstract_sharded(factory: Callable[[], Any], mesh: Mesh | None,
                     rule: str | RuleTable | Rule = "replicated", *, warn: bool = True) -> Any:
    """``factory()`` abstractly: each value a ``jax.ShapeDtypeStruct`` at its planned sharding.

    Nothing is allocated: for lowering and compiling a step (dry runs) or ``describe``.
    Shardings and warnings are those of ``init_sharded``; ``mesh=None`` gives no shardings.

    Raises
    ------
    ValueError
        As ``init_sharded``.
    """
    rule = _check(factory, rule)
    if mesh is None:
        return nnx.eval_shape(factory)
    graphdef, state, plan = _trace_and_plan(factory, mesh, rule)
    if warn:
        plan.warn(stacklevel=2)
    return nnx.merge(graphdef, plan.abstract_state(nnx.merge(graphdef, state)))


def init_optimizer_sharded(model: Any, tx: Any, rule: str | RuleTable | Rule = "replicated", *,
                           wrt: Any = nnx.Param) -> nnx.Optimizer:
    """``nnx.Optimizer(model, tx, wrt=wrt)`` with its state created at its planned placement.

    The optimizer is planned abstractly (``nnx.eval_shape``) under ``rule`` on the mesh
    the model's arrays live on: its moments carry their parameters' annotations, so they
    go where the parameters went. The state is computed by one jitted program with those
    output shardings, so no device holds a whole moment. For an abstract model
    (``abstract_sharded``) the optimizer is abstract too.

    Parameters
    ----------
    model : nnx.Module
        Placed by ``init_sharded``/``shard_model`` under ``rule`` (unplaced: a plain optimizer).
    tx : optax.GradientTransformation
    rule : str, mapping or Rule
        The rule the model was placed with.
    wrt : nnx filter, default ``nnx.Param``

    Raises
    ------
    ValueError
        If the model's arrays are not all on one mesh, or the rule is unknown.
    """
    rule = resolve_rule(rule)
    values = [var.get_value() for _, var in nnx.to_flat_state(nnx.state(model))]
    shardings = [getattr(v, "sharding", None) for v in values if is_array(v) or isinstance(v, jax.ShapeDtypeStruct)]
    meshes = {s.mesh for s in shardings if isinstance(s, NamedSharding)}
    abstract = any(isinstance(v, jax.ShapeDtypeStruct) for v in values)
    build = lambda: nnx.Optimizer(model, tx, wrt=wrt)  # noqa: E731
    if not meshes:
        return nnx.eval_shape(build) if abstract else build()
    if len(meshes) > 1 or any(not isinstance(s, NamedSharding) for s in shardings):
        raise ValueError(f"the model's arrays are on {len(meshes)} meshes and/or single devices; "
                         "place the whole model first (init_sharded or shard_model)")
    optimizer = nnx.eval_shape(build)
    plan = plan_shardings(optimizer, meshes.pop(), rule)
    graphdef, state = nnx.split(optimizer)
    if abstract:
        return nnx.merge(graphdef, plan.abstract_state(optimizer))
    model_graph, model_state = nnx.split(model)
    paths = list(plan.specs)

    def create(model_state):
        values = {path_name(p): v.get_value() for p, v in nnx.to_flat_state(
            nnx.state(nnx.Optimizer(nnx.merge(model_graph, model_state), tx, wrt=wrt)))}
        return [values[path] for path in paths]

    created = jax.jit(create, out_shardings=[plan.sharding(p) for p in paths])(model_state)
    variables = {path_name(p): v for p, v in nnx.to_flat_state(state)}
    for path, value in zip(paths, created):
        variables[path].set_value(value)
    return nnx.merge(graphdef, state)


def _check(factory: Any, rule: Any) -> Rule:
    if not callable(factory) or isinstance(factory, nnx.Pytree):
        raise ValueError(f"factory must be a zero-argument callable building the module, got a "
                         f"{type(factory).__name__}; pass e.g. lambda: make_mlp(dim_theta=2, dim_x=2, "
                         "rngs=nnx.Rngs(0))")
    return resolve_rule(rule)


def _trace_and_plan(factory: Callable[[], Any], mesh: Mesh, rule: Rule) -> tuple[Any, nnx.State, Plan]:
    """Trace ``factory`` abstractly; its Python/NumPy scalar leaves keep their values, unplanned."""
    found = {}

    def build():
        node = factory()
        check_node(node, "init_sharded (what the factory returned)")
        graphdef, state = nnx.split(node)
        found["graphdef"] = graphdef  # static: the same object on every trace
        found["scalars"] = {path_name(p): v.get_value() for p, v in nnx.to_flat_state(state)
                            if isinstance(v.get_value(), (bool, int, float, complex, np.generic))}
        return state

    try:
        state = jax.eval_shape(build)
    except _READS_TRACED_VALUE as error:
        raise ValueError(
            f"init_sharded traces the constructor, which reads a value it computed ({type(error).__name__}: "
            f"{str(error).splitlines()[0]}); build it eagerly and place it instead: "
            "shard_model(factory(), mesh, rule) (in the harness: model.init=eager)") from error
    for path, var in nnx.to_flat_state(state):
        if path_name(path) in found["scalars"]:
            var.set_value(found["scalars"][path_name(path)])
    graphdef = found["graphdef"]
    return graphdef, state, plan_shardings(nnx.merge(graphdef, state), mesh, rule)


def _groups(variables: dict[str, nnx.Variable], n_devices: int) -> list[list[str]]:
    """Paths in groups of at most ``max(GROUP_BYTES, total / n_devices)`` (a larger variable alone)."""
    sizes = {path: int(np.prod(var.get_value().shape)) * var.get_value().dtype.itemsize
             for path, var in variables.items()}
    limit = max(GROUP_BYTES, sum(sizes.values()) // n_devices)
    groups, size = [], limit
    for path in sorted(sizes, key=lambda p: sizes[p]):  # stable: graph order among equal sizes
        if size + sizes[path] > limit:
            groups.append([])
            size = 0
        groups[-1].append(path)
        size += sizes[path]
    return groups


def _select(factory: Callable[[], Any], paths: list[str]) -> Callable[[], list]:
    """A traceable function returning ``factory()``'s leaves at ``paths``."""
    def build():
        values = {path_name(p): v.get_value() for p, v in nnx.to_flat_state(nnx.state(factory()))}
        return [jnp.asarray(values[p]) for p in paths]
    return build


def _place_whole(whole: jax.Array, target: NamedSharding) -> jax.Array:
    """Move a variable computed on one device to ``target``."""
    if jax.process_count() == 1:
        return jax.device_put(whole, target)
    # Every process computed the same value; each places the shards its devices hold.
    return jax.make_array_from_callback(whole.shape, target, lambda index: whole[index])
