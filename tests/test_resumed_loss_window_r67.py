"""A resumed run reports the train loss the uninterrupted run reports (round 67's new-user walkthrough: stopped with
Ctrl-C and continued as printed, ``make run`` said "train loss 0.5320 (mean of the last 99 steps)" where the
uninterrupted run said "0.5330 (mean of the last 100 steps)", their per-step losses identical)."""

import logging

import numpy as np
import pytest

from faults_helpers import ctrl_c_after, run_tiny


@pytest.mark.slow  # three end-to-end runs (uninterrupted, stopped, resumed)
def test_a_resumed_run_reports_the_uninterrupted_runs_last_window(tmp_path, monkeypatch, caplog, devices):
    # 8 steps, log_every=3: windows 1-3, 4-6, 7-8, so the final train loss is the mean of steps 7-8.
    settings = ("train.log_every=3", "train.checkpoint_every=4")
    reference = run_tiny(tmp_path / "reference", *settings)
    out = tmp_path / "run"
    with monkeypatch.context() as patch:
        ctrl_c_after(patch, 5)  # the run continues from checkpoint 4
        with pytest.raises(KeyboardInterrupt):
            run_tiny(out, *settings)
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        resumed = run_tiny(out, *settings, "train.resume=auto")
    assert resumed["resumed_from_step"] == 4 and resumed["final_step"] == 8
    # Windows counted from the resume (5-7, 8) made it the loss of step 8 alone.
    assert resumed["final_train_loss"] == pytest.approx(reference["final_train_loss"], rel=1e-6)
    with np.load(out / "train_losses.npz") as f:
        assert resumed["final_train_loss"] == pytest.approx(float(f["losses"][6:8].mean()), rel=1e-6)
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("compile "))
    assert f"train loss {resumed['final_train_loss']:.4f} (mean of the last 2 steps)" in line
