"""``sample.py`` (``sample_posterior``) and ``train.resume=`` given a folder holding no run's checkpoint of its own
(a sweep's, its jobs named by number; a ``benchmarks/sequential.py`` job's, which keeps none); ``sample.py --out``;
the conversion command of a text observation."""

import json
import shutil

from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from faults_helpers import saved_two_moons_run
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness import own_observation
from gensbi_sharding.harness.own_observation import main, sample_posterior
from gensbi_sharding.harness.resume import resume_step_dir


@pytest.fixture(scope="module")
def one_run(tmp_path_factory):
    """A two_moons run's folder holding one checkpoint (written by the library; the arrays are no model's)."""
    return saved_two_moons_run(tmp_path_factory.mktemp("run"))


def test_a_sweeps_jobs_are_named_by_number(tmp_path, one_run):
    # Was: "(jobs with a checkpoint: 0, 1, 10, 11, 2)", the job names sorted as strings (sample.py and train.resume)
    sweep = tmp_path / "sweep"
    for job in ("11", "2", "10", "0", "1"):
        shutil.copytree(one_run, sweep / job)
    (sweep / "3").mkdir()  # no checkpoint: not named
    (sweep / "multirun.yaml").write_text("")
    with pytest.raises(FileNotFoundError) as err:
        sample_posterior(sweep, np.zeros(2))
    assert str(err.value) == (f"{sweep} is a sweep's folder, one run per job: sample one job's, e.g. {sweep / '0'} "
                              "(jobs with a checkpoint: 0, 1, 2, 10, 11)")
    with pytest.raises(ConfigError) as err:
        resume_step_dir(OmegaConf.create({"train": {"resume": str(sweep)}}))
    assert str(err.value).endswith(f"e.g. train.resume={sweep / '0'} (jobs with a checkpoint: 0, 1, 2, 10, 11)")


def test_a_sweeps_jobs_named_by_subdir_are_ordered_by_their_numbers(tmp_path, one_run):
    # hydra.sweep.subdir=${hydra.job.num}_${rule.name}: was "10_fsdp" before "1_fsdp" and "2_fsdp" (as strings)
    sweep = tmp_path / "sweep"
    for job in ("10_fsdp", "2_fsdp", "1_fsdp", "notes", "0_tensor"):
        shutil.copytree(one_run, sweep / job)
    (sweep / "multirun.yaml").write_text("")
    with pytest.raises(FileNotFoundError) as err:
        sample_posterior(sweep, np.zeros(2))
    assert str(err.value).endswith(f"e.g. {sweep / '0_tensor'} (jobs with a checkpoint: 0_tensor, 1_fsdp, 2_fsdp, "
                                   "10_fsdp, notes)")


def _sequential_job(root, status="stopped"):
    """A ``benchmarks/sequential.py`` job's folder under the ``sbibm.py`` root ``root``, as the job leaves it."""
    job = root / "two_moons_1000_sequential-2-box-0.5" / "job"
    (job / ".hydra").mkdir(parents=True)
    (job / "sequential.json").write_text(json.dumps({"rounds": 2, "region": "box", "margin": 0.5}))
    (job / ".hydra" / "overrides.yaml").write_text(
        "- experiment=sbibm\n- data=two_moons\n- data.num_simulations=1000\n- eval.observations=[1, 2]\n")
    (job / "c2st.csv").write_text("observation,c2st\n1,0.6\n")
    (job / "metrics.json").write_text(json.dumps({"status": status, "error": "stopped by Ctrl-C or a signal"}))
    return job


@pytest.mark.parametrize("status", ["ok", "stopped"])
def test_a_sequential_jobs_folder_is_said_to_keep_no_checkpoint(tmp_path, one_run, capsys, status):
    # Was: "... its run (status stopped) saved no complete checkpoint in <job>/checkpoints. Sampling needs a trained
    # run's saved weights": its rounds never save one, whatever its status
    job = _sequential_job(tmp_path, status)
    np.save(tmp_path / "x_o.npy", np.zeros(2))
    said = (f"run folder '{job}' has no checkpoint to sample: it is a sequential job's folder (benchmarks/sequential"
            ".py), whose rounds train a network per observation and keep neither weights nor samples, only their C2ST "
            f"scores ({job / 'c2st.csv'}); ")
    assert main([str(job), str(tmp_path / "x_o.npy")]) == 2
    assert capsys.readouterr().err == (f"[ERROR] {said}train an amortised run to sample (python launch.py "
                                       "experiment=sbibm data=two_moons data.num_simulations=1000 "
                                       "'eval.observations=[1, 2]') and sample its folder\n")
    shutil.copytree(one_run, tmp_path / "two_moons_1000" / "job")  # the amortised job of its cell, trained
    with pytest.raises(FileNotFoundError) as err:
        sample_posterior(job, np.zeros(2))
    assert str(err.value) == (f"{said}sample the amortised job of its task and budget instead: "
                              f"{tmp_path / 'two_moons_1000' / 'job'}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["two_moons_1000", "two_moons_1000_sequential-2-box-0.5",
                                                          "x_o.npy"]  # nothing written
    # train.resume=<it>: was "holds a completed run whose checkpoints are gone" (status ok), or "a run that saved no
    # complete checkpoint (status stopped)"
    with pytest.raises(FileNotFoundError) as err:
        resume_step_dir(OmegaConf.create({"train": {"resume": str(job)}}))
    assert str(err.value).endswith(f"; {job} is a sequential job's folder (benchmarks/sequential.py), whose rounds "
                                   "keep no checkpoint: start a new run without train.resume")


@pytest.mark.parametrize("blank, typed", [("", "''"), ("  ", "'  '")])
def test_a_blank_out_is_refused_naming_the_default(tmp_path, one_run, monkeypatch, capsys, blank, typed):
    # Was: --out '' wrote the default output, x_o_posterior.npz, as if --out were not given
    shutil.copytree(one_run, tmp_path / "run")
    np.save(tmp_path / "x_o.npy", np.zeros(2))
    monkeypatch.setattr(own_observation, "sample_posterior", lambda *a, **k: pytest.fail("sampled"))
    with pytest.raises(SystemExit) as code:
        main([str(tmp_path / "run"), str(tmp_path / "x_o.npy"), "--out", blank])
    assert code.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"sample.py: error: --out {typed} names no file; pass --out <a file>.npz, or drop --out to write the default "
        f"beside the observation file, {tmp_path / 'x_o_posterior.npz'}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "x_o.npy"]


@pytest.mark.slow
@pytest.mark.parametrize("name, text", [
    ("observation.csv", "data_1,data_2\n0.5,-0.25\n"),  # sbibm's own files: a header row (was: the command failed)
    ("x.csv", "# x_o\nx1;x2\n\n0.5;-0.25\n"),  # a comment, column names, a blank line, ';'
    ("x.txt", "0.5, -0.25\n"),  # commas in a .txt (was: no delimiter, the command failed)
    ("x.dat", "x1\tx2\n0.5\t-0.25  # mine\n"),
    # A spreadsheet's "CSV UTF-8" starts with a byte order mark (was: "could not convert string '\ufeff0.5'")
    ("excel.csv", "\ufeff0.5,-0.25\r\n"),
    ("excel_named.csv", "\ufeffx1,x2\r\n0.5,-0.25\r\n"),
    ("excel_1252.csv", b"temp\xe9rature,x\r\n0.5,-0.25\r\n"),  # its plain "CSV" (was: UnicodeDecodeError)
])
def test_a_text_observations_conversion_command_reads_it(tmp_path, name, text):
    import subprocess
    import sys

    from gensbi_sharding.harness.observation_input import load_observation

    (tmp_path / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ValueError) as refused:
        load_observation(tmp_path / name)
    saved = tmp_path / f"{Path(name).stem}_x_o.npy"  # beside it (was x_o.npy, in the folder the command ran from)
    command = str(refused.value).split('convert it once: python -c "')[1].removesuffix(f'" and pass {saved}')
    subprocess.run([sys.executable, "-c", command], cwd=tmp_path, check=True, timeout=60, capture_output=True)
    np.testing.assert_array_equal(np.load(saved), [0.5, -0.25])


@pytest.mark.slow
def test_the_conversion_command_of_an_observation_in_a_read_only_folder_writes_where_it_can(tmp_path, monkeypatch):
    # Was: np.save('<read-only folder>/obs_x_o.npy', ...) beside the file, which failed with PermissionError when
    # pasted (a shared data folder); now the current folder's, by absolute path. (root ignores a folder's mode, so
    # the folder's own check, os.access, is told it is read-only.)
    import os
    import subprocess
    import sys

    from gensbi_sharding.harness import observation_input

    shared, here = tmp_path / "shared", tmp_path / "here"
    shared.mkdir(), here.mkdir()
    (shared / "obs.txt").write_text("0.5 -0.25\n")
    real = os.access
    monkeypatch.setattr(observation_input.os, "access", lambda p, mode: Path(p) != shared and real(p, mode))
    monkeypatch.chdir(here)
    with pytest.raises(ValueError) as refused:
        observation_input.load_observation(shared / "obs.txt")
    saved = here / "obs_x_o.npy"
    command = str(refused.value).split('convert it once: python -c "')[1].removesuffix(f'" and pass {saved}')
    subprocess.run([sys.executable, "-c", command], cwd=tmp_path, check=True, timeout=60, capture_output=True)
    np.testing.assert_array_equal(np.load(saved), [0.5, -0.25])
    assert os.listdir(shared) == ["obs.txt"]
