"""A run resumed (into a new folder) from a checkpoint whose early stopping had already ended training, with a larger
``train.steps``: the log says that early stopping, not the step count, left nothing to train, and how to train on.

Was: "nothing left to train: the checkpoint holds step 75 of train.steps=300", naming no cause (its patience, which
the resumed run applies again to the restored validations) and no fix; ``train.patience=0`` trains on.
"""

import logging

import pytest

from faults_helpers import run_tiny
from gensbi_sharding.harness.python_words import as_overrides

STOPPING = ("train.val_every=1", "train.patience=1", "train.ema_decay=0", "train.learning_rate=0.3")


@pytest.mark.slow  # three tiny runs (about 20 s on 2 cores)
def test_a_resume_that_early_stopping_leaves_nothing_to_train_names_it_and_the_fix(tmp_path, devices, caplog):
    first = run_tiny(tmp_path / "a", *STOPPING)
    assert first["stopped_early"] and first["final_step"] < 8  # the premise: early stopping ended it
    stop, best = first["final_step"], first["best_step"]
    after = sum(step > best for step, _ in first["val_history"])
    # launch.py's words (run(cfg) from Python says cfg.train.patience=0: tests/test_run_logged_words_r79f.py)
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"), as_overrides():
        again = run_tiny(tmp_path / "b", *STOPPING, "train.steps=20", f"train.resume={tmp_path / 'a'}")
    assert again["steps"] == 0 and again["stopped_early"]
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("nothing")]
    assert said == [f"nothing trained: early stopping had ended training at the checkpoint's step {stop} ({after} "
                    f"validations after the best, step {best}; train.patience=1); val loss "
                    f"{again['final_val_loss']:.4f} over {again['val_pairs']} pairs; to train on to train.steps=20, "
                    f"set train.patience=0 (or above {after})"], said
    on = run_tiny(tmp_path / "c", *STOPPING[:1], *STOPPING[2:], "train.patience=0", "train.steps=20",
                  f"train.resume={tmp_path / 'a'}")  # the fix it names
    assert on["final_step"] == 20 and on["steps"] == 20 - stop
