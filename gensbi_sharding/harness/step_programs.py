"""The programs of a train step and a validation loss over a split NNX state, jitted once per program key.

``step_functions.make_step_functions`` asks for them by the split graph, mesh and state placements; equal keys get the
same jitted functions (settings that compare equal but differ in type, ``0.5`` and ``np.float32(0.5)``, are kept
apart: JAX promotes a Python scalar weakly, a NumPy one strongly, so their programs differ), whose traced, lowered
and compiled programs JAX keeps by the arguments' shapes, dtypes and shardings: a second run of the same shapes in one
process (a sweep's next job) compiles nothing again. What tracing warned (an activation ``constrain`` left unsplit) is
kept with them, for each run that reuses them to say again.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

__all__ = ["flow_matching_loss", "jitted_steps", "say_again", "types_of"]


def flow_matching_loss(model: Callable, theta: jax.Array, x: jax.Array, key: jax.Array,
                       weight: jax.Array | None = None, index: jax.Array | None = None) -> jax.Array:
    """Mean squared error of the predicted velocity on the straight path.

    Parameters
    ----------
    model : callable
        ``model(theta_t (B, d_theta), x (B, d_x), t (B,)) -> (B, d_theta)``.
    theta, x : jax.Array
        Float32 parameters (B, d_theta) and simulations (B, d_x), z-scored.
    key : jax.Array
        A typed PRNG key; draws t ~ U(0, 1) and z ~ N(0, I).
    weight : jax.Array, optional
        (B,) float32 row weights (1 for a real pair, 0 for padding): the loss is then
        the weighted mean over rows. None: every row counts.
    index : jax.Array, optional
        (B,) int32, each row's pair (a held-out pair's global index): row ``i`` draws its (t, z) from
        ``jax.random.fold_in(key, index[i])``, its pair's own whichever batch holds it, in either threefry mode.
        None: one draw of B values, by row (the train step's).

    Returns
    -------
    jax.Array
        Scalar float32 loss.
    """
    if index is None:
        t_key, z_key = jax.random.split(key)
        t = jax.random.uniform(t_key, (theta.shape[0],), theta.dtype)
        z = jax.random.normal(z_key, theta.shape, theta.dtype)
    else:  # only this batch's B rows are drawn: no draw grows with the held-out rows of other batches
        t, z = jax.vmap(functools.partial(_pair_draw, key, theta.shape[1:], theta.dtype))(index)
    theta_t = (1.0 - t)[:, None] * z + t[:, None] * theta
    velocity = model(theta_t, x, t)
    if weight is None:
        return jnp.mean((velocity - (theta - z)) ** 2)
    per_row = jnp.mean((velocity - (theta - z)) ** 2, axis=-1)
    return jnp.sum(weight * per_row) / jnp.maximum(jnp.sum(weight), 1.0)


def _pair_draw(key: jax.Array, shape: tuple, dtype: Any, index: jax.Array) -> tuple[jax.Array, jax.Array]:
    """One pair's (t, z) from its own key: a draw of shape () and ``shape``, alike at any batch size."""
    t_key, z_key = jax.random.split(jax.random.fold_in(key, index))
    return jax.random.uniform(t_key, (), dtype), jax.random.normal(z_key, shape, dtype)


def said_when_traced(function: Callable, said: dict) -> Callable:
    """``function``, whose warnings shown while it is traced are kept in ``said`` (by text, kind and place)."""
    @functools.wraps(function)
    def traced(*args):
        shown = warnings.showwarning  # swapped, not catch_warnings: that resets the registries, saying repeats again

        def keep(message, category, filename, lineno, file=None, line=None):
            said.setdefault((str(message), category, filename, lineno), (message, category, filename, lineno))
            shown(message, category, filename, lineno, file, line)

        warnings.showwarning = keep
        try:
            return function(*args)
        finally:
            warnings.showwarning = shown
    return traced


def say_again(said: dict) -> None:
    """Warn what ``said_when_traced`` kept: a run reusing programs traced before hears what their tracing said."""
    for message, category, filename, lineno in list(said.values()):
        warnings.warn_explicit(message, category, filename, lineno)


def types_of(value: Any) -> Any:
    """The types in ``value``, through tuples, lists, mappings and dataclasses (a split graph and its settings).

    Equal settings can trace differently: ``x * 0.5`` keeps a bfloat16 ``x`` bfloat16, ``x * np.float32(0.5)``
    makes it float32; ``True``, ``1`` and ``1.0`` differ so too. A key of ``(value, types_of(value))`` tells them apart.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return type(value), tuple(types_of(getattr(value, field.name)) for field in dataclasses.fields(value))
    if isinstance(value, (tuple, list)):
        return type(value), tuple(types_of(item) for item in value)
    if isinstance(value, Mapping):
        return type(value), tuple((types_of(name), types_of(item)) for name, item in value.items())
    return type(value)


@functools.lru_cache(maxsize=8)
def jitted_steps(graphdef: Any, mesh: Mesh | None, leaf_shardings: tuple = (), treedef: Any = None,
                 setting_types: Any = None) -> tuple:
    """The jitted ``(train_step, eval_loss, said, train_arrays)`` of the split state of ``graphdef`` (model,
    optimizer[, EMA]).

    The step donates the state and returns it at ``leaf_shardings`` (its leaves' shardings, flattened with ``treedef``;
    none without a mesh). ``train_arrays`` is that step over the state's arrays (``nnx.to_pure_dict`` of it, the same
    leaves in the same order), returning them so: a call flattens and rebuilds no ``nnx.Variable`` (about 3 ms of
    host work per step for Flux1's 379), which ``harness.train.train``'s loop saves. ``setting_types``:
    ``types_of(graphdef)``, unused but in the key (settings equal in value, not in type, get their own pair).
    ``said``: the warnings their tracing gave so far (``say_again``). The last 8 keys' are kept: each holds the
    programs JAX compiled for it. ``eval_loss(state, batch, key)`` draws each row's (t, z) from its own key, by the
    batch's ``index`` (a held-out pair's) or else its row (``flow_matching_loss``).
    """
    said = {}

    def step(state, batch, key):  # nnx.merge takes the arrays as the variables alike
        model, optimizer, *average = nnx.merge(graphdef, state)
        count = optimizer.step[...]  # updates so far: the step's key and the EMA's warm-up
        step_key = jax.random.fold_in(key, count)
        loss, grads = nnx.value_and_grad(
            lambda m: flow_matching_loss(m, batch["theta"], batch["x"], step_key))(model)
        optimizer.update(model, grads)
        for ema in average:
            ema.update(model, count)
        return nnx.state((model, optimizer, *average)), loss

    @functools.partial(said_when_traced, said=said)
    def train_step(state, batch, key):
        return step(state, batch, key)

    @functools.partial(said_when_traced, said=said)
    def train_arrays(arrays, batch, key):
        state, loss = step(arrays, batch, key)
        return nnx.to_pure_dict(state), loss
    train_arrays.__name__ = train_arrays.__qualname__ = "train_step"  # its compiles are the train step's

    @functools.partial(said_when_traced, said=said)
    def eval_loss(state, batch, key):
        model, _, *average = nnx.merge(graphdef, state)
        if average:
            graph, _, rest = nnx.split(model, nnx.Param, ...)
            model = nnx.merge(graph, average[0].param_state(model), rest)
        weight = batch.get("weight")
        count = jnp.sum(weight) if weight is not None else jnp.float32(batch["theta"].shape[0])
        # By pair, not one draw of B values: a pair's (t, z) then does not depend on the rows beside it
        index = batch["index"] if "index" in batch else jnp.arange(batch["theta"].shape[0], dtype=jnp.int32)
        return flow_matching_loss(model, batch["theta"], batch["x"], key, weight, index), count

    if mesh is None:
        return (jax.jit(train_step, donate_argnums=0), jax.jit(eval_loss), said,
                jax.jit(train_arrays, donate_argnums=0))
    scalar = NamedSharding(mesh, P())
    state_shardings = jax.tree.unflatten(treedef, leaf_shardings)
    return (jax.jit(train_step, donate_argnums=0, out_shardings=(state_shardings, scalar)),
            jax.jit(eval_loss, out_shardings=scalar), said,
            jax.jit(train_arrays, donate_argnums=0, out_shardings=(nnx.to_pure_dict(state_shardings), scalar)))
