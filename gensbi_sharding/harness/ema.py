"""An exponential moving average (EMA) of a model's parameters, placed like the parameters.

Averaging the iterates of a stochastic optimiser smooths out the noise of the last
steps (Polyak and Juditsky 1992; Izmailov et al. 2018); flow-matching and diffusion
models are almost always sampled with an EMA of their weights (Ho et al. 2020,
"Denoising Diffusion Probabilistic Models"; Karras et al. 2024). The decay warms up
as ``min(decay, (1 + n) / (10 + n))`` after ``n`` updates (TensorFlow's
``ExponentialMovingAverage(num_updates=...)``), so the average follows the fast
early changes instead of remembering the random initialisation for ~1/(1 - decay) steps.

Each average is an ``EMAParam`` variable carrying the parameter's own metadata
(its logical axis names), so ``plan_shardings`` / ``shard_model`` and checkpoint
restore place it exactly as the parameter, under every rule and mesh.

A parameter narrower than float32 (``model.param_dtype=bfloat16`` / ``float16``) is
averaged in a float32 copy: in bfloat16 (8 significant bits) a step of
``(1 - decay) * (p - avg)`` with ``decay=0.999`` is below half a unit in the last place
of ``avg`` and rounds away, so the average would freeze. The average is cast back
to the parameter's dtype only where the model is run with it (``param_state``); every
update returns each average in its own dtype, so the jitted step's state keeps its types.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import nnx

__all__ = ["EMAParam", "EMA", "warmed_up_decay", "average_dtype", "new_buffers"]


class EMAParam(nnx.Variable):
    """The moving average of one ``nnx.Param``: its shape and metadata, in ``average_dtype`` of its dtype."""


def average_dtype(dtype: Any) -> jnp.dtype:
    """The dtype an average of a ``dtype`` parameter is kept in: float32 for narrower floats, else ``dtype``."""
    dtype = jnp.dtype(dtype)
    if jnp.issubdtype(dtype, jnp.floating) and jnp.finfo(dtype).bits < 32:
        return jnp.dtype(jnp.float32)
    return dtype


def warmed_up_decay(decay: float, updates: jax.Array) -> jax.Array:
    """``min(decay, (1 + n) / (10 + n))`` for ``n`` previous updates (float32 scalar)."""
    n = updates.astype(jax.numpy.float32)
    return jax.numpy.minimum(decay, (1.0 + n) / (10.0 + n))


class EMA(nnx.Pytree):
    """Moving averages of ``model``'s ``nnx.Param`` variables.

    Parameters
    ----------
    model : nnx.Module
        The model whose parameters are averaged; the averages start as copies of
        them (new buffers, same placement; float32 for parameters narrower than that).
    decay : float
        In (0, 1): the weight of the old average per update once warmed up.

    Raises
    ------
    ValueError
        If ``decay`` is not in (0, 1).
    """

    def __init__(self, model: nnx.Module, decay: float):
        if isinstance(decay, bool) or not isinstance(decay, (int, float)) or not 0.0 < decay < 1.0:
            raise ValueError(f"EMA decay must lie strictly between 0 and 1, got {decay!r}; e.g. "
                             "train.ema_decay=0.999 (or 0 to switch the average off)")
        self.decay = float(decay)
        params = nnx.state(model, nnx.Param)
        self.params = nnx.data(jax.tree.map(
            lambda v, value: EMAParam(value, **v.get_metadata()), params, _as_averages(_values(params)),
            is_leaf=lambda x: isinstance(x, nnx.Variable)))

    def update(self, model: nnx.Module, updates: jax.Array) -> None:
        """Move every average towards ``model``'s parameters; ``updates`` counts previous updates."""
        step_size = 1.0 - warmed_up_decay(self.decay, updates)
        new = nnx.state(model, nnx.Param)
        old = _values(self.params)
        averaged = optax.incremental_update(_values(new), old, step_size)
        # The float32 step size promotes the sum; each average goes back to its own dtype so the
        # step's output state has its input's types (a jitted step refuses any other on its next call).
        averaged = jax.tree.map(lambda value, previous: value.astype(previous.dtype), averaged, old)
        jax.tree.map(lambda var, value: var.set_value(value), self.params, averaged,
                     is_leaf=lambda x: isinstance(x, nnx.Variable))

    def param_state(self, model: nnx.Module) -> nnx.State:
        """``nnx.state(model, nnx.Param)`` with the averages as values, each in its parameter's dtype.

        Merge it into the model to validate or sample with the averaged weights.
        """
        return jax.tree.map(lambda var, avg: var.replace(avg.get_value().astype(var.get_value().dtype)),
                            nnx.state(model, nnx.Param),
                            self.params, is_leaf=lambda x: isinstance(x, nnx.Variable))


def new_buffers(tree: Any) -> Any:
    """``tree`` with each array copied into new buffers, placed and typed as it is: the train step donates the
    parameters, the averages and the best weights kept, and one buffer donated twice is an error. By ``jax.device_put``,
    compiling nothing (``Array.copy`` compiled a program per shape); an array spanning processes by ``Array.copy``
    (``device_put`` copies it only by resharding it)."""
    return jax.tree.map(lambda a: a.copy() if isinstance(a, jax.Array) and not isinstance(a, jax.core.Tracer)
                        and not a.is_fully_addressable else jax.device_put(a, may_alias=False), tree)


def _as_averages(values: Any) -> Any:
    # New buffers (new_buffers: astype to the same dtype returns the same array); narrower floats widened by one
    # compiled program for all of them (an eager astype per leaf would compile a program per shape).
    leaves, treedef = jax.tree.flatten(values)
    narrow = [i for i, leaf in enumerate(leaves) if average_dtype(leaf.dtype) != leaf.dtype]
    widened = dict(zip(narrow, jax.jit(lambda xs: [x.astype(average_dtype(x.dtype)) for x in xs])(
        [leaves[i] for i in narrow]))) if narrow else {}
    return jax.tree.unflatten(treedef, [widened[i] if i in widened else new_buffers(leaf)
                                        for i, leaf in enumerate(leaves)])


def _values(state: Any) -> Any:
    return jax.tree.map(lambda v: v.get_value(), state, is_leaf=lambda x: isinstance(x, nnx.Variable))
