"""A run's train losses per logging window, as the progress bar reports them: ``window_means``, ``windows``.

Below ``loss_history`` (which names ``windows`` too) and ``plots`` (which draws them): ``plots`` read them from
``loss_history``, which imports ``plots`` to draw its history (an import cycle).
"""

from __future__ import annotations

import numpy as np

from gensbi_sharding.harness.units import is_int

__all__ = ["window_means", "windows"]


def window_means(steps: np.ndarray, losses: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean train loss per window of ``window`` steps, as the progress bar reports it.

    Windows are counted from step 0 (steps 1..window, window+1..2*window, ...), resumed or not, as
    ``harness.train.train`` cuts them: a resumed run's windows, its last one and the final train loss are the
    uninterrupted run's. A window holds the steps of it that ``steps`` has: the first after a resume, when the
    earlier losses are not joined, and the last are shorter.

    Parameters
    ----------
    steps : ndarray of int, shape (n,)
        Global step number of each loss (1-based: the loss of step 1 is the first), increasing.
    losses : ndarray of float, shape (n,)
    window : int
        ``train.log_every``, >= 1.

    Returns
    -------
    (ndarray, ndarray)
        The global step at each window's end and the window's mean loss (``windows``: also its step count).

    Raises
    ------
    ValueError
        If the shapes differ or ``window`` < 1.
    """
    return windows(steps, losses, window)[:2]


def windows(steps: np.ndarray, losses: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``window_means``' ends and means, then each window's step count: ``window`` but for a window cut short.

    Parameters
    ----------
    steps, losses, window
        As ``window_means``.

    Returns
    -------
    (ndarray, ndarray, ndarray)
        The global step at each window's end, the window's mean loss and its number of steps.
    """
    steps, losses = np.asarray(steps), np.asarray(losses, dtype=np.float64)
    if steps.shape != losses.shape or steps.ndim != 1:
        raise ValueError(f"steps and losses must be 1-D of one length, got {steps.shape} and {losses.shape}")
    if not is_int(window) or window < 1:
        raise ValueError(f"window={window!r} must be an integer >= 1 (train.log_every)")
    index = (steps - 1) // window  # the window of each step
    starts = np.flatnonzero(np.r_[True, index[1:] != index[:-1]]) if len(steps) else np.zeros(0, np.int64)
    sizes = np.diff(np.r_[starts, len(steps)])
    means = np.add.reduceat(losses, starts) / sizes if len(steps) else np.zeros(0)
    return steps[starts + sizes - 1].astype(np.int64), means, sizes.astype(np.int64)
