"""A GenSBI user's overrides and presets of one's own in the harness: keys under no section, GenSBI's training
names, presets YAML or the schema refuses, and a preset resumed without its search path.
"""

import pytest

pytest.importorskip("gensbi")


SECTIONS = "mesh, rule, model, data, train, eval, activation, devices, distributed"


@pytest.mark.parametrize("args, message", [
    # GenSBI's training-config names: its counterpart here, not the nearest spelling (save_every was read as
    # val_every: "set train.val_every=100", which changes validation, not checkpoints)
    (("model=flux1", "train.save_every=100"), "did you mean train.checkpoint_every?); its settings: "),
    (("model=flux1", "train.nsteps=100"), "did you mean train.steps?); its settings: "),
    (("model=flux1", "train.max_lr=1e-3"), "did you mean train.learning_rate?); its settings: "),
])
def test_gensbis_training_names_suggest_the_setting_that_takes_their_value(args, message):
    from gensbi_sharding.harness.command_checks import command_problem

    problem = command_problem(args)
    assert message in problem
    fixed = problem.rsplit("; set ", 1)[1]
    assert fixed.split("=")[1] == args[-1].split("=")[1] and command_problem((args[0], fixed)) is None


@pytest.mark.parametrize("args, message", [
    # Was Hydra's "Could not override 'training.nsteps'. To append to your config use +training.nsteps=100" (then
    # refused by the config check: "training is not a setting"), for GenSBI's section name and for a typo alike.
    (("model=flux1", "training.nsteps=100"), f"training.nsteps=100: training is not a section of the config (did you "
                                            f"mean train?); its sections: {SECTIONS}; write train.steps=100"),
    (("modle.num_heads=2", "model=flux1"), f"modle.num_heads=2: modle is not a section of the config (did you mean "
                                          f"model?); its sections: {SECTIONS}; write model.num_heads=2"),
    (("rul.embed=data",), f"rul.embed=data: rul is not a section of the config (did you mean rule?); its sections: "
                          f"{SECTIONS}; write rule.embed=data"),
    (("foo.bar=1",), f"foo.bar=1: foo is not a section of the config; its sections: {SECTIONS}"),
])
def test_a_key_under_no_section_names_the_section_and_setting_to_write(args, message):
    from gensbi_sharding.harness.command_checks import command_problem

    assert command_problem(args) == message
    if "; write " in message:  # the command with that override written as named runs
        written = message.rsplit("; write ", 1)[1]
        assert command_problem([written if a == message.split(":")[0] else a for a in args]) is None


@pytest.mark.parametrize("args, message", [
    # Was Hydra's multi-line "Could not override 'experiment.quick'. To append to your config use
    # +experiment.quick=1 ... Key 'experiment' not in 'Config'".
    (("experiment.quick=1",), "experiment.quick=1: experiment is a group of presets, not a section of settings; its "
                              "options: quick, sbibm, slcp_transformer; pick one with experiment=<option>, e.g. "
                              "experiment=quick"),
    (("experiment.steps=5",), "experiment.steps=5: experiment is a group of presets, not a section of settings; its "
                              "options: quick, sbibm, slcp_transformer; pick one with experiment=<option>; or set "
                              "train.steps=5"),
    (("sweep.x=1",), "sweep.x=1: sweep is a group of presets, not a section of settings; its options: "
                     "rules_x_model_axis; pick one with sweep=<option>"),
])
@pytest.mark.fast_cases(1)
def test_a_key_under_a_group_of_presets_names_its_options(args, message):
    from gensbi_sharding.harness.command_checks import command_problem

    assert command_problem(args) == message
    for fix in (message.rsplit("e.g. ", 1)[1:] + message.rsplit("or set ", 1)[1:])[:1]:
        assert command_problem([fix]) is None


GROUPS = "mesh, rule, model, data, train, eval, activation, distributed, experiment, sweep"


@pytest.mark.parametrize("args, fix", [
    # Was "sharding_rule is not a setting; its settings: debug, dry_run, seed, strict, verbose": GenSBI's name for
    # the rule (its training config's sharding_rule), and a misspelled group, named no group at all.
    (("sharding_rule=fsdp",), "rule=? ...; write rule=fsdp"),
    (("modle=flux1",), "model=? ...; write model=flux1"),
    (("-m", "sharding_rule=fsdp,tensor"), "rule=? ...; write rule=fsdp,tensor"),
    (("mesh_axis=2",), "mesh=? ...; mesh options: auto, dict, none"),  # no option: the group's options
])
@pytest.mark.fast_cases(2)
def test_a_top_level_key_near_a_group_names_the_group(args, fix):
    from gensbi_sharding.harness.command_checks import command_problem

    asked, tail = fix.split(" ...")
    key = args[-1].split("=")[0]
    assert command_problem(args) == (f"{args[-1]}: {key} is not a setting or group (did you mean {asked}); its "
                                     f"settings: debug, dry_run, seed, strict, verbose; its groups: {GROUPS}{tail}")
    if "; write " in tail:
        assert command_problem((*args[:-1], tail.split("; write ")[1])) is None


FLUX1_SETTINGS = ("init, mlp_ratio, num_heads, depth, depth_single_blocks, qkv_bias, axes_dim, val_emb_dim, id_emb_dim, "
                  "id_merge_mode, theta, id_embedding_strategy, param_dtype, dtype")


@pytest.mark.parametrize("line, message", [
    # Was Hydra's "In 'model/my_flux1': ConfigKeyError raised while composing config: Key 'guidance_embed' not in
    # 'Flux1Config'" (five lines, no fix), after the command's checks had passed: a GenSBI field the harness fixes.
    ("guidance_embed: false", f"sets guidance_embed, which is not a setting of /flux1_schema (model=flux1); its "
                              f"settings: {FLUX1_SETTINGS}; remove guidance_embed from that file"),
    ("num_head: 2", f"sets num_head, which is not a setting of /flux1_schema (model=flux1) (did you mean num_heads?); "
                    f"its settings: {FLUX1_SETTINGS}; remove num_head from that file or rename it num_heads"),
    # Was Hydra's multi-line ValidationError naming no value to write
    ("num_heads: 2.5", "sets num_heads: 2.5, which it cannot take (Value '2.5' of type 'float' could not be converted "
                       "to Integer); write e.g. num_heads: 4 there"),
    ("axes_dim: 8", "sets axes_dim: 8, which it cannot take (Invalid value assigned: int is not a ListConfig, list or "
                    "tuple.); write e.g. axes_dim: [8,0] there"),
])
def test_a_preset_of_ones_own_with_a_key_or_value_its_schema_refuses_names_its_file(tmp_path, line, message):
    from gensbi_sharding.harness.command_checks import command_problem

    (tmp_path / "model").mkdir()
    preset = tmp_path / "model" / "my_flux1.yaml"
    preset.write_text(f"defaults:\n  - /flux1_schema\n  - _self_\nname: flux1\ndepth: 1\n{line}\n")
    args = [f"hydra.searchpath=[file://{tmp_path}]", "model=my_flux1"]
    assert command_problem(args) == f"model=my_flux1: {preset} {message}"
    preset.write_text("defaults:\n  - /flux1_schema\n  - _self_\nname: flux1\ndepth: 1\ntheta: ${model.depth}\n")
    assert command_problem(args) is None  # settings it has, an interpolation resolved once composed


def test_a_preset_of_ones_own_that_yaml_cannot_read_names_its_file_and_line(tmp_path):
    # Was Hydra's 87-line traceback ending in PyYAML's ScannerError (a tab indenting depth: 1).
    from gensbi_sharding.harness.command_checks import command_problem

    (tmp_path / "model").mkdir()
    preset = tmp_path / "model" / "my_flux1.yaml"
    preset.write_text("defaults:\n  - /flux1_schema\n  - _self_\nname: flux1\n\tdepth: 1\n")
    tab = "YAML cannot read it (found character '\\t' that cannot start any token); indent with spaces: YAML takes no tabs"
    assert command_problem([f"--config-dir={tmp_path}", "experiment=quick", "model=my_flux1"]) == (
        f"{preset}, line 5, column 1: {tab}")
    # named before the checks that read the file (was: "model.nope is not a setting of model", of no model's settings)
    assert command_problem([f"--config-dir={tmp_path}", "model=my_flux1", "model.nope=3"]).startswith(f"{preset}, ")
    (tmp_path / "my.yaml").write_text("defaults:\n  - config\n  - _self_\n\tseed: 3\n")  # a primary config of one's own
    assert command_problem([f"--config-dir={tmp_path}", "--config-name=my"]) == (  # was: ScannerError out of a check
        f"{tmp_path / 'my.yaml'}, line 4, column 1: {tab}")


@pytest.mark.parametrize("resume", ["run", "run/checkpoints/20", "auto"])
@pytest.mark.fast_cases(1)
def test_a_preset_of_ones_own_resumed_without_its_search_path_names_that_search_path(tmp_path, resume):
    # README: "Repeat both overrides when you resume it". With the search path left out, was: "Could not find
    # 'model/my_flux1' ...; did you mean model=flux1?", whose sizes the resume then refuses.
    from gensbi_sharding.harness.command_checks import command_problem

    (tmp_path / "my_conf" / "model").mkdir(parents=True)
    (tmp_path / "my_conf" / "model" / "my_flux1.yaml").write_text(
        "defaults:\n  - /flux1_schema\n  - _self_\nname: flux1\nnum_heads: 2\n")
    record = tmp_path / "run" / ".hydra"
    record.mkdir(parents=True)
    searched = f"hydra.searchpath=[file://{tmp_path / 'my_conf'}]"
    (record / "overrides.yaml").write_text("- model=my_flux1\n- experiment=quick\n")
    (record / "hydra.yaml").write_text(f"hydra:\n  overrides:\n    hydra:\n    - {searched}\n    task: []\n")
    run = ["train.resume=auto", f"hydra.run.dir={tmp_path / 'run'}"] if resume == "auto" else \
        [f"train.resume={tmp_path / resume}"]
    assert command_problem(["model=my_flux1", "experiment=quick", *run]) == (
        f"model=my_flux1: Could not find 'model/my_flux1' in this command's config folders; the run it resumes was "
        f"launched with '{searched}', whose folder holds it: add '{searched}'")
    assert command_problem([searched, "model=my_flux1", "experiment=quick", *run]) is None  # as named: found
    assert "did you mean model=flux1?" in command_problem(["model=my_flux1", "experiment=quick"])  # nothing resumed


def test_a_checkpoint_of_a_preset_of_ones_own_names_that_preset_when_the_model_differs(tmp_path, monkeypatch):
    # python launch.py train.resume=<a model=my_flux1 run> (no model=): was "add model=flux1", whose sizes the resume
    # then refused in a second try naming the preset; now the preset and its search path at once.
    from omegaconf import OmegaConf

    import gensbi_sharding.checkpoint
    from gensbi_sharding.harness.model_switch import model_overrides

    record = tmp_path / "run" / ".hydra"
    record.mkdir(parents=True)
    searched = f"hydra.searchpath=[file://{tmp_path / 'my_conf'}]"
    (record / "hydra.yaml").write_text(f"hydra:\n  overrides:\n    hydra:\n    - {searched}\n    task: []\n")
    monkeypatch.setattr(gensbi_sharding.checkpoint, "saved_config", lambda path: {"model": {"name": "flux1"}})
    step = tmp_path / "run" / "checkpoints" / "20"
    mlp = OmegaConf.create({"name": "mlp", "width": 32})
    (record / "overrides.yaml").write_text("- model=my_flux1\n- experiment=quick\n")
    assert model_overrides(step, mlp, command=["experiment=quick"]) == (
        f"the checkpoint holds model=flux1 (this run: model=mlp): add '{searched}' model=my_flux1. ")
    (record / "overrides.yaml").write_text("- model=flux1\n- experiment=quick\n")  # the registered model: as before
    assert model_overrides(step, mlp, command=["experiment=quick"]) == (
        "the checkpoint holds model=flux1 (this run: model=mlp): add model=flux1. ")


@pytest.mark.slow  # ~0.7 s on 2 cores
def test_a_checkpoint_of_another_model_names_its_sizes_with_the_model_in_one_fix(tmp_path, monkeypatch):
    # python launch.py experiment=quick model=simformer train.resume=<an experiment=quick model=flux1
    # model.num_heads=3 run>: was "add model=flux1", and that command refused in turn: "the checkpoint was saved with
    # model.num_heads=3 (this run: model.num_heads=2): add model.num_heads=3"; now both at once, which then fits
    from omegaconf import OmegaConf

    import gensbi_sharding.checkpoint
    from faults_helpers import TINY, compose_tiny
    from gensbi_sharding.harness.model_switch import model_overrides

    saved = OmegaConf.to_container(compose_tiny("model=flux1", "model.num_heads=3").model, resolve=True)
    monkeypatch.setattr(gensbi_sharding.checkpoint, "saved_config", lambda path: {"model": saved})
    step = tmp_path / "run" / "checkpoints" / "8"
    command = [*TINY, "model=simformer", "model.depth=1"]  # a field of this run's model: not the saved one's
    assert model_overrides(step, compose_tiny("model=simformer", "model.depth=1").model, command=command) == (
        "the checkpoint holds model=flux1 (this run: model=simformer): add model=flux1 model.num_heads=3. ")
    fixed = [*TINY, "model=flux1", "model.num_heads=3"]  # the fix, as named
    assert model_overrides(step, compose_tiny(*fixed[len(TINY):]).model, command=fixed) == ""
