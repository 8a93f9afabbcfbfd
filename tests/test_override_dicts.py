"""A section given as a dict (``train={stepz:5}``, ``mesh={data:2,model:4}``) is checked as the dotted overrides it
stands for. Was: Hydra's "Could not override 'train'. To append to your config use +train={stepz:5} / Key 'stepz'
not in 'TrainConfig'", whose advice is refused in turn, and for the mesh no word of ``mesh.model_axis``."""

from __future__ import annotations

import pytest
from faults_helpers import compose_tiny

from gensbi_sharding.harness.command_checks import command_problem

SETTINGS = ("steps, learning_rate, weight_decay, schedule, warmup_steps, ema_decay, val_every, patience, val_draws, "
            "log_every, checkpoint_every, keep, resume")


@pytest.mark.parametrize("args, message, fix", [
    (["train={stepz:5}"], f"train={{stepz:5}} stands for train.stepz=5: train.stepz is not a setting of train (did "
     f"you mean train.steps?); its settings: {SETTINGS}; set train.steps=5", ["train.steps=5"]),
    (["mesh={data:2,model:4}"], "mesh={data:2,model:4} stands for mesh.data=2 mesh.model=4: mesh.data is not a "
     "setting of mesh; its settings: spec, model_axis, devices; the mesh's axes come from mesh.model_axis (data = "
     "devices // model_axis): for data=2 x model=4, mesh.model_axis=4 on 8 devices (devices.cpu_count=8, or "
     "mesh.devices=[0,1,2,3,4,5,6,7])", ["mesh.model_axis=4", "devices.cpu_count=8"]),
    (["model={heads:2}"], "model={heads:2} stands for model.heads=2: model=mlp (the default) has no field heads; "
     "model=transformer has it: add model=transformer, whose section it then sets", ["model=transformer",
                                                                                     "model={heads:2}"]),
    (["model={width:8.5}"], "model={width:8.5} stands for model.width=8.5: model.width (model=mlp) takes a whole "
     "number (Value '8.5' of type 'float' could not be converted to Integer); e.g. model.width=8", ["model.width=8"]),
    (["-m", "train={steps:5},{stepz:6}"], f"train={{steps:5}},{{stepz:6}} stands for train.stepz=6: train.stepz is "
     f"not a setting of train (did you mean train.steps?); its settings: {SETTINGS}; set train.steps=6",
     ["-m", "train={steps:5},{steps:6}"]),
])
@pytest.mark.fast_cases(2)
def test_a_section_given_as_a_dict_is_checked_key_by_key(args, message, fix):
    assert command_problem(args) == message
    assert command_problem(fix) is None
    if "-m" not in fix:
        cfg = compose_tiny(*fix)
        assert (cfg.train.steps, cfg.mesh.model_axis, cfg.model.get("heads"), cfg.model.get("width")) == {
            "train.steps=5": (5, 1, None, 32), "mesh.model_axis=4": (cfg.train.steps, 4, None, 32),
            "model=transformer": (cfg.train.steps, 1, 2, None), "model.width=8": (cfg.train.steps, 1, None, 8)}[fix[0]]


@pytest.mark.slow  # ~0.8 s on 2 cores
def test_a_dict_two_levels_deep_names_the_setting_meant():
    # Was: Hydra's multi-line "Could not override 'eval'. ... Key 'c2st' not in 'EvalConfig'".
    assert command_problem(["eval={c2st:{folds:3}}"]) == (
        "eval={c2st:{folds:3}} stands for eval.c2st.folds=3: eval.c2st is not a setting of eval (did you mean "
        "eval.c2st_folds?); its settings: enabled, num_samples, batch_size, ode_steps, c2st_folds, observations, "
        "c2st_jobs, plot; set eval.c2st_folds=3")
    assert command_problem(["eval={c2st_folds:3}"]) is None


@pytest.mark.parametrize("args", [["train={steps:5}"], ["mesh={model_axis:2}"], ["rule={embed:model}"],
                                  ["-m", "train={steps:5},{steps:6}"], ["seed=1"]])
def test_a_dict_hydra_merges_passes(args):
    assert command_problem(args) is None


@pytest.mark.parametrize("arg, end", [
    ("mesh={x:1}", "mesh.x is not a setting of mesh; its settings: spec, model_axis, devices"),
    ("mesh={data:0}", "mesh.data is not a setting of mesh; its settings: spec, model_axis, devices"),
    ("mesh={data:1}", "for data=1, mesh.model_axis=1 on 1 device (devices.cpu_count=1, or mesh.devices=[0])"),
])
def test_a_mesh_dict_of_no_sizes_names_no_mesh_and_one_device_in_the_singular(arg, end):
    """mesh={x:1} crashed with a TypeError (range(None)), mesh={data:0} named "mesh.model_axis=1 on 0 devices
    (..., mesh.devices=[])", which the mesh checks refuse, and mesh={data:1} "on 1 devices"."""
    from gensbi_sharding.harness.override_dicts import dict_override_problem

    assert dict_override_problem([arg]).endswith(end)
