"""``train.resume=<a folder of runs>`` (and ``sample.py <a folder of runs>``) scans the folder once.

Was: the library's ``find_checkpoint`` scanned it for the runs below (``runs_below``), then the harness's refusal
scanned it again to name the newest as ``train.resume=<it>``: twice the minutes on a folder of thousands of runs.
Now the harness takes the runs from the library's refusal.
"""

import os
from pathlib import Path

import jax
import numpy as np
import pytest
from flax import nnx
from omegaconf import OmegaConf

import gensbi_sharding.checkpoint_steps as steps
from gensbi_sharding.checkpoint import CheckpointWriter
from gensbi_sharding.harness import runs_below as harness_runs
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.runs_below import runs_note


def _run(folder, when):
    with CheckpointWriter(folder / "checkpoints", every=1) as writer:
        writer.save(4, nnx.State({"w": jax.numpy.ones(2)}), jax.random.key(0))
    os.utime(folder / "checkpoints" / "4", (when, when))


@pytest.fixture
def runs(tmp_path, monkeypatch):
    """A folder of three runs (the newest: one whose name holds the words the refusal splits at) and a scan count."""
    for name, when in (("a", 1_000_000), ("b", 2_000_000), ("c: pass one of them, e.g. c", 3_000_000)):
        _run(tmp_path / "outputs" / name, when)
    scans = []
    real = steps.runs_below
    counted = lambda folder, *a, **k: scans.append(Path(folder)) or real(folder, *a, **k)  # noqa: E731
    monkeypatch.setattr(steps, "runs_below", counted)  # the library's scan, and the harness's (the same function)
    monkeypatch.setattr(harness_runs, "runs_below", counted)
    return tmp_path / "outputs", scans


def test_a_resume_from_a_folder_of_runs_scans_it_once(runs):
    from gensbi_sharding.harness.override_grammar import hydra_override
    from gensbi_sharding.harness.resume import resume_step_dir

    outputs, scans = runs
    with pytest.raises(ConfigError) as err:
        resume_step_dir(OmegaConf.create({"train": {"resume": str(outputs)}}))
    newest = outputs / "c: pass one of them, e.g. c"
    assert hydra_override("train.resume", newest) == "'train.resume=\"" + str(newest) + "\"'"  # shell, Hydra
    assert f"; it holds 3 run folder(s) with a checkpoint, the newest: {hydra_override('train.resume', newest)}; or " \
           "leave train.resume out to start fresh" in str(err.value), str(err.value)
    assert len(scans) == 1


def test_sampling_a_folder_of_runs_scans_it_once(runs):
    from gensbi_sharding.harness.own_observation import sample_posterior

    outputs, scans = runs
    with pytest.raises(FileNotFoundError) as err:
        sample_posterior(outputs, np.zeros(2))
    assert str(err.value) == (f"run folder {str(outputs)!r} has no checkpoint to sample; it holds 3 run folder(s) "
                              f"with a checkpoint, the newest: {outputs / 'c: pass one of them, e.g. c'}: pass one "
                              "of them")
    assert len(scans) == 1


def test_a_refusal_that_names_no_runs_gives_none():
    assert runs_note("/x", refusal=FileNotFoundError("no checkpoint in /x: looked for ...; pass a run dir")) == ""
    said = steps.reasoned("/x/4 is not a complete checkpoint (cut); /x holds no complete step", ": start without it")
    assert runs_note("/x", "train.resume", said) == ""


def test_a_folder_of_runs_beside_another_writers_checkpoint_still_names_its_runs(tmp_path):
    """find_checkpoint refuses such a folder before it scans for runs (it names the other writer's checkpoint):
    the runs are then scanned for, not dropped (review of round 70: the note was gone)."""
    import orbax.checkpoint as ocp

    from gensbi_sharding.harness.own_observation import sample_posterior
    from gensbi_sharding.harness.resume import resume_step_dir

    outputs = tmp_path / "outputs"
    _run(outputs / "run_a", 1_000_000)
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save((outputs / "state").absolute(), {"w": np.ones(2)})
    checkpointer.wait_until_finished()
    with pytest.raises(ConfigError) as err:
        resume_step_dir(OmegaConf.create({"train": {"resume": str(outputs)}}))
    assert f"; it holds 1 run folder(s) with a checkpoint, the newest: train.resume={outputs / 'run_a'}" in \
        str(err.value), str(err.value)
    with pytest.raises(FileNotFoundError) as err:
        sample_posterior(outputs, np.zeros(2))
    assert f"it holds 1 run folder(s) with a checkpoint, the newest: {outputs / 'run_a'}: pass one of them" in \
        str(err.value), str(err.value)
