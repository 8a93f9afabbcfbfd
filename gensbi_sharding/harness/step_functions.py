"""The jitted step over a split NNX state: the optimiser and the step functions ``harness.train.train`` runs.

``make_optimizer`` builds AdamW under the run's learning-rate schedule; ``make_step_functions`` splits
``(model, optimizer[, ema])`` once and gets the jitted train and loss programs for its placements
(``step_programs.jitted_steps``), so a sweep's jobs of the same shapes share them. Split from ``harness.train``
(at its 300-line cap), which re-exports both, so ``harness.train.make_step_functions`` is the same function.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import optax
from flax import nnx
from jax.sharding import Mesh

from gensbi_sharding.harness.schedule import learning_rate_schedule
from gensbi_sharding.harness.step_programs import jitted_steps, say_again, types_of

__all__ = ["make_optimizer", "StepFunctions", "make_step_functions"]


def make_optimizer(*, learning_rate: float, weight_decay: float, steps: int, schedule: str = "cosine",
                   warmup_steps: int = 0, counted: bool = False) -> optax.GradientTransformation:
    """AdamW under a linear warm-up to ``learning_rate``, then cosine decay to 0 at ``steps`` (or constant);
    ``counted``: a state that counts steps whatever the schedule (``learning_rate_schedule``). The same settings
    give the same (stateless) object, so two runs' optimizers, and their split graphs, compare equal: the key under
    which ``make_step_functions`` shares a jitted step (settings that cannot be hashed, an array: a new object).

    Raises
    ------
    ValueError
        For an unknown ``schedule`` or a warm-up not shorter than ``steps``.
    """
    settings = dict(learning_rate=learning_rate, weight_decay=weight_decay, steps=steps, schedule=schedule,
                    warmup_steps=warmup_steps, counted=counted)
    try:
        hash(tuple(settings.values()))
    except TypeError:  # an array setting, which optax takes: an optimizer of its own
        return _adamw.__wrapped__(**settings)
    return _adamw(**settings)


@functools.lru_cache(maxsize=32, typed=True)
def _adamw(*, learning_rate: Any, weight_decay: Any, steps: int, schedule: str, warmup_steps: int,
           counted: bool) -> optax.GradientTransformation:
    return optax.adamw(learning_rate_schedule(learning_rate=learning_rate, steps=steps, schedule=schedule,
                                              warmup_steps=warmup_steps, counted=counted), weight_decay=weight_decay)


@dataclasses.dataclass
class StepFunctions:
    """The jitted train and loss functions over the split state ``(model, optimizer[, ema])``.

    ``eval_loss`` scores the weights that are sampled: the EMA when there is one.
    ``weights(state)`` is that part of the state (to keep a copy of the best);
    ``with_weights(state, weights)`` puts such a copy back. ``train_arrays`` is ``train_step`` over the state's
    arrays (``arrays(state)``), which ``train`` runs: no ``nnx.Variable`` is flattened or rebuilt per step;
    ``variables(arrays)`` makes them the split state again.
    """

    graphdef: Any
    train_step: Callable[[Any, dict, jax.Array], tuple[Any, jax.Array]]
    eval_loss: Callable[..., tuple[jax.Array, jax.Array]]  # (state, batch, key) -> (mean loss, rows counted)
    has_ema: bool = False
    train_arrays: Callable[[dict, dict, jax.Array], tuple[dict, jax.Array]] | None = None
    state_def: Any = None  # the split state's tree structure, Variables included

    @staticmethod
    def arrays(state: Any) -> Any:
        """The split state's arrays, nested as its variables (``nnx.to_pure_dict``); arrays as they are."""
        return nnx.to_pure_dict(state) if isinstance(state, nnx.State) else state

    def variables(self, state: Any) -> Any:
        """The split ``nnx.State`` of ``state``'s arrays (which may hold variables: the same leaves, in one order)."""
        return jax.tree.unflatten(self.state_def, jax.tree.leaves(state))

    def weights(self, state: Any) -> Any:
        return state[2] if self.has_ema else state[0]

    def with_weights(self, state: Any, weights: Any) -> Any:
        state = jax.tree.map(lambda leaf: leaf, state)  # a new container; the leaves are shared
        state[2 if self.has_ema else 0] = weights
        return state


def make_step_functions(model: nnx.Module, optimizer: nnx.Optimizer, mesh: Mesh | None,
                        ema: Any = None, warn_again: bool = True) -> tuple[StepFunctions, Any]:
    """Split ``(model, optimizer[, ema])`` and jit their step, keeping every placement fixed.

    Returns new step functions and the split state. Their jitted functions are those of an earlier call with an equal
    split graph (the modules and their settings, of the same types: ``0.5`` and ``np.float32(0.5)`` trace apart; the
    optimizer: ``make_optimizer``'s), mesh and state placements (``step_programs.jitted_steps``, the last 8 kept),
    so a run of the same shapes in this process (a sweep's next job) reuses the programs JAX traced, lowered and
    compiled for them (JAX keys them on the arguments' shapes, dtypes and shardings too), and warns again what their
    tracing warned; a graph that cannot be hashed gets a pair of its own. A function the step calls, replaced in this
    process later (a monkeypatched method), is traced again only after ``jax.clear_caches()``. ``warn_again=False``:
    for a caller that runs no step, only merges the state.
    """
    nodes = (model, optimizer) if ema is None else (model, optimizer, ema)
    graphdef, state = nnx.split(nodes)
    placed = mesh is not None
    shardings, treedef = jax.tree.flatten(jax.tree.map(lambda leaf: leaf.sharding, state)) if placed else ([], None)
    key = (graphdef, mesh, tuple(shardings), treedef)
    try:
        hash(key)
    except TypeError:  # a static attribute that cannot be hashed: no key, a pair of its own (its types not read)
        train_step, eval_loss, said, train_arrays = jitted_steps.__wrapped__(*key)
    else:
        train_step, eval_loss, said, train_arrays = jitted_steps(*key, types_of(graphdef))
    if warn_again:
        say_again(said)  # what tracing them warned, said in this run too (none yet for new programs)
    functions = StepFunctions(graphdef, train_step, eval_loss, ema is not None, train_arrays, jax.tree.structure(state))
    return functions, state
