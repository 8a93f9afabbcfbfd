"""A scikit-learn fit (C2ST's cross-validation) that a Ctrl-C stops as the caller's SIGINT handler says, in this
process or in joblib's worker processes: scikit-learn catches ``KeyboardInterrupt`` (``MLPClassifier.fit`` returns its
half-fitted model) and would go on with the next fold."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["fit_through_ctrl_c"]


class _Interrupted(BaseException):
    """A ``KeyboardInterrupt`` carried past scikit-learn, which catches that one (and ``Exception``)."""


def fit_through_ctrl_c(fit: Callable[[], Any], parallel: bool) -> Any:
    """``fit()``, a Ctrl-C meaning what the caller's SIGINT handler makes of it, with worker processes or without.

    ``MLPClassifier.fit`` catches ``KeyboardInterrupt`` and returns its half-fitted model, and ``cross_val_score``
    fits the next fold (so a Ctrl-C during C2ST would end one fold's fit only, "Training interrupted by user."); the
    handler's exception crosses scikit-learn as one it does not catch and is a ``KeyboardInterrupt`` again here.
    ``parallel``: joblib's workers, in the terminal's process group, ignore SIGINT, so a Ctrl-C the caller's handler
    only records (a run's first: stop once the observation under way is scored) lets them finish, as it lets one
    process finish (was, with ``eval.c2st_jobs=2``: the workers died, "stopped at once" after one Ctrl-C, or
    returned half-fitted scores); a pool one broke while starting, before it could ignore it, is fitted again once.
    A failure after a Ctrl-C, the second time, is that Ctrl-C.

    Parameters
    ----------
    fit : callable
        ``fit()`` runs the fits (``cross_val_score``) and returns their result.
    parallel : bool
        Whether ``fit`` runs them in joblib's loky worker processes.

    Returns
    -------
    Any
        What ``fit()`` returned.

    Raises
    ------
    KeyboardInterrupt
        What the caller's SIGINT handler raised for a Ctrl-C, after the fits it lets finish.
    """
    from joblib import parallel_config

    def once() -> Any:
        with parallel_config(backend="loky", initializer=signal.signal, initargs=(
                signal.SIGINT, signal.SIG_IGN)) if parallel else contextlib.nullcontext():  # in force as made
            return fit()

    if threading.current_thread() is not threading.main_thread() or not callable(
            previous := signal.getsignal(signal.SIGINT)):  # SIG_IGN, SIG_DFL, or one set from C: nothing raised
        return once()
    seen: list[int] = []

    def handler(signum: int, frame: Any) -> None:
        seen.append(signum)
        try:
            previous(signum, frame)
        except KeyboardInterrupt as interrupt:
            raise _Interrupted from interrupt

    signal.signal(signal.SIGINT, handler)
    try:
        for attempt in (1, 2):
            try:
                return once()
            except _Interrupted as carried:
                raise carried.__cause__ from None
            except Exception:
                if not seen:
                    raise
                if attempt == 2 or not parallel:
                    raise KeyboardInterrupt from None  # the workers' end, from the Ctrl-C this process got too
                seen.clear()
    finally:
        signal.signal(signal.SIGINT, previous)
