"""A run resumed under another learning-rate schedule than the one that saved its checkpoint says so.

Was: ``train.resume=<run>/checkpoints/7 train.steps=30`` of a 20-step cosine run continued at step 7 with
the rate of a 30-step cosine, without a word; a Ctrl-C'd run continued with another ``train.steps`` or
``train.learning_rate`` trained on a schedule that jumped at the resume step.
"""

import logging

import pytest

from faults_helpers import run_tiny
from gensbi_sharding.harness.schedule import learning_rate_schedule, schedule_change_note

TRAIN = {"steps": 20, "learning_rate": 0.003, "schedule": "cosine", "warmup_steps": 0}


def test_the_note_names_the_settings_and_the_rate_under_each():
    note, unfinished = schedule_change_note({"train": TRAIN}, {"train": {**TRAIN, "steps": 30}}, 7)
    assert unfinished and note == (
        "train.resume: the checkpoint at step 7 trained with train.steps=20 (this run: train.steps=30): from step 7 "
        "the learning rate follows this run's schedule, 0.00261 at step 7 where the saved run's gives 0.00218; add "
        "train.steps=20 to continue the run as it would have gone")
    assert float(learning_rate_schedule(**{**TRAIN, "steps": 30})(7)) == pytest.approx(0.00261, rel=2e-3)
    # A finished run trained further: by design, so no advice, and not a warning.
    note, unfinished = schedule_change_note({"train": TRAIN}, {"train": {**TRAIN, "steps": 30}}, 20)
    assert not unfinished and note.endswith("0.00075 at step 20 where the saved run's gives 0")
    constant = {**TRAIN, "schedule": "constant", "learning_rate": 0.001}
    note, _ = schedule_change_note({"train": TRAIN}, {"train": constant}, 10)
    assert note.startswith("train.resume: the checkpoint at step 10 trained with train.learning_rate=0.003 "
                           "train.schedule=cosine (this run: train.learning_rate=0.001 train.schedule=constant): ")
    assert schedule_change_note({"train": TRAIN}, {"train": dict(TRAIN)}, 7) is None  # the same schedule
    assert schedule_change_note({"train": {"steps": 20}}, {"train": TRAIN}, 7) is None  # an older checkpoint


@pytest.mark.parametrize("steps", [20, 10, 7])
def test_no_note_when_this_run_trains_nothing_from_the_checkpoint(steps):
    # Was: train.resume=<a 20-step run> train.steps=10 noted "0 at step 20 where the saved run's gives 0" (a rate
    # no step runs at) before refusing the step; train.steps=20 (evaluate again) noted a rate nothing used.
    changed = {"train": {**TRAIN, "steps": steps, "learning_rate": 0.001}}
    assert schedule_change_note({"train": TRAIN}, changed, 20) is None
    assert schedule_change_note({"train": TRAIN}, changed, steps - 1) is not None  # one step left: said


def test_an_unfinished_run_continued_with_its_step_as_train_steps_is_said_to_be_scored_unfinished():
    # Was: no note, the run scored with status ok as if finished: e.g. a run of the 4,000-step default stopped at
    # step 3,000, continued by the command it printed (no train.steps) after the default became 3,000.
    assert schedule_change_note({"train": TRAIN}, {"train": {**TRAIN, "steps": 7}}, 7) == (
        "train.resume: the checkpoint at step 7 is of an unfinished run (train.steps=20): this run, train.steps=7, "
        "trains nothing and scores its weights as they are; add train.steps=20 to finish it", True)
    # Beyond this run's train.steps (refused next): the one that finishes it (was: only "set train.steps=7").
    assert schedule_change_note({"train": TRAIN}, {"train": {**TRAIN, "steps": 5}}, 7) == (
        "train.resume: the checkpoint at step 7 is of an unfinished run (train.steps=20): add train.steps=20 to "
        "finish it", True)


@pytest.mark.slow  # end-to-end runs (run_tiny, twice)
def test_a_resumed_run_warns_when_it_continues_an_unfinished_run_on_another_schedule(tmp_path, caplog, devices):
    source = tmp_path / "source"
    assert run_tiny(source, "train.checkpoint_every=4")["status"] == "ok"
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        other = run_tiny(tmp_path / "other", f"train.resume={source / 'checkpoints' / '4'}", "train.steps=12")
    assert other["status"] == "ok" and other["resumed_from_step"] == 4
    warned = [r.getMessage() for r in caplog.records
              if r.levelno == logging.WARNING and "learning rate" in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith(
        "train.resume: the checkpoint at step 4 trained with train.steps=8 (this run: train.steps=12): from step 4 ")
    assert warned[0].endswith("set cfg.train.steps=8 to continue the run as it would have gone")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        same = run_tiny(tmp_path / "same", f"train.resume={source / 'checkpoints' / '4'}")
    assert same["status"] == "ok" and not [r for r in caplog.records if "learning rate" in r.getMessage()]
