"""The training progress bar: redrawn in place on a terminal, a line per new state where the console is a file.

tqdm redraws its one line with carriage returns. A file or a pipe (``python launch.py ... > log.txt 2>&1``, a
SLURM job's output) keeps them all on one line, with no newline after the last state: the next console line (an
``[ERROR]`` ending the run, a validation, a signal's ``[WARNING]``) landed on the bar's line, and ``grep`` or an
editor showed it glued to the bar's states. There the bar is a ``LineBar``: each new state a whole line of its own
(tqdm's documented way to draw elsewhere is overriding ``display``), so every line after it starts its own.
"""

from __future__ import annotations

from typing import Any

from tqdm.auto import tqdm

from gensbi_sharding.harness.console import is_terminal

__all__ = ["LineBar", "progress_bar", "window_rate"]


class LineBar(tqdm):
    """A progress bar that writes each new state (its count or postfix changed) as a line, and never redraws.

    ``clear`` writes nothing (there is no partial line to clear): ``tqdm.write`` and ``logging_redirect_tqdm``
    then put a log line between two bar lines; the redraw that follows it is not written again.
    """

    def display(self, msg: str | None = None, pos: int | None = None) -> bool:
        """Write the bar's state as a line if it is new; a message (``""``: tqdm clearing on close) is not written."""
        state = (self.n, str(self.postfix))
        if msg is not None or state == getattr(self, "_shown", None):
            return False  # False: close() then writes no "\r" either
        self._shown = state
        self.fp.write(self.__str__() + "\n")
        self.fp.flush()
        return True

    def clear(self, nolock: bool = False) -> None:
        """Nothing to clear: every state written is a whole line."""


def progress_bar(**kwargs: Any) -> tqdm:
    """``tqdm(**kwargs)`` on a terminal (or in a notebook); a ``LineBar`` where the console is a file or a pipe.

    Parameters
    ----------
    **kwargs
        As ``tqdm`` takes them (``total``, ``desc``, ``disable``, ...); its stream is stderr.

    Returns
    -------
    tqdm
        A ``LineBar`` shows every update it gets (``miniters=1``, ``mininterval=0``): the caller updates it once
        per logging window.
    """
    if is_terminal(2) or "notebook" in tqdm.__module__:
        return tqdm(**kwargs)
    return LineBar(**{**kwargs, "miniters": 1, "mininterval": 0})


def window_rate(batch_size: int, windows: list[tuple[float, int]], first_step_s: float | None = None) -> str:
    """The samples/s of the newest logging window, as the progress bar shows it (its ``samples_s``).

    The first window (an attempt's first step in it) holds that step's warm-up too (its first dispatches): ~4x low
    against the steady speed of the final line, which leaves it out. Its time is left out here as well where it
    was timed (``first_step_s``: a run of one window) and a step follows it; else the figure says it.

    Parameters
    ----------
    batch_size : int
        Samples a step.
    windows : list of (float, int)
        Each window's step time (seconds, pauses left out) and its step count so far, first first
        (``train_speed.steady_step_s``'s).
    first_step_s : float, optional
        The first step's own time, where it was timed.

    Returns
    -------
    str
        Whole samples/s, with ``" (warm-up incl.)"`` where the warm-up is in it.
    """
    (seconds, steps), first = windows[-1], len(windows) == 1
    if first and first_step_s is not None and steps > 1 and seconds > first_step_s:
        return f"{batch_size * (steps - 1) / (seconds - first_step_s):.0f}"
    return f"{batch_size * steps / seconds:.0f}" + (" (warm-up incl.)" if first else "")
