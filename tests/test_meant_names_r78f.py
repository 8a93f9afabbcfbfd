"""A name a user brings to a model from elsewhere is read by what it means there, not by its nearest spelling.

Were (FIX78): ``model=flux1 model.num_layers=2`` "did you mean model.num_heads?; set model.num_heads=2" (Flux1 has no
single layer count: GenSBI's Flux1 recipe reads ``depth`` and ``depth_single_blocks``), ``model.double_blocks=2``
offered ``model.depth_single_blocks`` (the other kind of block), ``model.hidden_dim=2`` offered ``model.id_emb_dim``;
transformer's ``model.embed_dim=2`` offered ``model.time_embed_dim``; mlp's ``model.num_layers=2`` named simformer's
``num_hidden_layers``; simformer's ``model.n_layers=2`` offered ``model.num_hidden_layers`` (not its depth).
"""

import pytest

from gensbi_sharding.harness.key_checks import unknown_key_problem
from gensbi_sharding.harness.override_keys import model_fields
from gensbi_sharding.harness.refusal import fix_of


@pytest.mark.parametrize("model, typed, setting", [
    ("flux1", "double_blocks", "depth"), ("flux1", "num_double_blocks", "depth"), ("flux1", "widening_factor",
                                                                                   "mlp_ratio"),
    ("transformer", "embed_dim", "embed"), ("transformer", "d_model", "embed"), ("transformer", "num_layers", "depth"),
    ("mlp", "num_layers", "depth"), ("mlp", "hidden", "width"), ("mlp", "num_blocks", "depth"),
    ("simformer", "n_layers", "depth"), ("simformer", "qkv_dim", "qkv_features")])
def test_a_name_with_a_counterpart_is_offered_that_setting(model, typed, setting):
    said = unknown_key_problem([f"model={model}", f"model.{typed}=2"])
    assert said.startswith(f"model.{typed} is not a setting of model={model} (did you mean model.{setting}?); ")
    assert fix_of(said) == f"model.{setting}=2"


@pytest.mark.parametrize("typed", ["num_layers", "num_blocks", "n_layers"])
def test_flux1s_layer_count_names_both_depths_and_offers_no_other_setting(typed):
    said = unknown_key_problem(["model=flux1", f"model.{typed}=2"])
    assert said.startswith(f"model.{typed} is not a setting of model=flux1 (Flux1 counts its layers in two settings: "
                           "model.depth, its double-stream blocks, and model.depth_single_blocks, its single-stream "
                           "ones); its settings: ")
    assert fix_of(said) is None and "num_heads=2" not in said


@pytest.mark.parametrize("model, typed", [("flux1", "hidden_dim"), ("flux1", "hidden_size"), ("flux1", "embed_dim"),
                                          ("simformer", "hidden_dim")])
def test_a_width_no_setting_holds_says_what_makes_it(model, typed):
    said = unknown_key_problem([f"model={model}", f"model.{typed}=2"])
    assert "width is " in said and "did you mean" not in said and fix_of(said) is None


def test_names_of_other_settings_keep_their_spelling_hint():
    said = unknown_key_problem(["model=flux1", "model.rope_theta=2"])
    assert "(did you mean model.theta?)" in said and fix_of(said) == "model.theta=2"
    assert fix_of(unknown_key_problem(["model=transformer", "model.time_dim=2"])) == "model.time_embed_dim=2"


def test_every_counterpart_is_a_setting_of_its_model_and_no_name_is_one():
    from gensbi_sharding.harness.override_keys import MEANT_NAMES

    fields = model_fields()
    for model, names in MEANT_NAMES.items():
        assert not set(names) & fields[model], model  # a setting is never read as another
        assert all(" " in meant or meant in fields[model] for meant in names.values()), model


def test_a_sweep_of_models_meaning_different_things_offers_none():
    said = unknown_key_problem(["-m", "model=flux1,mlp", "model.num_layers=2"])
    assert "num_heads" not in said.split("; its settings")[0] and fix_of(said) is None


def test_a_preset_file_with_flux1s_layer_count_is_not_told_to_rename_it_num_heads(tmp_path):
    from gensbi_sharding.harness.command_checks import command_problem

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "my_flux1.yaml").write_text("defaults:\n  - /flux1_schema\n  - _self_\nname: flux1\n"
                                                      "num_layers: 4\n")
    said = command_problem([f"hydra.searchpath=[file://{tmp_path}]", "model=my_flux1"])
    assert "(Flux1 counts its layers in two settings: depth, its double-stream blocks" in said
    assert said.endswith("; remove num_layers from that file") and "num_heads?" not in said


def test_another_models_heads_name_on_the_transformer_offers_its_own_heads_first():
    # review of session 78: "model=transformer has no field num_heads; ... set model=flux1 for it" (another model, for
    # a user who wanted more heads); the transformer's own model.heads is offered first
    from gensbi_sharding.harness.key_checks import model_key_problem

    said = model_key_problem(["model=transformer", "model.num_heads=2"])
    assert said.endswith("have it: set model.heads=2, model=transformer's own, or model=flux1 for it, or drop "
                         "model.num_heads=2")
    assert model_key_problem(["model=mlp", "model.heads=2"]).endswith("set model=transformer for it, or drop "
                                                                      "model.heads=2")


@pytest.mark.parametrize("typed", ["hidden_dim", "head_dim"])
def test_flux1s_width_note_names_the_concat_mode_too(typed):
    # under model.id_merge_mode=concat GenSBI's Flux1 sizes a head by val_emb_dim + id_emb_dim, not by axes_dim
    said = unknown_key_problem(["model=flux1", f"model.{typed}=2"])
    assert "sum(model.axes_dim), or under model.id_merge_mode=concat model.val_emb_dim + model.id_emb_dim)" in said
