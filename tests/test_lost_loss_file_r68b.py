"""A resumed run whose earlier attempt left no ``train_losses.npz`` (killed by ``kill -9`` or the OOM killer before it
wrote it, or its folder refused it): the file and ``losses.png`` still hold the validations before the resume.

Was (``train.val_every=50 train.checkpoint_every=100``, ``kill -9`` after step 300's checkpoint, then
``train.resume=auto``): ``metrics.json``'s ``val_history`` listed 8 validations (50 ... 400), ``train_losses.npz``'s
``val_step`` only this attempt's two (350, 400), and the plot drew those alone, though the checkpoint holds the rest.
"""

import json
import subprocess
import sys

import numpy as np
import pytest

from faults_helpers import REPO
from gensbi_sharding.harness.loss_history import joined_loss_history


def test_the_checkpoints_validations_fill_in_what_no_earlier_file_holds(tmp_path):
    step_dir = tmp_path / "run" / "checkpoints" / "100"
    step_dir.mkdir(parents=True)  # no train_losses.npz beside it
    history = joined_loss_history(np.ones(50, np.float32), start_step=100, val_points=[(150, 0.8)],
                                  resume_dir=step_dir, restored_val=[(50, 1.0), (100, 0.9)])
    assert history.val_step.tolist() == [50, 100, 150]  # was [150]
    assert history.val_losses.tolist() == pytest.approx([1.0, 0.9, 0.8])
    assert history.val_set.tolist() == [0, 0, 0]
    assert history.step.tolist() == list(range(101, 151))  # the train losses before are nowhere: left out, as before


def test_an_earlier_file_that_stops_short_is_completed_from_the_checkpoint_in_its_own_set(tmp_path):
    # The file of an attempt stopped at 50 on held-out set 1, the folder's next attempt killed at 100 unwritten.
    run = tmp_path / "run"
    (run / "checkpoints" / "100").mkdir(parents=True)
    np.savez(run / "train_losses.npz", step=np.arange(1, 51), losses=np.ones(50, np.float32),
             val_step=np.array([20, 50]), val_losses=np.array([1.2, 1.0], np.float32), resumed_at=np.array([20]),
             val_set=np.array([0, 1]))
    history = joined_loss_history(np.ones(10, np.float32), start_step=100, val_points=[(110, 0.7)],
                                  resume_dir=run / "checkpoints" / "100", restored_val=[(50, 1.0), (100, 0.9)])
    assert history.val_step.tolist() == [20, 50, 100, 110]
    assert history.val_losses.tolist() == pytest.approx([1.2, 1.0, 0.9, 0.7])
    assert history.val_set.tolist() == [0, 1, 1, 1]


@pytest.mark.slow
def test_a_run_resumed_from_a_checkpoint_whose_losses_file_is_gone_lists_every_validation(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    common = ["experiment=quick", "eval.enabled=false", "train.val_every=5", "train.log_every=5"]
    subprocess.run([sys.executable, "launch.py", *common, "train.steps=10", f"hydra.run.dir={first}"], cwd=REPO,
                   check=True, capture_output=True, timeout=300)
    (first / "train_losses.npz").unlink()  # as a kill -9 before the attempt's end leaves it: never written
    subprocess.run([sys.executable, "launch.py", *common, "train.steps=15", f"train.resume={first}",
                    f"hydra.run.dir={second}"], cwd=REPO, check=True, capture_output=True, timeout=300)
    listed = [step for step, _ in json.loads((second / "metrics.json").read_text())["val_history"]]
    with np.load(second / "train_losses.npz") as saved:
        assert listed == [5, 10, 15]
        assert saved["val_step"].tolist() == listed  # was [15]
