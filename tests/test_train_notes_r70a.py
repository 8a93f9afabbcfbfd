"""A ``train.patience`` that can never end the run early is said before training (round 70, BREAK70A).

Was: ``train.patience=2 train.val_every=100`` over 8 steps (one validation, after the last step), or
``train.patience=20`` with ``train.val_every=250`` over 3,000 steps (12 validations, 21 needed), passed the checks
(``val_every >= steps`` is let through for a preset's patience in a short run) and trained every step without a
word: the early stopping asked for had no effect. Now a warning names the values, the validations the run has and
needs, and a ``train.val_every`` that gives enough.
"""

import logging

import pytest

from faults_helpers import run_tiny

from gensbi_sharding.harness.python_words import as_overrides
from gensbi_sharding.harness.train_notes import early_validations, patience_note
from gensbi_sharding.harness.validation import validates_at


@pytest.mark.parametrize("start,steps,every", [(0, 8, 100), (0, 8, 3), (0, 3000, 250), (7, 8, 1), (5, 23, 4),
                                               (0, 9, 0), (250, 3000, 250)])
def test_early_validations_counts_what_the_loop_validates_before_its_last_step(start, steps, every):
    loop = sum(validates_at(s, val_every=every, last_step=steps) for s in range(start + 1, steps))
    assert early_validations(start, steps, every) == loop


def test_an_unreachable_patience_is_named_with_a_val_every_that_reaches_it():
    note = patience_note(patience=20, val_every=250, steps=3000)
    assert note.startswith("train.patience=20 cannot end this run early: steps 0..3000 with train.val_every=250 "
                           "validate 11 time(s) before the last step, and early stopping needs 21 (a first best, "
                           "then 20 without a new best)")
    assert "train.val_every=142 (or less)" in note
    # The advice passes: with it the patience can end the run (21 validations), one more is still too few.
    assert patience_note(patience=20, val_every=142, steps=3000) is None
    assert early_validations(0, 3000, 142) == 21 and early_validations(0, 3000, 143) == 20
    assert patience_note(patience=21, val_every=143, steps=3000) is not None
    # 143 validates 21 times, the 21st at step 3000 itself: a stop there is no early stop (review of round 70)
    assert patience_note(patience=20, val_every=143, steps=3000) is not None


def test_a_reachable_or_absent_patience_says_nothing():
    assert patience_note(patience=0, val_every=0, steps=100) is None
    assert patience_note(patience=20, val_every=200, steps=20000) is None  # experiment=sbibm: 100 validations
    assert patience_note(patience=1, val_every=1, steps=3) is None  # a best, then one without, before step 3
    assert patience_note(patience=1, val_every=1, steps=2) is not None  # the one without is at the last step


def test_a_resumed_run_counts_the_validations_its_early_stopping_carries():
    # Two validations since the best carried: one more without a new best ends it (patience 3).
    assert patience_note(patience=3, val_every=10, steps=40, start=20, since_best=2, validated=True) is None
    note = patience_note(patience=3, val_every=10, steps=30, start=20, since_best=0, validated=True)
    assert "steps 20..30 with train.val_every=10 validate 0 time(s) before the last step, and early stopping needs 3 " \
           "(its next 3 without" \
           in note
    assert "train.val_every=3 (or less)" in note
    assert patience_note(patience=3, val_every=3, steps=30, start=20, since_best=0, validated=True) is None


def test_no_val_every_fits_a_patience_beyond_the_steps():
    note = patience_note(patience=10, val_every=1, steps=5)
    assert "needs 11" in note and "no train.val_every gives 11 validations before the last of 5 step(s)" in note


@pytest.mark.slow  # two tiny runs, about 10 s on 2 cores
def test_a_run_whose_patience_cannot_act_warns_before_training(tmp_path, devices, caplog):
    # launch.py's words (run(cfg) from Python says cfg's settings: tests/test_run_logged_words_r79f.py)
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"), as_overrides():
        metrics = run_tiny(tmp_path / "a", "train.patience=2", "train.val_every=100")
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("train.patience=")]
    assert said == ["train.patience=2 cannot end this run early: steps 0..8 with train.val_every=100 validate 0 "
                    "time(s) before the last step, and early stopping needs 3 (a first best, then 2 without "
                    "a new best); the run trains to train.steps=8. train.val_every=2 (or less) lets it stop early; "
                    "train.patience=0 says no early stopping"]
    # Every process of a job knows it: process 0 says it on the console, the others in their logs (not twice)
    assert all(getattr(r, "every_process", False) for r in caplog.records if r.getMessage() == said[0])
    messages = [r.getMessage() for r in caplog.records]
    assert messages.index(said[0]) < next(i for i, m in enumerate(messages) if m.startswith("[5/7] train"))
    assert metrics["steps"] == 8 and not metrics["stopped_early"]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):  # the advice pasted: no warning
        run_tiny(tmp_path / "b", "train.patience=2", "train.val_every=2")
    assert not [r for r in caplog.records if r.getMessage().startswith("train.patience=")]
