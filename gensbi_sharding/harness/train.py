"""Conditional flow matching for the posterior p(theta | x): loss, jitted step, loop.

Flow matching with the straight (rectified) path (Lipman et al. 2023, "Flow
Matching for Generative Modeling"; Liu et al. 2023, "Flow Straight and Fast"):
theta_t = (1 - t) z + t theta with z ~ N(0, I), and the network regresses the
velocity theta - z given (theta_t, x, t). Sampling integrates from t=0 to t=1.

The step is a pure function of the split NNX state (graph traversal happens once,
not per step), jitted with the state's own shardings as input and output
shardings and the state buffers donated. Everything it needs but the batch
(parameters, optimizer state with its step counter, the base RNG key) is placed
before the loop, so nothing but the new batch crosses to the devices per step.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from tqdm.auto import tqdm

from gensbi_sharding import mesh_context

__all__ = ["flow_matching_loss", "StepFunctions", "make_step_functions", "train", "TrainResult",
           "validation_loss"]


def flow_matching_loss(model: Callable, theta: jax.Array, x: jax.Array, key: jax.Array,
                       weight: jax.Array | None = None) -> jax.Array:
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

    Returns
    -------
    jax.Array
        Scalar float32 loss.
    """
    t_key, z_key = jax.random.split(key)
    t = jax.random.uniform(t_key, (theta.shape[0],), theta.dtype)
    z = jax.random.normal(z_key, theta.shape, theta.dtype)
    theta_t = (1.0 - t)[:, None] * z + t[:, None] * theta
    velocity = model(theta_t, x, t)
    if weight is None:
        return jnp.mean((velocity - (theta - z)) ** 2)
    per_row = jnp.mean((velocity - (theta - z)) ** 2, axis=-1)
    return jnp.sum(weight * per_row) / jnp.maximum(jnp.sum(weight), 1.0)


@dataclasses.dataclass
class StepFunctions:
    """The jitted train and loss functions over the split state ``(model, optimizer)``."""

    graphdef: Any
    train_step: Callable[[Any, dict, jax.Array], tuple[Any, jax.Array]]
    eval_loss: Callable[[Any, dict, jax.Array], tuple[jax.Array, jax.Array]]  # (mean loss, rows counted)


def make_step_functions(model: nnx.Module, optimizer: nnx.Optimizer, mesh: Mesh | None) -> tuple[StepFunctions, Any]:
    """Split ``(model, optimizer)`` and jit their step, keeping every placement fixed.

    Returns the step functions and the split state; a new pair per call, so jobs of a
    multirun never share a compiled step.
    """
    graphdef, state = nnx.split((model, optimizer))

    def train_step(state, batch, key):
        model, optimizer = nnx.merge(graphdef, state)
        step_key = jax.random.fold_in(key, optimizer.step[...])
        loss, grads = nnx.value_and_grad(
            lambda m: flow_matching_loss(m, batch["theta"], batch["x"], step_key))(model)
        optimizer.update(model, grads)
        return nnx.state((model, optimizer)), loss

    def eval_loss(state, batch, key):
        model, _ = nnx.merge(graphdef, state)
        weight = batch.get("weight")
        count = jnp.sum(weight) if weight is not None else jnp.float32(batch["theta"].shape[0])
        return flow_matching_loss(model, batch["theta"], batch["x"], key, weight), count

    if mesh is None:
        return StepFunctions(graphdef, jax.jit(train_step, donate_argnums=0), jax.jit(eval_loss)), state
    state_shardings = jax.tree.map(lambda leaf: leaf.sharding, state)
    scalar = NamedSharding(mesh, P())
    jitted = jax.jit(train_step, donate_argnums=0, out_shardings=(state_shardings, scalar))
    return StepFunctions(graphdef, jitted, jax.jit(eval_loss, out_shardings=scalar)), state


@dataclasses.dataclass
class TrainResult:
    """What a training loop measured. Times in seconds."""

    state: Any
    losses: np.ndarray  # (steps,) float32, train loss of every step
    val_loss: float | None
    compile_s: float
    median_step_s: float
    samples_per_s: float
    steps: int


def train(functions: StepFunctions, state: Any, batches: Iterator[dict], *, steps: int,
          key: jax.Array, mesh: Mesh | None, batch_size: int, log_every: int = 100,
          val_batches: list[dict] | None = None, progress: bool = True,
          start_step: int = 0, on_step: Callable[[int, Any], None] | None = None) -> TrainResult:
    """Run ``steps`` train steps under ``mesh_context(mesh)``.

    Step time is measured over windows of ``log_every`` steps (one device sync per
    window, not per step); ``median_step_s`` is the median over windows. The
    first step's compile is timed separately (``compile_s``). ``on_step(step, state)``
    runs after every step; when it returns True (e.g. preemption) the loop ends at
    that step boundary, without validation, and ``TrainResult.steps`` counts the
    steps done.
    """
    with mesh_context(mesh):
        first = next(batches)
        start = time.perf_counter()
        compiled = functions.train_step.lower(state, first, key).compile()
        compile_s = time.perf_counter() - start
        losses, windows = [], []
        bar = tqdm(total=steps, initial=0, disable=not progress, desc="train", unit="step",
                   dynamic_ncols=True, leave=False)
        batch, window_start, window_steps, stop = first, time.perf_counter(), 0, False
        for i in range(steps):
            if i:
                batch = next(batches)
            state, loss = compiled(state, batch, key)
            losses.append(loss)
            if on_step is not None:  # e.g. a periodic checkpoint; it sees the global step number
                stop = bool(on_step(start_step + i + 1, state))
            window_steps += 1
            if window_steps == log_every or i == steps - 1 or stop:
                window_loss = float(jnp.mean(jnp.stack(losses[-window_steps:])))
                if not np.isfinite(window_loss):
                    raise FloatingPointError(
                        f"training diverged: mean loss {window_loss} over steps {start_step + i + 2 - window_steps}"
                        f"..{start_step + i + 1}; lower train.learning_rate or check the data")
                elapsed = time.perf_counter() - window_start
                windows.append(elapsed / window_steps)
                bar.update(window_steps)
                bar.set_postfix(step=start_step + i + 1, loss=f"{window_loss:.4f}",
                                samples_s=f"{batch_size * window_steps / elapsed:.0f}")
                window_start, window_steps = time.perf_counter(), 0
            if stop:
                steps = i + 1
                break
        bar.close()
        val_loss = None
        if val_batches and not stop:
            val_loss = validation_loss(functions, state, val_batches, key)
    # The first window holds the warm-up of the first dispatches; prefer the rest when there are any.
    steady = windows[1:] if len(windows) > 2 else windows
    median = float(np.median(steady))
    return TrainResult(state=state, losses=np.asarray(jnp.stack(losses)), val_loss=val_loss,
                       compile_s=compile_s, median_step_s=median,
                       samples_per_s=batch_size / median if median > 0 else float("nan"),
                       steps=steps)


def validation_loss(functions: StepFunctions, state: Any, val_batches: list[dict], key: jax.Array) -> float:
    """Mean flow-matching loss over every held-out pair (padding rows weigh 0)."""
    val_key = jax.random.fold_in(key, 0x7FFFFFFF)  # a stream the train steps never reach
    parts = [functions.eval_loss(state, b, val_key) for b in val_batches]
    total, count = sum(float(m) * float(c) for m, c in parts), sum(float(c) for _, c in parts)
    return total / count
