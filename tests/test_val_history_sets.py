"""A resumed run's validation losses on other held-out pairs are never joined to the earlier ones in losses.png.

Was: ``train.resume=<2-process run> mesh=none`` (data shards 2 -> 1), or another ``seed``, warned "early stopping
starts afresh: the checkpoint's validation losses were measured on other held-out pairs or draws", yet
``losses.png`` drew one "validation loss" line from the earlier run's points through this run's, and
``train_losses.npz`` could not tell them apart.
"""

import numpy as np
import pytest

from faults_helpers import run_tiny
from gensbi_sharding.harness.loss_history import joined_loss_history
from gensbi_sharding.harness.plots import OTHER_PAIRS, validation_lines


def _save(history, run_dir):
    (run_dir / "checkpoints" / "4").mkdir(parents=True)
    np.savez(run_dir / "train_losses.npz", **history.arrays())
    return run_dir / "checkpoints" / "4"


@pytest.mark.parametrize("afresh, sets", [(True, [0, 0, 1]), (False, [0, 0, 0])])
def test_validation_on_other_pairs_is_a_set_of_its_own(tmp_path, afresh, sets):
    first = joined_loss_history(np.arange(1.0, 7.0), start_step=0, val_points=[(2, 0.7), (4, 0.5), (6, 0.45)],
                                resume_dir=None)
    assert first.val_set.tolist() == [0, 0, 0]
    second = joined_loss_history(np.array([10.0, 11.0]), start_step=4, val_points=[(6, 0.9)],
                                 resume_dir=_save(first, tmp_path / "a"), val_afresh=afresh)
    assert second.val_step.tolist() == [2, 4, 6] and second.val_set.tolist() == sets
    # The step resumed from, validated again: once on the same pairs, on other pairs once on each.
    again = joined_loss_history(np.array([10.0, 11.0]), start_step=4, val_points=[(4, 0.95), (6, 0.9)],
                                resume_dir=_save(first, tmp_path / "again"), val_afresh=afresh)
    assert again.val_step.tolist() == ([2, 4, 4, 6] if afresh else [2, 4, 6])
    assert again.val_losses.tolist() == pytest.approx([0.7, 0.5, 0.95, 0.9] if afresh else [0.7, 0.95, 0.9])
    lines = validation_lines(second.val_step, second.val_losses, second.val_set)
    if afresh:  # two lines, never joined: the earlier pairs' faded, this run's "validation loss"
        assert [(s.tolist(), v.tolist(), label) for s, v, label in lines] == [
            ([2, 4], pytest.approx([0.7, 0.5]), OTHER_PAIRS), ([6], pytest.approx([0.9]), "validation loss")]
    else:
        assert [(s.tolist(), label) for s, _, label in lines] == [([2, 4, 6], "validation loss")]
    # A third attempt on this attempt's pairs continues its set; one on other pairs again starts another.
    for again, last in ((False, 1 if afresh else 0), (True, 2 if afresh else 1)):
        third = joined_loss_history(np.array([12.0, 13.0]), start_step=6, val_points=[(8, 0.8)],
                                    resume_dir=_save(second, tmp_path / f"b{again}"), val_afresh=again)
        assert third.val_set.tolist() == [*sets, last]


def test_an_earlier_versions_file_without_sets_reads_as_one_set(tmp_path):
    first = joined_loss_history(np.arange(1.0, 5.0), start_step=0, val_points=[(2, 0.7), (4, 0.5)], resume_dir=None)
    old = {k: v for k, v in first.arrays().items() if k != "val_set"}
    (tmp_path / "a" / "checkpoints" / "4").mkdir(parents=True)
    np.savez(tmp_path / "a" / "train_losses.npz", **old)
    second = joined_loss_history(np.array([10.0, 11.0]), start_step=4, val_points=[(6, 0.9)],
                                 resume_dir=tmp_path / "a" / "checkpoints" / "4", val_afresh=True)
    assert second.val_set.tolist() == [0, 0, 1]
    assert validation_lines([2, 4], [0.7, 0.5])[0][2] == "validation loss"  # no sets given: one line
    assert validation_lines([], []) == []


@pytest.mark.slow  # two end-to-end runs
def test_a_run_resumed_with_another_seed_records_its_validation_apart(tmp_path, devices):
    first, second = tmp_path / "first", tmp_path / "second"
    run_tiny(first, "train.val_every=4")
    run_tiny(second, f"train.resume={first}", "train.steps=16", "train.val_every=4", "seed=1")
    with np.load(second / "train_losses.npz") as history:
        # step 8 twice: validated on the first run's pairs, then on this run's before it trains on
        assert history["val_step"].tolist() == [4, 8, 8, 12, 16]
        assert history["val_set"].tolist() == [0, 0, 1, 1, 1]
    run_tiny(tmp_path / "third", f"train.resume={second}", "train.steps=20", "train.val_every=4", "seed=1")
    with np.load(tmp_path / "third" / "train_losses.npz") as history:  # the same pairs: the same set
        assert history["val_step"].tolist() == [4, 8, 8, 12, 16, 20]
        assert history["val_set"].tolist() == [0, 0, 1, 1, 1, 1]
