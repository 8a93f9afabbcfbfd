"""A GenSBI user's own models and overrides in the harness: what failed late or said nothing, now named.

Tiny models built eagerly (one head, one block): each test checks a constructor or a config check, no training.
"""

import jax
import jax.numpy as jnp
import pytest
from flax import nnx

pytest.importorskip("gensbi")

from gensbi.models import Flux1, Flux1Joint, Flux1JointParams, Flux1Params, Simformer, SimformerParams  # noqa: E402

from gensbi_sharding.harness.models.flux1 import Flux1Velocity  # noqa: E402
from gensbi_sharding.harness.models.simformer import SimformerVelocity  # noqa: E402

DIM_THETA, DIM_X = 2, 3


def _flux1_params(**fields):
    base = dict(in_channels=1, vec_in_dim=None, context_in_dim=1, mlp_ratio=2.0, num_heads=1, depth=0,
                depth_single_blocks=1, qkv_bias=True, rngs=nnx.Rngs(0), dim_obs=DIM_THETA, dim_cond=DIM_X,
                axes_dim=[4], dtype="float32")
    with jax.ensure_compile_time_eval():  # as the README's factory: Flux1Params computes with jnp and int()
        return Flux1Params(**{**base, **fields})


def _simformer():
    return Simformer(SimformerParams(rngs=nnx.Rngs(0), in_channels=1, val_emb_dim=4, id_emb_dim=2, cond_emb_dim=2,
                                     dim_joint=DIM_THETA + DIM_X, num_heads=1, depth=1, fourier_features=4,
                                     dtype="float32"))


def _joint_params(**fields):
    return Flux1JointParams(**{**dict(in_channels=1, vec_in_dim=None, mlp_ratio=2.0, num_heads=1,
                                      depth_single_blocks=1, val_emb_dim=4, cond_emb_dim=2, id_emb_dim=2,
                                      qkv_bias=True, rngs=nnx.Rngs(0), dim_joint=DIM_THETA + DIM_X,
                                      dtype="float32"), **fields})


def _inputs(batch=4):
    return jnp.ones((batch, DIM_THETA)), jnp.ones((batch, DIM_X)), jnp.full((batch,), 0.5)


def test_a_guidance_distilled_flux1_is_refused_when_wrapped_not_at_its_first_call():
    # Was: wrapped without a word, then GenSBI's "Didn't get guidance strength for guidance distilled model." at
    # the first call (inside the first training step's trace, in the harness).
    flux = Flux1(_flux1_params(guidance_embed=True, vec_in_dim=4))
    with pytest.raises(ValueError, match=r"guidance_embed=True .* Flux1Velocity .* never passes; build its params "
                                         r"with guidance_embed=False"):
        Flux1Velocity(flux)
    assert Flux1Velocity(Flux1(_flux1_params())).dim_theta == DIM_THETA  # the fix it names


@pytest.mark.parametrize("wrap, given, fix", [
    # Was: AttributeError: 'Flux1Params' object has no attribute 'params'
    (lambda p: Flux1Velocity(p), _flux1_params, "Flux1Velocity(Flux1(params))"),
    (lambda p: SimformerVelocity(p, dim_theta=DIM_THETA), lambda: _simformer().params,
     "SimformerVelocity(Simformer(params), dim_theta=...)"),
    # A Flux1Params handed to the other wrapper: named as the Flux1 wrapper's
    (lambda p: SimformerVelocity(p, dim_theta=DIM_THETA), _flux1_params, "Flux1Velocity(Flux1(params))"),
], ids=["flux1", "simformer", "flux1-to-simformer"])
def test_params_passed_for_the_model_name_the_model_to_build(wrap, given, fix):
    with pytest.raises(ValueError, match=r"takes the GenSBI model, got its \w+Params; build the model first: ") as err:
        wrap(given())
    assert str(err.value).endswith(fix)


def test_a_model_of_the_other_kind_names_the_wrapper_that_fits():
    # Was: AttributeError: 'SimformerParams' object has no attribute 'context_in_dim' (and 'Flux1Params' ... 'dim_joint')
    with pytest.raises(ValueError, match=r"^Flux1Velocity wraps a GenSBI model whose params have dim_obs, got "
                                         r"Simformer; wrap this one with SimformerVelocity\(model, dim_theta=\.\.\.\)$"):
        Flux1Velocity(_simformer())
    with pytest.raises(ValueError, match=r"^SimformerVelocity wraps a GenSBI model whose params have dim_joint, got "
                                         r"Flux1; wrap this one with Flux1Velocity\(model\)$"):
        SimformerVelocity(Flux1(_flux1_params()), dim_theta=DIM_THETA)
    with pytest.raises(ValueError, match=r"got Linear; build gensbi.models.Flux1 or Simformer"):
        Flux1Velocity(nnx.Linear(1, 1, rngs=nnx.Rngs(0)))


def test_gensbis_other_joint_model_is_wrapped_as_simformer_is():
    # Flux1Joint is called as Simformer is (JointWrapper.conditioned): accepted, and its guidance refused up front.
    v = SimformerVelocity(Flux1Joint(_joint_params()), dim_theta=DIM_THETA)
    out = v(*_inputs())
    assert out.shape == (4, DIM_THETA) and bool(jnp.isfinite(out).all())
    joint = Flux1Joint(_joint_params())
    joint.params.guidance_embed = True  # GenSBI's own constructor fails first without a vec_in_dim it can build
    with pytest.raises(ValueError, match="Flux1Joint built with guidance_embed=True"):
        SimformerVelocity(joint, dim_theta=DIM_THETA)


def test_qkv_bias_without_double_stream_blocks_is_named_as_without_effect(compose_config):
    # Was: silently ignored. GenSBI's single-stream blocks build their qkv projection with a bias whatever
    # Flux1Params.qkv_bias says; only the double-stream blocks (model.depth of them) read it.
    from gensbi_sharding.harness.model_checks import ignored_settings

    model = compose_config("model=flux1", "model.depth=0", "model.qkv_bias=false").model
    assert ignored_settings(model) == (
        "no effect: model.qkv_bias=false (only the double-stream blocks read it, and model.depth=0 builds none; "
        "the single-stream blocks always have query/key/value biases)")
    for overrides in [("model.depth=1", "model.qkv_bias=false"), ("model.depth=0",)]:  # read; the preset's value
        assert ignored_settings(compose_config("model=flux1", *overrides).model) is None, overrides


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


def test_pos1d_ids_are_refused_only_where_init_sharded_traces_them(compose_config):
    # Was: refused without a mesh too ("with model.init=sharded ... e.g. model.init=eager"), where the model is built
    # whole whatever model.init says (the console: "init=eager (no mesh)"); and in a dry run, whose trace then
    # refused model.init=eager in turn: two refusals, the first naming a fix that does not work there.
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.config_checks import validate
    from gensbi_sharding.harness.model_plan import DRY_RUN_TRACES, trace_model
    from gensbi_sharding.harness.state import builder

    pos1d = ("model=flux1", "model.id_embedding_strategy=[pos1d,pos1d]", "model.depth=1", "model.depth_single_blocks=0",
             "model.num_heads=1", "model.axes_dim=[4,0]")
    validate(compose_config(*pos1d, "mesh=none"))  # trains: nothing traces it
    with pytest.raises(ConfigError, match=r"with model.init=sharded: GenSBI's pos1d .* e.g. model.init=eager"):
        validate(compose_config(*pos1d))  # a mesh: init_sharded traces it
    cfg = compose_config(*pos1d, "dry_run=true")
    validate(cfg)  # the dry run's own refusal, which names the whole fix:
    with pytest.raises(ConfigError, match=r"cannot be traced .* drop dry_run=true and train it with model.init=eager"):
        trace_model(builder(cfg, dim_theta=DIM_THETA, dim_x=DIM_X, partition_axis=None), cfg, needed_by=DRY_RUN_TRACES)


@pytest.mark.parametrize("dim_theta", [2.0, True, "2", None, 0, 5])
def test_simformer_dim_theta_that_is_no_token_count_is_refused_when_wrapped(dim_theta):
    # Was, at the first call: "Input type must be an integer or unsigned integer." (2.0), "theta_t must have shape
    # (B, True)" (True), or "'<' not supported between instances of 'int' and 'str'" ("2", None).
    with pytest.raises(ValueError) as err:
        SimformerVelocity(_simformer(), dim_theta=dim_theta)
    assert str(err.value) == f"dim_theta={dim_theta!r} must be an integer in 1..4 (dim_joint=5 = dim_theta + dim_x)"
    if dim_theta is None:  # once: a NumPy integer is an integer
        import numpy as np

        assert SimformerVelocity(_simformer(), dim_theta=np.int64(2))(*_inputs()).shape == (4, DIM_THETA)


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
    from gensbi_sharding.harness.resume import model_overrides

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
