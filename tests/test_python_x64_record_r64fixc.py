"""``run(cfg)`` from Python into a new folder records its JAX_ENABLE_X64 as it starts, as a launch does."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from faults_helpers import compose_tiny, saved_checkpoint
from gensbi_sharding.harness import run_folder
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.resume_refusal import refuse_resume_settings


def test_a_python_run_killed_before_its_metrics_still_refuses_a_resume_under_the_other_x64(tmp_path, monkeypatch):
    # Was: a run from Python into a new folder wrote no .hydra, so no x64.yaml: killed before its metrics.json, a
    # resume under the other JAX_ENABLE_X64 went on unrefused, and its continue advice named no setting
    import jax

    on = bool(jax.config.jax_enable_x64)
    run = tmp_path / "run"
    cfg = compose_tiny("mesh=none", output_dir=run)
    monkeypatch.setattr(run_folder, "x64_on", lambda: not on)  # the run ran under the other setting
    folder = run_folder.RunFolder(run, cfg)
    folder.claim()
    try:
        step_dir = saved_checkpoint(run, OmegaConf.to_container(cfg, resolve=True), {}, step=3)
    finally:
        folder.release()  # killed here: no metrics.json
    assert not (run / "metrics.json").exists()
    assert (run / ".hydra" / "x64.yaml").read_text() == f"jax_enable_x64: {str(not on).lower()}\n"
    now = compose_tiny("mesh=none", f"train.resume={run}", "train.steps=6")
    with pytest.raises(ConfigError, match=f"jax_enable_x64|JAX_ENABLE_X64") as refused:
        refuse_resume_settings(step_dir, now)
    assert f"jax.config.update('jax_enable_x64', {not on})" in str(refused.value) or (
        f"{'set JAX_ENABLE_X64=1' if not on else 'unset JAX_ENABLE_X64'} to " in str(refused.value)), refused.value
