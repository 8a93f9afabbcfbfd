"""A hand-edited ``.hydra/x64.yaml`` is read as YAML; what holds no bool ``jax_enable_x64`` is refused, named."""

from __future__ import annotations

import logging

import pytest
from omegaconf import OmegaConf

from faults_helpers import compose_tiny, saved_checkpoint
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.launch_record import launch_x64, quiet_absl
from gensbi_sharding.harness.resume_refusal import refuse_resume_settings
from gensbi_sharding.harness.resume_settings import x64_prefix


def test_a_hand_edited_x64_record_is_read_as_yaml_and_refuses_a_resume_under_the_other_setting(tmp_path):
    # Was: compared as exact text ("jax_enable_x64: true"), so each of these was ignored: None, and a resume under
    # the other JAX_ENABLE_X64 of a run killed before its metrics.json went on unrefused
    import jax

    on = bool(jax.config.jax_enable_x64)
    run = tmp_path / "run"
    cfg = compose_tiny("mesh=none", output_dir=run)
    step_dir = saved_checkpoint(run, OmegaConf.to_container(cfg, resolve=True), {}, step=3)
    (run / ".hydra").mkdir(exist_ok=True)
    other = str(not on).lower()
    now = compose_tiny("mesh=none", f"train.resume={run}", "train.steps=6")
    for text in (f"jax_enable_x64: {other.capitalize()}", f"jax_enable_x64: {other}  # hand-set",
                 f"{{jax_enable_x64: {other}}}", f"jax_enable_x64:   {other.upper()}"):
        (run / ".hydra" / "x64.yaml").write_text(text + "\n")
        assert launch_x64(step_dir) is (not on), text
        with pytest.raises(ConfigError, match="JAX_ENABLE_X64"):
            refuse_resume_settings(step_dir, now)


@pytest.mark.parametrize("text", ["jax_enable_x64: maybe", "jax_enable_x64: 1", "x64: true", "", "- true"])
def test_an_x64_record_holding_no_bool_is_refused_naming_the_file_and_the_fix(tmp_path, text):
    step_dir = tmp_path / "run" / "checkpoints" / "3"
    step_dir.mkdir(parents=True)
    (record := tmp_path / "run" / ".hydra").mkdir()
    (record / "x64.yaml").write_text(text + "\n")
    with pytest.raises(ConfigError) as refused:
        launch_x64(step_dir)
    said = str(refused.value)
    assert said.startswith(f"{record / 'x64.yaml'} holds {text!r}, not 'jax_enable_x64: true'"), said
    assert "write the setting the run was launched with" in said and "\n" not in said
    assert x64_prefix(step_dir) in ("", "env -u JAX_ENABLE_X64 ")  # advice printed on: no lead, the paste refused
    (record / "x64.yaml").write_text("jax_enable_x64: true\n")  # the fix the refusal names: read
    assert launch_x64(step_dir) is True


def test_quiet_absl_holds_absl_at_warnings_and_puts_its_level_back_even_on_an_error():
    absl = logging.getLogger("absl")
    before = absl.level
    absl.setLevel(logging.DEBUG)
    try:
        with pytest.raises(KeyError), quiet_absl():
            assert absl.level == logging.WARNING
            raise KeyError("x")
        assert absl.level == logging.DEBUG
    finally:
        absl.setLevel(before)
