"""A mistyped key on the command line (``mesh.modle_axis=2``): refused before Hydra composes, naming the key
meant and the group's settings.

Was: Hydra's "Could not override 'mesh.modle_axis'. To append to your config use +mesh.modle_axis=2 ...
Key 'modle_axis' not in 'MeshConfig'": it listed no setting, and its advice (append) is refused in turn.
"""

import dataclasses
import re

import pytest

from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.config import Config, DataConfig, MLPConfig, TrainConfig
from gensbi_sharding.harness.hints import mesh_devices_problem, model_axis_problem
from gensbi_sharding.harness.key_checks import model_key_problem, unknown_key_problem
from gensbi_sharding.harness.key_paths import hydra_key_problem
from gensbi_sharding.harness.hydra_flags import mode_flags_problem
from gensbi_sharding.harness.override_keys import model_schemas
from gensbi_sharding.harness.override_types import override_problem


@pytest.mark.parametrize("args,message", [
    (["mesh.modle_axis=2"], "mesh.modle_axis is not a setting of mesh (did you mean mesh.model_axis?); its settings: "
                            "spec, model_axis, devices; set mesh.model_axis=2"),
    (["-m", "train.stpes=10,20"], "train.stpes is not a setting of train (did you mean train.steps?); its settings: "
                                  + ", ".join(f.name for f in dataclasses.fields(TrainConfig))
                                  + "; set train.steps=10,20"),
    (["data.nam=slcp"], "data.nam is not a setting of data (did you mean data.name?); its settings: "
                        + ", ".join(f.name for f in dataclasses.fields(DataConfig)) + "; set data.name=slcp"),
    (["model=flux1", "model.num_head=2"], "model.num_head is not a setting of model=flux1 (did you mean "
                                          "model.num_heads?); its settings: init, mlp_ratio, num_heads, depth, "
                                          "depth_single_blocks, qkv_bias, axes_dim, val_emb_dim, id_emb_dim, "
                                          "id_merge_mode, theta, id_embedding_strategy, param_dtype, dtype; "
                                          "set model.num_heads=2"),
    # Another model's setting: that model is named, not a near miss of this one's (width is not depth).
    (["model=transformer", "model.width=64"], "model.width is a setting of model=mlp, not of model=transformer; "
                                              "its settings: init, embed, depth, heads, mlp_ratio, time_embed_dim"),
    (["activation.hed_axis=model"], "activation.hed_axis is not a setting of activation (did you mean "
                                    "activation.head_axis?)"),
    (["distributed.xyz=1"], "distributed.xyz is not a setting of distributed; its settings: mode, "),
])
def test_a_mistyped_key_names_the_setting_meant(args, message):
    problem = unknown_key_problem(args)
    assert problem is not None and problem.startswith(message), problem
    key = next(a for a in args if "." in a).split("=")[0]
    if "set " in message:  # the fix it names is itself accepted
        fix = message.rsplit("; set ", 1)[1]
        assert unknown_key_problem([*(a for a in args if not a.startswith(key)), fix]) is None


TRAIN = ", ".join(f.name for f in dataclasses.fields(TrainConfig))


@pytest.mark.parametrize("args,message", [
    # A part its group lacks, deeper than one level: the setting meant, from the parts below it joined or the last
    # one (was Hydra's multi-line "Could not override 'mesh.shape.model'. To append to your config use
    # +mesh.shape.model=2 ... Key 'shape' not in 'MeshConfig'").
    (["mesh.shape.model=2"], "mesh.shape.model=2: mesh.shape is not a setting of mesh (did you mean "
                             "mesh.model_axis?); its settings: spec, model_axis, devices; set mesh.model_axis=2"),
    (["train.optim.lr=1"], f"train.optim.lr=1: train.optim is not a setting of train (did you mean "
                           f"train.learning_rate?); its settings: {TRAIN}; set train.learning_rate=1"),
    (["eval.c2st.folds=3"], "eval.c2st.folds=3: eval.c2st is not a setting of eval (did you mean eval.c2st_folds?); "
                            "its settings: enabled, num_samples, batch_size, ode_steps, c2st_folds, observations, "
                            "c2st_jobs, plot; set eval.c2st_folds=3"),
    (["-m", "train.optim.lr=1,2"], f"train.optim.lr=1,2: train.optim is not a setting of train (did you mean "
                                   f"train.learning_rate?); its settings: {TRAIN}; set train.learning_rate=1,2"),
    (["model.foo.bar=1"], "model.foo.bar=1: model.foo is not a setting of the default model=mlp; its settings: "
                          "init, width, depth, mlp_ratio, time_embed_dim"),
    (["model=transformer", "model.width.x=3"], "model.width.x=3: model.width is a setting of model=mlp, not of "
                                               "model=transformer; its settings: "),
    (["rule.foo.x=data"], "rule.foo.x=data: rule.foo is not a setting of rule; its settings: name, embed, mlp, "),
    # A part under a setting (was Hydra's "Value '{}' of type 'dict' could not be converted to Integer").
    (["train.steps.x=5"], "train.steps.x=5: train.steps is a setting, which holds no keys; set train.steps=5"),
    (["mesh.model_axis.x=2"], "mesh.model_axis.x=2: mesh.model_axis is a setting, which holds no keys; set "
                              "mesh.model_axis=2"),
    (["rule.mlp.x=data"], "rule.mlp.x=data: rule.mlp is a setting, which holds no keys; set rule.mlp=data"),
    (["debug.x=true"], "debug.x=true: debug is a setting, which holds no keys; set debug=true"),
    (["model=flux1", "model.num_heads.x=2"], "model.num_heads.x=2: model.num_heads is a setting, which holds no "
                                             "keys; set model.num_heads=2"),
    (["model=flux1", "model.axes_dim.x=4"], "model.axes_dim.x=4: model.axes_dim is a setting, which holds no keys; "
                                            "set model.axes_dim=[4]"),  # a list, as the list check takes it
    # an item of a list setting is Hydra's to set; a key under no section is override_types' to name
    (["model=flux1", "model.axes_dim.0=4"], None),
    (["trian.steps.x=1"], None),
])
def test_a_key_deeper_than_its_group_names_the_setting_meant(args, message):
    problem = unknown_key_problem(args)
    assert (problem is None) if message is None else problem.startswith(message), problem
    if message and "; set " in message:  # the fix it names is itself accepted
        assert unknown_key_problem([*args[:-1], message.rsplit("; set ", 1)[1]]) is None


def every_setting() -> list[str]:
    groups = [f for f in dataclasses.fields(Config) if f.default_factory is not dataclasses.MISSING]
    assert {g.name for g in groups} == {"mesh", "data", "train", "eval", "activation", "devices", "distributed"}
    return [f"{g.name}.{f.name}=1" for g in groups for f in dataclasses.fields(g.default_factory)]


@pytest.mark.parametrize("args", [
    every_setting(),  # every schema field of every typed group
    ["model=transformer", "model.depth=4", "model.embed=32"],
    ["model.width=64", "model.axes_dim=[8,0]"],  # no model=: any model's setting (an experiment may choose it)
    ["-m", "model=mlp,flux1", "model.axes_dim=[8]"],  # a sweep over models: any of theirs
    ["rule=fsdp", "rule.mlp=model", "rule.name=mine"],  # the rule table: its label and the logical axes
    ["+mesh.modle_axis=2", "++train.stepz=1", "~eval.plot"],  # asked to add/delete: config_checks refuses
    ["hydra.run.dir=runs/a", "hydra/launcher=slurm", "mesh=auto", "seed=1", "--cfg", "job", "experiment=quick"],
])
def test_valid_keys_and_what_others_check_pass(args):
    assert unknown_key_problem(args) is None


@pytest.mark.parametrize("args,message", [
    # Was Hydra's ValueError traceback ("Only one of --run, --multirun, --cfg, ... can be specified").
    (["-m", "sweep=rules_x_model_axis", "--cfg", "job"],
     "-m and --cfg cannot be combined (Hydra runs one mode); to see a job's composed config, leave out -m and give "
     "each swept key one value: python launch.py <overrides> --cfg job"),
    (["--multirun", "rule=fsdp,tensor", "--info"], "-m and --info cannot be combined (Hydra runs one mode); keep one "
                                                   "of -m, --info"),
    (["-r", "-c", "job"], "--run and --cfg cannot be combined"),
    (["-m", "rule=fsdp", "--cfg", "job"], None),
])
def test_two_hydra_modes_are_refused_in_one_line(args, message):
    if message is None:
        args = args[1:]  # one mode alone is Hydra's
    problem = mode_flags_problem(args)
    assert (problem is None) if message is None else problem.startswith(message), problem
    assert mode_flags_problem(["-m", "rule=fsdp,tensor"]) is None and mode_flags_problem(["--cfg", "job"]) is None


@pytest.mark.parametrize("args,problem", [
    # Hydra applies the last model= typed. Was: this check read the first (model=mlp) and refused num_heads,
    # "a setting of model=flux1 or model=simformer, not of model=mlp", while the model-key check read the last
    # and let it through, as Hydra composes it (flux1).
    (["model=mlp", "model=flux1", "model.num_heads=2"], None),
    (["model=flux1", "model=mlp", "model.num_heads=2"],
     "model.num_heads is a setting of model=flux1 or model=simformer, not of model=mlp; its settings: "),
])
def test_the_last_model_choice_is_the_one_checked_as_hydra_applies_it(args, problem):
    found = unknown_key_problem(args)
    assert found is None if problem is None else found.startswith(problem), found
    assert (model_key_problem(args) is None) == (problem is None)


MLP = "init, width, depth, mlp_ratio, time_embed_dim"


@pytest.mark.parametrize("args,message", [
    # Was: every model's 22 fields listed, and the nearest of them all, for a misspelling under the default model.
    (["model.widht=64"], f"model.widht is not a setting of the default model=mlp (did you mean model.width?); its "
                         f"settings: {MLP}; set model.width=64"),
    (["model.qqq=1"], f"model.qqq is not a setting of the default model=mlp; its settings: {MLP}"),
    # nothing near in the model's own fields, one near in another model's: that model is named, no override to set
    (["model.num_head=2"], "model.num_head is not a setting of the default model=mlp (did you mean model.num_heads, a "
                           f"setting of model=flux1 or model=simformer?); its settings: {MLP}"),
    (["experiment=slcp_transformer", "model.dpeth=2"],
     "model.dpeth is not a setting of experiment=slcp_transformer's model=transformer (did you mean model.depth?); its "
     "settings: init, embed, depth, heads, mlp_ratio, time_embed_dim; set model.depth=2"),
    (["experiment=quick", "model.widht=2"], "model.widht is not a setting of the default model=mlp (did you mean "),
    # a sweep over models: the swept models' fields, not every model's
    (["-m", "model=mlp,transformer", "model.widht=64"], "model.widht is not a setting of model=mlp,transformer (did "
     "you mean model.width?); its settings: depth, embed, heads, init, mlp_ratio, time_embed_dim, width; set "
     "model.width=64"),
    (["-m", "model=glob(*former)", "model.dpeth=2"], "model.dpeth is not a setting of model=glob(*former) (did you "
     "mean model.depth?); its settings: cond_emb_dim, depth, dtype, embed, fourier_features, heads, id_emb_dim, init, "
     "mlp_ratio, num_heads, num_hidden_layers, param_dtype, qkv_features, time_embed_dim, val_emb_dim; set "
     "model.depth=2"),
    # the other groups with options share one schema: its settings, whichever option is chosen
    (["data=slcp", "data.nam=x"], "data.nam is not a setting of data (did you mean data.name?); its settings: name, "),
    (["mesh=auto", "mesh.modle_axis=2"], "mesh.modle_axis is not a setting of mesh (did you mean mesh.model_axis?); "
                                         "its settings: spec, model_axis, devices; set mesh.model_axis=2"),
    (["distributed=local", "distributed.local_procs=2"], "distributed.local_procs is not a setting of distributed "
     "(did you mean distributed.local_processes?); its settings: mode, "),
    (["activation=fixed", "activation.hed_axis=x"], "activation.hed_axis is not a setting of activation (did you "
                                                    "mean activation.head_axis?); its settings: strategy, "),
    # the rule table: its label and the logical axes (was left to Hydra, whose advice, +rule.embedd=data, the
    # config check refused in turn)
    (["rule=fsdp", "rule.embedd=data"], "rule.embedd is not a setting of rule (did you mean rule.embed?); its "
                                        "settings: name, embed, mlp, heads, vocab, in, out; set rule.embed=data"),
    (["rule.xyz=data"], "rule.xyz is not a setting of rule; its settings: name, embed, mlp, heads, vocab, in, out"),
    (["-m", "experiment=quick,sbibm", "model.widht=3"], "model.widht is not a setting of model (did you mean "
                                                       "model.width?); its settings: axes_dim, "),  # unknown model
])
def test_a_misspelt_key_is_matched_against_the_chosen_models_fields(args, message):
    problem = unknown_key_problem(args)
    assert (problem is None) if message is None else problem.startswith(message), problem
    if message and "; set " in message:  # the fix it names is itself accepted
        fix = message.rsplit("; set ", 1)[1]
        assert unknown_key_problem([*args[:-1], fix]) is None
    if message and args[-1].startswith("model."):  # the sbibm runner's check lists the same settings
        listed = lambda text: set(text.split("; its settings: ")[1].split("; ")[0].split(", "))  # noqa: E731
        assert listed(override_problem(args, sweeps_need_m=False)) == listed(problem)


@pytest.mark.parametrize("args,message", [
    # Was Hydra's multi-line "Could not override 'hydra.run.dirr'. To append to your config use
    # +hydra.run.dirr=runs/a ... Key 'dirr' not in 'RunDir'".
    (["hydra.run.dirr=runs/a"], "hydra.run.dirr=runs/a: hydra.run.dirr is not a setting of hydra.run (did you mean "
                                "hydra.run.dir?); its settings: dir; set hydra.run.dir=runs/a"),
    (["-m", "hydra.sweep.subdirr=x"], "hydra.sweep.subdirr=x: hydra.sweep.subdirr is not a setting of hydra.sweep "
                                      "(did you mean hydra.sweep.subdir?); its settings: dir, subdir; set "
                                      "hydra.sweep.subdir=x"),
    (["hydra.job.chdirr=true"], "hydra.job.chdirr=true: hydra.job.chdirr is not a setting of hydra.job (did you mean "
                                "hydra.job.chdir?); its settings: "),
    (["hydra.foo=1"], "hydra.foo=1: hydra.foo is not a setting of hydra; its settings: mode, searchpath, run, "),
    # Hydra's own keys, and those under a part of no fixed schema: Hydra's to judge
    (["hydra.run.dir=runs/a", "hydra.job.chdir=false", "hydra.mode=RUN", "+hydra.job.env_set.X=1",
      "hydra.launcher.timeout_min=5", "hydra.sweeper.params.seed=1,2", "hydra/launcher=basic"], None),
])
@pytest.mark.fast_cases(2)
def test_a_mistyped_key_of_hydra_s_own_config_names_the_setting_meant(args, message):
    problem = hydra_key_problem(args)
    assert (problem is None) if message is None else problem.startswith(message), problem
    if message is not None:
        assert command_problem(args) == problem  # launch.py's checks reach it
        if "; set " in message:
            assert hydra_key_problem([*args[:-1], message.rsplit("; set ", 1)[1]]) is None


@pytest.mark.parametrize("args", [["mesh.data_axis=3"], ["mesh.data=3"], ["mesh.data_axis=2", "mesh.model_axis=4"],
                                  ["mesh.data_parallel=6"]])
def test_a_data_axis_size_is_answered_with_a_mesh_the_mesh_checks_accept(args):
    """``mesh.data_axis=3`` on 8 devices was answered "set mesh.model_axis=3", which 8 devices refuse (and which
    is no data axis of 3): each mesh named now passes the checks the run makes of it."""
    problem = unknown_key_problem(args)
    data = int(args[0].split("=")[1])
    found = re.search(r"mesh\.model_axis=(\d+) on (\d+) devices \(devices\.cpu_count=(\d+), or mesh\.devices=\[([\d,]+)\]",
                      problem)
    assert found, problem
    model, devices, count, listed = int(found[1]), int(found[2]), int(found[3]), [int(d) for d in found[4].split(",")]
    assert count == devices == len(listed) and devices // model == data, problem  # the data axis asked for
    assert model_axis_problem(model, count) is None  # devices.cpu_count=<count>
    assert mesh_devices_problem(listed, range(8), model) is None and model_axis_problem(model, len(listed)) is None
    assert f"set mesh.model_axis={data}" not in problem


def test_a_model_axis_wider_than_one_device_counts_it_in_the_singular():
    """Was "mesh.model_axis=2: 1 devices are not divisible by model_axis=2"."""
    assert model_axis_problem(2, 1).startswith("mesh.model_axis=2: 1 device is not divisible by model_axis=2; "
                                               "set mesh.model_axis=1 (divisors of 1: [1])")
    assert model_axis_problem(3, 8).startswith("mesh.model_axis=3: 8 devices are not divisible by model_axis=3; ")


@pytest.mark.parametrize("args", [["mesh.data_axis=abc"], ["mesh.data_axis=0"], ["mesh.data_axis=-2"],
                                  ["mesh.data_axis=null"]])
def test_a_data_axis_of_no_size_names_no_value_to_set(args):
    """mesh.data_axis=abc was answered "set mesh.model_axis=abc" (and mesh.data_axis=null crashed with a TypeError
    once the data axis hint named a mesh): a value no mesh check accepts is not named as the fix."""
    problem = unknown_key_problem(args)
    assert problem == ("mesh.data_axis is not a setting of mesh (did you mean mesh.model_axis?); its settings: "
                       "spec, model_axis, devices")


def test_a_model_settings_dataclass_defined_outside_config_py_is_no_model_the_checks_name():
    """Was: any subclass of ModelConfig alive in the process counted as a model (``ModelConfig.__subclasses__()``), so
    one a test defined for itself, kept until the cycle collector freed it, made the next test's refusal read
    "model=mlp, model=tiny have it"; register_configs stores only config.py's, which alone a run can compose."""
    @dataclasses.dataclass
    class TinyConfig(MLPConfig):  # noqa: F841 (alive while this test runs: a subclass of MLPConfig)
        name: str = "tiny"

    assert sorted(model_schemas()) == ["flux1", "mlp", "simformer", "transformer"]
    assert model_key_problem(["model=transformer", "model.width=3"]) == (
        "model.width=3: model=transformer has no field width; model=mlp has it: set model=mlp for it, or drop "
        "model.width=3")
