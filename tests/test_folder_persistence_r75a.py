"""Session 74's persistence leftovers (BREAK74B "found, left"), as a user meets them.

1. ``hydra.run.dir=<app>/outputs/<date>/<time>/ours``, where that folder is another Hydra app's (its ``.hydra/``
   record, its ``launch.log`` and ``checkpoints/``), was refused: "lies inside the folder of the run <app folder>".
2. A run refused before its claim with Hydra's job log file off (``hydra/job_logging=stdout``, measured:
   ``launch.py distributed=auto hydra/job_logging=stdout``, refused at [1/7]) ended "error after 9.8 s; but <folder>
   was deleted or moved while the run went on", though nothing had touched its folder: only a folder this process
   claimed is said to be gone.
3. A sweep whose folder was moved mid-sweep ended "sweep stopped: ... 1 not run" and exit 0, where every other sweep
   with a job not run exits non-zero: ``folder_gone.sweep_lost`` says it, for launch.py's exit code.
"""

import shutil

from gensbi_sharding.harness import folder_gone
from gensbi_sharding.harness.folder_lock import FolderLock, folder_problem, run_folder_holding

METRICS = {"status": "error", "error": "distributed=auto found no cluster", "wall_s": 9.5}


def _app_folder(root, config="train: true\ntrainer:\n  max_epochs: 3\n"):
    """An output folder of another Hydra app (the Lightning-Hydra template's record), with its log and checkpoints."""
    (app := root / "app" / "outputs" / "2026-12-07" / "13-04-17").mkdir(parents=True)
    (app / ".hydra").mkdir()
    (app / ".hydra" / "config.yaml").write_text(config)
    (app / "launch.log").write_text("[INFO] epoch 0\n")
    (app / "checkpoints").mkdir()
    return app


def test_a_run_folder_inside_another_apps_output_folder_is_not_refused(tmp_path):
    app = _app_folder(tmp_path)
    assert run_folder_holding(app / "ours") is None
    assert folder_problem(app / "ours", sweep=False) is None
    assert folder_problem(app / "ours", sweep=True) is None


def test_a_folder_inside_one_of_our_runs_is_still_refused(tmp_path):
    run = _app_folder(tmp_path, config="mesh: {}\nrule: {}\ntrain: {steps: 20}\n")
    assert run_folder_holding(run / "ours") == run
    assert f"lies inside the folder of the run {run}" in folder_problem(run / "ours", sweep=False)


def test_a_run_refused_before_its_claim_with_no_job_log_is_not_said_to_have_lost_its_folder(tmp_path):
    # hydra/job_logging=stdout: no launch.log; hydra.output_subdir=null: no .hydra/ either; no .run.lock (no claim)
    (out := tmp_path / "run").mkdir()
    assert folder_gone.gone_note(out, METRICS) == ""
    assert folder_gone.gone_note(tmp_path / "never_made", METRICS) == ""


def test_a_folder_this_process_claimed_then_moved_is_said_to_be_gone(tmp_path):
    out = tmp_path / "run"
    lock = FolderLock(out)
    lock.acquire()
    lock.release()
    assert folder_gone.gone_note(out, METRICS) == ""  # still there, its lock file kept
    shutil.move(out, tmp_path / "better_name")
    assert folder_gone.gone_note(out, METRICS).startswith(
        f"; but {out} was deleted or moved while the run went on (its .run.lock is gone) and no longer exists")
    out.mkdir()  # made anew by a later write
    assert "holds only what was written after it was made anew" in folder_gone.gone_note(out, METRICS)


def test_a_sweep_that_lost_its_folder_is_told_to_the_exit_code(tmp_path, monkeypatch):
    monkeypatch.setattr(folder_gone, "LOST_SWEEPS", [])  # this process's earlier sweeps (other tests) left out
    (sweep := tmp_path / "sweep").mkdir()
    (sweep / FolderLock.LOCK).touch()
    assert folder_gone.sweep_gone_note(sweep, True) == "" and not folder_gone.sweep_lost()
    assert folder_gone.sweep_gone_note(tmp_path / "never", False) == "" and not folder_gone.sweep_lost()
    shutil.move(sweep, tmp_path / "better_name")
    sweep.mkdir()  # the next job makes it anew
    assert f"; but {sweep} was deleted or moved" in folder_gone.sweep_gone_note(sweep, True)
    assert folder_gone.sweep_lost() is True
