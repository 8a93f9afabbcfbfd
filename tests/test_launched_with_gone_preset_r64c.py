""""The run that saved it was launched with: ..." for a run whose preset was deleted since: no word for it."""

from __future__ import annotations

import shlex

import pytest
from faults_helpers import run_with_own_preset, under_command
from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.saving_record import gone_presets, launched_with


@pytest.mark.slow
def test_a_deleted_presets_word_is_left_out_and_every_setting_that_ran_added(tmp_path):
    # Was: '... experiment=mine seed=3 model.width=24', refused pasted: "Could not find 'experiment/mine'" (Hydra's
    # optional experiment skipped the missing option as it composed, so the check before printing passed)
    preset, search, run = run_with_own_preset(tmp_path)
    assert gone_presets([search, "experiment=mine", "seed=3"]) == []
    preset.unlink()  # deleted after the run started
    assert gone_presets([search, "experiment=mine", "seed=3"]) == ["experiment=mine"]
    said = "; the run that saved it was launched with: "
    command = launched_with(run / "checkpoints" / "5")
    assert command == f"{said}{shlex.quote(search)} seed=3 model.width=24", command
    pasted = shlex.split(command.removeprefix(said))
    assert command_problem(pasted) is None  # launch.py's own check passes it
    assert under_command(pasted, lambda cfg: (cfg.model.width, cfg.seed)) == (24, 3)  # what ran, pasted now


def test_a_preset_of_conf_and_a_pkg_search_path_are_kept():
    assert gone_presets(["experiment=quick", "model=mlp", "seed=1"]) == []
    assert gone_presets(["hydra.searchpath=[pkg://nowhere]", "experiment=mine"]) == []  # Hydra's to list
    assert gone_presets(["experiment=gone_one", "model=mlp"]) == ["experiment=gone_one"]
