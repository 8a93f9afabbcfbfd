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
"""

from __future__ import annotations

from typing import Any

import jax
import optax
from flax import nnx

__all__ = ["EMAParam", "EMA", "warmed_up_decay"]


class EMAParam(nnx.Variable):
    """The moving average of one ``nnx.Param``; same shape, dtype and metadata."""


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
        them (new buffers, same placement).
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
        # A copy, not the same buffer: the train step donates both, and a buffer donated twice is an error.
        self.params = nnx.data(jax.tree.map(
            lambda v: EMAParam(v.get_value().copy(), **v.get_metadata()), params,
            is_leaf=lambda x: isinstance(x, nnx.Variable)))

    def update(self, model: nnx.Module, updates: jax.Array) -> None:
        """Move every average towards ``model``'s parameters; ``updates`` counts previous updates."""
        step_size = 1.0 - warmed_up_decay(self.decay, updates)
        new = nnx.state(model, nnx.Param)
        averaged = optax.incremental_update(_values(new), _values(self.params), step_size)
        jax.tree.map(lambda var, value: var.set_value(value), self.params, averaged,
                     is_leaf=lambda x: isinstance(x, nnx.Variable))

    def param_state(self, model: nnx.Module) -> nnx.State:
        """``nnx.state(model, nnx.Param)`` with the averages as values: merge it to sample with them."""
        return jax.tree.map(lambda var, avg: var.replace(avg.get_value()), nnx.state(model, nnx.Param),
                            self.params, is_leaf=lambda x: isinstance(x, nnx.Variable))


def _values(state: Any) -> Any:
    return jax.tree.map(lambda v: v.get_value(), state, is_leaf=lambda x: isinstance(x, nnx.Variable))
