"""A checkpoint of a version that drew its validations otherwise, resumed by this one (UPGRADE76).

Before 2026-12-06 (session 68) the held-out pairs' (t, z) were drawn otherwise: the same weights of a session-64 run
scored 1.7861 there and 1.6727 here, and its checkpoint records nothing that tells (config and info read as
today's). Resumed, that best loss was compared with this version's losses (a history [[20, 1.7861], [40, 1.5739]]),
and a resume only to evaluate reported 1.7861 as its validation loss. The old checkpoint is made here from today's
by writing into its early-stopping record the losses other draws gave: the same weights, 7% more, and no ``draws``.
Since then the record names its draws (``validation.DRAWS``): such a checkpoint is not scored again.
"""
import json
import logging
import shutil

import pytest

from faults_helpers import run_tiny

OTHER_DRAWS = 1.07  # the session-64 run's recorded loss over today's score of the same weights: 1.7861 / 1.6727


@pytest.fixture(scope="module")
def val4_run(tmp_path_factory, devices):
    """A completed tiny run validating every 4 steps (its final checkpoint, step 8, holds validations 4 and 8)."""
    source = tmp_path_factory.mktemp("val4") / "source"
    assert run_tiny(source, "train.val_every=4")["status"] == "ok"
    return source


def _as_drawn_otherwise(source, target):
    """A copy of the run ``source`` whose final checkpoint records the losses an earlier version's draws gave."""
    shutil.copytree(source, target)
    meta = target / "checkpoints" / "8" / "meta" / "metadata"
    record = json.loads(meta.read_text())
    stopping = record["info"]["early_stopping"]
    del stopping["draws"]  # an earlier version's record names no draws
    stopping["best_loss"] *= OTHER_DRAWS
    stopping["history"] = [[step, loss * OTHER_DRAWS] for step, loss in stopping["history"]]
    meta.write_text(json.dumps(record))
    return target, stopping


@pytest.mark.slow  # end-to-end runs (a resume)
def test_a_checkpoint_drawn_otherwise_starts_early_stopping_afresh(tmp_path, caplog, val4_run):
    old, stopping = _as_drawn_otherwise(val4_run, tmp_path / "old")
    with caplog.at_level(logging.WARNING, logger="gensbi_sharding"):
        resumed = run_tiny(tmp_path / "resumed", f"train.resume={old}", "train.steps=12", "train.val_every=4")
    assert resumed["status"] == "ok"
    # Only this run's losses compare: the restored weights (step 8) validated again on today's draws, then step 12
    # (was [4, 8, 12], the old draws' losses beside the new).
    own = dict(json.loads((val4_run / "metrics.json").read_text())["val_history"])
    assert [step for step, _ in resumed["val_history"]] == [8, 12]
    assert resumed["val_history"][0][1] == pytest.approx(own[8], rel=1e-5)
    assert resumed["best_val_loss"] == min(loss for _, loss in resumed["val_history"])
    said = [r.getMessage() for r in caplog.records if "drawn otherwise" in r.getMessage()]
    assert len(said) == 1 and "early stopping starts afresh" in said[0]
    assert f"not the {stopping['best_loss']:.4f} it recorded" in said[0]


@pytest.mark.slow  # end-to-end runs (a resume)
def test_a_resume_only_to_evaluate_reports_the_loss_of_this_versions_draws(tmp_path, val4_run):
    old, stopping = _as_drawn_otherwise(val4_run, tmp_path / "old")
    evaluated = run_tiny(tmp_path / "evaluated", f"train.resume={old}", "train.val_every=4")
    own = json.loads((val4_run / "metrics.json").read_text())
    assert evaluated["steps"] == 0
    # Its weights scored on today's draws (was: the recorded 7% more, reported as this run's validation loss).
    assert evaluated["best_val_loss"] == pytest.approx(own["final_val_loss"], rel=1e-5)
    assert evaluated["best_val_loss"] != pytest.approx(stopping["best_loss"], rel=1e-3)


@pytest.mark.slow  # end-to-end runs (a resume)
def test_a_checkpoint_of_todays_draws_continues_its_early_stopping(tmp_path, caplog, val4_run):
    with caplog.at_level(logging.WARNING, logger="gensbi_sharding"):
        same = run_tiny(tmp_path / "same", f"train.resume={val4_run}", "train.steps=12", "train.val_every=4",
                        "rule=fsdp", "data.batch_size=32")  # the same draws, summed in another order and batching
    assert [step for step, _ in same["val_history"]] == [4, 8, 12]
    assert "drawn otherwise" not in caplog.text


@pytest.mark.slow  # end-to-end runs (a resume)
def test_a_checkpoint_naming_todays_draws_is_not_scored_again(tmp_path, caplog, val4_run):
    meta = val4_run / "checkpoints" / "8" / "meta" / "metadata"
    assert json.loads(meta.read_text())["info"]["early_stopping"]["draws"] == "per_pair"
    old, _ = _as_drawn_otherwise(val4_run, tmp_path / "old")
    record = json.loads((old / "checkpoints" / "8" / "meta" / "metadata").read_text())
    record["info"]["early_stopping"]["draws"] = "per_pair"  # the 7% more now read as this version's own losses
    (old / "checkpoints" / "8" / "meta" / "metadata").write_text(json.dumps(record))
    with caplog.at_level(logging.WARNING, logger="gensbi_sharding"):
        resumed = run_tiny(tmp_path / "resumed", f"train.resume={old}", "train.steps=12", "train.val_every=4")
    assert "drawn otherwise" not in caplog.text  # no second validation of the restored weights
    assert [step for step, _ in resumed["val_history"]] == [4, 8, 12]


def test_a_checkpoint_without_validations_names_todays_draws_once_resumed():
    from gensbi_sharding.harness.resumed_draws import drawn_otherwise
    from gensbi_sharding.harness.validation import DRAWS, EarlyStopping

    stopper = EarlyStopping(patience=2, draws=None)  # an earlier version's record, before any validation
    assert drawn_otherwise(stopper, None, None, [], None, 0, draws=1, mesh=None) is None
    assert stopper.draws == DRAWS  # its later saves say so: no re-score on the next resume
