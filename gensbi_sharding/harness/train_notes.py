"""Warnings about training settings that pass the checks yet cannot act in this run: ``patience_note``; the lines a
resumed run logs where it has nothing to train (``nothing_trained_line``, ``at_steps_line``), their fixes in the
caller's words (launch.py's overrides, ``run(cfg)``'s settings of cfg: ``python_words``).

Pure Python: ``train_checkpoints`` logs the note once the run knows where it starts (a resumed run's early stopping
carries its validations), before the first step.
"""

from __future__ import annotations

from gensbi_sharding.harness.python_words import run_setting, setting

__all__ = ["early_validations", "patience_note", "nothing_trained_line", "at_steps_line"]


def nothing_trained_line(start: int, after: int, best: int, patience: int, val: str, pairs: int, steps: int) -> str:
    """What a resumed run says where early stopping had ended training at its checkpoint's step ``start`` (``after``
    validations after the ``best`` step, ``patience``; ``val`` loss over ``pairs``), with the ``train.patience`` that
    trains on to ``steps``, said as its caller sets it (launch.py: ``train.patience=0``; ``run(cfg)``:
    ``cfg.train.patience=0``). Returns str."""
    fix = run_setting("train.patience", 0)
    return (f"nothing trained: early stopping had ended training at the checkpoint's step {start} ({after} "
            f"validations after the best, step {best}; train.patience={patience}); val loss {val} over {pairs} pairs; "
            f"to train on to train.steps={steps}, set {fix} (or above {after})")


def at_steps_line(start: int, scored: bool) -> str:
    """What a run resumed at its ``train.steps`` (step ``start``) says: its weights are evaluated (``scored``), or only
    their validation loss is measured, with the setting that scores them in its caller's words. Returns str."""
    fix = run_setting("eval.enabled", True, "eval.enabled=true")
    return (f"train.resume: step {start} is train.steps: nothing to train, " + ("evaluating its weights" if scored else
            f"and eval.enabled=false: only its validation loss is measured (set {fix} to score it)"))


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
        Names the values, the validations the run has and needs, and a ``train.val_every`` that gives enough (inside
        ``python_words.in_python_words``, ``run(cfg)`` from Python: as cfg's settings).
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
    fix = (f"{setting('train.val_every', every)} (or less) lets it stop early" if every >= 1 else
           f"no train.val_every gives {need} validations before the last of {span} step(s)")
    return (f"train.patience={patience} cannot end this run early: steps {start}..{steps} with "
            f"train.val_every={val_every} validate {have} time(s) before the last step, and early stopping needs "
            f"{need} ({f'its next {need}' if validated else f'a first best, then {patience}'} without a new best); "
            f"the run trains to train.steps={steps}. {fix}; {setting('train.patience', 0)} says no early stopping")
