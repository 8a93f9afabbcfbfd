"""``python_words`` (a ``run(cfg)`` refusal in the settings a Python caller sets) leaves the command lines a refusal
quotes as they are, and says its ``omegaconf.open_dict`` note once (REVIEW76B).

Was: ``run(cfg)`` with ``cfg.train.resume=<a sweep folder>`` whose job 1 had stopped was refused with best_job's note
"to continue it in its own folder: python launch.py rule=tensor cfg.train.steps=2000 and cfg.train.resume='auto'
hydra.mode=RUN cfg.output_dir='<sweep>/1'; set cfg.output_dir in omegaconf.open_dict(cfg)": the recorded shell
command (``sweep_hints.job_command``) reworded into neither a command bash runs nor Python. Likewise the command line
of a process holding a run's lock (``folder_note.owner_line``), another run's, as it ran. And a refusal worded twice
(raised inside two ``in_python_words``) said "; set cfg.output_dir in omegaconf.open_dict(cfg)" twice.
"""

import shlex

import pytest

from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.python_words import in_python_words, said_as, setting
from gensbi_sharding.harness.sweep_hints import job_command


def test_a_quoted_continue_command_is_left_a_shell_command(tmp_path):
    job = tmp_path / "my sweep" / "1"
    job.mkdir(parents=True)
    command = job_command(["rule=tensor", "train.steps=2000"], job, multirun=True)
    for written in (command, f"env -u JAX_ENABLE_X64 {command}"):
        with pytest.raises(ConfigError) as refused, in_python_words():  # as resume_step_dir says it to run(cfg)
            raise ConfigError(f"{setting('train.resume', tmp_path)} is a sweep's folder: resume one of its jobs, "
                              f"{setting('train.resume', tmp_path / 'my sweep' / '0')}; job 1 stopped before "
                              f"finishing (status interrupted at step 40): to continue it in its own folder: {written}")
        python = str(refused.value)
        assert python == (f"cfg.train.resume={str(tmp_path)!r} is a sweep's folder: resume one of its jobs, "
                          f"cfg.train.resume={str(tmp_path / 'my sweep' / '0')!r}; job 1 stopped before finishing "
                          f"(status interrupted at step 40): to continue it in its own folder: {written}"), python
        assert shlex.split(python.rpartition("own folder: ")[2])[-1] == f'hydra.run.dir={job}'


def test_the_command_line_of_a_lock_holder_is_said_as_it_ran():
    with pytest.raises(ConfigError) as refused, in_python_words():  # as resume._writing_run says it to run(cfg)
        raise ConfigError(f"{setting('train.resume', '/r')}: a run is still writing in /r (pid 12 on h, started "
                          "2026-12-07 17:00:00: launch.py experiment=quick train.resume=auto hydra.run.dir=/r), and "
                          "deletes older checkpoints as it saves new ones; wait for that run to end, or copy its "
                          f"newest complete step folder and give {setting('train.resume', '<copy>')}")
    assert str(refused.value) == (
        "cfg.train.resume='/r': a run is still writing in /r (pid 12 on h, started 2026-12-07 17:00:00: launch.py "
        "experiment=quick train.resume=auto hydra.run.dir=/r), and deletes older checkpoints as it saves new ones; "
        "wait for that run to end, or copy its newest complete step folder and give cfg.train.resume='<copy>'")


@pytest.mark.parametrize("said", ["/x is a file, not a folder; choose another {}",
                                  "or in a new folder with cfg.train.resume='/a/b' and {}='<new folder>'"])
def test_the_open_dict_note_is_said_once(said):
    with pytest.raises(FileExistsError) as refused, in_python_words(), in_python_words():  # raised through two
        raise FileExistsError(said.format(said_as("hydra.run.dir", "cfg.output_dir")))
    python = str(refused.value)
    assert python.count("omegaconf.open_dict") == 1 and python.endswith(
        "; set cfg.output_dir in omegaconf.open_dict(cfg)"), python  # was: the note twice


@pytest.mark.slow  # saves a checkpoint per job
def test_run_cfg_resuming_a_sweep_folder_names_its_stopped_jobs_command_as_bash_runs_it(tmp_path):
    from omegaconf import OmegaConf

    from faults_helpers import saved_two_moons_run, sweep_of_runs
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.resume import resume_point

    run = saved_two_moons_run(tmp_path / "run")
    command = job_command(["rule=tensor", "train.steps=2000"], tmp_path / "sweep" / "1", multirun=True)
    stopped = {"status": "interrupted", "data": "two_moons", "stopped_at_step": 40, "continue_with": command,
               "error": f"interrupted by Ctrl-C (SIGINT) at step 40; continue with: {command}"}
    sweep = sweep_of_runs(tmp_path, run, [{"status": "ok", "data": "two_moons", "c2st": 0.912}, stopped])
    with pytest.raises(ConfigError) as refused:  # outside Hydra, as run(cfg) calls it
        resume_point(OmegaConf.create({"train": {"resume": str(sweep)}}), tmp_path / "out")
    said = str(refused.value)
    assert said.startswith(f"cfg.train.resume={str(sweep)!r} is a sweep's folder: resume one of its jobs, ") and \
        f"cfg.train.resume={str(sweep / '0')!r}" in said, said
    assert said.endswith(f"to continue it in its own folder: {command}"), said  # as bash runs it, nothing after
