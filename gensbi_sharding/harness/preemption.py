"""Preemption as cluster users meet it: a signal, a checkpoint at the next step boundary, a requeue.

SLURM ends a job at its time limit or on preemption with SIGTERM (or a signal chosen with ``--signal``, e.g.
SIGUSR1, some seconds before), then SIGKILL. While a run is inside ``PreemptionWatch``, SIGTERM, SIGUSR1 and SIGUSR2
(submitit's choice) ask it to stop: in the training loop at the next step boundary or between the batches of a
validation, after a checkpoint; anywhere else at the next step of the run (``check``: between the setup steps,
between the observations of the evaluation; there is nothing new to save: before training nothing was trained, after
it the final checkpoint is written). Before training a setup step is waited for seconds at most, in training a step
that does not return for about a minute (``stop_watchdog``).
The run then records ``status: preempted`` with the step, and the process exits with ``EXIT_PREEMPTED``;
``train.resume=auto`` continues from the checkpoint. Ctrl-C (SIGINT) stops the same way, as ``status: interrupted``;
a second Ctrl-C stops at once. ``distributed=local``'s processes get any signal as SIGTERM from their parent; they
word the stop by the signal the parent received (``harness.parent_signal``): its Ctrl-C is "interrupted".

The handler only records the signal; it never raises into whatever code runs (an exception raised there can land in a
C++ callback of JAX's, where it is lost or crashes the process); only a second Ctrl-C raises ``KeyboardInterrupt``.

Across processes every process must stop at the same step, or their collective checkpoint cannot complete: there
JAX's preemption service (started by ``jax.distributed.initialize``, it takes over SIGTERM) agrees on the step
(``multihost_utils.reached_preemption_sync_point``), and SIGUSR1/SIGUSR2 are passed on to it as SIGTERM. SIGTERM
stays the service's once it started: a multirun's later jobs leave it there (a watch's handler put over it
would hide every notice from the service); one between two jobs is the service's too, answered at the next job's
first check (the ids count on across the jobs, each watch closing with a question of its own: ``prior_checks``).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

from gensbi_sharding.harness.console import stop_level
from gensbi_sharding.harness.interrupt_hold import defer_interrupt, handler_lines, say
from gensbi_sharding.harness.stop_ids import ask_past_saves, saves_near
from gensbi_sharding.harness.parent_signal import stop_signal
from gensbi_sharding.harness.signal_hold import PREEMPT_SIGNALS, take_held
from gensbi_sharding.harness.train_checkpoints import train_with_checkpoints

__all__ = ["EXIT_PREEMPTED", "EXIT_INTERRUPTED", "PREEMPT_SIGNALS", "Preempted", "PreemptionWatch",
           "train_with_checkpoints"]

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
        name = ("Ctrl-C (SIGINT)" if self.interrupted
                else signal.Signals(signum).name if signum else "a preemption notice")
        where = (f"after training (step {step}), before the evaluation finished" if after_training else
                 f"at step {step}" if step is not None else "before training (nothing trained: no checkpoint to save)")
        saved = f"; checkpoint {checkpoint}" if checkpoint else ""
        super().__init__(f"{'interrupted' if self.interrupted else 'preempted'} by {name} {where}{saved}")


class PreemptionWatch:
    """Catch preemption signals and Ctrl-C while a run lasts (a context manager; main thread only).

    A signal is only recorded (one held before, ``signal_hold``, too): inside ``at_step_boundaries()``
    ``should_stop(step)`` tells the loop when to stop; outside, ``check()`` raises ``Preempted`` at the run's next
    step. A second Ctrl-C raises ``KeyboardInterrupt`` at once. On exit the handlers that were there before come
    back; ``chain`` passes the signal on to them (under submitit that requeues the job). ``ignore_after``: on exit
    preemption signals are ignored instead (a ``distributed=local`` process: its parent reads a process ended by one
    as one still starting up, so one after the run must not end it, as SIG_DFL would: exit -15).
    """

    #: Stop checks the ended jobs of this process made while JAX stays joined to several processes (a multirun's,
    #: explicit or auto mode): a later job's watch counts on from it, so the step ids of JAX's preemption sync point
    #: grow across the jobs, alike on every process: counted from 1 in each job, a notice between two jobs would set a
    #: sync point the next job reaches only after as many checks as the job before made (late in it, not its start).
    prior_checks = 0
    #: Whether the closing question of the last job's watch met the sync point (a notice as it ended): the next job
    #: stops at its first check.
    stop_pending = False

    def __init__(self, ignore_after: bool = False) -> None:
        self._ignore_after = ignore_after
        self.signum: int | None = None
        self._interrupts = 0  # Ctrl-C presses: the second stops at once
        self._deferred = False
        self._previous: dict[int, Any] = {}
        self._pending = False  # a notice met as the job before closed (``stop_pending``)
        self._checks = 0  # stop checks so far: the sequence every process runs alike (``prior_checks``: from there)
        self.save_every, self._saved = 0, None  # train.checkpoint_every; steps a save asked the sync point with
        self._told = False  # whether a check told JAX's preemption service of this process's signal
        self._trained: tuple[int, Any] | None = None  # (step, checkpoint) once training is over
        # settle(); a StopWatchdog; whether the stop came from another process (check_together), this one no signal
        self.stop_lock, self.settled, self.watchdog, self.elsewhere = threading.Lock(), False, None, False
        # The last step boundary (step, time.monotonic()), the longest time between two, whether a stop was answered:
        self.boundary, self.longest_step_s, self.answered = None, 0.0, False  # the watchdog's measure of a hung step

    def __enter__(self) -> PreemptionWatch:
        # JAX joined already (a multirun's later job): its sync point's ids go on from the jobs before
        # (``prior_checks``); a notice the last job's closing question met is this job's to answer, at its first check
        self._checks, self._pending = (PreemptionWatch.prior_checks, PreemptionWatch.stop_pending) if self._several() \
            else (0, False)
        PreemptionWatch.stop_pending = False
        if self._pending:
            self.signum, self._told = self.signum or signal.SIGTERM, True  # the service heard it: not told again
        if threading.current_thread() is threading.main_thread():
            # JAX's preemption service, started by an earlier job of this process (a multirun's), holds SIGTERM: a
            # handler put over it would hide every notice from the service, so the sync point would never answer (a
            # later job training on to its last step on every process)
            service = (signal.SIGTERM,) if self._several() else ()
            for signum in (*PREEMPT_SIGNALS, signal.SIGINT):
                if signum not in service:
                    self._previous[signum] = signal.signal(signum, self._handle)
            for signum in take_held():  # came before the watch (signal_hold): the run answers it at its first step
                self._handle(signum, None)
        return self

    def __exit__(self, *exc) -> None:
        if self.watchdog is not None:  # a forced stop under way still ends the process
            self.watchdog.close()
        PreemptionWatch.prior_checks, PreemptionWatch.stop_pending = 0, False
        if self._several():  # the last question of this job is this watch's: a notice before the next job sets the
            # sync point at the next id, that job's first check (not an id of Orbax's last save, the step number,
            # or of each job's own count from 1: those are answered late or never); past the last save's id (stop_ids)
            reached, self._checks = ask_past_saves(self._checks + 1, self._saved)
            PreemptionWatch.stop_pending = reached or self._pending
            PreemptionWatch.prior_checks = self._checks
        service = self._several() and not self._ignore_after  # JAX's service took SIGTERM: left to it, for the
        for signum, handler in self._previous.items():  # next job's checks (a multirun's) to hear of a notice
            if signum == signal.SIGTERM and service:
                continue
            if self._ignore_after and signum in PREEMPT_SIGNALS:
                handler = signal.SIG_IGN
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)  # None: not set from Python
        self._previous.clear()

    @property
    def last_check_id(self) -> int:
        """This watch's count of stop checks (counting on from ``prior_checks``, the ended jobs', while JAX stays
        joined): the step id of its last question to JAX's preemption sync point; set to agree with process 0's
        (``run_folder.claim_together``)."""
        return self._checks

    @last_check_id.setter
    def last_check_id(self, count: int) -> None:
        self._checks = count

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
        self._saved = saves_near(step, self.save_every, self._saved)  # its save asked the sync point too (stop_ids)
        return self.stop_requested()

    def stop_requested(self) -> bool:
        """Whether to stop here (a step boundary, or between validation batches), alike on every process.

        One process: whether a signal came. Several: JAX's preemption sync point, asked with the count of checks so
        far, a multirun's earlier jobs' included while JAX stays joined (``prior_checks``: every process makes the
        same checks in the same order, so the count is a step id they share and it grows by one per check, as the
        sync point requires); all processes get True at the same check.
        """
        import jax

        self._checks += 1
        if jax.distributed.is_initialized() and jax.process_count() > 1:
            if self._pending:  # met as the job before closed, on every process alike: answered at this first check
                return True

            if self.signum is not None and not self._told:  # it may have come before the service took SIGTERM
                # (held since launch.py's start, or while [1/7] waited for the other processes, where the handler's
                # SIGTERM reached this handler again): told once more now, else no sync point came (a second one is
                # a no-op to the service)
                self._told = True
                signal.raise_signal(signal.SIGTERM)
            reached, self._checks = ask_past_saves(self._checks, self._saved)  # past a save's id too, not its own only
            self._saved = None
            return reached
        self.answered = self.answered or self.signum is not None
        return self.signum is not None

    def check(self) -> None:
        """A safe point outside the training loop (the run's setup, between its stages): stop here if a signal came;
        several processes stop together, at the check the sync point names (``check_together``): a process whose
        own signal came first (a terminal's Ctrl-C reaches each of ``distributed=local``'s processes) would otherwise
        stop alone, the others going on into the next stage's collectives without it.

        Raises
        ------
        Preempted
            If a signal was received (naming the final checkpoint once training is done).
        """
        if self._several():
            self.check_together()
        elif self.signum is not None and not self._deferred:
            self._stop()

    @staticmethod
    def _several() -> bool:
        import jax

        return jax.distributed.is_initialized() and jax.process_count() > 1

    def _stop(self) -> None:
        self.settle()
        self.answered = True
        raise (Preempted(self.signum, *self._trained, after_training=True) if self._trained
               else Preempted(self.signum))

    def check_together(self) -> None:
        """``check``, asked alike on every process (between chunks of ODE steps, before and after each observation's
        C2ST): several processes stop at the same call, the one the preemption sync point names (``stop_requested``),
        a process whose own signal has not come yet too; one process stops where a signal came. Asked between chunks
        on several processes too, so that a multi-process C2ST does not hold Ctrl-C until its observation is sampled.

        Raises
        ------
        Preempted
            As ``check``.
        """
        together = not self._deferred and self.stop_requested()
        if together and self.signum is None:  # (the parent's Ctrl-C reaches distributed=local's processes as it)
            self.signum, self.elsewhere = signal.SIGTERM, True  # said alike; by peer_stop, where another's came
        # several processes: at the sync point only, though a process's own signal (a terminal's Ctrl-C reaches each
        # process) came before it: that process would stop alone, the others in the chunk
        if (together or not self._several()) and self.signum is not None and not self._deferred:
            self._stop()

    check_together.collective = True  # ``FlowSampler`` asks it between chunks on every process (a mark, not a call)

    @property
    def in_training(self) -> bool:
        """Whether the training loop is under way: a step boundary passed, ``training_done`` not yet called."""
        return self.boundary is not None and self._trained is None

    def training_done(self, step: int, checkpoint: Any) -> None:
        """Training is over and saved at ``step``: a signal from now on stops the run at once, naming it."""
        self.settle()
        self._trained, self._saved = (step, checkpoint), saves_near(step, 1, self._saved)  # its last save asked too

    def settle(self, step: int | None = None) -> None:
        """From here the run answers signals itself (``StopWatchdog`` waits for a step boundary); a forced stop under
        way ends it. ``step``: a training step just ended (a step boundary)."""
        with self.stop_lock:
            self.settled, now = True, time.monotonic()
            if step is not None:
                self.longest_step_s = max(self.longest_step_s, now - self.boundary[1]) if self.boundary else 0.0
                self.boundary = (step, now)

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
                where = ("at the next step boundary, after a checkpoint" if self._deferred else
                         # evaluation: its training over, "at the next step of the run" would be a whole observation
                         f"the evaluation under way before its next observation is sampled, or once the one under "
                         f"way is scored and written; training is over, saved at step "
                         f"{self._trained[0]}, and a run past its evaluation ends as it would" if self._trained else
                         "at the next step of the run")
                say(0, log, min(stop_level(), logging.WARNING), "received %s: stopping %s%s" % (
                    "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name,
                    where, " (Ctrl-C again stops at once)" if signum == signal.SIGINT else ""))
        if signum != signal.SIGTERM and jax.distributed.is_initialized():
            signal.raise_signal(signal.SIGTERM)  # JAX's preemption service tells every process
