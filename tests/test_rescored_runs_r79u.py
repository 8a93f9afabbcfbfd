"""A run resumed at its checkpoint's step only to be scored again (``train.resume=<run> train.steps=<its step>``,
other ``eval.*``): it trains nothing and saves no checkpoint of its own; what it says and what it is refused name the
checkpoint it scored, never one of its own folder that does not exist, nor "start a new run" (the weights lost)."""

import os
import re
import signal
from pathlib import Path

import numpy as np
import pytest

from faults_helpers import run_tiny

pytestmark = pytest.mark.slow  # end-to-end runs, in this process


@pytest.fixture(scope="module")
def rescored(tmp_path_factory, devices):
    """(the trained run's folder, the folder of a run that resumed it at its step 8 and only scored it)."""
    root = tmp_path_factory.mktemp("rescored")
    assert run_tiny(root / "trained")["status"] == "ok"
    again = run_tiny(root / "again", f"train.resume={root / 'trained'}")
    assert again["status"] == "ok" and again["steps"] == 0 and not (root / "again" / "checkpoints").exists()
    return root / "trained", root / "again"


def test_a_stop_in_a_rescoring_runs_evaluation_names_the_checkpoint_it_scored(rescored, tmp_path, monkeypatch):
    # Was (USER79): "preempted by SIGTERM after training (step 8), before the evaluation finished; checkpoint
    # <its own folder>/checkpoints/8; continue with: ..." where no such folder was ever written.
    from gensbi_sharding.harness import posterior

    trained, _ = rescored
    real = posterior.posterior_draws

    def signal_then_draw(*args, **kwargs):  # the signal comes as the observation's sampling starts
        os.kill(os.getpid(), signal.SIGTERM)
        return real(*args, **kwargs)

    monkeypatch.setattr(posterior, "posterior_draws", signal_then_draw)
    out = tmp_path / "rescored"
    stopped = run_tiny(out, f"train.resume={trained}", "eval.enabled=true", "eval.observations=[1,2]")
    assert stopped["status"] == "preempted" and stopped["steps"] == 0
    assert not (out / "checkpoints").exists()
    named = re.search(r"; checkpoint (\S+);", stopped["error"]).group(1)
    assert Path(named) == (trained / "checkpoints" / "8").resolve() and Path(named).is_dir(), stopped["error"]
    # Was: "continue with: run(cfg) with cfg.train.resume='auto' ...", which trained a fresh model from step 0 there
    # (this folder holds no checkpoint), status ok; now that refused, and the run it continued named instead
    monkeypatch.setattr(posterior, "posterior_draws", real)
    assert f"cfg.train.resume={str(trained)!r}" in stopped["continue_with"], stopped["continue_with"]
    auto = run_tiny(out, "train.resume=auto", "eval.enabled=true", "eval.observations=[1,2]")
    assert auto["status"] == "error" and "from step 0" in auto["error"] and not (out / "checkpoints").exists()
    assert f"rerun with cfg.train.resume={str(trained)!r}" in auto["error"], auto["error"]
    pasted = run_tiny(out, f"train.resume={trained}", "eval.enabled=true", "eval.observations=[1,2]")
    assert pasted["status"] == "ok" and pasted["steps"] == 0 and len(pasted["c2st_observations"]) == 2


def test_resuming_a_rescoring_run_names_the_checkpoint_it_scored(rescored, tmp_path):
    # Was: "... holds a completed run whose checkpoints are gone (no complete step folder in .../checkpoints): start a
    # new run without train.resume": it never had any, and the trained weights were one setting away.
    trained, again = rescored
    refused = run_tiny(tmp_path / "further", f"train.resume={again}", "train.steps=12")
    assert refused["status"] == "error" and "checkpoints are gone" not in refused["error"]
    assert f"train.resume={(trained / 'checkpoints' / '8').resolve()}" in refused["error"].replace("'", ""), \
        refused["error"]
    fixed = re.search(r"train\.resume='?([^',\s]+)", refused["error"].split("resume that one, ")[1]).group(1)
    assert run_tiny(tmp_path / "pasted", f"train.resume={fixed}", "train.steps=12")["status"] == "ok"


def test_sampling_a_rescoring_runs_folder_names_the_checkpoint_it_scored(rescored, tmp_path, capsys):
    # Was: "... its run (status ok) saved no complete checkpoint in .../checkpoints. Sampling needs a trained run's
    # saved weights: pass the folder of a run that trained", the one it scored unnamed.
    from gensbi_sharding.harness.own_observation import main

    trained, again = rescored
    x_o = tmp_path / "x_o.npy"
    np.save(x_o, np.array([0.1, -0.2]))
    assert main([str(again), str(x_o), "--num-samples", "10"]) == 2
    said = capsys.readouterr().err
    assert str((trained / "checkpoints" / "8").resolve()) in said, said
    assert main([str(trained / "checkpoints" / "8"), str(x_o), "--num-samples", "10"]) == 0
