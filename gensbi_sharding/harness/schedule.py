"""The learning rate by step (``train.schedule``), and what a resumed run's other schedule changes.

A run continued from a checkpoint takes its optimizer's step count and follows the schedule of
*this* run's ``train.steps``, ``train.learning_rate``, ``train.schedule`` and ``train.warmup_steps``;
with others than the run that saved it, the rate jumps at the resume step (a cosine to 3,000 steps
continued with ``train.steps=300`` at step 250 drops from 2.8e-3 to 2.0e-4). ``schedule_change_note``
says so, naming the values and the rate under each. The optimizer's state holds a step count only under a
schedule (``counts_steps``): a resumed run builds its rate in the saved run's form, so its state restores
whatever schedule it switches to, but for a schedule from a checkpoint without a count (``schedule_refusal``).
"""

from __future__ import annotations

from typing import Any

import optax

from gensbi_sharding.harness.held_out import config_value
from gensbi_sharding.harness.python_words import WITHOUT_RESUME, fix_said, said_as, setting

__all__ = ["SCHEDULES", "COUNTS_STEPS", "learning_rate_schedule", "counts_steps", "saved_counts_steps",
           "schedule_refusal", "schedule_change_note"]

#: ``train.schedule`` choices.
SCHEDULES = ("cosine", "constant")

#: The settings that decide the learning rate at each step.
SCHEDULE_KEYS = ("steps", "learning_rate", "schedule", "warmup_steps")
#: The other settings each step trains under, a resumed run's own (the EMA's presence is fixed by the checkpoint).
TRAINED_UNDER = ("train.weight_decay", "train.ema_decay", "data.batch_size")


def learning_rate_schedule(*, learning_rate: float, steps: int, schedule: str = "cosine",
                           warmup_steps: int = 0, counted: bool = False) -> Any:
    """The learning rate by optimizer step: a linear warm-up to ``learning_rate``, then cosine decay to 0 or constant.

    Parameters
    ----------
    learning_rate : float
        The peak (``train.learning_rate``).
    steps : int
        ``train.steps``: where the cosine reaches 0.
    schedule : str
        ``train.schedule``: cosine or constant.
    warmup_steps : int
        ``train.warmup_steps``, shorter than ``steps``.
    counted : bool
        A schedule even for a constant rate without warm-up (whose optimizer state then counts steps, as a
        checkpoint saved under another schedule holds them: ``counts_steps``).

    Returns
    -------
    optax.Schedule or float
        What ``optax.adamw`` takes: ``schedule(step)`` is the rate at a step; a float when constant without warm-up
        and not ``counted``.

    Raises
    ------
    ValueError
        For an unknown ``schedule`` or a warm-up not shorter than ``steps``.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"train.schedule={schedule!r} is not one of {', '.join(SCHEDULES)}")
    if not 0 <= warmup_steps < steps:
        raise ValueError(f"train.warmup_steps={warmup_steps} must lie in 0..train.steps-1 ({steps - 1})")
    if schedule == "cosine":
        return optax.warmup_cosine_decay_schedule(0.0, learning_rate, warmup_steps, steps, end_value=0.0)
    if warmup_steps:
        return optax.join_schedules([optax.linear_schedule(0.0, learning_rate, warmup_steps),
                                     optax.constant_schedule(learning_rate)], [warmup_steps])
    return optax.constant_schedule(learning_rate) if counted else learning_rate


#: The checkpoint info's key: whether the saved optimizer state counts steps (``counts_steps``).
COUNTS_STEPS = "optimizer_counts_steps"


def counts_steps(train: dict) -> bool:
    """Whether the optimizer of a fresh run with these ``train`` settings counts steps: ``optax.adamw`` keeps a
    count for a schedule, none for a constant rate without warm-up (an older checkpoint's config lacking them: a
    count). A resumed run's counts as its checkpoint's did (``saved_counts_steps``), whatever its own settings."""
    return train.get("schedule", "cosine") != "constant" or bool(train.get("warmup_steps", 0))


def saved_counts_steps(saved: dict, info: dict) -> bool:
    """Whether the optimizer state of a checkpoint (its saved config and info) counts steps: as its info says, or,
    saved before it said, as its run's settings gave (``counts_steps``; each run then built its own afresh)."""
    said = info.get(COUNTS_STEPS)
    return counts_steps(saved.get("train") or {}) if said is None else bool(said)


def schedule_refusal(saved: dict, now: dict, info: dict) -> str | None:
    """Why a checkpoint (its saved config and info) cannot continue under ``now``'s schedule, with the fix; None
    when it can: any change but a schedule continuing a constant rate without warm-up, whose optimizer state
    holds no step count to read the schedule at (a restore would refuse it as "another optimizer")."""
    old, new = saved.get("train") or {}, now.get("train") or {}
    if saved_counts_steps(saved, info) or not counts_steps(new):
        return None
    this = " ".join(f"train.{k}={new[k]}" for k in ("schedule", "warmup_steps") if new[k] != old.get(k))
    return (f"was saved with train.schedule=constant train.warmup_steps=0, a constant learning rate whose optimizer "
            f"state holds no step count, so it cannot continue under a schedule (this run: {this}): "
            f"{fix_said(['train.schedule=constant', 'train.warmup_steps=0'])} (train.learning_rate may change), or "
            f"start a new run {said_as(*WITHOUT_RESUME)}")


def schedule_change_note(saved: dict, now: dict, step: int) -> tuple[str, bool] | None:
    """How resuming at ``step`` under ``now``'s schedule differs from the run that saved it; None if not at all,
    or if this run trains nothing from ``step`` (at or past its ``train.steps``: it only evaluates, or is refused),
    but for an unfinished run (``step`` below the saved run's ``train.steps``): the ``train.steps`` that finishes it.

    Parameters
    ----------
    saved, now : dict
        The checkpoint's saved config and this run's (plain dicts with a ``train`` section).
    step : int
        The checkpoint's step: the optimizer's step count, where this run starts.

    Returns
    -------
    (str, bool) or None
        One line naming the settings that differ (the saved values and this run's), the learning rate
        at ``step`` under each and how to continue the run as it would have gone; and whether the
        saved run was unfinished (``step`` below its ``train.steps``: then the change is likely a
        slip, worth a warning; a finished run trained further changes its schedule by design).
    """
    old, new = saved.get("train") or {}, now.get("train") or {}
    if any(old.get(k) is None for k in SCHEDULE_KEYS):  # an older checkpoint without them: nothing to compare
        return None
    if new.get("steps") is not None and new["steps"] <= step < old["steps"]:  # an unfinished run only scored (or
        # refused, beyond), e.g. one of the 4,000-step default continued under the 3,000-step one by the command it
        # printed: said, not scored as if finished with status ok; beyond, more than "set train.steps=<its step>"
        scored = f"this run, {setting('train.steps', step)}, trains nothing and scores its weights as they are; " * (
            step == new["steps"])
        finish = fix_said([f"train.steps={old['steps']}"])
        return (f"train.resume: the checkpoint at step {step} is of an unfinished run (train.steps={old['steps']}): "
                f"{scored}{finish} to finish it", True)
    if new.get("steps") is not None and step >= new["steps"]:  # no step runs at a rate: was a note of the
        return None  # rate (e.g. "0 at step 20" of a 10-step schedule), then "beyond train.steps=10"'s refusal
    differ = [k for k in SCHEDULE_KEYS if old[k] != new[k]]
    # The other settings a step trains under, said alike (train.weight_decay=0.5 on an unfinished run too).
    values = {key: config_value(saved, key) for key in TRAINED_UNDER}
    changed = [key for key, value in values.items() if value is not None and value != config_value(now, key)]
    if not differ and not changed:
        return None

    def rate(train: dict) -> float:
        lr = learning_rate_schedule(**{k: train[k] for k in SCHEDULE_KEYS[1:]}, steps=train["steps"])
        return float(lr(step) if callable(lr) else lr)

    unfinished = step < old["steps"]
    typed = [*(f"train.{k}={old[k]}" for k in differ), *(f"{key}={values[key]}" for key in changed)]
    then = " ".join(typed)
    this = " ".join([*(f"train.{k}={new[k]}" for k in differ), *(f"{key}={config_value(now, key)}" for key in changed)])
    applies = (f"the learning rate follows this run's schedule, {rate(new):.3g} at step {step} where the saved run's "
               f"gives {rate(old):.3g}" if differ else "this run's values apply")
    return (f"train.resume: the checkpoint at step {step} trained with {then} (this run: {this}): from step {step} "
            f"{applies}" + f"; {fix_said(typed)} to continue the run as it would have gone" * unfinished, unfinished)
