"""REVIEW73C's faults in the unfinished-run warning of ``sample.py`` (U2, U3), each as a user met it.

- U2: a run killed by SIGKILL (the OOM killer, a lost machine) leaves a checkpoint under train.steps and no
  metrics.json: ``sample.py`` sampled it without a word (its test is merged into test_sample_unfinished_r73a's).
- U3: a run early stopping ended, Ctrl-C'd during its evaluation, was told it was unfinished and to continue it:
  its training was complete.
"""

import json

import pytest

from gensbi_sharding.harness.unfinished_run import unfinished_note

TRAIN = {"train": {"steps": 2000, "patience": 1}}


def test_a_damaged_record_is_said_as_such(tmp_path):
    (tmp_path / "run" / "checkpoints" / "8").mkdir(parents=True)
    (tmp_path / "run" / "metrics.json").write_text('{"status": "interr')  # cut off mid-write
    note = unfinished_note(tmp_path / "run" / "checkpoints" / "8", TRAIN)
    assert note.startswith(f"{tmp_path / 'run'} left no record of its end (a damaged metrics.json: ")


@pytest.mark.parametrize("recorded", [True, False])
def test_a_run_early_stopping_ended_is_finished_whatever_its_evaluation(tmp_path, recorded):
    # stopped early at step 8, then Ctrl-C'd (recorded) or killed (not) during its evaluation: training was complete
    (tmp_path / "run" / "checkpoints" / "8").mkdir(parents=True)
    if recorded:
        (tmp_path / "run" / "metrics.json").write_text(json.dumps({"status": "interrupted", "stopped_early": True}))
    info = {"early_stopping": {"best_loss": 0.57, "best_step": 4, "since_best": 1, "history": [[4, 0.57], [8, 0.6]]}}
    assert unfinished_note(tmp_path / "run" / "checkpoints" / "8", TRAIN, info) is None
    if not recorded:  # patience not yet run out (0 validations since the best): training was cut short
        info["early_stopping"]["since_best"] = 0
        assert unfinished_note(tmp_path / "run" / "checkpoints" / "8", TRAIN, info) is not None
