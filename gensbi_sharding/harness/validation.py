"""Validation during training: the held-out loss on fixed draws, and early stopping on it.

The loss of the sampled weights (the EMA when there is one) over every held-out pair, with
the same draws of (t, noise) at every validation, so two validations differ only by the
weights. ``EarlyStopping`` keeps the best weights and their history; a checkpoint carries
it (``EarlyStopping.scalars`` / ``resumed``), so a resumed run stops where an uninterrupted
one does.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from gensbi_sharding.harness.ema import new_buffers

if TYPE_CHECKING:  # train imports this module
    from gensbi_sharding.harness.train import StepFunctions
    from jax.sharding import Mesh

__all__ = ["EarlyStopping", "record_validation", "validate_pending", "held_out_indexed", "validates_at",
           "validation_loss"]

log = logging.getLogger("gensbi_sharding")

_VAL_STREAM = 0x7FFFFFFF  # folded into the base key: a stream the train steps never reach

#: How this version draws a validation's (t, z): from each held-out pair's own key (since session 68). Saved with the
#: early-stopping state, so a resume re-scores only a checkpoint without it (an earlier version's: resumed_draws).
DRAWS = "per_pair"


@dataclasses.dataclass
class EarlyStopping:
    """Stop after ``patience`` validations without a new best; remember the best weights.

    ``patience=0`` never stops (the best weights are still kept and restored). ``history``
    holds every validation ``(step, loss)``. ``scalars()`` and ``resumed`` carry it through
    a checkpoint (the best weights are saved beside it), so a resumed run stops where an
    uninterrupted one does.
    """

    patience: int = 0
    best_loss: float = math.inf
    best_step: int | None = None
    best_weights: Any = None
    since_best: int = 0
    history: list[tuple[int, float]] = dataclasses.field(default_factory=list)
    draws: str | None = DRAWS  # None: resumed from a checkpoint that does not say (resumed_draws checks it)

    def observe(self, step: int, loss: float, weights: Callable[[], Any]) -> bool:
        """Record the validation ``loss`` at ``step``; ``weights()`` copies them if best. True: stop."""
        self.history.append((step, loss))
        if loss < self.best_loss:
            self.best_loss, self.best_step, self.since_best = loss, step, 0
            self.best_weights = weights()
            return False
        self.since_best += 1
        return self.exhausted

    @property
    def exhausted(self) -> bool:
        """Whether ``patience`` validations passed without a new best: training is over."""
        return 0 < self.patience <= self.since_best

    def validated(self, step: int) -> bool:
        """Whether the validation of ``step`` is recorded (the last one in ``history``)."""
        return bool(self.history) and self.history[-1][0] == step

    def kept_best_step(self) -> int | None:
        """The best validation's step where its weights are kept (``with_best`` samples them); None before one."""
        return self.best_step if self.best_weights is not None else None

    def with_best(self, functions: StepFunctions, state: Any, step: int) -> Any:
        """``state``, of ``step``, with the best weights put back (as is when ``step`` is the best or none is kept).

        Decided by the state's step, not by the last validation: a checkpoint saved steps after its best validation
        (``train.checkpoint_every`` not a multiple of ``train.val_every``, a preempted run's newest) holds newer
        weights than the best.
        """
        if self.kept_best_step() in (None, step):
            return state
        return functions.with_weights(state, self.best_weights)

    def scalars(self) -> dict[str, Any]:
        """Everything but the best weights, JSON-serialisable (``best_loss`` None before a validation)."""
        return {"best_loss": self.best_loss if self.best_step is not None else None, "best_step": self.best_step,
                "since_best": self.since_best, "history": [[int(s), float(v)] for s, v in self.history],
                "draws": self.draws}

    @classmethod
    def resumed(cls, patience: int, scalars: dict[str, Any], best_weights: Any) -> EarlyStopping:
        """The state ``scalars()`` saved, with ``best_weights`` (ignored while ``best_step`` is None)."""
        best_step = scalars["best_step"]
        return cls(patience=patience, best_step=best_step, since_best=int(scalars["since_best"]),
                   best_loss=math.inf if best_step is None else float(scalars["best_loss"]),
                   best_weights=None if best_step is None else best_weights,
                   history=[(int(s), float(v)) for s, v in scalars["history"]], draws=scalars.get("draws"))


def record_validation(stopper: EarlyStopping, functions: StepFunctions, state: Any, step: int,
                      loss: float) -> bool:
    """``stopper.observe`` the validation ``loss`` of ``state``'s weights at ``step``; True: stop.

    Raises ``FloatingPointError`` when ``loss`` is not finite (the run diverged).
    """
    if not np.isfinite(loss):
        raise FloatingPointError(f"training diverged: validation loss {loss} at step {step}; "
                                 "lower train.learning_rate or check the data")
    copy = lambda: new_buffers(functions.weights(state))  # noqa: E731 (donated next step)
    return stopper.observe(step, loss, copy)


def validate_pending(stopper: EarlyStopping, functions: StepFunctions, state: Any, val_batches: list[dict],
                     key: jax.Array, step: int, *, val_every: int, last_step: int, draws: int,
                     mesh: Mesh | None) -> None:
    """Run a resumed run's validation of its first ``step`` if due and not in ``stopper`` yet, and log the result.

    A checkpoint is saved after its step's validation unless a stop came before or inside it; the
    resume line named the checkpoint's best step, so the one this validation leaves is logged too.
    """
    from gensbi_sharding import mesh_context

    if not (val_batches and step and not stopper.validated(step)
            and validates_at(step, val_every=val_every, last_step=last_step)):
        return
    with mesh_context(mesh):
        loss = validation_loss(functions, state, val_batches, key, draws=draws)
    record_validation(stopper, functions, state, step, loss)
    log.info("validation of step %d (its checkpoint was saved before it): %.4f; early stopping: best step %d, "
             "%d validation(s)", step, loss, stopper.best_step, len(stopper.history))


def validates_at(step: int, *, val_every: int, last_step: int) -> bool:
    """Whether the loop validates after ``step``: every ``val_every`` steps (0: never) and after ``last_step``."""
    return (val_every > 0 and step % val_every == 0) or step == last_step


def validation_loss(functions: StepFunctions, state: Any, val_batches: list[dict], key: jax.Array,
                    draws: int = 1, stop_requested: Callable[[], bool] | None = None) -> float | None:
    """Mean flow-matching loss over every held-out pair and ``draws`` fixed draws of (t, z).

    Padding rows weigh 0. The draws come from a stream of ``key`` the train steps never
    reach (the first is the stream's key itself), so every call with the same key scores
    different weights on the very same (t, z). Each pair draws its (t, z) from its own key, by
    its ``index`` (``held_out_indexed``), not by its row in a batch: the loss does not depend
    on ``data.batch_size``, and no two pairs share a draw. Batches are dispatched one ahead of the
    one read back, and ``stop_requested()`` is asked after each: True returns None at
    once (at most one batch still in flight), so a long validation can be cut short.
    """
    val_batches = held_out_indexed(val_batches)
    stream = jax.random.fold_in(key, _VAL_STREAM)
    # One key per draw as it is used: a list of them all (train.val_draws=100000000) took minutes and gigabytes
    # before the first batch, where no stop request is asked.
    keys = (stream if d == 0 else jax.random.fold_in(stream, d) for d in range(draws))
    total = count = 0.0
    pending = None
    for k in keys:
        for b in val_batches:
            current = functions.eval_loss(state, b, k)
            if pending is not None:  # read the previous batch while this one runs
                total, count = total + float(pending[0]) * float(pending[1]), count + float(pending[1])
                if stop_requested is not None and stop_requested():
                    return None
            pending = current
    total, count = total + float(pending[0]) * float(pending[1]), count + float(pending[1])
    return total / count


def held_out_indexed(val_batches: list[dict]) -> list[dict]:
    """``val_batches`` with each row's ``index`` among every held-out row: the key its (t, z) is drawn from.

    The pipeline's batches carry ``index`` (a pair's place in its shard's held-out pairs, after the shards before
    it; ``pipeline.build_pipeline``); other batches (a benchmark's own) are indexed by their rows' order over all
    batches. ``eval_loss`` draws row ``i``'s (t, z) from ``jax.random.fold_in(key, index[i])``: a batch draws only
    its own rows, a pair's draw is the same whichever batch holds it (whatever ``data.batch_size``, in either
    threefry mode), and no two batches share one.

    Parameters
    ----------
    val_batches : list of dict
        The held-out batches; a batch without ``theta`` (a test's stand-in) is passed on as it is.

    Returns
    -------
    list of dict
        The batches, indexed.
    """
    indexed, rows = [], 0
    for b in val_batches:
        if "theta" in b:
            n = int(b["theta"].shape[0])
            b = b if "index" in b else {**b, "index": np.arange(rows, rows + n, dtype=np.int32)}
            rows += n
        indexed.append(b)
    return indexed
