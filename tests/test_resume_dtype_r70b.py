"""A run resumed with another compute dtype (``model.dtype``, free on resume) says so, as a changed schedule is said.

Was: ``train.resume=<a flux1 run> model.dtype=bfloat16`` trained and scored in bfloat16 from the float32 run's
checkpoint without a word (a changed ``train.weight_decay`` or schedule is named, with the override that keeps it).
"""

import logging

import jax
import jax.numpy as jnp
import pytest
from flax import nnx
from omegaconf import OmegaConf

from faults_helpers import compose_tiny
from gensbi_sharding.checkpoint import CheckpointWriter
from gensbi_sharding.harness.resume import check_resume_settings


def _checkpoint(out, step, *overrides):
    """A checkpoint at ``step`` (one tiny array) saved with the tiny config of ``overrides`` (train.steps=8)."""
    saved = OmegaConf.to_container(compose_tiny(*overrides), resolve=True)
    with CheckpointWriter(out / "checkpoints", config=saved) as writer:
        writer.save(step, nnx.State({"w": jnp.ones(2)}), jax.random.key(0))
    return out / "checkpoints" / str(step)


def _said(caplog, step_dir, *overrides):
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        check_resume_settings(step_dir, compose_tiny(*overrides, f"train.resume={step_dir}"))
    return [(r.levelno, r.getMessage()) for r in caplog.records if "model.dtype" in r.getMessage()]


@pytest.mark.slow
@pytest.mark.parametrize("step, level", [(4, logging.WARNING), (8, logging.INFO)])  # unfinished, finished
def test_a_resume_in_another_compute_dtype_names_both_and_the_override_that_keeps_it(tmp_path, caplog, step, level):
    step_dir = _checkpoint(tmp_path, step, "model=flux1")
    said = _said(caplog, step_dir, "model=flux1", "model.dtype=bfloat16", "train.steps=12", "eval.enabled=true")
    assert said == [(level, f"train.resume: the checkpoint at step {step} was computed in model.dtype=float32 (this "
                            f"run: model.dtype=bfloat16): from step {step} this run trains and scores in bfloat16; "
                            "add model.dtype=float32 to compute as the saved run did")]
    # The override it names, added to the same command: nothing left to say.
    assert _said(caplog, step_dir, "model=flux1", "model.dtype=bfloat16", "train.steps=12", "model.dtype=float32") == []


def test_a_model_without_a_compute_dtype_says_nothing_of_one(tmp_path, caplog):
    step_dir = _checkpoint(tmp_path, 4)  # mlp: no model.dtype in either config
    assert _said(caplog, step_dir, "train.steps=12") == []


def test_a_resume_that_trains_nothing_further_says_it_only_scores_in_the_new_dtype(tmp_path, caplog):
    """train.steps at the checkpoint's step: nothing is trained, so the note does not say 'trains' (review of r70)."""
    step_dir = _checkpoint(tmp_path, 8, "model=flux1")
    said = _said(caplog, step_dir, "model=flux1", "model.dtype=bfloat16", "train.steps=8", "eval.enabled=true")
    assert said == [(logging.INFO, "train.resume: the checkpoint at step 8 was computed in model.dtype=float32 (this "
                                   "run: model.dtype=bfloat16): from step 8 this run scores in bfloat16; add "
                                   "model.dtype=float32 to compute as the saved run did")]


def test_a_resume_that_neither_trains_nor_scores_says_nothing_of_the_dtype(tmp_path, caplog):
    step_dir = _checkpoint(tmp_path, 8, "model=flux1")
    assert _said(caplog, step_dir, "model=flux1", "model.dtype=bfloat16", "train.steps=8", "eval.enabled=false") == []
    said = _said(caplog, step_dir, "model=flux1", "model.dtype=bfloat16", "train.steps=12", "eval.enabled=false")
    assert [m for _, m in said] == ["train.resume: the checkpoint at step 8 was computed in model.dtype=float32 (this "
                                    "run: model.dtype=bfloat16): from step 8 this run trains in bfloat16; add "
                                    "model.dtype=float32 to compute as the saved run did"]
