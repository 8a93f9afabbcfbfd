"""What the console shows, and what goes only into the job's log file (``launch.log``).

Hydra sets up logging for every job from ``conf/hydra/job_logging/gensbi.yaml``: the console
gets short lines through ``ConsoleFilter`` and ``ConsoleFormatter``, ``launch.log`` (in the
job's folder; ``process_<i>.log`` for the processes of a ``distributed=local`` job) gets every
record with its time and logger. What is kept off the console:

- the full per-variable placement table (logger ``DETAILS``) unless ``verbose=true``;
- third-party noise: Orbax's notes on reading a checkpoint folder (``NOISY_MESSAGES``),
  scikit-learn's ``ConvergenceWarning`` (C2ST's classifier), captured from
  Python's warnings by ``warnings_to_log``, Gloo's ``[Gloo] Rank ...`` lines and the C++ log
  lines of XLA at INFO and WARNING level (``NATIVE_LOG_LINE``, e.g. the SPMD partitioner's
  "Involuntary full rematerialization"), which C++ code writes straight to the process's
  stdout/stderr and ``native_output_to_log`` takes from there (the console gets one line saying
  that XLA warned, and where to read it; its errors still show);
- in a multi-process job, the info lines of every process but process 0 (they all run the
  same steps); their warnings and errors still show.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from gensbi_sharding.harness.native_notes import NOTES, note_for
from gensbi_sharding.messages import clipped
from gensbi_sharding.harness.native_pump import end_and_wait, pump

__all__ = ["DETAILS", "NOISY_WARNINGS", "NOISY_MESSAGES", "NOISY_NATIVE_LINES", "ConsoleFilter", "ConsoleFormatter",
           "warnings_to_log", "native_output_to_log", "quiet_console", "set_process", "tagged",
           "tag_process_records", "stop_level", "job_log_name", "is_terminal",
           "CONSOLE_TERMINAL_ENV"]

DETAILS = "gensbi_sharding.details"  # full tables: launch.log always, the console with verbose=true
NOISY_WARNINGS = ("ConvergenceWarning",)  # warning categories kept out of the console
# Orbax's notes (logger "absl") when a checkpoint folder is read without its item handlers: the library
# drops them while it lists a folder's steps (checkpoint_steps); kept here for any other read-only look.
NOISY_MESSAGES = ("CheckpointManagerOptions.read_only=True", "Given directory is read only",
                  "was found in the checkpoint, but could not be restored",
                  "Reached preemption sync point",  # every process of a stopped job, every saving thread
                  # A save that failed (read-only or full folder), from each of Orbax's saving threads, traceback and
                  # all: the run's own error line names it, and the checkpoint that continues it; launch.log keeps them
                  "_SignalingThread.run() raised an exception", "Handler Commit operations or the Commit callback",
                  "Save Finalize thread (save_finalize) failed")
NOISY_NATIVE_LINES = (b"[Gloo]",)  # starts of lines C++ libraries print that belong in launch.log only
# Gloo's threads write their lines in pieces that interleave ("[Gloo] Rank [Gloo] Rank 7 is connected ...\n", then
# "5 is connected to 7 peer ranks. ...\n" or " is connected to 1\n": torn anywhere): any piece of GLOO_LINE is one.
GLOO_LINE = b"[Gloo] Rank 0 is connected to 0 peer ranks. Expected number of connected peer ranks is : 0"
BARE_NUMBER, DIGITS = re.compile(rb"\s*\d+\s*$"), re.compile(rb"\d+")  # "3\n": torn just before its last number
# A C++ (absl/TSL) log line of XLA at INFO or WARNING level, as jaxlib writes it to stderr:
# "W1130 21:32:49.078772    8033 spmd_partitioner.cc:666] [SPMD] Involuntary full rematerialization. ..."
# Errors (E/F) stay on the console. No public switch sends these to a file (TF_CPP_MIN_LOG_LEVEL only
# drops them), hence the descriptor-level routing below.
NATIVE_LOG_LINE = re.compile(rb"[IW]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^ \]]+:\d+\] ")
#: XLA warnings that need no console notice: JAX's preemption notifier logging the SIGTERM a stop sends on purpose.
QUIET_NATIVE_WARNINGS = (b"SIGTERM caught",)
NATIVE = "gensbi_sharding.native"  # those lines, logged: launch.log only, even with verbose=true

_process = {"index": 0, "count": 1}
_terminal: dict[int, bool] = {}  # descriptor -> whether it was a terminal before native_output_to_log piped it
CONSOLE_TERMINAL_ENV = "GENSBI_SHARDING_CONSOLE_IS_TERMINAL"  # "1"/"0": the console a local process's stderr reaches
#: ``extra=`` of a message every process of a job logs alike (read from the config or a checkpoint): process 0 says
#: it on the console, the others in their ``process_<i>.log`` only (else a 4-process job showed it four times).
EVERY_PROCESS = {"every_process": True}


class _ProcessTag(logging.Filter):
    """Prefixes every line of a record with ``[process i/n]`` while ``set_process`` says there are several."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _process["count"] > 1 and not getattr(record, "process_tagged", False):
            tag = f"[process {_process['index']}/{_process['count']}] "
            # The formatted text, each line: a multi-line message (the placement block) keeps its tag on
            # every line, and a message given as an argument ("%s") is tagged too.
            record.msg = tag + record.getMessage().replace("\n", "\n" + tag)
            record.args, record.process_tagged = None, True
        return True


def job_log_name() -> str:
    """The name of the file this job logs to in its folder: ``launch.log``, a ``distributed=local`` process's own
    ``process_<i>.log`` (Hydra's job name, which the parent sets), "launch.log" outside Hydra."""
    from hydra.core.hydra_config import HydraConfig

    return f"{HydraConfig.get().job.name}.log" if HydraConfig.initialized() else "launch.log"


def set_process(index: int, count: int) -> None:
    """Tell the console which JAX process this is: with several, every line is tagged with its index.

    Processes other than 0 show warnings and errors only (they all run the same steps). Called again
    with other values it replaces them (``set_process(0, 1)``: one process, no tags); each handler of
    the root logger gets the tag once, whatever the calls.

    Parameters
    ----------
    index, count : int
        This JAX process's index and the number of processes.
    """
    _process.update(index=index, count=count)
    # On the handlers (Hydra's console and log file), not a logger: a warning of another library
    # (py.warnings, absl) that reaches the console is tagged too.
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, _ProcessTag) for f in handler.filters):
            handler.addFilter(_ProcessTag())


def stop_level() -> int:
    """The level of "stopped by a signal / Ctrl-C" lines: error on process 0, info on the others.

    Every process of a job stops at the same step and names the same command; process 0 says it on the
    console, the others in their ``process_<i>.log`` (else each line came once per process).

    Returns
    -------
    int
        ``logging.ERROR`` or ``logging.INFO``.
    """
    return logging.ERROR if _process["index"] == 0 else logging.INFO


def tag_process_records(index: int, count: int) -> None:
    """Prefix this process's log lines with its index: every process logs, to one console (``set_process``).

    Parameters
    ----------
    index, count : int
        This JAX process's index and the number of processes.
    """
    set_process(index, count)


#: The shape in ``constrain``'s fallback warning, which names one traced call: training, validation and sampling
#: batches differ, so Python's once-per-text left three of each on the console (30 lines for one quick run).
_ACTIVATION_SHAPE = re.compile(r" of shape \([^)]*\)")
_SOURCE_LINE = re.compile(r"\n  \S[^\n]*\s*\Z")  # warnings.formatwarning's last line, the code that warned


class ConsoleFilter(logging.Filter):
    """Passes what a person at the console needs; ``verbose=True`` adds the full tables. Hydra makes one per job,
    so an activation's fallback warning is said once per job, whatever shapes it was traced at (all in launch.log)."""

    def __init__(self, verbose: bool = False) -> None:
        super().__init__()
        self.verbose, self._activations = bool(verbose), set()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == DETAILS or record.name.startswith(DETAILS + "."):
            return self.verbose
        if record.name == NATIVE:
            return False
        if record.name == "py.warnings" and any(name in record.getMessage() for name in NOISY_WARNINGS):
            return False
        if record.name == "py.warnings" and "ShardingFallbackWarning: activation " in (text := record.getMessage()):
            said = _ACTIVATION_SHAPE.sub("", text.split("ShardingFallbackWarning: ", 1)[1].split("\n", 1)[0])
            if said in self._activations:
                return False
            self._activations.add(said)
        if record.name == "absl" and any(text in record.getMessage() for text in NOISY_MESSAGES):
            return False
        if _process["index"] > 0 and getattr(record, "every_process", False) or getattr(record, "parent_reports", False):
            return False
        return not (_process["index"] > 0 and record.levelno < logging.WARNING)


def is_terminal(fd: int = 2) -> bool:
    """Whether the console's descriptor ``fd`` is a terminal (while ``native_output_to_log`` pipes it: as it was;
    a ``distributed=local`` process's stderr: as its parent's console is, ``CONSOLE_TERMINAL_ENV``)."""
    inherited = os.environ.get(CONSOLE_TERMINAL_ENV) if fd == 2 else None
    return inherited == "1" if inherited is not None else _terminal[fd] if fd in _terminal else os.isatty(fd)


def tagged(level: str, text: str) -> str:
    """``[ERROR] text``: the one tag a console line gets for its level (messages carry none of their own)."""
    return f"[{level}] {text}"


class ConsoleFormatter(logging.Formatter):
    """Info as the bare message; warnings and errors tagged ``[WARNING]`` / ``[ERROR]`` (``tagged``)."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        if record.name == "py.warnings":  # was also the code line that warned, and a blank one (launch.log keeps them)
            text = _SOURCE_LINE.sub("", text).rstrip()
        return text if record.levelno < logging.WARNING else tagged(record.levelname, text)


@contextlib.contextmanager
def warnings_to_log() -> Iterator[None]:
    """Route Python warnings into logging (logger ``py.warnings``) while the job runs.

    The console filter drops the noisy categories; ``launch.log`` keeps them all.
    """
    logging.captureWarnings(True)
    try:
        yield
    finally:
        logging.captureWarnings(False)


@contextlib.contextmanager
def quiet_console(cfg: Any) -> Iterator[None]:
    """A job's noise to its launch.log: Python warnings, Gloo's lines and XLA's C++ log lines."""
    from gensbi_sharding.harness.child_logging import last_resort_kept
    from gensbi_sharding.harness.log_file import errors_on_console, late_writes_to_log  # (log_file imports this one)

    with contextlib.ExitStack() as stack:
        stack.enter_context(last_resort_kept())  # first: errors_on_console reads the root's handlers
        stack.enter_context(errors_on_console(logging.getLogger("gensbi_sharding")))  # hydra/job_logging=disabled
        stack.enter_context(warnings_to_log())
        stack.enter_context(late_writes_to_log())  # a failed checkpoint save's late callbacks: launch.log only
        stack.enter_context(native_output_to_log())
        yield


@contextlib.contextmanager
def native_output_to_log(prefixes: Sequence[bytes] = NOISY_NATIVE_LINES, fds: Sequence[int] = (1, 2),
                         logger: str = NATIVE) -> Iterator[None]:
    """Take lines starting with ``prefixes``, and XLA's C++ log lines, out of this process's stdout and stderr.

    C++ libraries (Gloo, XLA) write to file descriptors 1 and 2 directly, past Python's
    ``sys.stdout``, so each descriptor is pointed at a pipe; a thread passes every other byte
    on to the real descriptor as it arrives (progress bars included) and logs the matching
    lines to ``logger`` (launch.log only). The first XLA warning also gets one console line
    (logger ``gensbi_sharding``), so nothing it says goes unnoticed. On exit the descriptors
    are restored and the threads drained of this process's output (``native_pump``: bounded, and a
    process started meanwhile still holding a pipe is not waited for).
    """
    warned: list[bool] = []
    NOTES.clear()  # a job's own: a sweep's next job may leave its model axis busy
    with contextlib.ExitStack() as stack:
        for fd in fds:
            stack.enter_context(_lines_of(fd, tuple(prefixes), logging.getLogger(logger), warned))
        yield


def _may_become_native(pending: bytes) -> bool:
    """Whether a partial line could still turn out to be a C++ log line (held back until its end)."""
    return pending[:1] in (b"I", b"W") and len(pending) < 512 and b"]" not in pending


@contextlib.contextmanager
def _lines_of(fd: int, prefixes: tuple[bytes, ...], sink: logging.Logger, warned: list[bool]) -> Iterator[None]:
    try:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        saved = os.dup(fd)
    except (OSError, ValueError):  # no such descriptor (e.g. a test runner's capture): nothing to take
        yield
        return
    read_end, write_end = os.pipe()
    _terminal[fd] = os.isatty(saved)
    os.dup2(write_end, fd)
    os.close(write_end)

    after_noisy = [False]  # the last line was a noisy one: a bare number next is the tail of a torn one

    def forward(data: bytes) -> None:
        kept = []
        for line in data.splitlines(keepends=True):
            bare = line.lstrip(b"\r")
            piece = DIGITS.sub(b"0", bare.strip())  # a bare number is one only right after a piece
            noisy = prefixes == NOISY_NATIVE_LINES and (b"peer ranks" in bare or (after_noisy[0] and BARE_NUMBER.match(
                bare)) or (re.search(rb"[A-Za-z]", piece) is not None and piece in GLOO_LINE))
            after_noisy[0] = bool(bare.startswith(prefixes) or noisy)
            if bare.startswith(prefixes) or NATIVE_LOG_LINE.match(bare) or noisy:
                text = line.decode(errors="replace").strip()
                sink.info("%s", text)
                if (bare.startswith(b"W") and not warned and NATIVE_LOG_LINE.match(bare)
                        and not any(quiet in bare for quiet in QUIET_NATIVE_WARNINGS)):
                    warned.append(True)  # once per run: the message without its C++ header, cut short
                    said = NATIVE_LOG_LINE.sub(b"", bare, count=1).decode(errors="replace").strip()
                    logging.getLogger("gensbi_sharding").warning(  # + its cause where the run said it (the hint)
                        "XLA warned (all its lines are in %s): %s%s", job_log_name(), clipped(said, 100), note_for(bare))
            else:
                kept.append(line)
        with contextlib.suppress(OSError):
            os.write(saved, b"".join(kept))

    def held(partial: bytes) -> bool:  # a partial line that may still become a noisy one: held back
        return any(p.startswith(partial[:len(p)]) for p in prefixes) or _may_become_native(partial)

    ended = threading.Event()
    thread = threading.Thread(target=pump, args=(read_end, forward, held, ended), name=f"native-output-{fd}",
                              daemon=True)
    thread.start()
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        _terminal.pop(fd, None)
        if end_and_wait(fd, saved, thread, ended):  # bounded; a worker process still holding the pipe: not waited
            os.close(saved)
