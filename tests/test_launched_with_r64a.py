""""The run that saved it was launched with: ..." names what ran, a preset edited since or not.

Was: the record's overrides alone ("experiment=mine"), which pasted after the preset's file was edited composed the
edited preset: the refusal's own fix then trained otherwise than the checkpoint it named.
"""

from __future__ import annotations

import shlex

import pytest
from faults_helpers import run_with_own_preset, under_command


@pytest.mark.slow
def test_the_launched_with_command_keeps_the_settings_of_a_preset_edited_since(tmp_path):
    from gensbi_sharding.harness.saving_record import launched_with

    preset, search, run = run_with_own_preset(tmp_path)
    said = "; the run that saved it was launched with: "
    assert launched_with(run / "checkpoints" / "5") == f"{said}{shlex.quote(search)} experiment=mine seed=3"
    preset.write_text("# @package _global_\nmodel:\n  width: 40\n")  # edited after the run started
    command = launched_with(run / "checkpoints" / "5")
    assert command == f"{said}{shlex.quote(search)} experiment=mine seed=3 model.width=24", command
    pasted = shlex.split(command.removeprefix(said))
    assert under_command(pasted, lambda cfg: cfg.model.width) == 24  # what ran, pasted now
