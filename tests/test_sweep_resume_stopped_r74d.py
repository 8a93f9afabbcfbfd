"""``train.resume=<sweep folder>`` (and ``sample.py <sweep folder>``) with a stopped job: the refusal says the job it
names is the best FINISHED one, and gives the command that continues each stopped job in its own folder.

Was: "resume one of its jobs, the lowest C2ST, 0.912: train.resume=<sweep>/0 (jobs with a checkpoint: 0, 1)" for a
sweep whose job 1 was Ctrl-C'd at step 40: a user who wanted to finish the sweep's stopped job was pointed at the
finished job 0, whose weights ``train.resume=<sweep>/0`` starts a NEW run from (docs/harness.md: ``train.resume=<run>``
starts a new run from that run's checkpoint; ``train.resume=auto`` in the run's own folder continues it), with no
word of job 1 (FIX74 #4).
"""


import numpy as np
import pytest
from omegaconf import OmegaConf

from faults_helpers import saved_two_moons_run, sweep_of_runs
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.own_observation import sample_posterior
from gensbi_sharding.harness.resume import resume_step_dir

def _continue(job):
    """The command that continues job ``job``, as its run recorded it: naming its own folder (a made-up folder,
    /x/sweep/1, reads as one moved since, and is said as the job's folder now: tests/test_moved_folder_r76g.py)."""
    return f"python launch.py rule=tensor train.resume=auto hydra.mode=RUN hydra.run.dir={job}"


@pytest.fixture(scope="module")
def one_run(tmp_path_factory):
    return saved_two_moons_run(tmp_path_factory.mktemp("run"))


@pytest.mark.slow  # copies a saved checkpoint per job, and sample.py's refusal loads its reader
def test_a_stopped_job_is_named_with_its_continue_command_beside_the_best_finished_one(tmp_path, one_run):
    command = _continue(tmp_path / "sweep" / "1")
    stopped = {"status": "interrupted", "data": "two_moons", "stopped_at_step": 40, "continue_with": command,
               "error": "interrupted by Ctrl-C (SIGINT) at step 40; worded any way"}
    sweep = sweep_of_runs(tmp_path, one_run, [{"status": "ok", "data": "two_moons", "c2st": 0.912}, stopped])
    with pytest.raises(ConfigError) as resumed:
        resume_step_dir(OmegaConf.create({"train": {"resume": str(sweep)}}))
    assert str(resumed.value) == (
        f"train.resume={sweep} is a sweep's folder: resume one of its jobs, the lowest C2ST, 0.912: "
        f"train.resume={sweep / '0'} (jobs with a checkpoint: 0, 1); that job is the best of the finished ones, "
        "named by the sweep's own scores; job 1 stopped before finishing (status interrupted at step 40): to continue "
        f"it in its own folder: {command}")
    with pytest.raises(FileNotFoundError) as sampled:
        sample_posterior(sweep, np.zeros(2))
    assert str(sampled.value).endswith(f"; job 1 stopped before finishing (status interrupted at step 40): to "
                                       f"continue it in its own folder: {command}")


@pytest.mark.slow
def test_with_no_finished_job_the_named_one_is_said_to_be_the_first(tmp_path, one_run):
    command = _continue(tmp_path / "sweep" / "0")
    stopped = {"status": "preempted", "data": "two_moons", "error": f"preempted by SIGTERM; continue with: {command}"}
    sweep = sweep_of_runs(tmp_path, one_run, [stopped])
    with pytest.raises(ConfigError) as resumed:
        resume_step_dir(OmegaConf.create({"train": {"resume": str(sweep)}}))
    assert str(resumed.value).endswith(
        f"e.g. train.resume={sweep / '0'} (jobs with a checkpoint: 0); that job is the first with a checkpoint, none "
        f"being ranked; job 0 stopped before finishing (status preempted): to continue it in its own folder: "
        f"{command}")
