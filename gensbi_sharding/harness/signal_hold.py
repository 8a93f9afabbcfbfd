"""Preemption signals outside a run's ``PreemptionWatch``: held for the run to answer, or ignored once it has.

``launch.py`` holds SIGTERM, SIGUSR1 and SIGUSR2 from its first lines (``hold_preemption_signals``): a signal that
comes before a run's watch is armed (importing JAX, Hydra composing) is kept, and the run's watch takes it over
(``take_held``), so the run stops at its first step with ``status: preempted`` in its ``metrics.json``, as one
signalled a moment later, not Python's default action, the process killed (exit 143) with no record. One that
comes after a sweep's job ended is the sweep's: ``launch.py`` takes it before the next job starts, which then never
does (``sweep_stop.stopped_between_jobs``; started, it would only record a stop it never saw). Once a
run has recorded its preemption the process only ends (``EXIT_PREEMPTED``): from then on
these signals are ignored (``ignore_preemption_signals``; SLURM sends SIGTERM more than once), where a second
one killed it while it exited, so the scheduler saw 143 (a failure) instead of 75 (requeue me).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterable
from typing import Any

from gensbi_sharding.harness.interrupt_hold import in_finalizer  # imported now: never first inside the handler
from gensbi_sharding.harness.units import is_int

__all__ = ["PREEMPT_SIGNALS", "exit_as_decided", "hold_preemption_signals", "ignore_preemption_signals", "take_held",
           "stop_after_run", "raise_interrupt", "AGAIN_AFTER_S"]

#: How long after a Ctrl-C that landed in a finalizer it is sent again: a garbage-collector callback takes far less.
AGAIN_AFTER_S = 0.05

#: The signals that ask a run to stop for a requeue: SLURM's SIGTERM (or the one chosen with ``--signal``) and
#: submitit's SIGUSR2.
PREEMPT_SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)

_held: list[int] = []  # signals received while held, first first; taken by the next run's watch


def _hold(signum: int, frame: Any) -> None:
    _held.append(signum)


def hold_preemption_signals(received: Iterable[int] = ()) -> None:
    """Hold every preemption signal until a run's watch takes it over (main thread only; elsewhere a no-op).

    Parameters
    ----------
    received : iterable of int
        Signals an earlier holder already received (``launch.py``'s, before this module could be imported).
    """
    if threading.current_thread() is threading.main_thread():
        for signum in PREEMPT_SIGNALS:
            signal.signal(signum, _hold)
    _held[:0] = received  # after: one the earlier holder receives now is not lost between the two; before it


def stop_after_run(signum: int) -> None:
    """A stop a run finished before answering (it came as its last observation was scored): the next job's.

    Where ``launch.py`` holds (its hold is back once the run's watch ended) the signal is held, so the sweep's next job
    never starts and a single run ends as finished; elsewhere (``run`` called from Python) a Ctrl-C is raised as
    ``KeyboardInterrupt``, as Python raises one, and a preemption signal is dropped: the run it asked to stop is over.

    Parameters
    ----------
    signum : int
        The signal the run's watch recorded (SIGINT for a Ctrl-C).

    Raises
    ------
    KeyboardInterrupt
        For a Ctrl-C where nothing holds signals.
    """
    if signal.getsignal(signal.SIGUSR2) is _hold:  # SIGTERM's may stay JAX's preemption service's (a multirun's)
        _held.append(signum)
    elif signum == signal.SIGINT:
        raise KeyboardInterrupt


def take_held() -> list[int]:
    """The signals held so far, first first; they are the caller's from now on (the hold forgets them)."""
    taken = list(_held)
    _held.clear()
    return taken


def ignore_preemption_signals() -> None:
    """The process ends for a preemption it has recorded: ignore further preemption signals until it has ended.

    ``SIG_IGN``, not a Python handler: Python puts its own handlers back to the default action as the
    interpreter shuts down, where a late SIGTERM would still end the process with 143.
    """
    if threading.current_thread() is threading.main_thread():
        for signum in PREEMPT_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)


def raise_interrupt(signum: int, frame: Any) -> None:
    """SIGINT's handler in ``launch.py`` outside a run's watch: ``KeyboardInterrupt``, as Python's own handler raises
    it, except in a finalizer or a garbage-collector callback (``interrupt_hold.in_finalizer``), where the signal is
    sent again ``AGAIN_AFTER_S`` later, to land in the code that runs next.

    Was Python's handler: a Ctrl-C landing in JAX's ``_xla_gc_callback`` (run at every collection once JAX is imported)
    printed "Exception ignored in: <function _xla_gc_callback ...> ... KeyboardInterrupt" and was dropped, so the run
    went on training to its end as if no Ctrl-C had come.

    Parameters
    ----------
    signum : int
        SIGINT.
    frame : frame or None
        The frame it interrupted.

    Raises
    ------
    KeyboardInterrupt
        Where it landed outside a finalizer.
    """
    if in_finalizer(frame):
        timer = threading.Timer(AGAIN_AFTER_S, os.kill, (os.getpid(), signum))
        timer.daemon = True  # never holds the process's exit
        timer.start()
        return
    raise KeyboardInterrupt


def exit_as_decided(leaving: BaseException | None, decided: list[int], signum: int, frame: Any) -> None:
    """SIGINT's handler in ``launch.py`` once every job has ended: the process ends at once with the exit code its jobs
    decided. Python's own handler printed a ``KeyboardInterrupt`` traceback under the final line (a Ctrl-C in JAX's
    teardown); ignoring it would leave a teardown that hung (a dead peer) unstoppable from the terminal.

    Parameters
    ----------
    leaving : BaseException or None
        The exception in flight as the handler was set: a ``SystemExit`` gives the code (``sys.exit(75)``: 75), any
        other means a crash (1).
    decided : list of int
        Where ``launch.py`` puts the code it exits with when nothing is in flight; empty as it is being decided (130,
        as an interrupted run's).
    signum, frame
        As ``signal.signal`` passes them.
    """
    if isinstance(leaving, SystemExit):
        status = leaving.code if is_int(leaving.code) else 0 if leaving.code is None else 1  # as Python exits
    else:
        status = 1 if leaving is not None else decided[0] if decided else 130  # preemption.EXIT_INTERRUPTED
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(status)
