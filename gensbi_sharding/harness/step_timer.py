"""Step time of the training loop: windows of steps, with the work between steps left out.

JAX dispatches a step asynchronously: the loop runs ahead of the devices, so when a
checkpoint save or a validation starts, earlier steps may still be queued. Timing such
work from where the loop reached would count those steps as the work's time (a window
with a validation looked several times faster than it was); timing the window from end
to end would count the work as step time (a checkpoint save made steps look ten times
slower). ``StepTimer.paused`` first waits for the queued steps (step time), then leaves
out what runs inside.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["StepTimer"]


class StepTimer:
    """Wall time of the training steps in the current window, pauses excluded.

    Parameters
    ----------
    clock : callable, optional
        Seconds as a float (``time.perf_counter``).
    sync : callable, optional
        Waits for a pytree of arrays to be computed (``jax.block_until_ready``).

    Attributes
    ----------
    paused_s : float
        Seconds left out so far, over all windows.
    """

    def __init__(self, clock: Callable[[], float] = time.perf_counter, sync: Callable[[Any], Any] | None = None):
        if sync is None:
            import jax

            sync = jax.block_until_ready
        self._clock, self._sync = clock, sync
        self._depth, self._window_paused, self.paused_s = 0, 0.0, 0.0
        self._start = clock()

    def start_window(self) -> None:
        """Start a window of steps now."""
        self._start, self._window_paused = self._clock(), 0.0

    @contextlib.contextmanager
    def paused(self, pending: Any = None) -> Iterator[None]:
        """Leave out of step time what runs inside (a checkpoint save, a validation).

        Parameters
        ----------
        pending : pytree of jax.Array, optional
            The newest step's outputs: waited for first, so the queued steps count as step time.
        """
        outer = self._depth > 0  # a pause inside a pause is already left out
        if not outer:
            if pending is not None:
                self._sync(pending)
            began = self._clock()
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if not outer:
                spent = self._clock() - began
                self._window_paused += spent
                self.paused_s += spent

    def window_s(self) -> float:
        """Seconds of step time since ``start_window``.

        The caller has waited for the window's last step (e.g. by reading its loss).
        """
        return self._clock() - self._start - self._window_paused
