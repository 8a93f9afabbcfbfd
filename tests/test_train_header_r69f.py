"""The training phase's header of a resumed run that trains nothing says so, not the steps it will not run (round 69,
LEFT69 item 3).

Was: a run resumed from a checkpoint whose early stopping had ended training printed "[5/7] train: steps 10200..20000,
..." and then "nothing trained: early stopping had ended training at the checkpoint's step 10200 ..."; one resumed at
its train.steps, "[5/7] train: steps 3000..3000", and, with eval.enabled=false, "train.resume: step 3000 is train.steps:
nothing to train, evaluating its weights" before "[6/7] sample + C2ST: skipped". Now each says what will be done.
"""

import logging

import pytest
from omegaconf import OmegaConf

from faults_helpers import run_tiny
from gensbi_sharding.harness.python_words import as_overrides

from gensbi_sharding.harness.train_header import train_header

STOPPING = ("train.val_every=1", "train.patience=1", "train.ema_decay=0", "train.learning_rate=0.3")


def _headers(caplog):
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("[5/7]")]


@pytest.mark.slow  # three tiny runs (about 10 s on 2 cores)
def test_a_resumed_run_that_trains_nothing_says_so_in_its_header(tmp_path, devices, caplog):
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        first = run_tiny(tmp_path / "a", *STOPPING)
    assert first["stopped_early"] and first["final_step"] < 8  # the premise: early stopping ended it
    stop = first["final_step"]
    assert _headers(caplog) == ["[5/7] train: steps 0..8, global batch 64"]  # a run that trains: as before
    step_dir = tmp_path / "a" / "checkpoints" / str(stop)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        again = run_tiny(tmp_path / "b", *STOPPING, "train.steps=20", f"train.resume={tmp_path / 'a'}")
    assert again["steps"] == 0 and again["stopped_early"]
    # was: f"[5/7] train: steps {stop}..20, global batch 64, resumed from step {stop} ({step_dir})"
    assert _headers(caplog) == [f"[5/7] train: nothing to train, resumed from step {stop} ({step_dir}): early "
                                "stopping had ended training there"]
    caplog.clear()
    # launch.py's words (run(cfg) from Python says cfg.eval.enabled=True: tests/test_run_logged_words_r79f.py)
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"), as_overrides():
        at_end = run_tiny(tmp_path / "c", *STOPPING, f"train.steps={stop}", f"train.resume={tmp_path / 'a'}")
    assert at_end["steps"] == 0
    assert _headers(caplog) == [f"[5/7] train: nothing to train, resumed from step {stop} ({step_dir}): "
                                f"train.steps={stop} is reached"]  # was: f"steps {stop}..{stop}, ..."
    # eval.enabled=false (TINY): was "..., evaluating its weights", then "[6/7] sample + C2ST: skipped"
    assert [r.getMessage() for r in caplog.records if r.getMessage().startswith("train.resume: step")] == [
        f"train.resume: step {stop} is train.steps: nothing to train, and eval.enabled=false: only its validation "
        "loss is measured (set eval.enabled=true to score it)"]


def test_the_header_of_a_resumed_run_that_trains_names_its_steps_and_checkpoint():
    cfg = OmegaConf.create({"train": {"steps": 300}, "data": {"batch_size": 32}})
    assert train_header(cfg, 100, "/r/checkpoints/100", True) == (
        "[5/7] train: steps 100..300, global batch 32, resumed from step 100 (/r/checkpoints/100)")
