"""REVIEW76A: a checkpoint of an earlier version's validation draws keeps its best weights when resumed.

UPGRADE76's re-score (``resumed_draws.drawn_otherwise``) found such a checkpoint's losses drawn otherwise and started
early stopping from nothing: its best weights were dropped. A run whose best validation came before its newest
checkpoint then went on without them: a resume only to evaluate sampled the newest weights (its best step null), a
resume that trains could never choose them again, however good. Now they stay the best, at their score on this
run's draws, until one of this run's validations scores lower.
"""
import json
import shutil

import pytest

from faults_helpers import run_tiny

OTHER_DRAWS = 1.07  # as tests/test_resumed_draws_r76c.py: the session-64 run's loss over today's of the same weights


@pytest.mark.slow  # end-to-end runs (a run and its resume)
def test_an_earlier_versions_best_weights_before_its_checkpoint_stay_candidates(tmp_path, caplog, devices):
    source = tmp_path / "source"
    own = run_tiny(source, "train.val_every=4", "train.checkpoint_every=2")
    assert own["status"] == "ok"
    old = tmp_path / "old"
    shutil.copytree(source, old)
    meta = old / "checkpoints" / "6" / "meta" / "metadata"  # validated at 4 only: its best weights are step 4's
    record = json.loads(meta.read_text())
    stopping = record["info"]["early_stopping"]
    assert stopping["best_step"] == 4 and [s for s, _ in stopping["history"]] == [4]
    del stopping["draws"]  # an earlier version's record: no draws named, its losses 7% above today's
    stopping["best_loss"] *= OTHER_DRAWS
    stopping["history"] = [[s, v * OTHER_DRAWS] for s, v in stopping["history"]]
    meta.write_text(json.dumps(record))

    resumed = run_tiny(tmp_path / "resumed", f"train.resume={old}/checkpoints/6", "train.val_every=4")
    assert resumed["status"] == "ok"
    scores = dict(own["val_history"])
    # Step 4's weights scored on today's draws stay a candidate beside step 8's (was [8] alone: step 4's dropped)
    assert [s for s, _ in resumed["val_history"]] == [4, 8]
    assert resumed["val_history"][0][1] == pytest.approx(scores[4], rel=1e-5)
    assert resumed["val_history"][1][1] == pytest.approx(scores[8], rel=1e-5)
    assert resumed["best_step"] == own["best_step"]
    assert "drawn otherwise" in caplog.text
