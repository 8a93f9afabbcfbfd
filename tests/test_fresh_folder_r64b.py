"""A failed run's folder whose only checkpoint is a save cut short holds no checkpoint: the next command reruns."""

import json

import pytest

from gensbi_sharding.harness.fresh_folder import ensure_fresh


def _failed(tmp_path, cut: str):
    run = tmp_path / "run"
    (run / "checkpoints" / cut / "arrays").mkdir(parents=True)  # a first save cut short, as Orbax names it
    (run / "metrics.json").write_text(json.dumps({"status": "error", "steps_done": 8}))
    return run


def test_a_failed_run_with_only_a_save_cut_short_is_rerun_by_the_same_command(tmp_path):
    # Was: "metrics.json already exists (status error): ...; rerun with train.resume=auto to continue it in this
    # folder", which continued nothing (no complete step) and trained from step 0.
    run = _failed(tmp_path, "8.orbax-checkpoint-tmp-1700000000")  # Orbax's own: the rerun's checkpointer removes it
    assert ensure_fresh(run, overrides=["experiment=quick"]) == {"status": "error", "steps_done": 8}


def test_a_failed_run_with_only_a_step_folder_cut_short_is_told_to_move_it_then_reruns(tmp_path):
    # Was: "rerun with train.resume=auto", whose first save was then refused (its folder claimed, its data simulated).
    run = _failed(tmp_path, "8")
    with pytest.raises(FileExistsError) as err:
        ensure_fresh(run, overrides=["experiment=quick"])
    cut = run / "checkpoints" / "8"
    assert str(err.value).endswith(f"move them aside, e.g. {cut} to {cut}.incomplete, or delete them"), str(err.value)
    cut.rename(cut.with_name("8.incomplete"))  # the advice, followed
    assert ensure_fresh(run, overrides=["experiment=quick"]) == {"status": "error", "steps_done": 8}


def test_a_failed_run_with_a_complete_step_is_still_told_to_continue_it(tmp_path):
    from faults_helpers import saved_checkpoint

    run = _failed(tmp_path, "9.orbax-checkpoint-tmp-1700000000")
    saved_checkpoint(run, {"seed": 0}, {}, step=8)
    with pytest.raises(FileExistsError, match="train.resume=auto to continue it in this folder"):
        ensure_fresh(run)
