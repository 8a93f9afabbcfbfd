"""``train.resume=auto`` in a folder without a checkpoint: a sweep's job that never ran says so in one short line.

Was: a sweep stopped by Ctrl-C and continued with the command it printed (``-m ... train.resume=auto
hydra.sweep.dir=<sweep>``) printed, for each job not yet started, "no checkpoint in <job> yet, starting fresh (to
continue an unfinished run: hydra.run.dir=<its folder>; to train a finished one further: ...)", advice that does not
apply to a job that never ran. It stays for a job that ran and lost its checkpoint, and for a run of its own.
"""

import logging
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from gensbi_sharding.harness.resume import resume_point

REPO = Path(__file__).resolve().parents[1]
ADVICE = "(to continue an unfinished run: hydra.run.dir=<its folder>; to train a finished one further: "


def _said(out: Path, caplog) -> str:
    """The one line ``resume_point`` logs for ``train.resume=auto`` in ``out`` (it must start fresh)."""
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        assert resume_point(OmegaConf.create({"train": {"resume": "auto"}}), out) is None
    lines = [r.getMessage() for r in caplog.records if r.name == "gensbi_sharding"]
    assert len(lines) == 1, lines
    return lines[0]


def _sweep_job(tmp_path: Path, name: str = "1") -> Path:
    (tmp_path / "multirun.yaml").write_text("hydra: {}\n")
    job = tmp_path / name
    (job / ".hydra").mkdir(parents=True)  # Hydra's record, made before the job runs (and for one it never starts)
    for record in ("config", "hydra", "overrides"):
        (job / ".hydra" / f"{record}.yaml").write_text("{}\n")
        (job / ".hydra" / f"{record}.attempt1.yaml").write_text("{}\n")  # set aside as a stop between jobs left it
    (job / "launch.log").write_text("job 1 of the sweep did not start (interrupted by Ctrl-C ...)\n")
    return job


def test_a_sweep_job_that_never_ran_starts_in_one_short_line(tmp_path, caplog):
    job = _sweep_job(tmp_path)
    for folder, name in ((job, "1"), (tmp_path / "2", "2")):  # 2: a job whose folder is not made yet
        said = _said(folder, caplog)
        assert said == f"train.resume=auto: job {name} of the sweep has not run before: starting it fresh"


@pytest.mark.parametrize("trace", ["metrics.json", "checkpoints/20.orbax-checkpoint-tmp-1", "error.attempt1.txt",
                                   ".hydra/x64.attempt1.yaml"])
def test_a_sweep_job_that_ran_and_lost_its_checkpoint_keeps_the_advice(tmp_path, caplog, trace):
    # metrics.json: it stopped before its first save; the rest: killed during its save, or outright (no record, but
    # its files and the jax_enable_x64 record it wrote as it claimed the folder, set aside as this attempt claimed it)
    job = _sweep_job(tmp_path)
    (job / trace).parent.mkdir(parents=True, exist_ok=True)
    (job / trace).write_text("{}") if "." in Path(trace).name[1:] and "orbax" not in trace else (job / trace).mkdir()
    assert _said(job, caplog) == f"train.resume=auto: no checkpoint in {job} yet, starting fresh {ADVICE}" \
        "train.resume=<its folder> and a new hydra.run.dir)"


def test_a_run_of_its_own_in_a_new_folder_keeps_the_advice(tmp_path, caplog):
    out = tmp_path / "runs" / "q"  # perhaps meant to be an earlier run's folder: the advice applies
    out.mkdir(parents=True)
    assert ADVICE in _said(out, caplog)


@pytest.mark.slow  # a two-job launch.py sweep, 2 training steps each
def test_a_sweep_continued_with_train_resume_auto_starts_its_new_jobs_quietly(tmp_path):
    sweep = tmp_path / "sweep"
    proc = subprocess.run([sys.executable, "launch.py", "-m", "experiment=quick", "seed=0,1", "train.steps=2",
                           "eval.enabled=false", "train.resume=auto", f"hydra.sweep.dir={sweep}"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("train.resume=auto:")]
    assert said == [f"train.resume=auto: job {n} of the sweep has not run before: starting it fresh" for n in (0, 1)]
