"""Warnings about training settings that pass the checks yet cannot act in this run: ``patience_note``.

Pure Python: ``train_checkpoints`` logs the note once the run knows where it starts (a resumed run's early stopping
carries its validations), before the first step.
"""

from __future__ import annotations

__all__ = ["early_validations", "patience_note"]


def early_validations(start: int, steps: int, val_every: int) -> int:
    """How many validations the loop runs before its last step, after steps ``start + 1 .. steps - 1``: every
    ``val_every`` steps (0: none; ``validation.validates_at``). Only these can end a run early: a stop at the last
    step trained every step."""
    return max(0, (steps - 1) // val_every - start // val_every) if val_every > 0 else 0


def patience_note(*, patience: int, val_every: int, steps: int, start: int = 0, since_best: int = 0,
                  validated: bool = False) -> str | None:
    """The one-line warning that ``train.patience`` can never end this run early; None when it can (or is 0).

    The config checks let ``train.val_every`` >= ``train.steps`` through (a preset's patience in a short run,
    ``experiment=sbibm train.steps=100``), and ``train.patience=20`` with ``train.val_every=250`` over 3,000 steps
    (12 validations) alike: early stopping then had no effect, said nowhere, and the run trained every step.

    Parameters
    ----------
    patience, val_every, steps : int
        ``train.patience``, ``train.val_every``, ``train.steps``.
    start : int
        The step training starts from (a resumed run's checkpoint step).
    since_best, validated : int, bool
        The early stopping carried into the run: validations since its best, and whether it holds a best yet.

    Returns
    -------
    str or None
        Names the values, the validations the run has and needs, and a ``train.val_every`` that gives enough.
    """
    if patience <= 0 or steps <= start:
        return None
    have = early_validations(start, steps, val_every)
    # A first validation is always a new best; after it, each without a new best counts towards patience.
    need = patience - since_best if validated else patience + 1
    if have >= need:
        return None
    span = steps - start
    every = (span - 1) // need  # at least `need` multiples of it in (start, steps - 1]
    fix = (f"train.val_every={every} (or less) lets it stop early" if every >= 1 else
           f"no train.val_every gives {need} validations before the last of {span} step(s)")
    return (f"train.patience={patience} cannot end this run early: steps {start}..{steps} with "
            f"train.val_every={val_every} validate {have} time(s) before the last step, and early stopping needs "
            f"{need} ({f'its next {need}' if validated else f'a first best, then {patience}'} without a new best); "
            f"the run trains to train.steps={steps}. {fix}; train.patience=0 says no early stopping")
