"""REVIEW73C's faults in the unfinished-run warning of ``sample.py`` (U2, U3), each as a user met it.

- U2: a run killed by SIGKILL (the OOM killer, a lost machine) leaves a checkpoint under train.steps and no
  metrics.json: ``sample.py`` sampled it without a word.
- U3: a run early stopping ended, Ctrl-C'd during its evaluation, was told it was unfinished and to continue it:
  its training was complete.
"""

import json
import logging

import numpy as np
import pytest

from faults_helpers import saved_two_moons_run
from gensbi_sharding.harness import own_observation
from gensbi_sharding.harness.own_observation import sample_posterior
from gensbi_sharding.harness.unfinished_run import unfinished_note

TRAIN = {"train": {"steps": 2000, "patience": 1}}


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory):
    """A two_moons run's folder with a checkpoint at step 8 of train.steps=2000, no metrics.json, no lock held."""
    return saved_two_moons_run(tmp_path_factory.mktemp("k") / "run", **TRAIN)


def test_sampling_a_killed_run_warns_that_it_left_no_record(killed_run, monkeypatch, caplog):
    monkeypatch.setattr(own_observation, "draw_posterior",
                        lambda *args, **kwargs: (np.zeros((16, 2), np.float32), 1.0, {"weights": "last"}))
    with caplog.at_level(logging.WARNING, logger="gensbi_sharding"):
        sample_posterior(killed_run, np.zeros(2))
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        f"{killed_run} left no record of its end (no metrics.json: killed by SIGKILL, out of memory, a lost "
        "machine?); its newest checkpoint is at step 8 of train.steps=2000: these samples are of a posterior trained "
        f"8 of its 2000 steps, not the run's result; to finish it, continue it with train.resume=auto "
        f"hydra.run.dir={killed_run} and the run's own overrides"]


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
