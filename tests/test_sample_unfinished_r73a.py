"""``sample.py`` on a run that has not finished training says so, with the step reached and the command finishing it.

Was: a run Ctrl-C'd at step 1 of ``train.steps=2000`` sampled with only "sampling checkpoint <run>/checkpoints/1
(step 1) ...; its newest weights": the samples of a barely trained network read as the run's posterior (found
trying the harness as a new user, session 73).
"""

import json
import logging

import numpy as np
import pytest

from faults_helpers import saved_checkpoint
from gensbi_sharding.harness import own_observation
from gensbi_sharding.harness.own_observation import sample_posterior
from gensbi_sharding.harness.unfinished_run import unfinished_note

RESUME = "python launch.py train.steps=2000 train.resume=auto hydra.run.dir=/x/run"


@pytest.fixture
def run(tmp_path):
    """A two_moons run's folder with a checkpoint at step 8 of train.steps=2000 (the library's writer, no model)."""
    from gensbi_sharding.harness.simulation_data import NORMALIZATION

    config = {"data": {"name": "two_moons", "x_transform": "none"}, "model": {"name": "mlp"}, "seed": 0,
              "eval": {"num_samples": 16, "ode_steps": 4}, "train": {"steps": 2000}}
    stats = {"theta_mean": [0.0, 0.0], "theta_std": [1.0, 1.0], "x_mean": [0.0, 0.0], "x_std": [1.0, 1.0]}
    return saved_checkpoint(tmp_path / "run", config, {NORMALIZATION: stats}).parents[1]


def _record(run, status, error=None):
    (run / "metrics.json").write_text(json.dumps({"status": status, "error": error}))


# Merged with test_unfinished_run_r73w's killed-run test (REVIEW73C U2: a run killed by SIGKILL, the OOM killer or a
# lost machine leaves a checkpoint under train.steps and no metrics.json: sample.py sampled it without a word).
@pytest.mark.parametrize("stopped", [True, False])  # False: killed, no metrics.json
def test_sampling_an_unfinished_run_warns_with_its_step_and_how_to_finish_it(run, stopped, monkeypatch, caplog):
    resume = RESUME.replace("/x/run", str(run))  # its own folder: a made-up one reads as moved since (r76g)
    if stopped:
        _record(run, "interrupted", f"interrupted by Ctrl-C (SIGINT) at step 8; checkpoint {run}/checkpoints/8; "
                                    f"continue with: {resume}")
    monkeypatch.setattr(own_observation, "draw_posterior",
                        lambda *args, **kwargs: (np.zeros((16, 2), np.float32), 1.0, {"weights": "last"}))
    with caplog.at_level(logging.WARNING, logger="gensbi_sharding"):
        sample_posterior(run, np.zeros(2))
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    if stopped:
        assert said == [
            f"{run} stopped (status interrupted) at step 8 of train.steps=2000: these samples are of a posterior "
            f"trained 8 of its 2000 steps, not the run's result; to finish it: {resume}, then sample again"]
    else:
        assert said == [
            f"{run} left no record of its end (no metrics.json: killed by SIGKILL, out of memory, a lost "
            "machine?); its newest checkpoint is at step 8 of train.steps=2000: these samples are of a posterior "
            f"trained 8 of its 2000 steps, not the run's result; to finish it, continue it with train.resume=auto "
            f"hydra.run.dir={run} and the run's own overrides"]


def test_a_failed_run_without_a_continue_line_is_told_the_overrides_to_add(run):
    _record(run, "error", "ValueError: something")
    note = unfinished_note(run / "checkpoints" / "8", {"train": {"steps": 2000}})
    assert note.endswith(f"; to finish it, continue it with train.resume=auto hydra.run.dir={run} and the run's "
                         "own overrides")


@pytest.mark.parametrize("status, steps", [("ok", 2000),  # early stopping ended it before train.steps: finished
                                           ("interrupted", 8)])  # stopped at its last step: all trained
def test_a_finished_run_says_nothing(run, status, steps):
    _record(run, status)
    assert unfinished_note(run / "checkpoints" / "8", {"train": {"steps": steps}}) is None


def test_a_checkpoint_without_train_steps_or_outside_a_run_says_nothing(run, tmp_path):
    _record(run, "interrupted")
    assert unfinished_note(run / "checkpoints" / "8", {"model": {}}) is None  # CheckpointWriter's own config
    assert unfinished_note(tmp_path / "8", {"train": {"steps": 2000}}) is None  # a step folder copied out
