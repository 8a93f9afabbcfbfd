"""A run's training phase with its checkpoint cadence and preemption: ``train_with_checkpoints``.

Saves every ``train.checkpoint_every`` steps and at the end, stops at the first step boundary after a preemption
signal (``preemption.PreemptionWatch``), saving there. Re-exported by ``harness.preemption``, where ``run`` reads it.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from gensbi_sharding.harness.config import TrainConfig
from gensbi_sharding.harness.console import EVERY_PROCESS
from gensbi_sharding.harness.interrupt_hold import hold_interrupt
from gensbi_sharding.harness.override_grammar import hydra_override
from gensbi_sharding.harness.python_words import in_python_words
from gensbi_sharding.harness.train_notes import patience_note

if TYPE_CHECKING:
    from gensbi_sharding.harness.preemption import PreemptionWatch
    from jax.sharding import Mesh

__all__ = ["train_with_checkpoints"]

log = logging.getLogger("gensbi_sharding")


def train_with_checkpoints(functions: Any, state: Any, batches: Any, *, ts: Any, cfg: Any, mesh: Mesh | None,
                           out: Any, config: dict, watch: PreemptionWatch, val_batches: list,
                           progress: bool, statistics: dict | None = None,
                           window_head: Any = (), announce: Any = None) -> tuple[Any, bool]:
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
    Before each checkpoint the writing process writes ``train_losses.npz``, the curve up to that step (one host copy
    of the steps since the last save), so a continued run keeps the losses of an attempt killed outright.
    ``window_head``: ``train.train``'s (the earlier attempt's losses in the resumed step's logging window).
    ``announce``: called with whether any step will run, and why not (``"early stopping"``, ``"train.steps"``), once
    that is known (after a resumed run's pending validation, which may end its early stopping), before training.

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
    from gensbi_sharding.harness import outputs
    from gensbi_sharding.harness.held_out import DATA_SHARDS
    from gensbi_sharding.harness.loss_history import joined_loss_history
    from gensbi_sharding.harness.run_folder import is_writer
    from gensbi_sharding.harness.resumed_draws import drawn_otherwise
    from gensbi_sharding.harness.schedule import COUNTS_STEPS
    from gensbi_sharding.harness.simulation_data import NORMALIZATION
    from gensbi_sharding.harness.state import EARLY_STOPPING, checkpoint_tree
    from gensbi_sharding.harness.step_timer import StepTimer

    resumed = ts.early_stopping  # left as restored (run.py counts its validations): a copy is continued
    stopper = (validation.EarlyStopping(patience=cfg.train.patience) if resumed is None else
               dataclasses.replace(resumed, patience=cfg.train.patience, history=list(resumed.history)))
    start = ts.start_step
    if resumed is not None and (afresh := drawn_otherwise(stopper, functions, state, val_batches, ts.key, start,
                                                          draws=cfg.train.val_draws, mesh=mesh)) is not None:
        # an earlier version's draws: its losses are not continued, its best weights are (run_steps reads both fields
        # after training: the history this attempt starts from, a validation set of its own in train_losses.npz)
        stopper, ts.val_afresh = afresh, True
        ts.early_stopping = dataclasses.replace(afresh, history=list(afresh.history))
    # The checkpoint of this step may have been saved before its validation (a stop before or inside it).
    validation.validate_pending(stopper, functions, state, val_batches, ts.key, start, val_every=cfg.train.val_every,
                                last_step=cfg.train.steps, draws=cfg.train.val_draws, mesh=mesh)
    done = "train.steps" if start >= cfg.train.steps else "early stopping" if stopper.exhausted else None
    with in_python_words(reword=False):  # run(cfg) from Python: its fixes as cfg's settings
        note = None if done else patience_note(patience=cfg.train.patience, val_every=cfg.train.val_every,
                                               steps=cfg.train.steps, start=start, since_best=stopper.since_best,
                                               validated=stopper.best_step is not None)
    if note is not None:  # let through by the checks (a preset's patience in a short run), so said here
        log.warning("%s", note, extra=EVERY_PROCESS)  # each process knows it: process 0 says it
    if announce is not None:  # the phase's header: was "steps 10200..20000" before "nothing trained (early stopping)"
        announce(done is None, done)
    if done:  # an earlier attempt finished training
        # The checkpoint restored, not one in this folder: a run resumed from another folder to be scored again saves
        # none, and a stop in its evaluation named "<this folder>/checkpoints/<step>", which does not exist.
        watch.training_done(start, ts.resumed_from or out / checkpoint.CHECKPOINT_SUBDIR / str(start))
        if stopper.history:
            state, val_loss = stopper.with_best(functions, state, start), stopper.best_loss
        else:  # a checkpoint without validations (or saved before early stopping was checkpointed)
            with mesh_context(mesh):
                val_loss = (validation.validation_loss(functions, state, val_batches, ts.key, draws=cfg.train.val_draws)
                            if val_batches else None)
        # A signal marked since the caller deferred them (its log line, the pending validation) stops the run here.
        return train.TrainResult(state=state, losses=np.zeros(0, np.float32), val_loss=val_loss, compile_s=0.0,
                                 median_step_s=float("nan"), samples_per_s=float("nan"), steps=0,
                                 best_step=stopper.best_step,
                                 stopped_early=stopper.exhausted and start < cfg.train.steps,
                                 val_history=stopper.history), watch.signum is not None
    writer = checkpoint.CheckpointWriter(out / checkpoint.CHECKPOINT_SUBDIR, every=cfg.train.checkpoint_every,
                                         keep=cfg.train.keep, config=config)
    timer = StepTimer()  # a save is not step time
    shards = cfg.data.shards or jax.process_count()  # effective: a resumed run compares it (held_out.py)
    so_far, copied = [], []  # this attempt's losses (device scalars, train.train appends), the host copies made

    def write_curve(step: int) -> None:
        # Before the checkpoint: a kill after it never leaves a checkpoint beyond the file's last step (a resume keeps
        # the file's steps <= its own, so a file ahead of the checkpoint, killed before the commit, is harmless).
        copied.append(train.host_values(so_far[sum(map(len, copied)):step - start]))  # the new steps only
        mine = stopper.history[len(ts.early_stopping.history) if ts.early_stopping else 0:]
        # Only this attempt's validations past the resume: the file's steps <= start_step stay the earlier file's
        # as they were, so run_steps' join at the end, which reads this file as the earlier one, is unchanged.
        curve = joined_loss_history(np.concatenate(copied), start_step=start, resume_dir=ts.resumed_from,
                                    val_points=[(s, v) for s, v in mine if s > start], val_afresh=ts.val_afresh)
        outputs.write_npz(out / "train_losses.npz", **curve.arrays())

    def save(step: int, current: Any) -> None:  # the early-stopping state too: state.checkpoint_tree
        best = stopper.best_weights if stopper.best_weights is not None else functions.weights(current)
        # The loop's arrays (on_step's) as the split state's variables: what a resume restores (typed optimizer state)
        best = functions.weights(functions.variables(functions.with_weights(current, best)))
        current = functions.variables(current)
        # A second Ctrl-C: once the checkpoint is written; the watchdog's stop of a hung step: never during a save.
        with timer.paused(current), hold_interrupt(), watch.stop_lock:
            if is_writer():  # the curve so far: a run killed outright (SIGKILL) keeps it (F4 of BREAK77)
                write_curve(step)
            writer.save(step, checkpoint_tree(current, best), ts.key,
                        info={EARLY_STOPPING: stopper.scalars(), DATA_SHARDS: shards, NORMALIZATION: statistics,
                              COUNTS_STEPS: ts.counts_steps})  # its optimizer state's form: a resume builds it alike

    stopped = []  # where a preemption stopped the loop: a step boundary or inside a validation

    def on_step(step: int, current: Any) -> bool:
        watch.settle(step)  # a step is trained: a signal now stops at a step boundary, after a checkpoint
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
        # The last step too, before the best weights are put back, with its validation (a due last step saved
        # before it would make the resumed run log an earlier best step than metrics.json).
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
                                 early_stopping=stopper, timer=timer, on_validated=on_validated,
                                 window_head=window_head, losses_so_far=so_far)
            save(ts.start_step + result.steps, result.state)
    except FloatingPointError as err:
        # The value that diverged and one to try; after 1e30 the default, not 1e29. A resumed run's checkpoint is
        # finite too (so no "no finite checkpoint was saved", nor checkpoint_every=N advised when set).
        latest, lr = writer.latest() or ts.resumed_from, cfg.train.learning_rate
        raise FloatingPointError(f"{err} (this run: train.learning_rate={lr:g}; e.g. train.learning_rate="
                                 f"{min(lr / 10, TrainConfig.learning_rate):g}); " + (
                                     "resume from the last finite checkpoint with "
                                     f"{hydra_override('train.resume', latest)} and a lower train.learning_rate"
                                     if latest else "no finite checkpoint to resume from: start afresh with a lower "
                                     "train.learning_rate" + " (train.checkpoint_every=N keeps some)" * (
                                         not cfg.train.checkpoint_every))) from None
    finally:
        with hold_interrupt(), watch.stop_lock:  # its commit too (inside Orbax's wait, a KeyboardInterrupt printed a
            writer.close()  # traceback), never cut short by the watchdog
    final = ts.start_step + result.steps
    watch.training_done(final, out / checkpoint.CHECKPOINT_SUBDIR / str(final))
    # A signal at the last step, in its validation or during the last save stops the run too: evaluation can take
    # minutes, SLURM's SIGKILL follows its SIGTERM within seconds (one process only: else the sync point decides).
    return result, bool(stopped) or (watch.signum is not None and jax.process_count() == 1)

