"""GenSBI's own config-file names for Simformer's settings (``num_layers``, ``widening_factor``: what
``gensbi.recipes.simformer.parse_simformer_params`` reads as ``depth`` and ``mlp_ratio``) are named as those settings.

Were: ``model.num_layers=4`` refused "did you mean model.num_hidden_layers? ...; set model.num_hidden_layers=4" (by
spelling: following it added MLP hidden layers and left the depth at 2), ``model.widening_factor=4`` with no hint, and a
preset file of one's own with ``num_layers: 4`` told to rename it ``num_hidden_layers`` (GENSBI77's finding).
"""

import pytest

from gensbi_sharding.harness.key_checks import unknown_key_problem
from gensbi_sharding.harness.refusal import fix_of


@pytest.mark.parametrize("gensbi_key, setting", [("num_layers", "depth"), ("widening_factor", "mlp_ratio")])
def test_a_gensbi_config_file_name_on_the_command_line_names_the_setting_it_means(gensbi_key, setting):
    said = unknown_key_problem(["model=simformer", f"model.{gensbi_key}=4"])
    assert said.startswith(f"model.{gensbi_key} is GenSBI's config-file name for model.{setting} ")
    assert fix_of(said) == f"model.{setting}=4" and said.endswith(f"; set model.{setting}=4")
    assert "num_hidden_layers=" not in said


def test_the_suggested_setting_is_accepted_and_gensbi_reads_the_name_so(tmp_path):
    from gensbi.recipes.simformer import parse_simformer_params

    # GenSBI's own reader: the table is its mapping, not a guess (without depth/mlp_ratio, these names are read)
    (tmp_path / "simformer.yaml").write_text("model:\n  num_layers: 3\n  widening_factor: 2\n")
    params = parse_simformer_params(str(tmp_path / "simformer.yaml"))
    assert (params["depth"], params["mlp_ratio"]) == (3, 2)
    assert unknown_key_problem(["model=simformer", "model.depth=3", "model.mlp_ratio=2"]) is None


def test_a_model_without_that_name_keeps_the_spelling_hint():
    said = unknown_key_problem(["model=simformer", "model.num_hidden_layer=2"])
    assert "did you mean model.num_hidden_layers?" in said and "GenSBI's config-file name" not in said
    assert "GenSBI's config-file name" not in unknown_key_problem(["model=flux1", "model.num_layers=4"])


def test_a_preset_file_with_a_gensbi_name_is_told_to_rename_it_to_the_setting(tmp_path):
    from gensbi_sharding.harness.command_checks import command_problem

    (tmp_path / "model").mkdir()
    preset = tmp_path / "model" / "my_simformer.yaml"
    preset.write_text("defaults:\n  - /simformer_schema\n  - _self_\nname: simformer\nnum_layers: 4\n")
    said = command_problem([f"hydra.searchpath=[file://{tmp_path}]", "model=my_simformer"])
    assert said.startswith(f"model=my_simformer: {preset} sets num_layers, which is not a setting of /simformer_schema "
                           "(model=simformer) (GenSBI's config-file name for depth); its settings: ")
    assert said.endswith("; remove num_layers from that file or rename it depth")
