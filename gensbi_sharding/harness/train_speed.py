"""The training speed a run reports (``median_step_s``, ``samples_per_s``), the warm-up of the first dispatches out.

The first window of steps holds the warm-up of the first dispatches (buffers allocated, the first transfers, the
host's first calls into the compiled step): ~4x slower per step than the rest on a tiny model. With several windows
the first is left out. With one window (``train.log_every`` >= ``train.steps``, or ``train.steps=1``) it was the
whole figure, read ~4x low with no note: now the window is timed from its second step on (the first step timed apart,
``first_step_s``); only a run of one step keeps its warm-up, and says so (``includes_warmup``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["steady_step_s"]


def steady_step_s(windows: list[tuple[float, int]], first_step_s: float | None) -> tuple[float, bool]:
    """The median step time over the windows, the warm-up left out where the run can, and whether it could not.

    Parameters
    ----------
    windows : list of (float, int)
        Each window's step time (seconds, pauses left out) and its step count, first first.
    first_step_s : float or None
        The first step's own time (from the first window's start to its result); None: not timed.

    Returns
    -------
    (float, bool)
        The median seconds per step (nan with no window), and True where the figure includes the warm-up: one
        window of a single step (nothing after the first step to time).
    """
    if len(windows) > 1:  # the first window holds the warm-up: left out whenever another follows (two too)
        return float(np.median([seconds / count for seconds, count in windows[1:]])), False
    if not windows:
        return float("nan"), False
    seconds, count = windows[0]
    if count > 1 and first_step_s is not None:  # one window: timed from its second step on
        return max(seconds - first_step_s, 0.0) / (count - 1), False
    return seconds / count, True
