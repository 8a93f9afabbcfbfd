"""Conditional flow matching for the posterior p(theta | x): loss, optimiser, jitted step, loop.

Flow matching with the straight (rectified) path (Lipman et al. 2023, "Flow
Matching for Generative Modeling"; Liu et al. 2023, "Flow Straight and Fast"):
theta_t = (1 - t) z + t theta with z ~ N(0, I), and the network regresses the
velocity theta - z given (theta_t, x, t). Sampling integrates from t=0 to t=1.

The recipe (``conf/train``): AdamW under a warm-up + cosine (or constant) learning
rate, an exponential moving average of the weights (``harness.ema``) that is
validated and sampled, and early stopping on the validation loss with a fixed key
(the same t and noise draws at every validation, so two validations differ only by
the weights), which restores the best weights at the end.

The step is a pure function of the split NNX state's arrays (graph traversal happens
once, not per step, and no ``nnx.Variable`` is flattened or rebuilt per step), jitted
with the state's own shardings as input and output shardings and the state buffers donated. Everything it needs but
the batch (parameters, optimizer state with its step counter, EMA, the base RNG key) is placed
before the loop, so nothing but the new batch crosses to the devices per step. The optimiser and the step functions
are ``harness.step_functions``'s (re-exported here); this module runs the loop.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh
from tqdm.auto import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from gensbi_sharding import compiled_report, mesh_context
from gensbi_sharding.harness.progress import progress_bar, window_rate
from gensbi_sharding.harness.schedule import SCHEDULES
from gensbi_sharding.harness.step_check import check_step_keeps_state
from gensbi_sharding.harness.train_speed import steady_step_s
from gensbi_sharding.harness.step_functions import StepFunctions, make_optimizer, make_step_functions
from gensbi_sharding.harness.step_programs import flow_matching_loss
from gensbi_sharding.harness.step_timer import StepTimer
from gensbi_sharding.harness.validation import EarlyStopping, record_validation, validates_at, validation_loss

__all__ = ["flow_matching_loss", "make_optimizer", "StepFunctions", "make_step_functions", "train",
           "TrainResult", "SCHEDULES"]


@dataclasses.dataclass
class TrainResult:
    """What a training loop measured. Times in seconds."""

    state: Any  # the final state, its sampled weights restored to the best validation when validated
    losses: np.ndarray  # (steps,) float32, train loss of every step run
    val_loss: float | None  # validation loss of the returned weights
    compile_s: float
    median_step_s: float
    samples_per_s: float
    steps: int  # steps run (fewer than asked when stopped early)
    best_step: int | None = None  # global step whose weights were returned (None: not validated)
    stopped_early: bool = False
    val_history: list[tuple[int, float]] = dataclasses.field(default_factory=list)
    speed_includes_warmup: bool = False  # one step run: its time holds the first dispatch's warm-up (train_speed)
    # XLA's compiled step per device (compiled_report's total_bytes: arguments + outputs + temporaries - donated), the
    # dry run's step_memory_bytes_per_device; None where the backend gives no memory analysis
    step_memory_bytes_per_device: int | None = None
    # The same step's collectives as the dry run counts them (compiled_report: {op: {"count", "bytes"}}, the bytes one
    # device sends per step) and their sum, the dry run's collective_bytes_per_step; None when nothing was compiled
    collectives: dict[str, dict[str, int]] | None = None
    collective_bytes_per_step: int | None = None


def host_values(arrays: list) -> np.ndarray:
    """Device scalars (the per-step losses) as one host array, copied, not stacked on the device:
    ``jnp.stack`` of a whole run's losses compiles one program of that many operands, which took minutes
    at the sbibm preset's 20,000 steps (9.5 s at 5,000), at every run's end and after a Ctrl-C or a
    preemption, which it held that long."""
    return np.stack(jax.device_get(arrays)) if arrays else np.zeros(0, np.float32)


def train(functions: StepFunctions, state: Any, batches: Iterator[dict], *, steps: int,
          key: jax.Array, mesh: Mesh | None, batch_size: int, log_every: int = 100,
          val_batches: list[dict] | None = None, progress: bool = True,
          start_step: int = 0, on_step: Callable[[int, Any], bool | None] | None = None,
          val_every: int = 0, patience: int = 0, val_draws: int = 1,
          stop_requested: Callable[[], bool] | None = None,
          early_stopping: EarlyStopping | None = None, timer: StepTimer | None = None,
          on_validated: Callable[[int, Any], None] | None = None,
          window_head: Sequence[float] = (), losses_so_far: list | None = None) -> TrainResult:
    """Run up to ``steps`` train steps under ``mesh_context(mesh)``, validating as it goes.

    Every ``val_every`` steps (and after the last) the sampled weights (the EMA when
    there is one) are scored on ``val_batches``, each pair with the same ``val_draws``
    fixed draws of (t, z) at every validation (more draws: less noise). The best are
    copied; after ``patience`` validations without a new best the loop stops, and at
    the end the best weights are put back into the returned state. ``val_every=0``
    validates only once, at the end. ``on_step(step, arrays)`` runs after every step, given
    the state as the step's arrays (``functions.variables(arrays)``: the split state), so no
    step rebuilds its variables; when it returns True (e.g. preemption) the loop ends at that step boundary, without
    validation, and ``TrainResult.steps`` counts the steps done. ``stop_requested()`` is
    asked between validation batches: True abandons that validation and ends the loop at
    the step it followed, so a preemption never waits for a long validation. Either way
    the returned state is that step's (the best weights are put back only when the loop
    was not stopped so). ``on_validated(step, arrays)`` runs after each completed validation,
    before the best weights are put back (a checkpoint saved there holds the validation in
    its early-stopping state). ``early_stopping``: the state to continue (a resumed run's, with
    its best so far and its history; updated in place); None: a fresh one with
    ``patience``. Step time is measured
    over windows of ``log_every`` steps counted from step 0 (one device sync per window,
    not per step; a resumed run's windows are the uninterrupted run's),
    training steps only: validations, and whatever ``on_step`` runs inside
    ``timer.paused(state)`` (checkpoint saves), are left out, after the queued steps are
    waited for (``harness.step_timer``); ``median_step_s``: ``train_speed.steady_step_s`` (the warm-up left out).
    ``timer``: the one ``on_step`` pauses (None: a new one). The first step's compile is
    timed separately (``compile_s``). ``window_head``: a resumed run's earlier losses of the
    steps of ``start_step``'s window (from its joined history), counted in the first window's
    loss shown, so the progress bar shows the uninterrupted run's (its steps are not timed).
    ``losses_so_far``: a list the loop appends each step's loss to (a device scalar, not copied: no sync per step),
    for a caller that reads them as it goes (a checkpoint save writes the curve so far); None: a list of its own.

    Raises
    ------
    StateDriftError
        Before the first step, when the step returns some state variable with another
        dtype or shape than it is given (it could not be called again), naming them.
    FloatingPointError
        When a window's mean train loss or a validation loss is not finite (a
        diverging run stops there), naming the steps.
    KeyboardInterrupt
        On Ctrl-C, carrying ``losses`` (this call's train losses so far) and ``val_history``
        (its validations), so the caller can keep the curve of the steps run.
    """
    stopper = early_stopping if early_stopping is not None else EarlyStopping(patience=patience)
    history = stopper.history

    def validate(state, step):
        loss = validation_loss(functions, state, val_batches, key, draws=val_draws, stop_requested=stop_requested)
        if loss is None:  # stopped between its batches (preemption): end the loop at this step
            return False, True
        return record_validation(stopper, functions, state, step, loss), False

    # Console lines (a validation, a signal's warning) go above the progress bar, not glued to its line; in a file
    # the bar writes whole lines (progress_bar), so a line after it starts its own there too.
    with mesh_context(mesh), logging_redirect_tqdm(tqdm_class=tqdm):
        first = next(batches)
        start = time.perf_counter()
        state = functions.arrays(state)  # the loop steps the arrays: no variable is flattened or rebuilt per step
        lowered = functions.train_arrays.lower(state, first, key)
        check_step_keeps_state(state, lowered.out_info[0])  # else the second step fails on XLA's types
        compiled = lowered.compile()
        compile_s = time.perf_counter() - start
        # The program the loop runs, read, not compiled again: a sweep ranks its jobs by it as a dry run's
        report = compiled_report(compiled)  # one read of the program for its memory and its collectives alike
        step_memory = (report["memory"] or {}).get("total_bytes")
        losses, windows = (losses_so_far if losses_so_far is not None else []), []
        bar = progress_bar(total=steps, initial=0, disable=not progress, desc="train", unit="step",
                           dynamic_ncols=True, leave=False)
        timer = timer if timer is not None else StepTimer()
        batch, window_steps, stop, halted = first, 0, False, False
        head, first_step_s = [float(v) for v in window_head], None
        timer.start_window()
        first_validation = len(history)
        try:
            for i in range(steps):
                step, last = start_step + i + 1, i == steps - 1
                if i:
                    batch = next(batches)
                state, loss = compiled(state, batch, key)
                losses.append(loss)
                if not i and steps > 1 and (start_step + steps - 1) // log_every == start_step // log_every:
                    jax.block_until_ready(loss)  # one window only: timed from its second step on (train_speed)
                    first_step_s = timer.window_s()
                if on_step is not None:  # checkpoints, preemption; it sees the global step number
                    halted = bool(on_step(step, state))
                window_steps += 1
                if val_batches and not halted and validates_at(step, val_every=val_every, last_step=start_step + steps):
                    with timer.paused(state):  # validation is not step time; the queued steps are
                        stop, halted = validate(functions.variables(state), step)  # eval_loss's one program
                    if on_validated is not None and not halted:
                        on_validated(step, state)
                if step % log_every == 0 or last or stop or halted:  # counted from step 0, resumed or not
                    # A resumed run's first window holds the earlier attempt's steps of it too (window_head): the
                    # loss shown is the uninterrupted run's, as the final train loss and losses.png are
                    window_loss = float(np.mean([*head, *host_values(losses[-window_steps:])]))
                    if not np.isfinite(window_loss):
                        raise FloatingPointError(
                            f"training diverged: mean loss {window_loss} over steps "
                            f"{step + 1 - window_steps - len(head)}..{step}; lower train.learning_rate or check the "
                            "data")
                    elapsed = timer.window_s()  # the loss read above waited for the window's steps
                    windows.append((elapsed, window_steps))
                    # Before the first validation there is no best: "inf" read as a diverged loss.
                    best = f"{stopper.best_loss:.4f}" if stopper.best_step is not None else "not yet"
                    bar.set_postfix(step=step, loss=f"{window_loss:.4f}", best_val=best,
                                    samples_s=window_rate(batch_size, windows, first_step_s), refresh=False)
                    bar.update(window_steps)  # then drawn: in a file, one line per window with its figures
                    bar.refresh()
                    window_steps, head = 0, []
                    timer.start_window()
                if stop or halted:
                    break
        except KeyboardInterrupt as interrupt:
            # Ctrl-C: the caller keeps the curve of the steps run (a resumed run joins it to its own).
            interrupt.losses = host_values(losses)
            interrupt.val_history = list(history[first_validation:])
            bar.close()  # else the stop's line continued the bar's ("...step=1600][ERROR] interrupted (Ctrl-C)")
            raise
        finally:  # before the error or the stop is logged: on a terminal the bar is cleared, not left under it
            bar.close()
        if not halted:
            state = stopper.with_best(functions, state, start_step + len(losses))
        state = functions.variables(state)
    median, warm = steady_step_s(windows, first_step_s)  # the warm-up of the first dispatches left out where it can
    return TrainResult(state=state, losses=host_values(losses),
                       val_loss=stopper.best_loss if history else None, compile_s=compile_s,
                       median_step_s=median, samples_per_s=batch_size / median if median > 0 else float("nan"),
                       steps=len(losses), speed_includes_warmup=warm, best_step=stopper.best_step,
                       stopped_early=stop and len(losses) < steps, val_history=history,
                       step_memory_bytes_per_device=step_memory, collectives=report["collectives"],
                       collective_bytes_per_step=report["collective_bytes"])
