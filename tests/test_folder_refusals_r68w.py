"""A refused run folder's line stands alone (round 68, wave 2A).

``train.resume=never`` on a preempted run's folder printed Orbax's info line "Read Metadata={...}" above the one-line
refusal (the folder's claim asks for its complete steps before the run quiets the loggers): now only the refusal.
"""

from __future__ import annotations

import subprocess
import sys

from faults_helpers import save_step
from gensbi_sharding.harness import outputs


def _stopped(run, status, step=None):
    if step is not None:
        save_step(run, step)
    else:
        run.mkdir(parents=True)
    outputs.write_json(run / "metrics.json", {"status": status, "stopped_at_step": None})


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
