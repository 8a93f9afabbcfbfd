"""Sharded initialisation: create a model, or its optimizer state, directly at its placement.

``shard_model`` places a model after it exists, so each variable first exists whole on
one device. Here each variable's target comes from ``plan_shardings`` on the abstract
model (the contract's rules, fallbacks and warnings), and its value is computed by jitted
programs with that output sharding (``staging``): the constructor is traced once, its
scalar work (RNG keys, counters, scales) runs eagerly as in eager construction, and the
rest of each variable runs with eager execution's program boundaries, every value at the
variable's sharding, each program compiled once for all variables (the kernels of every
block). Variables are computed one at a time, and each draw is one fused loop writing
its shards (``random_bits``), so the process holds the model's shards and little else:
for a 1.07 GB MLP under fsdp on 8 CPU devices, 1.36 GB at peak, of which 0.24 GB is
JAX's runtime (``benchmarks/init.py``). (One ``jit`` of the whole constructor keeps a
shard-sized threefry counter per variable alive, 1.47 GB of temporaries for that MLP.)

Values equal eager construction bit for bit on CPU. Threefry bits do not depend on the
layout (``jax_threefry_partitionable``, on by default), and an elementwise computation
from them gives each element the same operations in any layout; but XLA:CPU rounds an
initialiser's float transforms (``erf_inv``, ``log``: FMA contraction in vector loops)
differently when rows are short. Measured (float32; 7 initialisers, 28 shapes, every
split of every dimension over (8, 1), (4, 2), (2, 4) and (1, 8) meshes, and the models'
tests): a draw equals the eager one when the array and each device's block of it are
1-d, or 2-d with rows of at least ``_MIN_TRAILING`` elements; differences appeared with
shorter rows, and in some 3-d arrays. Every other variable is computed op by op on one
device, as eagerly, and then placed (see ``init_sharded``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.extend import core as jcore
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from gensbi_sharding import staging
from gensbi_sharding.sharding import RULES, _path_str, plan_shardings, shard_model, shard_model_by_table

__all__ = ["init_sharded", "init_optimizer_sharded"]

_READS_TRACED_VALUE = (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError,
                       jax.errors.TracerBoolConversionError, jax.errors.TracerIntegerConversionError)
# Fewest trailing elements for which a row block compiles like the whole array on XLA:CPU.
_MIN_TRAILING = 8


def init_sharded(factory: Callable[[], Any], mesh: Mesh | None, rule: str | Mapping = "replicated") -> Any:
    """Build ``factory()`` with every variable created directly at its placement.

    Parameters
    ----------
    factory : callable
        ``factory() -> module``, deterministic and free of outside state: it is traced
        twice, so it must build its own ``nnx.Rngs(seed)``, not draw from a shared one.
    mesh : jax.sharding.Mesh or None
        None builds the module eagerly, unplaced (``factory()``).
    rule : str or mapping
        A key of ``RULES`` (as ``shard_model``) or a rule table (as ``shard_model_by_table``).

    Returns
    -------
    The module, placed as ``shard_model(factory(), mesh, rule)`` places it, with
    bit-identical values on CPU, after the same warnings (experimental rule, one
    ``ShardingFallbackWarning``).

    Raises
    ------
    ValueError
        If ``factory`` is not a callable (a module instance is not), ``rule`` is
        neither a key of ``RULES`` nor a mapping, or the constructor cannot be traced
        (it converts a computed array to a Python value or NumPy).

    Notes
    -----
    A variable computed elementwise from its draws (the initialisers of ``jax.nn`` and
    Flax, scaled, shifted, cast; no transcendental function beyond ``erf``/``erf_inv``),
    1-d or 2-d, whose rows and the rows of each device's
    block of it hold at least 8 elements, is written directly
    at its placement. Any other (reshaped or reduced draws, batched keys as under
    ``nnx.vmap``, other generators, ``jax_threefry_partitionable`` off) is computed op
    by op on one device, exactly as eager construction computes it, and then placed:
    for that variable alone, one device holds it whole for a moment.
    """
    _check_factory(factory)
    table, honor = _resolve_rule(rule)
    if mesh is None:
        return factory()
    try:
        abstract = nnx.eval_shape(factory)
        graphdef, state = nnx.split(abstract)
        leaves = _array_leaves(state)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the constructor's own warnings were shown once above
            traced = jax.make_jaxpr(_select(factory, [path for path, _ in leaves], scalars := {}))()
    except _READS_TRACED_VALUE as error:
        raise ValueError(
            f"init_sharded traces the constructor, which reads a value it computed ({type(error).__name__}: "
            f"{str(error).splitlines()[0]}); build it eagerly and place it instead: "
            "shard_model(factory(), mesh, rule) (in the harness: model.init=eager)") from error
    specs, _ = plan_shardings(abstract, mesh, table, honor_annotations=honor)
    known, producer = staging.run_scalar_work(traced)
    for (path, var), out in zip(leaves, traced.jaxpr.outvars):
        target = NamedSharding(mesh, specs[path])
        if path in scalars:
            var.set_value(scalars[path])
            continue
        if isinstance(out, jcore.Literal) or out in known:
            var.set_value(jax.device_put(staging.read(out, known), target))
            continue
        jaxpr = staging.residual(traced.jaxpr, out, known, producer, path)
        value = _compute_at(jaxpr, [known[v] for v in jaxpr.invars], var.get_value().shape, target)
        var.set_value(jax.block_until_ready(value))  # one variable at a time
    module = nnx.merge(graphdef, state)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # placed as planned: this moves nothing, it only warns
        if isinstance(rule, str):
            shard_model(module, mesh, rule)
        else:
            shard_model_by_table(module, mesh, rule)
    for w in caught:
        warnings.warn(w.message, stacklevel=2)
    return module


def init_optimizer_sharded(model: Any, tx: Any, *, wrt: Any = nnx.Param) -> nnx.Optimizer:
    """``nnx.Optimizer(model, tx, wrt=wrt)`` with every moment created where its parameter lives.

    A state leaf whose path ends with a parameter's path and has its shape
    (``opt_state/0/mu/up/kernel`` for ``up/kernel``) gets that parameter's sharding;
    the rest (step counters) is replicated. The state is computed by one jitted
    program with those output shardings, so no device holds a whole moment. For an
    abstract model (``compiled.abstract_sharded``) the optimizer is abstract too.

    Parameters
    ----------
    model : nnx.Module
        Placed by ``init_sharded``/``shard_model`` (unplaced: a plain eager optimizer).
    tx : optax.GradientTransformation
    wrt : nnx filter, default ``nnx.Param``

    Raises
    ------
    ValueError
        If the model's arrays are not all on one mesh.
    """
    values = [(path, var.get_value()) for path, var in _array_leaves(nnx.state(model))]
    params = {path: (tuple(v.shape), getattr(v, "sharding", None)) for path, v in values}
    meshes = {s.mesh for _, s in params.values() if isinstance(s, NamedSharding)}
    abstract = any(isinstance(v, jax.ShapeDtypeStruct) for _, v in values)
    if not meshes:
        return nnx.eval_shape(lambda: nnx.Optimizer(model, tx, wrt=wrt)) if abstract else \
            nnx.Optimizer(model, tx, wrt=wrt)
    if len(meshes) > 1 or any(not isinstance(s, NamedSharding) for _, s in params.values()):
        raise ValueError(f"the model's arrays are on {len(meshes)} meshes and/or single devices; "
                         "place the whole model first (init_sharded or shard_model)")
    mesh = meshes.pop()
    graphdef, state = nnx.split(nnx.eval_shape(lambda: nnx.Optimizer(model, tx, wrt=wrt)))
    leaves = _array_leaves(state)
    out = [_like_param(path, var.get_value(), params, mesh) for path, var in leaves]
    if abstract:
        for (_, var), sharding in zip(leaves, out):
            value = var.get_value()
            var.set_value(jax.ShapeDtypeStruct(value.shape, value.dtype, sharding=sharding))
        return nnx.merge(graphdef, state)
    model_graph, model_state = nnx.split(model)

    def build(model_state):
        optimizer = nnx.Optimizer(nnx.merge(model_graph, model_state), tx, wrt=wrt)
        values = dict((p, v.get_value()) for p, v in _array_leaves(nnx.state(optimizer)))
        return [values[path] for path, _ in leaves]

    for (_, var), value in zip(leaves, jax.jit(build, out_shardings=out)(model_state)):
        var.set_value(value)
    return nnx.merge(graphdef, state)


def _eager_then_place(jaxpr: Any, args: list, target: NamedSharding) -> jax.Array:
    """Compute a variable op by op on one device, as eagerly (same programs, same rounding), then place it."""
    mesh = target.mesh
    device = next(d for d in mesh.devices.flat if d.process_index == jax.process_index())
    with jax.default_device(device):
        (whole,) = jcore.jaxpr_as_fun(jcore.ClosedJaxpr(jaxpr, []))(*args)
    if jax.process_count() == 1:
        return jax.device_put(whole, target)  # as shard_model places it
    # Every process computed the same value; each places the shards its devices hold.
    return jax.make_array_from_callback(whole.shape, target, lambda index: whole[index])


def _compute_at(jaxpr: Any, args: list, shape: tuple[int, ...], target: NamedSharding) -> jax.Array:
    """A variable's value at ``target``, computed so that it rounds as eager construction."""
    if (_rows_round_alike(shape) and _rows_round_alike(target.shard_shape(shape))
            and staging.elementwise_in(jaxpr, shape) and staging.draws_fuse(jaxpr, args)):
        return staging.run_at(jaxpr, args, target)
    return _eager_then_place(jaxpr, args, target)


def _rows_round_alike(shape: tuple[int, ...]) -> bool:
    """Whether a draw of this shape (or block shape) rounds as eager construction does."""
    # 3-d and up: a (8, 4, 12) normal split on its leading dimension differed in 15 of 384
    # elements, though its rows are long; not drawn in place until a rule is known.
    return len(shape) == 1 or len(shape) == 2 and shape[1] >= _MIN_TRAILING


def _check_factory(factory: Any) -> None:
    if not callable(factory) or isinstance(factory, nnx.Pytree):
        raise ValueError(f"factory must be a zero-argument callable building the module, got a "
                         f"{type(factory).__name__}; pass e.g. lambda: make_mlp(dim_theta=2, dim_x=2, "
                         "rngs=nnx.Rngs(0))")


def _resolve_rule(rule: Any) -> tuple[Mapping, bool]:
    if isinstance(rule, str):
        if rule not in RULES:
            raise ValueError(f"unknown sharding rule {rule!r}; choose one of {tuple(RULES)} "
                             "or pass a rule table (logical axis -> mesh axis or None)")
        return dict(RULES[rule]), rule != "replicated"
    if isinstance(rule, Mapping):
        return rule, True
    raise ValueError(f"rule must be a name in {tuple(RULES)} or a rule table mapping, got {rule!r}")


def _array_leaves(state: Any) -> list[tuple[str, nnx.Variable]]:
    return [(_path_str(path), var) for path, var in nnx.to_flat_state(state)
            if isinstance(var.get_value(), (jax.Array, jax.ShapeDtypeStruct))]


def _select(factory: Callable[[], Any], paths: list[str], scalars: dict) -> Callable[[], list]:
    """``factory``'s leaves at ``paths`` as a traceable function; fills ``scalars`` (path -> value)."""
    def build():
        # Every leaf: NumPy arrays and Python scalars become constants of the trace.
        values = {_path_str(p): v.get_value() for p, v in nnx.to_flat_state(nnx.state(factory()))}
        # Python and NumPy scalars cannot depend on traced values: kept as they are, as shard_model keeps them.
        scalars.update((p, values[p]) for p in paths if isinstance(values[p], (bool, int, float, complex, np.generic)))
        return [jnp.asarray(values[p]) for p in paths]
    return build


def _like_param(path: str, value: Any, params: dict, mesh: Mesh) -> NamedSharding:
    """The sharding of the longest parameter path ``path`` ends with, if the shapes agree."""
    for param in sorted((p for p in params if path == p or path.endswith("/" + p)), key=len, reverse=True):
        shape, sharding = params[param]
        if shape == tuple(value.shape):
            return sharding
    return NamedSharding(mesh, P())
