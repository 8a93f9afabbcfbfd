"""A preemption signal answered within seconds before training, wherever the run's main thread is.

Python runs a signal handler only between the main thread's bytecodes, and the run answers a signal only at
its next step (``PreemptionWatch.check``). A SIGTERM that came while the main thread was inside XLA (compiling,
initialising a large model) or a long setup step (simulating the data, building the model) waited for it to
end: minutes, where a scheduler's SIGKILL follows SIGTERM within seconds (SLURM's KillWait: 30 s). Then
``metrics.json`` still said nothing of the stop and the log ended mid-setup.

``StopWatchdog`` hears the signal at once through ``signal.set_wakeup_fd`` (written by Python's C-level
handler, even while the main thread is in C++). If the run has not answered it within ``GRACE_S`` and has not
begun training (nothing trained, so nothing to checkpoint and no save under way to cut short), it records the
stop as the run would (``status: preempted``, the command that continues it) and ends the process with
``EXIT_PREEMPTED``. In training the run answers at its next step boundary; a step that does not return (a hung
collective, a stuck device) was waited for forever: if no boundary comes within ``STEP_GRACE_S`` of the signal (or 3
times the longest step so far), it records the stop naming the newest complete checkpoint and ends the process, never
during a save (one under way is waited for up to ``SAVE_GRACE_S``; none is begun). One process only
(``distributed=none``): across processes JAX's preemption service decides, and ``distributed=local``'s parent bounds
its processes' stop.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gensbi_sharding.harness.folder_lock import remove_owner_notes
from gensbi_sharding.harness.preemption import EXIT_PREEMPTED, PREEMPT_SIGNALS, Preempted, PreemptionWatch

__all__ = ["GRACE_S", "STEP_GRACE_S", "SAVE_GRACE_S", "StopWatchdog", "end_preempted_run", "watch_setup"]

log = logging.getLogger("gensbi_sharding")

#: Set by launch.py for a lone run: the metrics its final line shows (``launch.counted_from_start``: the wall time from
#: the process's start), so a run stopped here says the same clock as one that ended in ``run``. Empty: the run's own.
final_metrics: list[Callable[[dict], dict]] = []

#: Seconds a run has to answer a preemption signal at a step of its own before the watchdog ends it: a third of
#: SLURM's default KillWait (30 s), so a step about to end (a small model's compile) still answers it itself.
GRACE_S = 10.0
#: Seconds after the signal a training step has to end (3 times the longest step so far where that is longer) before
#: the watchdog takes it for hung: within SLURM's default KillWait (30 s), so the stop is recorded before its SIGKILL.
STEP_GRACE_S = 20.0
#: Seconds the stop of a hung step waits more for a save under way (its lock): a save is never cut short before that.
SAVE_GRACE_S = 60.0


class StopWatchdog:
    """Until ``close()``: a preemption signal the run has not answered within ``GRACE_S`` calls ``stop(signum)``
    from a thread, unless ``watch.settle()`` came first (training began, or the run answered it itself). In training,
    one the run has not answered at a step boundary within ``STEP_GRACE_S`` (or 3 times its longest step) calls
    ``hung(signum, bound)``, never while a save holds ``watch.stop_lock``.

    Made in the main thread (``signal.set_wakeup_fd`` may only be set there); ``watch`` closes it on its exit.
    Where another wakeup fd is set (an asyncio loop's), it leaves that one and watches nothing.
    """

    def __init__(self, watch: PreemptionWatch, stop: Callable[[int], Any],
                 hung: Callable[[int, float], Any] | None = None):
        self._watch, self._stop, self._closed, self._thread = watch, stop, threading.Event(), None
        self._hung = hung  # hung(signum, bound): a training step did not end within bound seconds of the signal
        if threading.current_thread() is not threading.main_thread():
            return
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)  # set_wakeup_fd requires it: a full pipe never blocks the handler
        self._previous = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)  # read until the first stop
        if self._previous != -1:  # someone else's: put it back
            signal.set_wakeup_fd(self._previous)
            os.close(self._read), os.close(self._write)
            return
        self._thread = threading.Thread(target=self._run, name="preemption watchdog", daemon=True)
        self._thread.start()
        watch.watchdog = self

    def close(self) -> None:
        """Stop watching (the run is over); a forced stop under way still ends the process."""
        if self._thread is not None:
            signal.set_wakeup_fd(self._previous)
            self._closed.set()
            os.close(self._write)  # the thread reads the end of the pipe
            self._thread = None

    def _run(self) -> None:
        signum = self._watch.signum if self._watch.signum in PREEMPT_SIGNALS else None  # came before it was armed
        try:
            while signum is None and (data := os.read(self._read, 64)):  # b"": closed
                signum = next((s for s in data if s in PREEMPT_SIGNALS), None)  # Ctrl-C: a second one stops
            heard = time.monotonic()
            if signum is not None and not self._closed.wait(GRACE_S):
                if not self._watch.settled:  # else a save may hold the lock: _hung_step's wait for it is bounded
                    with self._watch.stop_lock:  # the main thread's settle() waits here while the stop is written
                        if not self._watch.settled:
                            self._stop(signum)
                if self._hung is not None:
                    self._hung_step(signum, heard)
        finally:
            # Each later signal writes to the pipe until close() sets the wakeup fd back: with this end closed,
            # a second SIGTERM printed 'Exception ignored when trying to write to the signal wakeup fd' (EPIPE).
            self._closed.wait()
            os.close(self._read)


    def _hung_step(self, signum: int, heard: float) -> None:
        """In training: wait for the run to answer at a step boundary, at most the bound from ``heard``; then stop it
        (``hung``), once a save that holds the watch's ``stop_lock`` is over (waited for ``SAVE_GRACE_S`` at most)."""
        watch = self._watch
        bound = max(STEP_GRACE_S, 3 * watch.longest_step_s)
        waiting = lambda: watch.in_training and not watch.answered and not self._closed.is_set()  # noqa: E731
        while waiting() and (left := heard + bound - time.monotonic()) > 0:
            self._closed.wait(min(0.5, left))
        locked = waiting() and watch.stop_lock.acquire(timeout=SAVE_GRACE_S)  # a save under way ends first
        try:
            if waiting():
                self._hung(signum, bound)
        finally:
            if locked:
                watch.stop_lock.release()


def watch_setup(cfg: Any, watch: PreemptionWatch, **run: Any) -> None:
    """In a run of one process (``distributed=none``), arm a ``StopWatchdog`` whose stop is ``end_preempted_run``.

    Parameters
    ----------
    cfg : DictConfig
        The job's config (``distributed.mode``).
    watch : PreemptionWatch
        The run's watch, entered in the main thread.
    **run
        ``metrics``, ``out``, ``start``, ``folder``: as ``end_preempted_run`` takes them.
    """
    watch.save_every = cfg.train.checkpoint_every or 0  # its saves ask JAX's sync point with their steps (stop_ids)
    if cfg.distributed.mode == "none":  # several processes: JAX's preemption service agrees on the stop
        StopWatchdog(watch, lambda signum: end_preempted_run(signum, watch=watch, **run),
                     lambda signum, bound: end_hung_run(signum, bound, watch=watch, **run))


def end_hung_run(signum: int, bound: float, *, watch: PreemptionWatch, out: Path, **run: Any) -> None:
    """Record a run whose training step did not end within ``bound`` seconds of ``signum``, and end the process.

    Nothing is saved (a checkpoint needs the step to end); the error names the newest complete checkpoint, which
    ``train.resume=auto`` continues from. ``run``: as ``end_preempted_run`` takes it.
    """
    from gensbi_sharding.checkpoint import CHECKPOINT_SUBDIR, committed_steps

    steps, step = committed_steps(out / CHECKPOINT_SUBDIR), watch.boundary[0] + 1
    saved = (f"saved up to step {steps[-1]} ({out / CHECKPOINT_SUBDIR / str(steps[-1])})" if steps else
             "no checkpoint was saved (train.checkpoint_every=N saves some): the run starts over")
    error = (f"preempted by {signal.Signals(signum).name} during training step {step}, which did not end within "
             f"{bound:g} s of the signal (a hung step; the bound is {STEP_GRACE_S:g} s or 3 times the longest step so "
             f"far): stopped without saving it (a checkpoint needs the step to end); {saved}; continue with: "
             f"{_continue_command(out)}")
    end_preempted_run(signum, watch=watch, out=out, error=error, saved=steps[-1] if steps else None, **run)


def _continue_command(out: Path) -> str:
    """The command that continues the run in ``out`` (``sweep_hints.continue_command``)."""
    from gensbi_sharding.harness import sweep_hints

    return sweep_hints.continue_command(out)


def end_preempted_run(signum: int, *, metrics: dict[str, Any], out: Path, start: float, folder: Any,
                      watch: PreemptionWatch, error: str | None = None, saved: int | None = None) -> None:
    """Record a run stopped before training by ``signum`` as ``run`` records a preemption, and end the process.

    Parameters
    ----------
    signum : int
        The preemption signal received.
    metrics : dict
        The run's metrics so far (its config); updated and written as ``metrics.json``.
    out : pathlib.Path
        The run's folder.
    start : float
        ``time.perf_counter()`` at the run's start.
    folder : RunFolder
        Records the metrics and releases the folder's lock.
    watch : PreemptionWatch
        Passes the signal on to the handler installed before the run (submitit's requeue).
    error : str or None
        The stop's message; None: a stop before training.
    saved : int or None
        The newest complete checkpoint's step (``stopped_at_step``); None: none, or before training.
    """
    from gensbi_sharding.harness import console, run_report, summary, sweep_continue

    from gensbi_sharding.harness.continue_field import CONTINUE_FIELD
    from gensbi_sharding.harness.interrupt_lines import stop_advice  # a dry run's: run it again, in a new folder
    from gensbi_sharding.harness.folder_gone import gone_note  # the folder deleted or moved meanwhile: said

    dry_run = bool((metrics.get("config") or {}).get("dry_run"))
    error = error or (f"{Preempted(signum)}; stopped {GRACE_S:g} s after the signal, inside a setup step; "
                      f"{stop_advice(out, dry_run)}")
    metrics.update(status="preempted", stopped_at_step=saved, error=error, wall_s=time.perf_counter() - start)
    metrics[CONTINUE_FIELD] = None if dry_run else _continue_command(out)  # the command the error words, as a value
    log.log(min(console.stop_level(), logging.WARNING), "%s", error)
    if whole := sweep_continue.whole_sweep_hint(out, sys.argv):
        log.info("%s", whole)
    folder.record(metrics)
    folder.release()
    if folder.owner:  # a sweep's job: its summary so far (Hydra's end-of-sweep one never comes)
        summary.refresh_job_sweep_summary(out)
    ended = final_metrics[0](metrics) if final_metrics else metrics
    log.info("%s", run_report.final_line(ended, out) + (gone_note(out, ended) if folder.claimed else ""))
    try:
        watch.chain(signum)  # under submitit: requeue the job
    finally:
        logging.shutdown()  # launch.log and the console complete: os._exit runs no exit hooks
        sys.stdout.flush(), sys.stderr.flush()
        time.sleep(0.5)  # the threads that pass the console's lines on (native_console.native_output_to_log) pass these
        remove_owner_notes()  # a sweep's, or Hydra's callback's of this folder: os._exit skips atexit's removal
        os._exit(EXIT_PREEMPTED)  # the main thread is held in XLA or a setup step: only the process can end
