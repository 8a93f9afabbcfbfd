"""The step ids a run's stop checks ask JAX's preemption sync point with, past the ids Orbax's saves ask with.

JAX's sync point (``multihost_utils.reached_preemption_sync_point(id)``) is the id one above the last one each
process asked as the notice came (the highest of them): it answers True only to that id. A run's stop checks ask with
a count of their own (``PreemptionWatch``), but every checkpoint save asks too, inside Orbax, with the step number it
saves. A notice that came while a save ran (after Orbax asked with step ``s``) set the sync point at ``s + 1``, an id
the checks, counting above the step numbers (setup and validation checks), had passed already: the notice was never
answered and every process trained on to its last step ("ok"). So the first check after a save asks every id from the
lower of the two (its own last id, the saved step) up to the higher, plus one, in order: whichever was the last asked
as the notice came, the sync point is among them, on every process alike; the count then goes on from the top.
"""

from __future__ import annotations

__all__ = ["saves_near", "ask_past_saves"]


def saves_near(step: int, every: int, pending: tuple[int, int] | None = None) -> tuple[int, int] | None:
    """The lowest and highest step a checkpoint save may have asked the sync point with since the watch last asked,
    at the step boundary after ``step`` (a save of ``step`` itself, or of ``step - 1`` after its validation), with
    ``pending`` (an earlier one not asked past yet); None where no save may have.

    Parameters
    ----------
    step : int
        The training step just ended.
    every : int
        ``train.checkpoint_every`` (0: saves only at the end, told by ``training_done``).
    pending : (int, int) or None
        Saved steps not asked past yet.
    """
    found = [s for s in (step - 1, step) if every > 0 and s > 0 and s % every == 0] + list(pending or ())
    return (min(found), max(found)) if found else None


def ask_past_saves(next_id: int, saved: tuple[int, int] | None) -> tuple[bool, int]:
    """Ask the sync point with ``next_id``, or, after saves (``saves_near``), with every id from the lower of the last
    one asked (``next_id - 1``) and the lowest saved step, plus one, up to the higher of it and the highest saved step,
    plus one; stops at the first id it answers True to.

    Returns
    -------
    (bool, int)
        Whether the sync point was reached, and the last id asked (the count goes on from it).
    """
    from jax.experimental import multihost_utils

    last = next_id - 1
    low, high = (next_id, next_id) if saved is None else (min(last, saved[0]) + 1, max(last, saved[1]) + 1)
    for step_id in range(low, high + 1):
        if multihost_utils.reached_preemption_sync_point(step_id):
            return True, step_id
    return False, high
