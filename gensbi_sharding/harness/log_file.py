"""The job's log file (``launch.log``, a ``distributed=local`` process's ``process_<i>.log``), as Hydra's job logging
config (``conf/hydra/job_logging/gensbi.yaml``) makes it: a ``logging.FileHandler`` whose writes the disk refuses.

A run whose disk filled up (or turned read-only) printed Python's "--- Logging error ---", a traceback and the
record's message for every line after that: 735 lines for a checkpoint that failed at its last step, the run's own
error line among them. ``JobLogFile`` says it once on the console and goes on: the lines are on the console.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator

from gensbi_sharding.harness.console_filter import ConsoleFilter, ConsoleFormatter, late_read_error, tagged
from gensbi_sharding.harness.native_console import NATIVE
from gensbi_sharding.harness.outputs import room_fix

__all__ = ["JobLogFile", "Console", "late_writes_to_log", "drop_late_callbacks", "errors_on_console", "console_fits"]


class JobLogFile(logging.FileHandler):
    """A ``logging.FileHandler`` that names a write the disk refused once, on stderr, and then drops the lines the
    file cannot take (any other error: ``logging``'s own report). Written in UTF-8, as every other output file, not
    in the locale's encoding: under ``LC_ALL=C PYTHONUTF8=0`` (ASCII) each C2ST line (its ``±``) was a "Logging
    error" traceback, the line missing from ``launch.log``."""

    refused = False

    def __init__(self, filename: str, mode: str = "a", encoding: str | None = None, delay: bool = False,
                 errors: str | None = None) -> None:
        super().__init__(filename, mode, encoding or "utf-8", delay, errors)

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 (logging's name)
        err = sys.exc_info()[1]
        if not isinstance(err, OSError):
            super().handleError(record)
            return
        if not self.refused:
            self.refused = True
            try:  # room_fix: a file over the file-size limit (ulimit -f) names that limit, as the run's other files do
                said = (f"{self.baseFilename} could not be written ({err.strerror or err}): this job's log lines from "
                        f"here are on this console only; {room_fix(err)}")
                sys.stderr.write(tagged("ERROR", said) + "\n")
                sys.stderr.flush()
            except (OSError, ValueError):  # the console gone too (a closed pipe): nothing left to tell
                pass


class Console(logging.StreamHandler):
    """The console's ``logging.StreamHandler``: once its reader has left (``python launch.py ... | head``), the lines
    go on to the log file only, unsaid (not "--- Logging error ---" and a traceback after a run that ended ok). A
    console whose encoding lacks a character (``LC_ALL=C PYTHONUTF8=0``, ``PYTHONIOENCODING=ascii``) gets ``+/-`` for
    ``±`` and a backslash escape for the rest (not a traceback in place of every C2ST line and the final line)."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        encoding = getattr(self.stream, "encoding", None) or "utf-8"
        try:
            text.encode(encoding)
        except UnicodeEncodeError:
            text = text.replace("\u00b1", "+/-").encode(encoding, "backslashreplace").decode(encoding)
        except LookupError:  # an encoding Python does not know: the stream's own write says so
            pass
        return text

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 (logging's name)
        if not isinstance(sys.exc_info()[1], BrokenPipeError):
            super().handleError(record)
            return
        try:  # the descriptor to nowhere: no write to it fails again, nor Python's flush of it at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), self.stream.fileno())
        except (OSError, ValueError):
            pass


def _fitted(err: UnicodeEncodeError) -> tuple[str, int]:
    """``codecs`` error handler "gensbi_console": ``±`` as ``+/-``, any other character the console's encoding
    lacks as its backslash escape (``\\xe9``)."""
    text = err.object[err.start:err.end].replace("\u00b1", "+/-")
    return text.encode("ascii", "backslashreplace").decode("ascii"), err.end


#: Text a console must print besides ASCII: a C2ST's ``±``, a dash, a CJK folder name, an emoji in a file name.
WIDE_TEXT = "\u00b1\u2014\u8def\U0001f600"


def console_fits() -> None:
    """Give ``sys.stdout`` and ``sys.stderr`` the "gensbi_console" error handler where their encoding lacks any of
    ``WIDE_TEXT`` (``LC_ALL=C PYTHONUTF8=0``, ``PYTHONIOENCODING=ascii`` or ``latin-1``): a ``print`` of a C2ST (the
    sweep's summary table) raised UnicodeEncodeError there, which Hydra turned into a warning in place of the table
    and the sweep's last line; a latin-1 console, which has ``±``, still raised it for a run folder named ``路``
    (sample.py's last line, a table's path, Hydra's ``--cfg``)."""
    import codecs

    codecs.register_error("gensbi_console", _fitted)
    for stream in (sys.stdout, sys.stderr):
        try:
            WIDE_TEXT.encode(stream.encoding or "utf-8")
        except UnicodeEncodeError:
            stream.reconfigure(errors="gensbi_console")
        except (AttributeError, LookupError, ValueError):  # no text stream (replaced, closed), or an unknown codec
            pass


@contextlib.contextmanager
def late_writes_to_log() -> Iterator[None]:
    """A checkpoint save the disk refused (full, read-only) leaves tensorstore's other writes to end after Orbax's
    event loop closed: each one's callback raised RuntimeError('Event loop is closed'), printed as Python prints an
    unraisable error, 36 to 208 tracebacks around the run's own error line (which names the failure and the checkpoint
    that continues it). While the job runs they go to its log file, once; any other unraisable error is printed."""
    previous, said = sys.unraisablehook, []

    def hook(unraisable: object) -> None:
        if not _late_callback(unraisable):
            previous(unraisable)
        elif not said:
            said.append(err := unraisable.exc_value)
            logging.getLogger(NATIVE).info("a write ended after its event loop closed (a save that failed): %s", err)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous


def drop_late_callbacks() -> None:
    """In a launcher's own process (launch.py), for good: drop the "RuntimeError: Event loop is closed" each read still
    under way raises, on TensorStore's threads, for a while after a damaged checkpoint's arrays failed to read
    (``checkpoint.step_damage`` before a run's folder: 38 tracebacks above a refusal's one line for experiment=quick's
    run); a job's own go to its log (``late_writes_to_log``). Any other unraisable error is printed. Installed here, not
    by the library's ``step_damage``: a process global, it would change for good in any caller's process. Also asyncio's
    "Task exception was never retrieved" for those reads (``console.late_read_error``), logged now and then as the
    process ends (sample.py: 1 run in 8)."""
    previous = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: None if _late_callback(unraisable) else previous(unraisable)
    # and asyncio's "Task exception was never retrieved ... NOT_FOUND" for those reads, now and then as it ends
    logging.getLogger("asyncio").addFilter(lambda record: not late_read_error(record))


def _late_callback(unraisable: object) -> bool:
    err = getattr(unraisable, "exc_value", None)
    return isinstance(err, RuntimeError) and str(err) == "Event loop is closed"


def _shows_errors(logger: logging.Logger) -> bool:
    """Whether an error ``logger`` logs reaches the console (stdout or stderr) through the logging config in place."""
    if logger.disabled or not logger.isEnabledFor(logging.ERROR):
        return False
    consoles, current, found = (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__), logger, False
    while current is not None:
        for handler in current.handlers:
            found = True
            if (getattr(handler, "stream", None) in consoles and not isinstance(handler, logging.FileHandler)
                    and handler.level <= logging.ERROR):
                return True
        current = current.parent if current.propagate else None
    return not found  # no handler at all: logging's last resort prints it on stderr


@contextlib.contextmanager
def errors_on_console(logger: logging.Logger) -> Iterator[None]:
    """While a job runs under a logging config that shows none of its errors on the console (``hydra/job_logging=
    disabled``, or one writing only to files), each error ``logger`` logs is still one ``[ERROR]`` line on stderr
    (so a failed run does not exit 1 saying nothing); its other lines stay as quiet as that config asked.

    Parameters
    ----------
    logger : logging.Logger
        The job's logger (``gensbi_sharding``), whose errors are said.
    """
    if _shows_errors(logger):
        yield
        return
    handler, was = logging.StreamHandler(sys.stderr), (logger.disabled, logger.level)
    handler.setLevel(logging.ERROR)
    handler.setFormatter(ConsoleFormatter("%(message)s"))
    handler.addFilter(ConsoleFilter())  # a distributed=local process's error its parent reports: said once, there
    logger.disabled = False
    logger.setLevel(min(logger.getEffectiveLevel(), logging.ERROR))
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.disabled = was[0]
        logger.setLevel(was[1])  # (clears logging's cache of levels, as assigning .level would not)
