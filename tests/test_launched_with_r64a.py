""""The run that saved it was launched with: ..." names what ran, a preset edited since or not.

Was: the record's overrides alone ("experiment=mine"), which pasted after the preset's file was edited composed the
edited preset: the refusal's own fix then trained otherwise than the checkpoint it named.
"""

from __future__ import annotations

import shlex

from omegaconf import OmegaConf

from faults_helpers import under_command


def test_the_launched_with_command_keeps_the_settings_of_a_preset_edited_since(tmp_path):
    from gensbi_sharding.harness.hints import launched_with

    preset = tmp_path / "my_conf" / "experiment" / "mine.yaml"
    preset.parent.mkdir(parents=True)
    preset.write_text("# @package _global_\nmodel:\n  width: 24\n")
    search = f"hydra.searchpath=[file://{tmp_path / 'my_conf'}]"
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "config.yaml").write_text(under_command([search, "experiment=mine", "seed=3"], OmegaConf.to_yaml))
    (run / ".hydra" / "overrides.yaml").write_text("- experiment=mine\n- seed=3\n")
    (run / ".hydra" / "hydra.yaml").write_text(f"hydra:\n  overrides:\n    hydra:\n    - {search}\n")
    said = "; the run that saved it was launched with: "
    assert launched_with(run / "checkpoints" / "5") == f"{said}{shlex.quote(search)} experiment=mine seed=3"
    preset.write_text("# @package _global_\nmodel:\n  width: 40\n")  # edited after the run started
    command = launched_with(run / "checkpoints" / "5")
    assert command == f"{said}{shlex.quote(search)} experiment=mine seed=3 model.width=24", command
    pasted = shlex.split(command.removeprefix(said))
    assert under_command(pasted, lambda cfg: cfg.model.width) == 24  # what ran, pasted now
