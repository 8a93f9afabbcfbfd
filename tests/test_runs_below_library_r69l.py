"""A folder of runs (outputs/, a date's, a sweep's) passed to the library's restore: it said "no checkpoint ... pass
a run dir, its checkpoints/ dir or one step dir" without naming the run folders below it, which the harness's
train.resume= and sample.py refusals named. Now find_checkpoint (so restore, saved_config) names them, newest first,
and the path it offers restores."""

import os

import jax
import pytest
from flax import nnx

from gensbi_sharding.checkpoint import CheckpointWriter, abstract_state_for, find_checkpoint, restore


def _save(run, when):
    model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    with CheckpointWriter(run / "checkpoints", every=1) as writer:
        writer.save(4, nnx.state(model), jax.random.key(0))
    os.utime(run / "checkpoints" / "4", (when, when))
    return model


def test_a_folder_of_runs_names_them_and_the_path_that_restores(tmp_path):
    old, new = tmp_path / "outputs" / "2026-12-05" / "10-00-00", tmp_path / "outputs" / "2026-12-06" / "0" / "run"
    _save(old, 1_000_000)
    model = _save(new, 2_000_000)
    with pytest.raises(FileNotFoundError) as err:
        restore(tmp_path / "outputs", abstract_state_for(model, None))
    assert str(err.value) == (f"no checkpoint in {tmp_path / 'outputs'}: looked for complete Orbax step folders "
                              f"<step>/ in it; it holds 2 run folder(s) with a checkpoint, the newest first: {new}, "
                              f"{old}: pass one of them, e.g. {new}")
    pasted = str(err.value).rsplit("e.g. ", 1)[1]
    assert restore(pasted, abstract_state_for(model, None)).step == 4
    (tmp_path / "empty").mkdir()  # nothing below: the words as before
    with pytest.raises(FileNotFoundError) as err:
        find_checkpoint(tmp_path / "empty")
    assert str(err.value).endswith("in it; pass a run dir, its checkpoints/ dir or one step dir")


def test_more_than_three_runs_are_counted(tmp_path):
    for k in range(5):
        _save(tmp_path / "runs" / f"r{k}", 1_000_000 + k)
    with pytest.raises(FileNotFoundError) as err:
        find_checkpoint(tmp_path / "runs")
    runs = tmp_path / "runs"
    assert (f"it holds 5 run folder(s) with a checkpoint, the newest first: {runs / 'r4'}, {runs / 'r3'}, "
            f"{runs / 'r2'} and 2 more: pass one of them, e.g. {runs / 'r4'}") in str(err.value)


def test_train_resume_names_the_runs_once_as_overrides(tmp_path):
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.resume import resume_step_dir

    run = tmp_path / "runs" / "a"
    _save(run, 1_000_000)
    with pytest.raises(ConfigError) as err:  # the library's paths not repeated beside the harness's override
        resume_step_dir(OmegaConf.create({"train": {"resume": str(tmp_path / "runs")}}))
    assert str(err.value) == (f"train.resume={tmp_path / 'runs'}: no checkpoint in {tmp_path / 'runs'}: looked for "
                              f"complete Orbax step folders <step>/ in it; it holds 1 run folder(s) with a checkpoint, "
                              f"the newest: train.resume={run}; or leave train.resume out to start fresh")
