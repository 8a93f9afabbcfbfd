"""Preemption as cluster users meet it: a signal, a checkpoint at the next step boundary, a requeue.

SLURM ends a job at its time limit or on preemption with SIGTERM (or a signal chosen with ``--signal``, e.g.
SIGUSR1, some seconds before), then SIGKILL. While a run is inside ``PreemptionWatch``, SIGTERM, SIGUSR1 and SIGUSR2
(submitit's choice) ask it to stop: in the training loop at the next step boundary or between the batches of a
validation, after a checkpoint; anywhere else at the next step of the run (``check``: between the setup steps,
between the observations of the evaluation; there is nothing new to save: before training nothing was trained, after
it the final checkpoint is written). Before training a setup step is waited for seconds at most (``stop_watchdog``).
The run then records ``status: preempted`` with the step, and the process exits with ``EXIT_PREEMPTED``;
``train.resume=auto`` continues from the checkpoint. Ctrl-C (SIGINT) stops the same way, as ``status: interrupted``;
a second Ctrl-C stops at once. ``distributed=local``'s processes get any signal as SIGTERM from their parent; they
word the stop by the signal the parent received (``harness.parent_signal``): its Ctrl-C is "interrupted".

The handler only records the signal; it never raises into whatever code runs (an exception raised there can land in a
C++ callback of JAX's, where it is lost or crashes the process); only a second Ctrl-C raises ``KeyboardInterrupt``.

Across processes every process must stop at the same step, or their collective checkpoint cannot complete: there
JAX's preemption service (started by ``jax.distributed.initialize``, it takes over SIGTERM) agrees on the step
(``multihost_utils.reached_preemption_sync_point``), and SIGUSR1/SIGUSR2 are passed on to it as SIGTERM.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import signal
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from gensbi_sharding.harness.config import TrainConfig
from gensbi_sharding.harness.console import stop_level
from gensbi_sharding.harness.interrupt_hold import defer_interrupt, handler_lines, hold_interrupt, say
from gensbi_sharding.harness.parent_signal import stop_signal
from gensbi_sharding.harness.signal_hold import PREEMPT_SIGNALS, take_held

__all__ = ["EXIT_PREEMPTED", "EXIT_INTERRUPTED", "PREEMPT_SIGNALS", "Preempted", "PreemptionWatch", "train_with_checkpoints"]

log = logging.getLogger("gensbi_sharding")

#: Exit status of a preempted run: sysexits' EX_TEMPFAIL ("temporary failure, try again"), so a scheduler or wrapper
#: script can tell "requeue me" from a failure (1).
EXIT_PREEMPTED = 75
#: Exit status of a run stopped by Ctrl-C: 128 + SIGINT, as a shell reports a process Ctrl-C ended.
EXIT_INTERRUPTED = 130


class Preempted(Exception):
    """The run stopped for a preemption signal.

    Attributes
    ----------
    step : int or None
        The step the run's newest checkpoint holds (None: stopped before training).
    signum : int or None
        The signal received (None where JAX's preemption service received it).
    """

    def __init__(self, signum: int | None, step: int | None = None, checkpoint: Any = None, after_training=False):
        signum = stop_signal(signum)  # a distributed=local parent's Ctrl-C is one too: "interrupted"
        self.signum, self.step = signum, step
        self.interrupted = signum == signal.SIGINT  # Ctrl-C: the run ends as "interrupted"
        name = "Ctrl-C (SIGINT)" if self.interrupted else signal.Signals(signum).name if signum else "a preemption notice"
        where = (f"after training (step {step}), before the evaluation finished" if after_training else
                 f"at step {step}" if step is not None else "before training (nothing trained: no checkpoint to save)")
        saved = f"; checkpoint {checkpoint}" if checkpoint else ""
        super().__init__(f"{'interrupted' if self.interrupted else 'preempted'} by {name} {where}{saved}")


class PreemptionWatch:
    """Catch preemption signals and Ctrl-C while a run lasts (a context manager; main thread only).

    A signal is only recorded (one held before, ``signal_hold``, too): inside ``at_step_boundaries()``
    ``should_stop(step)`` tells the loop when to stop; outside, ``check()`` raises ``Preempted`` at the run's next
    step. A second Ctrl-C raises ``KeyboardInterrupt`` at once. On exit the handlers that were there before come
    back; ``chain`` passes the signal on to them (under submitit that requeues the job).
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self._interrupts = 0  # Ctrl-C presses: the second stops at once
        self._deferred = False
        self._previous: dict[int, Any] = {}
        self._checks = 0  # stop checks so far: the sequence every process runs alike
        self._trained: tuple[int, Any] | None = None  # (step, checkpoint) once training is over
        self.stop_lock, self.settled, self.watchdog = threading.Lock(), False, None  # settle(); a StopWatchdog

    def __enter__(self) -> PreemptionWatch:
        if threading.current_thread() is threading.main_thread():
            for signum in (*PREEMPT_SIGNALS, signal.SIGINT):
                self._previous[signum] = signal.signal(signum, self._handle)
            for signum in take_held():  # came before the watch (signal_hold): the run answers it at its first step
                self._handle(signum, None)
        return self

    def __exit__(self, *exc) -> None:
        if self.watchdog is not None:  # a forced stop under way still ends the process
            self.watchdog.close()
        for signum, handler in self._previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)  # None: not set from Python
        self._previous.clear()

    @contextlib.contextmanager
    def at_step_boundaries(self) -> Iterator[None]:
        """Inside: a signal only marks the run; ``should_stop`` ends it at a step boundary (nestable)."""
        outer, self._deferred = self._deferred, True
        try:
            yield
        finally:
            self._deferred = outer

    def should_stop(self, step: int) -> bool:
        """Whether to checkpoint and stop after ``step``: every process gets the same answer."""
        return self.stop_requested()

    def stop_requested(self) -> bool:
        """Whether to stop here (a step boundary, or between validation batches), alike on every process.

        One process: whether a signal came. Several: JAX's preemption sync point, asked with the count of checks so
        far (every process makes the same checks in the same order, so the count is a step id they share and it
        grows by one per check, as the sync point requires); all processes get True at the same check.
        """
        import jax

        self._checks += 1
        if jax.distributed.is_initialized() and jax.process_count() > 1:
            from jax.experimental import multihost_utils

            return multihost_utils.reached_preemption_sync_point(self._checks)
        return self.signum is not None

    def check(self) -> None:
        """A safe point outside the training loop: stop here if a signal came.

        Raises
        ------
        Preempted
            If a signal was received (naming the final checkpoint once training is done).
        """
        if self.signum is not None and not self._deferred:
            self.settle()
            raise Preempted(self.signum, *self._trained, after_training=True) if self._trained else Preempted(self.signum)

    def training_done(self, step: int, checkpoint: Any) -> None:
        """Training is over and saved at ``step``: a signal from now on stops the run at once, naming it."""
        self.settle()
        self._trained = (step, checkpoint)

    def settle(self) -> None:
        """From here the run answers signals itself (``StopWatchdog`` stands down); a forced stop under way ends it."""
        with self.stop_lock:
            self.settled = True

    def chain(self, signum: int | None = None) -> None:
        """Call the handler that was installed before for the signal received (e.g. submitit's requeue)."""
        signum = signum or self.signum
        handler = self._previous.get(signum) if signum else None
        if callable(handler):
            handler(signum, None)

    def _handle(self, signum: int, frame: Any) -> None:
        import jax

        with handler_lines():  # a signal landing while this handler runs says its line after this one's
            if signum == signal.SIGINT:
                self._interrupts += 1
                if self._interrupts > 1 and not defer_interrupt(frame):  # Ctrl-C again: at once (after a save)
                    raise KeyboardInterrupt
            first, self.signum = self.signum is None, self.signum or signum
            if first:  # once, by process 0
                where = "at the next step boundary, after a checkpoint" if self._deferred else "at the next step of the run"
                say(0, log, min(stop_level(), logging.WARNING), "received %s: stopping %s%s" % (
                    "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name,
                    where, " (Ctrl-C again stops at once)" if signum == signal.SIGINT else ""))
        if signum != signal.SIGTERM and jax.distributed.is_initialized():
            signal.raise_signal(signal.SIGTERM)  # JAX's preemption service tells every process


def train_with_checkpoints(functions: Any, state: Any, batches: Any, *, ts: Any, cfg: Any, mesh: Any,
                           out: Any, config: dict, watch: PreemptionWatch, val_batches: list,
                           progress: bool, statistics: dict | None = None) -> tuple[Any, bool]:
    """The training phase of a run: ``train.train`` with its checkpoint cadence and preemption.

    Saves every ``train.checkpoint_every`` steps and at the end (a non-finite state is never saved:
    ``CheckpointWriter.save``), each checkpoint with the early-stopping state (``state.checkpoint_tree``; written after
    the step's validation, the final one before the best weights are put back; only a stop before or inside that
    validation saves without it, and a run resumed there runs it first), so a resumed run ends as an uninterrupted one:
    same stop step, best step, weights and validation history. It stops at the first step boundary after a preemption
    signal, or between the batches of a validation under way (then the step it followed), saving there. A run resumed by
    ``train.resume=auto`` whose checkpoint already holds ``train.steps``, or whose early stopping had ended training,
    trains nothing and goes on to evaluation (with the best weights put back). Afterwards the watch knows training is
    over (``training_done``): a signal during evaluation stops the run at once, naming the final checkpoint.
    ``statistics``, the data's z-score statistics, are saved in each checkpoint's info (``NORMALIZATION``).

    Returns
    -------
    (TrainResult, bool)
        The result, and whether a preemption stopped the run (before the last step, in
        the last validation, or during the last save: evaluation is then skipped).

    Raises
    ------
    FloatingPointError
        If training diverged; the message names the last finite checkpoint to resume from.
    """
    import jax

    from gensbi_sharding import checkpoint, mesh_context
    from gensbi_sharding.harness import train, validation
    from gensbi_sharding.harness.held_out import DATA_SHARDS
    from gensbi_sharding.harness.simulation_data import NORMALIZATION
    from gensbi_sharding.harness.state import EARLY_STOPPING, checkpoint_tree
    from gensbi_sharding.harness.step_timer import StepTimer

    resumed = ts.early_stopping  # left as restored (run.py counts its validations): a copy is continued
    stopper = (validation.EarlyStopping(patience=cfg.train.patience) if resumed is None else
               dataclasses.replace(resumed, patience=cfg.train.patience, history=list(resumed.history)))
    start = ts.start_step
    # The checkpoint of this step may have been saved before its validation (a stop before or inside it).
    validation.validate_pending(stopper, functions, state, val_batches, ts.key, start, val_every=cfg.train.val_every,
                                last_step=cfg.train.steps, draws=cfg.train.val_draws, mesh=mesh)
    if start >= cfg.train.steps or stopper.exhausted:  # an earlier attempt finished training
        watch.training_done(start, out / checkpoint.CHECKPOINT_SUBDIR / str(start))
        if stopper.history:
            state, val_loss = stopper.with_best(functions, state), stopper.best_loss
        else:  # a checkpoint without validations (or saved before early stopping was checkpointed)
            with mesh_context(mesh):
                val_loss = (validation.validation_loss(functions, state, val_batches, ts.key, draws=cfg.train.val_draws)
                            if val_batches else None)
        # A signal marked since the caller deferred them (its log line, the pending validation) stops the run here.
        return train.TrainResult(state=state, losses=np.zeros(0, np.float32), val_loss=val_loss, compile_s=0.0,
                                 median_step_s=float("nan"), samples_per_s=float("nan"), steps=0,
                                 best_step=stopper.best_step, stopped_early=stopper.exhausted and start < cfg.train.steps,
                                 val_history=stopper.history), watch.signum is not None
    writer = checkpoint.CheckpointWriter(out / checkpoint.CHECKPOINT_SUBDIR, every=cfg.train.checkpoint_every,
                                         keep=cfg.train.keep, config=config)
    timer = StepTimer()  # a save is not step time
    shards = cfg.data.shards or jax.process_count()  # effective: a resumed run compares it (held_out.py)

    def save(step: int, current: Any) -> None:  # the early-stopping state too: state.checkpoint_tree
        best = stopper.best_weights if stopper.best_weights is not None else functions.weights(current)
        with timer.paused(current), hold_interrupt():  # a second Ctrl-C: once the checkpoint is written
            writer.save(step, checkpoint_tree(current, best), ts.key,
                        info={EARLY_STOPPING: stopper.scalars(), DATA_SHARDS: shards, NORMALIZATION: statistics})

    stopped = []  # where a preemption stopped the loop: a step boundary or inside a validation

    def on_step(step: int, current: Any) -> bool:
        watch.settle()  # a step is trained: a signal now stops at a step boundary, after a checkpoint
        validates = val_batches and validation.validates_at(step, val_every=cfg.train.val_every,
                                                            last_step=cfg.train.steps)
        if writer.due(step) and not validates:  # else on_validated saves it, with its validation
            save(step, current)
        if watch.should_stop(step):
            save(step, current)
            stopped.append(step)
            return True
        return False

    def on_validated(step: int, current: Any) -> None:
        # The last step too, before the best weights are put back, with its validation (was: a due last step
        # was saved before it, so the resumed run logged an earlier best step than metrics.json).
        if writer.due(step) or step == cfg.train.steps or stopper.exhausted:
            save(step, current)

    def stop_requested() -> bool:  # between validation batches; the loop then saves that step below
        if watch.stop_requested():
            stopped.append("validation")
            return True
        return False

    try:
        with watch.at_step_boundaries():  # the last save too: a signal never cuts a checkpoint short
            result = train.train(functions, state, batches, steps=cfg.train.steps - ts.start_step, key=ts.key,
                                 mesh=mesh, batch_size=cfg.data.batch_size, log_every=cfg.train.log_every,
                                 val_batches=val_batches, progress=progress, start_step=ts.start_step,
                                 on_step=on_step, val_every=cfg.train.val_every, patience=cfg.train.patience,
                                 val_draws=cfg.train.val_draws, stop_requested=stop_requested,
                                 early_stopping=stopper, timer=timer, on_validated=on_validated)
            save(ts.start_step + result.steps, result.state)
    except FloatingPointError as err:
        # The value that diverged and one to try (was unnamed); after 1e30 the default, not 1e29.
        latest, lr = writer.latest(), cfg.train.learning_rate
        raise FloatingPointError(f"{err} (this run: train.learning_rate={lr:g}; e.g. train.learning_rate="
                                 f"{min(lr / 10, TrainConfig.learning_rate):g}); " + (
                                     f"resume from the last finite checkpoint with train.resume={latest} and a "
                                     "lower train.learning_rate" if latest else "no finite checkpoint was saved "
                                     "before it (train.checkpoint_every=N keeps some)")) from None
    finally:
        with hold_interrupt():  # its commit too (inside Orbax's wait, a KeyboardInterrupt printed a traceback)
            writer.close()
    final = ts.start_step + result.steps
    watch.training_done(final, out / checkpoint.CHECKPOINT_SUBDIR / str(final))
    # A signal at the last step, in its validation or during the last save stops the run too: evaluation can take
    # minutes, SLURM's SIGKILL follows its SIGTERM within seconds (one process only: else the sync point decides).
    return result, bool(stopped) or (watch.signum is not None and jax.process_count() == 1)

