"""A second Ctrl-C while a checkpoint is saved or committed: held until the save ends, then raised.

A run's first Ctrl-C stops it at the next step boundary, after a checkpoint; a second stops it at once
(``KeyboardInterrupt``, ``PreemptionWatch``). Raised while Orbax wrote or committed a checkpoint, it landed inside
Orbax's wait: Orbax logged "[ERROR] ... Save Finalize thread (save_finalize) failed" with the traceback, and the
run recorded ``stopped_at_step: null`` though the checkpoint was committed (``train.resume=auto`` continued from it).
Inside ``hold_interrupt()`` the watch's handler defers it (``defer_interrupt``); it is raised as the save ends, so
the run records the checkpoint the save committed. Nothing is waited for longer: the process's exit finished a
save under way anyway. One landing in a finalizer (``tqdm.__del__``) or a garbage-collector callback (JAX's) is
deferred as well: raised there, Python printed its traceback and dropped it. A third Ctrl-C raises at once.

A handler's console lines wait until the outermost handler ends (``handler_lines``, ``say``), then come out in the
order of the presses: a second Ctrl-C landing while the first one's handler ran (Python runs it there, nested)
printed "Ctrl-C again: ..." before the first one's "received Ctrl-C: ...".
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

__all__ = ["hold_interrupt", "defer_interrupt", "reset", "handler_lines", "say", "in_finalizer"]

log = logging.getLogger("gensbi_sharding")

_state = {"depth": 0, "pending": False}  # holds open (nested); a Ctrl-C deferred, raised as the outermost ends
_said: dict = {"handlers": 0, "lines": []}  # signal handlers running (nested); their lines: (rank, logger, level, text)


@contextlib.contextmanager
def handler_lines() -> Iterator[None]:
    """Around a signal handler's body: the lines it and any handler nested in it ``say`` come out as the outermost one
    ends (also when one raises ``KeyboardInterrupt``), by rank, then in the order said."""
    _said["handlers"] += 1
    try:
        yield
    finally:
        try:  # still counted while it logs: a handler landing inside the logging queues its line after these
            while _said["handlers"] == 1 and _said["lines"]:
                lines, _said["lines"] = sorted(_said["lines"], key=lambda line: line[0]), []
                for _, logger, level, text in lines:
                    logger.log(level, "%s", text)
        finally:
            _said["handlers"] -= 1


def say(rank: int, logger: logging.Logger, level: int, text: str) -> None:
    """Log ``text`` as the outermost ``handler_lines`` ends (at once outside one), before lines of a higher ``rank``.

    Parameters
    ----------
    rank : int
        Its place among the lines of one burst of signals: 0 the first signal's, 1 a second Ctrl-C's.
    logger : logging.Logger
    level : int
    text : str
    """
    _said["lines"].append((rank, logger, level, text))
    if not _said["handlers"]:
        with handler_lines():
            pass


@contextlib.contextmanager
def hold_interrupt() -> Iterator[None]:
    """Inside: a Ctrl-C that would stop the run at once waits for the block to end (a checkpoint's save or commit).

    Raises
    ------
    KeyboardInterrupt
        On leaving the outermost block, when a Ctrl-C was deferred inside it.
    """
    _state["depth"] += 1
    try:
        yield
    finally:
        _state["depth"] -= 1
        if _state["depth"] == 0 and _state["pending"]:
            _state["pending"] = False
            raise KeyboardInterrupt


def defer_interrupt(frame: Any = None) -> bool:
    """Whether the Ctrl-C that would stop the run at once is deferred: inside ``hold_interrupt``, or when it landed in
    a finalizer (``__del__``, a ``weakref`` or garbage-collector callback: Python prints "Exception ignored in ..."
    there and goes on); never a third.

    Parameters
    ----------
    frame : frame or None
        The frame the signal interrupted (the handler's second argument).

    Returns
    -------
    bool
        True: the caller raises nothing now; ``hold_interrupt`` raises ``KeyboardInterrupt`` as its block ends.
    """
    held = bool(_state["depth"])
    if _state["pending"] or not (held or in_finalizer(frame)):
        return False
    _state["pending"] = True
    where = "once the checkpoint under way is saved" if held else "at the next checkpoint, or as the first asked"
    say(1, log, logging.WARNING, f"Ctrl-C again: stopping {where} (Ctrl-C once more stops at once)")
    return True


def reset() -> None:
    """Forget a deferred Ctrl-C: a new run starts (a test's, or a sweep's next job after one that ended)."""
    _state.update(depth=0, pending=False)
    _said.update(handlers=0, lines=[])


def in_finalizer(frame: Any) -> bool:
    """Whether ``frame`` (a signal handler's second argument) is a finalizer's (``__del__``, a ``weakref`` callback)
    or a garbage-collector callback's, or one of the few frames such a one called: an exception raised there is
    printed ("Exception ignored in ...") and dropped.

    Parameters
    ----------
    frame : frame or None

    Returns
    -------
    bool
    """
    import gc

    # The garbage collector's callbacks drop an exception as finalizers do (JAX's _xla_gc_callback, run at every
    # collection: "Exception ignored in: <function _xla_gc_callback ...>").
    collector = {getattr(callback, "__code__", None) for callback in gc.callbacks}
    for _ in range(8):  # the finalizer's own frame, or one of the few it called
        if frame is None:
            return False
        code = frame.f_code
        if code.co_name == "__del__" or code.co_filename.endswith("weakref.py") or code in collector:
            return True
        frame = frame.f_back
    return False
