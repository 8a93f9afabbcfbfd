"""What the console shows of a record, and how: ``ConsoleFilter`` (the records kept off it), ``ConsoleFormatter`` and
``tagged`` (a line's ``[WARNING]``/``[ERROR]`` tag), and the JAX process whose lines are tagged (``set_process``).

Below ``console`` (which re-exports every name, as ``conf/hydra/job_logging/gensbi.yaml`` and the harness name them
there) and ``log_file`` (whose handlers use them), so that ``log_file`` no longer imports ``console``, which sets up
its handlers. Pure Python: no JAX.
"""

from __future__ import annotations

import logging
import re

from gensbi_sharding.harness.native_console import NATIVE

__all__ = ["DETAILS", "NOISY_WARNINGS", "NOISY_MESSAGES", "SAVE_WAIT", "SAVE_WAIT_SAID", "set_process", "stop_level",
           "ConsoleFilter", "STATUS_TEXT", "late_read_error", "REFUSAL_CLASS", "tagged",
           "ConsoleFormatter"]

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

#: Orbax's note at a save that waited over a second for the one before (logger "absl"): once a job on the console, in
#: words naming the setting (``SAVE_WAIT_SAID``); every one in launch.log (at every save the console's would be 8 lines)
SAVE_WAIT = "Waiting for previous save to complete took"
SAVE_WAIT_SAID = ("a checkpoint save waited {:.1f} s for the previous one to finish, training held meanwhile (said "
                  "once; every wait is in launch.log): a larger train.checkpoint_every saves less often")

_process = {"index": 0, "count": 1}


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


#: The shape in ``constrain``'s fallback warning, which names one traced call: training, validation and sampling
#: batches differ, so Python's once-per-text left three of each on the console (30 lines for one quick run).
_ACTIVATION_SHAPE = re.compile(r" of shape \([^)]*\)")
_SOURCE_LINE = re.compile(r"\n  \S[^\n]*\s*\Z")  # warnings.formatwarning's last line, the code that warned


class ConsoleFilter(logging.Filter):
    """Passes what a person at the console needs; ``verbose=True`` adds the full tables. Hydra makes one per job,
    so an activation's fallback warning is said once per job, whatever shapes it was traced at (all in launch.log)."""

    def __init__(self, verbose: bool = False) -> None:
        super().__init__()
        self.verbose, self._activations, self._save_waits = bool(verbose), set(), 0

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
        if record.name == "absl" and str(record.msg).startswith(SAVE_WAIT):  # ConsoleFormatter words it
            self._save_waits += 1
            return self._save_waits == 1
        if late_read_error(record):
            return False
        if (_process["index"] > 0 and getattr(record, "every_process", False)
                or getattr(record, "parent_reports", False)):
            return False
        return not (_process["index"] > 0 and record.levelno < logging.WARNING)


#: The start of a TensorStore error's text: its status code (absl's names), as in ValueError('NOT_FOUND: ...').
STATUS_TEXT = re.compile(r"(CANCELLED|UNKNOWN|INVALID_ARGUMENT|DEADLINE_EXCEEDED|NOT_FOUND|ALREADY_EXISTS|"
                         r"PERMISSION_DENIED|RESOURCE_EXHAUSTED|FAILED_PRECONDITION|ABORTED|OUT_OF_RANGE|UNIMPLEMENTED|"
                         r"INTERNAL|UNAVAILABLE|DATA_LOSS|UNAUTHENTICATED): ")


def late_read_error(record: logging.LogRecord) -> bool:
    """Whether ``record`` is asyncio's "Task exception was never retrieved" for a TensorStore read that failed with
    its status (``ValueError('NOT_FOUND: ...')``): a damaged checkpoint's reads still under way when its refusal was
    said, reported as the process ends (sample.py: now and then, below its one [ERROR] line); launch.log keeps them."""
    exc = record.exc_info[1] if record.exc_info else None
    return (record.name == "asyncio" and record.getMessage().startswith("Task exception was never retrieved")
            and STATUS_TEXT.match(str(exc)) is not None)


#: The class name a refusal of the user's input carries in ``metrics.json`` and launch.log (``config.ConfigError``),
#: which ``local_children`` reads back there; never said on the console.
REFUSAL_CLASS = "ConfigError: "


def tagged(level: str, text: str) -> str:
    """``[ERROR] text``: the one tag a console line gets for its level (messages carry none of their own).

    A refusal of the user's input reads the same wherever it was found: the command's checks said
    "[ERROR] train.steps=1.5: ...", the run's "[ERROR] ConfigError: mesh.model_axis=3: ...". Now no line, nor a sweep's
    job line within it ("job 1 (seed=-1): ..."), carries the class name.

    Parameters
    ----------
    level : str
        E.g. ``"ERROR"``, ``"WARNING"``.
    text : str
        The message, one line or several.

    Returns
    -------
    str
        E.g. ``"[ERROR] mesh.model_axis=3: 8 devices are not divisible by model_axis=3; set mesh.model_axis=2 ..."``.
    """
    return f"[{level}] {text.replace(REFUSAL_CLASS, '')}"


class ConsoleFormatter(logging.Formatter):
    """Info as the bare message; warnings and errors tagged ``[WARNING]`` / ``[ERROR]`` (``tagged``)."""

    def format(self, record: logging.LogRecord) -> str:
        if record.name == "absl" and str(record.msg).startswith(SAVE_WAIT) and record.args:
            return tagged(record.levelname, SAVE_WAIT_SAID.format(float(record.args[0])))  # launch.log: Orbax's
        text = super().format(record)
        if record.name == "py.warnings":  # not the code line that warned, nor a blank one (launch.log keeps them)
            text = _SOURCE_LINE.sub("", text).rstrip()
        return text if record.levelno < logging.WARNING else tagged(record.levelname, text)
