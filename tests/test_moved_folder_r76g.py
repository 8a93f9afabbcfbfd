"""A sweep or run folder moved (or copied) after its run stopped: the notes and refusals that paste the run's recorded
continue command name the folder as it is now (UPGRADE76 finding 4, FIX76 1).

Was: ``best_job``'s note over a copy of a stopped sweep said "to continue it in its own folder: ... hydra.run.dir=
<the folder it ran in>", and sample.py's "to finish it: ..." of a moved run likewise: pasted, the command started the
job from scratch where the folder had been (or continued the original, not the copy read). The recorded command is
made by the writer's own function (``sweep_hints.job_command``, as ``continue_command`` makes it for a stopped job).
"""

import json
import os
import shutil

import numpy as np
import pytest
from omegaconf import OmegaConf

from faults_helpers import saved_two_moons_run, sweep_of_runs
from gensbi_sharding.harness.best_job import best_note
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.override_grammar import hydra_override
from gensbi_sharding.harness.sampled_checkpoint import no_checkpoint
from gensbi_sharding.harness.sweep_hints import job_command
from gensbi_sharding.harness.unfinished_run import unfinished_note


def _stopped(job, status="interrupted"):
    """A stopped job's record, its continue command as the writer makes it in ``job``, the folder it ran in."""
    command = job_command(["rule=tensor", "train.steps=2000"], job, multirun=True)
    return {"status": status, "data": "two_moons", "stopped_at_step": 40, "continue_with": command,
            "error": f"interrupted by Ctrl-C (SIGINT) at step 40; continue with: {command}"}


def _job(folder, record):
    (folder / "checkpoints" / "40").mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps(record))


def _continues(note, folder):
    """Whether ``note`` ends with the command continuing the job in ``folder``: its folder is ``folder``."""
    return note.endswith(f"train.resume=auto hydra.mode=RUN {hydra_override('hydra.run.dir', folder)}")


@pytest.mark.parametrize("how", [shutil.move, shutil.copytree])
def test_a_moved_or_copied_sweeps_note_names_each_stopped_job_where_it_is_now(tmp_path, how):
    ran = tmp_path / "ran"
    _job(ran / "0", {"status": "ok", "data": "two_moons", "c2st": 0.912})
    _job(ran / "1", _stopped(ran / "1"))
    assert _continues(best_note([ran / "0", ran / "1"]), ran / "1")  # not moved: the recorded command, untouched
    now = tmp_path / "archive" / "sweep (copy)"
    now.parent.mkdir()
    how(ran, now)
    note = best_note([now / "0", now / "1"])
    assert "job 1 stopped before finishing (status interrupted at step 40): to continue it in its own folder: " \
           "python " in note and _continues(note, now / "1"), note
    assert str(ran) not in note  # was: hydra.run.dir=<tmp>/ran/1, gone (moved) or another folder (the original)


def test_a_moved_failed_jobs_note_names_it_where_it_is_now(tmp_path):
    _job(tmp_path / "ran" / "0", _stopped(tmp_path / "ran" / "0", status="error"))
    shutil.move(tmp_path / "ran", tmp_path / "now")
    note = best_note([tmp_path / "now" / "0"])
    assert "job 0 failed at step 40 (its error in " in note and _continues(note, tmp_path / "now" / "0"), note


@pytest.mark.slow  # copies a saved checkpoint per job, and sample.py's refusal loads its reader
def test_a_moved_sweep_folder_is_refused_naming_its_stopped_job_where_it_is_now(tmp_path):
    from gensbi_sharding.harness.own_observation import sample_posterior
    from gensbi_sharding.harness.resume import resume_step_dir

    run = saved_two_moons_run(tmp_path / "run")
    ran = tmp_path / "ran" / "sweep"
    sweep_of_runs(tmp_path / "ran", run, [{"status": "ok", "data": "two_moons", "c2st": 0.912}, _stopped(ran / "1")])
    moved = tmp_path / "moved"
    shutil.move(ran, moved)
    with pytest.raises(ConfigError) as resumed:
        resume_step_dir(OmegaConf.create({"train": {"resume": str(moved)}}))
    assert _continues(str(resumed.value), moved / "1") and str(ran) not in str(resumed.value), resumed.value
    with pytest.raises(FileNotFoundError) as sampled:
        sample_posterior(moved, np.zeros(2))
    assert _continues(str(sampled.value), moved / "1") and str(ran) not in str(sampled.value), sampled.value


def _run_record(run, command):
    (run / "metrics.json").write_text(json.dumps({"status": "interrupted", "continue_with": command,
                                                  "error": f"interrupted by Ctrl-C; continue with: {command}"}))


def test_sample_of_a_moved_stopped_run_names_the_command_for_its_folder_now(tmp_path):
    ran, now = tmp_path / "ran", tmp_path / "runs" / "kept"
    (ran / "checkpoints" / "8").mkdir(parents=True)
    _run_record(ran, job_command(["train.steps=2000"], ran, multirun=False))
    before = unfinished_note(ran / "checkpoints" / "8", {"train": {"steps": 2000}})
    assert before.endswith(f"; to finish it: {job_command(['train.steps=2000'], ran, multirun=False)}, then sample "
                           "again")  # in place: the recorded command
    now.parent.mkdir()
    shutil.move(ran, now)
    note = unfinished_note(now / "checkpoints" / "8", {"train": {"steps": 2000}})
    assert note.endswith(f"; to finish it: {job_command(['train.steps=2000'], now, multirun=False)}, then sample "
                         "again"), note


def test_a_moved_run_without_a_checkpoint_is_refused_naming_its_folder_now(tmp_path):
    ran, now = tmp_path / "ran", tmp_path / "now"
    ran.mkdir()
    _run_record(ran, job_command(["train.steps=2000"], ran, multirun=False))
    shutil.move(ran, now)
    refusal = str(no_checkpoint(now, now, FileNotFoundError("no checkpoint")))
    assert f"continue it, {job_command(['train.steps=2000'], now, multirun=False)}, and sample" in refusal, refusal


def test_a_run_cfg_continue_sentence_names_the_folder_now(tmp_path):
    """A run started from Python records its continue call as a sentence (``sweep_hints.continue_command`` outside
    Hydra): its ``cfg.output_dir`` is the folder's."""
    ran, now = tmp_path / "ran", tmp_path / "my runs" / "now"
    (ran / "checkpoints" / "8").mkdir(parents=True)
    said = "run(cfg) with cfg.train.resume='auto' and cfg.output_dir={!r} set in omegaconf.open_dict(cfg)"
    _run_record(ran, said.format(str(ran)))
    now.parent.mkdir()
    shutil.move(ran, now)
    note = unfinished_note(now / "checkpoints" / "8", {"train": {"steps": 2000}})
    assert note.endswith(f"; to finish it: {said.format(str(now))}, then sample again"), note


def test_a_folder_written_otherwise_is_not_a_move(tmp_path, monkeypatch):
    """The same folder named relatively, or through a symlink, keeps the recorded command as it is; a folder Hydra
    reads only quoted is written as the harness writes it."""
    from gensbi_sharding.harness.moved_folder import in_folder

    (tmp_path / "runs" / "a").mkdir(parents=True)
    os.symlink(tmp_path / "runs" / "a", tmp_path / "latest")
    monkeypatch.chdir(tmp_path)
    for named in ("hydra.run.dir=runs/a", f"hydra.run.dir={tmp_path / 'latest'}", "'hydra.run.dir=runs/a'"):
        command = f"env -u JAX_ENABLE_X64 python launch.py 'x=a b' {named}"
        assert in_folder(command, tmp_path / "runs" / "a") == command
    odd = tmp_path / "b(1)"
    odd.mkdir()
    assert in_folder("python launch.py 'x=a b' hydra.run.dir=runs/a seed=1", odd) == (
        f"python launch.py 'x=a b' {hydra_override('hydra.run.dir', odd)} seed=1")
    assert hydra_override("hydra.run.dir", odd).startswith("'hydra.run.dir=\"")  # quoted for Hydra and the shell
    assert in_folder("", odd) == "" and in_folder("python launch.py 'unclosed", odd) == "python launch.py 'unclosed"
