"""Sharded initialisation: create a model, or its optimizer state, directly at its placement.

``shard_model`` places a model after it exists, so each variable first exists whole on
one device. Here each variable's target comes from ``plan_shardings`` on the abstract
model (the contract's rules, fallbacks and warnings), and its value is computed by a
jitted program with that output sharding (``staging``): the constructor is traced once,
its scalar work (RNG keys, counters, scales) runs eagerly as in eager construction, and
the rest of each variable becomes one program taking those scalars, compiled once for
all variables that print alike (the kernels of every block). Variables are computed one
at a time, and each draw is one fused loop writing its shards (``random_bits``), so the
process holds the model's shards and little else: for a 1.07 GB MLP under fsdp on 8 CPU
devices, 1.37 GB at peak, of which 0.24 GB is JAX's runtime (``benchmarks/init.py``).
(One ``jit`` of the whole constructor keeps a shard-sized threefry counter per variable
alive, 1.47 GB of temporaries for that MLP, and compiles every draw separately.)

Values equal eager construction bit for bit on CPU. Threefry bits do not depend on the
layout (``jax_threefry_partitionable``, on by default), but an initialiser's float
transforms (``erf_inv``, ``log``) compile to vector loops whose rounding (FMA
contraction) can differ with the loop. Measured on XLA:CPU (float32; 7 initialisers, 28
shapes, every split of every dimension over (8, 1), (4, 2), (2, 4) and (1, 8) meshes),
a fused draw in any layout equals the eager one when the array is 1-d or its trailing
dimensions hold at least ``_MIN_TRAILING`` elements, and only then. Such variables are
drawn at their target. The others, and draws that cannot be fused (other key types,
``jax_threefry_partitionable`` off), are drawn unfused as eagerly, at a layout that
rounds alike (``generation_sharding``), and then moved to their target by XLA's
collectives.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import jax
from flax import nnx
from jax.extend import core as jcore
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P, SingleDeviceSharding

from gensbi_sharding import staging
from gensbi_sharding.sharding import RULES, _path_str, plan_shardings, shard_model, shard_model_by_table

__all__ = ["init_sharded", "init_optimizer_sharded", "generation_sharding"]

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
        If ``factory`` is not a callable (a module instance is not), or ``rule`` is
        neither a key of ``RULES`` nor a mapping.
    """
    _check_factory(factory)
    table, honor = _resolve_rule(rule)
    if mesh is None:
        return factory()
    abstract = nnx.eval_shape(factory)
    graphdef, state = nnx.split(abstract)
    specs, _ = plan_shardings(abstract, mesh, table, honor_annotations=honor)
    leaves = _array_leaves(state)
    traced = jax.make_jaxpr(_select(factory, [path for path, _ in leaves]))()
    known, producer = staging.run_scalar_work(traced)
    for (path, var), out in zip(leaves, traced.jaxpr.outvars):
        target = NamedSharding(mesh, specs[path])
        if isinstance(out, jcore.Literal) or out in known:
            value = jax.device_put(staging.read(out, known), target)
            var.set_value(value)
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


def generation_sharding(spec: P, shape: tuple[int, ...], mesh: Mesh) -> jax.sharding.Sharding:
    """Where a variable bound for ``NamedSharding(mesh, spec)`` is drawn (see the module docstring).

    If the trailing dimensions hold ``_MIN_TRAILING`` elements or more (or the array is
    1-d): the leading dimension split over ``spec``'s mesh axes then the others, when it
    divides by the device count (no device repeats another's draw); else over ``spec``'s
    axes only, when it divides by theirs. Otherwise this process's first device of the
    mesh: the variable is computed there as eager construction computes it (op by op),
    then placed (small variables in practice: rows of fewer than 8 elements).
    """
    target, used = NamedSharding(mesh, spec), _axes_of(spec)
    if len(shape) == 1 or len(shape) > 1 and math.prod(shape[1:]) >= _MIN_TRAILING:
        for axes in (used + tuple(a for a in mesh.axis_names if a not in used), used):
            if axes and shape[0] % math.prod(mesh.shape[a] for a in axes) == 0:
                born = NamedSharding(mesh, P(_entry(axes)))
                return target if born.is_equivalent_to(target, len(shape)) else born
    return SingleDeviceSharding(next(d for d in mesh.devices.flat if d.process_index == jax.process_index()))


def _eager_then_place(jaxpr: Any, args: list, born: SingleDeviceSharding, target: NamedSharding) -> jax.Array:
    """Compute a variable op by op on one device, as eagerly (same programs, same rounding), then place it."""
    (device,) = born.device_set
    with jax.default_device(device):
        (whole,) = jcore.jaxpr_as_fun(jcore.ClosedJaxpr(jaxpr, []))(*args)
    if jax.process_count() == 1:
        return jax.device_put(whole, target)  # as shard_model places it
    # Every process computed the same value; each places the shards its devices hold.
    return jax.make_array_from_callback(whole.shape, target, lambda index: whole[index])


def _compute_at(jaxpr: Any, args: list, shape: tuple[int, ...], target: NamedSharding) -> jax.Array:
    """A variable's value at ``target``, by the cheapest way that rounds as eager construction."""
    if _rows_round_alike(shape) and staging.draws_fuse(jaxpr, args):
        (value,) = staging.program(jaxpr, target, fuse=True)(*args)
        return value
    born = generation_sharding(target.spec, shape, target.mesh)
    if isinstance(born, SingleDeviceSharding):
        return _eager_then_place(jaxpr, args, born, target)
    (value,) = staging.program(jaxpr, born, fuse=False)(*args)
    return _place_drawn(value, born, target)


def _rows_round_alike(shape: tuple[int, ...]) -> bool:
    """Whether a fused draw of this shape rounds as eager construction does, in any layout."""
    return len(shape) == 1 or len(shape) > 1 and math.prod(shape[1:]) >= _MIN_TRAILING


def _axes_of(spec: P) -> tuple[str, ...]:
    return tuple(a for e in spec if e is not None for a in ((e,) if isinstance(e, str) else e))


def _entry(axes: tuple[str, ...]) -> str | tuple[str, ...] | None:
    """The PartitionSpec entry splitting one dimension over ``axes``."""
    return (axes[0] if len(axes) == 1 else axes) if axes else None


def _place_drawn(value: jax.Array, born: NamedSharding, target: NamedSharding) -> jax.Array:
    """Move a drawn value to its target without a whole copy on any device.

    XLA moves a split between dimensions well only over the same axes, and gathers well
    only over the minor axes of a split: so first move the target's axes (the others
    staying on the leading dimension), then gather over the others.
    """
    mesh, ndim, used = target.mesh, value.ndim, _axes_of(target.spec)
    entries = tuple(target.spec) + (None,) * (ndim - len(tuple(target.spec)))
    lead = _axes_of(P(entries[0])) + tuple(a for a in _axes_of(born.spec) if a not in used)
    if value.shape[0] % math.prod(mesh.shape[a] for a in lead) == 0:
        step = NamedSharding(mesh, P(_entry(lead), *entries[1:]))
    else:  # gather over the other axes first, then move
        step = NamedSharding(mesh, P(_entry(used)))
    if not value.sharding.is_equivalent_to(step, ndim):
        value = _mover(target if step.is_equivalent_to(target, ndim) else step)(value)
    return value if value.sharding == target else _mover(target)(jax.block_until_ready(value))


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


def _select(factory: Callable[[], Any], paths: list[str]) -> Callable[[], list]:
    def build():
        values = dict((p, v.get_value()) for p, v in _array_leaves(nnx.state(factory())))
        return [values[p] for p in paths]
    return build


@functools.lru_cache(maxsize=64)
def _mover(target: NamedSharding) -> Callable[[jax.Array], jax.Array]:
    return jax.jit(lambda value: value, out_shardings=target)


def _like_param(path: str, value: Any, params: dict, mesh: Mesh) -> NamedSharding:
    """The sharding of the longest parameter path ``path`` ends with, if the shapes agree."""
    for param in sorted((p for p in params if path == p or path.endswith("/" + p)), key=len, reverse=True):
        shape, sharding = params[param]
        if shape == tuple(value.shape):
            return sharding
    return NamedSharding(mesh, P())
