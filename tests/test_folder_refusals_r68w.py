"""A stopped run's folder refusal says what a rerun does and stands alone (round 68, wave 2A).

1. A folder whose run was stopped before any complete checkpoint (e.g. a double Ctrl-C in its first compile) was
   refused with "rerun with train.resume=auto to continue it in this folder", though that trains from step 0: it now
   says "to start it again in this folder (it saved no complete checkpoint: it trains from step 0)"; with a complete
   checkpoint it still says "continue it".
2. ``train.resume=never`` on a preempted run's folder printed Orbax's info line "Read Metadata={...}" above the one-line
   refusal (the folder's claim asks for its complete steps before the run quiets the loggers): now only the refusal.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from faults_helpers import save_step
from gensbi_sharding.harness import outputs
from gensbi_sharding.harness.fresh_folder import ensure_fresh

OVERRIDES = ["experiment=quick", "train.steps=8"]


def _stopped(run, status, step=None):
    if step is not None:
        save_step(run, step)
    else:
        run.mkdir(parents=True)
    outputs.write_json(run / "metrics.json", {"status": status, "stopped_at_step": None})


@pytest.mark.parametrize("status", ["interrupted", "preempted"])
def test_a_run_stopped_before_a_complete_checkpoint_is_told_a_rerun_starts_it_again(tmp_path, status):
    run = tmp_path / "run"
    _stopped(run, status)
    (run / "checkpoints" / "4.orbax-checkpoint-tmp-1").mkdir(parents=True)  # its first save, cut short
    with pytest.raises(FileExistsError) as refused:
        ensure_fresh(run, overrides=OVERRIDES)
    said = str(refused.value)
    assert said.endswith(f"(status {status}): this folder holds an earlier run's outputs, which are never "
                         "overwritten; rerun with train.resume=auto to start it again in this folder (it saved no "
                         "complete checkpoint: it trains from step 0), or choose another hydra.run.dir"), said
    assert "continue it" not in said  # was: "to continue it in this folder"
    assert ensure_fresh(run, resume="auto", overrides=[*OVERRIDES, "train.resume=auto"])["status"] == status


def test_a_run_stopped_with_a_complete_checkpoint_is_still_told_to_continue_it(tmp_path):
    run = tmp_path / "run"
    _stopped(run, "preempted", step=4)
    with pytest.raises(FileExistsError, match="rerun with train.resume=auto to continue it in this folder, or choose "
                                              "another hydra.run.dir$"):
        ensure_fresh(run, overrides=OVERRIDES)


@pytest.mark.slow
def test_a_preempted_folders_refusal_is_its_one_line_without_orbaxs_read_of_its_steps(tmp_path):
    # Orbax logs its read once in a process: a fresh one asks, as launch.py's folder claim (Hydra's callback) does
    run = tmp_path / "run"
    _stopped(run, "preempted", step=4)
    script = ("import logging, sys; logging.basicConfig(level=logging.INFO, format='%(name)s: %(message)s')\n"
              "from gensbi_sharding.harness.fresh_folder import ensure_fresh\n"
              "try: ensure_fresh(sys.argv[1], resume='never', overrides=['experiment=quick', 'train.resume=never'])\n"
              "except FileExistsError as err: print(err)\n"
              "print(logging.getLogger('absl').level)")
    done = subprocess.run([sys.executable, "-c", script, str(run)], capture_output=True, text=True, timeout=120)
    assert "(status preempted): this folder holds an earlier run's outputs" in done.stdout, done.stdout
    assert done.stdout.endswith("\n0\n") and "absl: " not in done.stderr, done.stderr  # was: absl: Read Metadata=...


@pytest.mark.slow
def test_a_recordless_folders_refusal_under_another_runs_resume_is_its_one_line(tmp_path):
    # The same read by another way in: checkpoints without a record, train.resume=<another run> (requeued_step)
    run = tmp_path / "run"
    save_step(run, 4, resume=str(tmp_path / "first"))
    other = str(tmp_path / "second")
    script = ("import logging, sys; logging.basicConfig(level=logging.INFO, format='%(name)s: %(message)s')\n"
              "from gensbi_sharding.harness.fresh_folder import ensure_fresh\n"
              f"try: ensure_fresh(sys.argv[1], resume={other!r}, overrides=['train.resume={other}'])\n"
              "except FileExistsError as err: print(err)")
    done = subprocess.run([sys.executable, "-c", script, str(run)], capture_output=True, text=True, timeout=120)
    assert "holds the checkpoints of a run with no record" in done.stdout, done.stdout
    assert "absl: " not in done.stderr, done.stderr  # was: absl: Read Metadata=...
