"""What the console shows, and what goes only into the job's log file (``launch.log``).

Hydra sets up logging for every job from ``conf/hydra/job_logging/gensbi.yaml``: the console
gets short lines through ``ConsoleFilter`` and ``ConsoleFormatter``, ``launch.log`` (in the
job's folder; ``process_<i>.log`` for the processes of a ``distributed=local`` job) gets every
record with its time and logger. What is kept off the console:

- the full per-variable placement table (logger ``DETAILS``) unless ``verbose=true``;
- third-party noise: Orbax's notes on reading a checkpoint folder (``NOISY_MESSAGES``),
  scikit-learn's ``ConvergenceWarning`` (C2ST's classifier), captured from
  Python's warnings by ``warnings_to_log``, Gloo's ``[Gloo] Rank ...`` lines and the C++ log
  lines of XLA at INFO and WARNING level (``native_console.NATIVE_LOG_LINE``, e.g. the SPMD partitioner's
  "Involuntary full rematerialization"), which C++ code writes straight to the process's
  stdout/stderr and ``native_console.native_output_to_log`` takes from there (the console gets one line saying
  that XLA warned, and where to read it; its errors still show);
- in a multi-process job, the info lines of every process but process 0 (they all run the
  same steps); their warnings and errors still show.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections.abc import Iterator
from typing import Any

from gensbi_sharding.harness.console_filter import (DETAILS, NOISY_MESSAGES, NOISY_WARNINGS, REFUSAL_CLASS, SAVE_WAIT,
                                                    SAVE_WAIT_SAID, ConsoleFilter, ConsoleFormatter, late_read_error,
                                                    set_process, stop_level, tagged)
from gensbi_sharding.harness.native_console import NATIVE, PIPED_TERMINALS, job_log_name, native_output_to_log

__all__ = ["DETAILS", "NOISY_WARNINGS", "NOISY_MESSAGES", "ConsoleFilter", "ConsoleFormatter",
           "warnings_to_log", "native_output_to_log", "quiet_console", "set_process", "tagged",
           "stop_level", "job_log_name", "is_terminal", "late_read_error", "quiet_libraries",
           "CONSOLE_TERMINAL_ENV", "REFUSAL_CLASS", "SAVE_WAIT", "SAVE_WAIT_SAID"]

CONSOLE_TERMINAL_ENV = "GENSBI_SHARDING_CONSOLE_IS_TERMINAL"  # "1"/"0": the console a local process's stderr reaches
#: ``extra=`` of a message every process of a job logs alike (read from the config or a checkpoint): process 0 says
#: it on the console, the others in their ``process_<i>.log`` only (else a 4-process job showed it four times).
EVERY_PROCESS = {"every_process": True}


def is_terminal(fd: int = 2) -> bool:
    """Whether the console's descriptor ``fd`` is a terminal (while ``native_output_to_log`` pipes it: as it was;
    a ``distributed=local`` process's stderr: as its parent's console is, ``CONSOLE_TERMINAL_ENV``)."""
    inherited = os.environ.get(CONSOLE_TERMINAL_ENV) if fd == 2 else None
    if inherited is not None:
        return inherited == "1"
    return PIPED_TERMINALS[fd] if fd in PIPED_TERMINALS else os.isatty(fd)


@contextlib.contextmanager
def warnings_to_log() -> Iterator[None]:
    """Route Python warnings into logging (logger ``py.warnings``) while the job runs.

    The console filter drops the noisy categories; ``launch.log`` keeps them all. A capture the caller had on (a
    notebook's ``logging.captureWarnings(True)`` before ``%run launch.py``) is left on: ``captureWarnings(False)``
    here turned it off.
    """
    # logging's own showwarning is in place exactly while warnings are captured (its documented effect)
    already = getattr(warnings.showwarning, "__module__", None) == logging.__name__
    logging.captureWarnings(True)
    try:
        yield
    finally:
        if not already:
            logging.captureWarnings(False)


@contextlib.contextmanager
def quiet_console(cfg: Any) -> Iterator[None]:
    """A job's noise to its launch.log: Python warnings, Gloo's lines and XLA's C++ log lines."""
    from gensbi_sharding.harness.child_logging import last_resort_kept
    from gensbi_sharding.harness.log_file import errors_on_console, late_writes_to_log  # imports numpy

    with contextlib.ExitStack() as stack:
        stack.enter_context(last_resort_kept())  # first: errors_on_console reads the root's handlers
        stack.enter_context(errors_on_console(logging.getLogger("gensbi_sharding")))  # hydra/job_logging=disabled
        stack.enter_context(warnings_to_log())
        stack.enter_context(late_writes_to_log())  # a failed checkpoint save's late callbacks: launch.log only
        stack.enter_context(native_output_to_log())
        yield


@contextlib.contextmanager
def quiet_libraries() -> Iterator[None]:
    """Inside: the ``jax`` and ``absl`` loggers (JAX's backend probing, Orbax's notes as it reads or saves a
    checkpoint) say warnings and errors only; each level is put back as it was after, so a caller's logging
    (``run(cfg)`` or ``sample_posterior`` from Python, a notebook) is left as it found it. A level already stricter is
    kept. A root logger without handlers keeps none: absl's first note ran ``logging.basicConfig()`` on it, so a
    notebook's own ``logging.basicConfig(level=logging.INFO)`` after a first run did nothing (``last_resort_kept``).
    """
    from gensbi_sharding.harness.child_logging import last_resort_kept  # imports numpy: not at launch.py's start

    loggers = [logging.getLogger(name) for name in ("jax", "absl")]
    levels = [logger.level for logger in loggers]
    for logger, level in zip(loggers, levels):
        if level < logging.WARNING:  # NOTSET too: it would inherit the root's INFO from Hydra's logging config
            logger.setLevel(logging.WARNING)
    try:
        with last_resort_kept():
            yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)
