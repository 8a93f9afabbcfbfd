"""Faults found by using model=flux1 / model=simformer in the harness as a GenSBI user does (round 26).

Each test reproduces one fault and checks the whole kind, calling the check or builder directly
(no launch): a setting GenSBI cannot use, or one a checkpoint's weights do not mean, is refused
before training in one line naming the value and the override that fixes it.
"""

import jax
import jax.numpy as jnp
import pytest
from flax import nnx
from omegaconf import OmegaConf

from faults_helpers import compose_tiny
from gensbi_sharding.checkpoint import CheckpointWriter
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.resume import check_resume_settings

ROPE = "model.id_embedding_strategy=[rope1d,rope1d]"


# ------------------------------------------------- a rope id strategy with other than two axes_dim sizes

@pytest.mark.slow
def test_a_user_built_flux1_with_rope_and_one_axes_dim_size_is_refused_by_the_wrapper():
    # Was, at the first call inside GenSBI's EmbedND: "IndexError: list index out of range" ([8]), or
    # "mul got incompatible shapes for broadcasting" ([4,2,2]): the 1-D ids have two axes, one size each.
    from gensbi.models import Flux1, Flux1Params

    from gensbi_sharding.harness.models.flux1 import Flux1Velocity

    def flux(axes_dim):
        def build():  # abstract (the wrapper reads only flux.params): no array is computed
            with jax.ensure_compile_time_eval():
                params = Flux1Params(in_channels=1, vec_in_dim=None, context_in_dim=1, mlp_ratio=2.0, num_heads=1,
                                     depth=1, depth_single_blocks=0, qkv_bias=True, rngs=nnx.Rngs(0), dim_obs=2,
                                     dim_cond=2, axes_dim=axes_dim, id_embedding_strategy=("rope1d", "absolute"),
                                     dtype="float32")
            return Flux1(params)
        return nnx.eval_shape(build)

    with pytest.raises(ValueError) as err:
        Flux1Velocity(flux([8]))
    assert str(err.value) == ("Flux1 with a rope id strategy and axes_dim=[8]: the wrapper's 1-D token ids have 2 "
                              "axes (position, then parameter or observation), one axes_dim size each; build "
                              "Flux1Params with axes_dim=[8,0]")
    with pytest.raises(ValueError, match=r"axes_dim=\[4, 2, 2\]: .* build Flux1Params with axes_dim=\[8,0\]$"):
        Flux1Velocity(flux([4, 2, 2]))
    assert Flux1Velocity(flux([8, 0])).dim_theta == 2  # the sizes it names: accepted


# ------------------------------------------------- a resume under model settings the weights were not trained for

@pytest.fixture(scope="module")
def rope_checkpoint(tmp_path_factory):
    """A checkpoint folder (one tiny array) saved with the config of a rope1d Flux1 run."""
    out = tmp_path_factory.mktemp("rope_run")
    saved = OmegaConf.to_container(compose_tiny("model=flux1", ROPE), resolve=True)
    with CheckpointWriter(out / "checkpoints", config=saved) as writer:
        writer.save(8, nnx.State({"w": jnp.ones(2)}), jax.random.key(0))
    return out / "checkpoints" / "8"


@pytest.mark.parametrize("changed, saved_as, now", [
    # Was: trained on from the checkpoint with another rope base, every shape the same, not a word.
    (("model.theta=1000",), "model.theta=null", "model.theta=1000"),
    # Another split of one hidden size (2 heads of 8 -> 4 of 4): named as an override the shell takes,
    # where "model.axes_dim=[8, 0]" was two words.
    (("model.num_heads=4", "model.axes_dim=[4,0]"), "model.num_heads=2 model.axes_dim=[8,0]",
     "model.num_heads=4 model.axes_dim=[4,0]"),
    (("model.id_embedding_strategy=[rope1d,absolute]",), "model.id_embedding_strategy=[rope1d,rope1d]",
     "model.id_embedding_strategy=[rope1d,absolute]"),
])
@pytest.mark.fast_cases(1)
def test_a_resume_with_other_model_settings_is_refused_before_simulating(rope_checkpoint, changed, saved_as, now):
    cfg = compose_tiny("model=flux1", ROPE, f"train.resume={rope_checkpoint}", *changed)
    with pytest.raises(ConfigError) as err:
        check_resume_settings(rope_checkpoint, cfg)
    assert str(err.value) == (f"the checkpoint was saved with {saved_as} (this run: {now}): add {saved_as}. The "
                              "saved weights compute that model, not this one; or start a new run without "
                              "train.resume")
    # The overrides it names, typed as written, resume it.
    check_resume_settings(rope_checkpoint, compose_tiny("model=flux1", ROPE, f"train.resume={rope_checkpoint}",
                                                        *changed, *saved_as.split()))


def test_a_resume_may_change_how_the_model_is_built_and_its_compute_dtype(rope_checkpoint):
    cfg = compose_tiny("model=flux1", ROPE, "model.init=eager", "model.dtype=bfloat16")
    check_resume_settings(rope_checkpoint, cfg)  # the same weights, computed in bfloat16: no refusal


# ------------------------------------------------- a model's variables that are not parameters, counted as them

def test_variables_that_are_not_parameters_are_counted_apart_from_them():
    # Was, for model=flux1 model.id_embedding_strategy=[pos1d,absolute]: "15,729 parameters" and "per device:
    # parameters 382.9 KB": GenSBI's pos1d table (5000 x 16 float32, never trained) counted as parameters.
    import optax

    from gensbi_sharding import describe
    from gensbi_sharding.harness.run_report import placement_block, state_figures

    class WithTable(nnx.Module):
        def __init__(self):
            self.w = nnx.Param(jnp.ones((4, 4)))  # 64 B
            self.pe = nnx.Variable(jnp.zeros((100, 4)))  # 1.6 KB, as GenSBI's pos1d table

    model = WithTable()
    nodes = {"model": model, "optimizer": nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param)}
    figures = state_figures(nodes, None)
    assert figures["param_count"] == 16 and figures["param_bytes_per_device"] == 64
    assert figures["other_model_bytes_per_device"] == 1600 and figures["state_bytes_per_device"] >= 64 + 1600 + 128
    block = placement_block(describe(nodes, None), rule_name="replicated", param_count=16, param_bytes=64,
                            opt_bytes=figures["opt_bytes_per_device"], fallbacks={}, whole=[], hint=None,
                            others={"model/pe": 1600})
    assert block[1].startswith("per device: parameters 64 B (of 64 B), optimizer state ")
    assert block[1].endswith("; not trained: 1 other model variable(s), 1.6 KB (largest: model/pe, 1.6 KB)")
    # A few bytes of RNG state (Simformer's) are counted, not named on the console.
    tiny = placement_block(describe(nodes, None), rule_name="replicated", param_count=16, param_bytes=64,
                           opt_bytes=1, fallbacks={}, whole=[], hint=None, others={"model/pe": 0})
    assert "not trained" not in tiny[1]


# ------------------------------------------------- activation fields a model never reads

@pytest.mark.slow
def test_activation_fields_a_model_does_not_read_are_named(monkeypatch):
    # Was: model=flux1 activation.head_axis=model trained the very same program as without it, not a word
    # (GenSBI's blocks set no activation layouts; the wrapper constrains only its tokens' batch rows).
    import importlib

    from faults_helpers import compose_tiny
    from gensbi_sharding import PartitionAxis
    from gensbi_sharding.activations import ACTIVATION_NAMES
    from gensbi_sharding.harness.model_checks import ACTIVATION_FIELDS_READ, ignored_settings
    from gensbi_sharding.harness.registry import get_model

    cfg = compose_tiny("model=flux1", "activation.head_axis=model", "activation.hidden_state_axis=[data,model]")
    assert ignored_settings(cfg.model, cfg.activation) == (
        "no effect: activation.head_axis=model activation.hidden_state_axis=[data,model] (GenSBI's flux1 blocks "
        "set no activation layouts: the harness constrains the tokens it passes in and reads out by "
        "activation.batch_axis only)")
    mlp = compose_tiny("activation.head_axis=model")
    assert ignored_settings(mlp.model, mlp.activation) == (
        "no effect: activation.head_axis=model (model=mlp constrains by activation.batch_axis, "
        "activation.hidden_state_axis only)")
    unread = compose_tiny("model=simformer", "activation.batch_axis=null")
    assert ignored_settings(unread.model, unread.activation) is None
    # The table is what each model reads: every name it passes to constrain, spied on one call.
    sizes = {"mlp": dict(width=8, depth=1), "transformer": dict(embed=8, heads=2, depth=1),
             "flux1": dict(num_heads=1, axes_dim=[4, 0], depth=1, depth_single_blocks=0, mlp_ratio=1.0),
             "simformer": dict(val_emb_dim=4, id_emb_dim=2, cond_emb_dim=2, num_heads=2, qkv_features=4, depth=1,
                               fourier_features=4, mlp_ratio=1)}
    for name, hparams in sizes.items():
        names = set()
        module = importlib.import_module(f"gensbi_sharding.harness.models.{name}")
        monkeypatch.setattr(module, "constrain", lambda x, dims, pa, names=names: names.update(dims) or x)
        model = nnx.eval_shape(lambda: get_model(name)(dim_theta=2, dim_x=2, rngs=nnx.Rngs(0),  # abstract: fast
                                                       partition_axis=PartitionAxis(), **hparams))
        nnx.eval_shape(lambda m: m(jnp.zeros((2, 2)), jnp.zeros((2, 2)), jnp.zeros((2,))), model)
        assert {ACTIVATION_NAMES[n] for n in names - {None}} == set(ACTIVATION_FIELDS_READ[name]), name


# ------------------------------------------------- a Flux1 GenSBI builds, refused

@pytest.mark.slow
def test_flux1_of_single_stream_blocks_only_is_built_and_one_without_blocks_refused():
    # Was: model.depth=0 refused ("must be an integer >= 1"), though GenSBI's Flux1 builds and trains with
    # depth=0 (single-stream blocks only). With no block of either kind the velocity ignores x: refused.
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.config_checks import validate
    from gensbi_sharding.harness.registry import get_model

    validate(compose_tiny("model=flux1", "model.depth=0"))  # the quick preset: depth_single_blocks=1
    with pytest.raises(ConfigError) as err:
        validate(compose_tiny("model=flux1", "model.depth=0", "model.depth_single_blocks=0"))
    assert str(err.value) == ("model.depth=0 and model.depth_single_blocks=0: no block lets the parameter tokens "
                              "attend to the observation tokens, so the velocity would ignore x; e.g. "
                              "model.depth_single_blocks=1 (single-stream blocks only) or model.depth=1")
    model = nnx.eval_shape(lambda: get_model("flux1")(dim_theta=2, dim_x=3, rngs=nnx.Rngs(0), depth=0,
                                                      depth_single_blocks=1, num_heads=1, axes_dim=[4, 0]))
    assert len(model.flux.double_blocks.layers) == 0 and len(model.flux.single_blocks.layers) == 1
    out = nnx.eval_shape(lambda m: m(jnp.zeros((5, 2)), jnp.zeros((5, 3)), jnp.zeros((5,))), model)
    assert out.shape == (5, 2)


@pytest.mark.slow
def test_the_split_of_axes_dim_without_rope_is_named_as_without_effect():
    # Was: model.axes_dim=[4,4] with the absolute id strategy trained exactly as [8,0] (final train loss
    # 1.7532 both), not a word: only rope1d reads the sizes one by one, the rest only their sum.
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.model_checks import ignored_settings

    split = compose_tiny("model=flux1", "model.axes_dim=[4,4]")
    assert ignored_settings(split.model, split.activation) == (
        "no effect: the split of model.axes_dim=[4,4] (without a rope1d id strategy only its sum is used: the same "
        "model as model.axes_dim=[8,0]; rope1d gives each id axis its size)")
    for used in (("model.axes_dim=[4,4]", ROPE), ("model.axes_dim=[8,0]",), ("model.axes_dim=[8]",)):
        cfg = compose_tiny("model=flux1", *used)
        assert ignored_settings(cfg.model, cfg.activation) is None, used


def test_a_refused_resume_in_its_own_folder_does_not_quote_this_attempts_command(tmp_path, monkeypatch):
    # Was, for train.resume=auto with model.num_heads=4 in a folder saved with 2: "saved with model.num_heads=2
    # ... the run that saved it was launched with: ... model.num_heads=4" (Hydra had just rewritten the folder's
    # .hydra/overrides.yaml with this attempt's overrides).
    from hydra.conf import HydraConf
    from hydra.core.hydra_config import HydraConfig

    from gensbi_sharding.harness.saving_record import launched_with

    run, step_dir = tmp_path / "run", tmp_path / "run" / "checkpoints" / "8"  # only the record is read
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text("- model=flux1\n- model.num_heads=4\n")

    def running_in(folder):
        cfg = OmegaConf.create({"hydra": OmegaConf.structured(HydraConf)})
        cfg.hydra.runtime.output_dir = str(folder)
        monkeypatch.setattr(HydraConfig.instance(), "cfg", None)
        HydraConfig.instance().set_config(cfg)

    running_in(run)  # train.resume=auto: this attempt's record, not the saving run's
    assert launched_with(step_dir) == ""
    running_in(run.parent / "elsewhere")  # train.resume=<another run>: its record is that run's own
    assert launched_with(step_dir) == "; the run that saved it was launched with: model=flux1 model.num_heads=4"


def test_the_logged_activation_axes_are_those_the_model_reads(caplog):
    # Was, for model=flux1 rule=tensor: "activation partition axes: {'batch_axis': 'data', 'head_axis': 'model',
    # 'generation_head_axis': 'model'}", though only the batch rows of its tokens are ever constrained.
    import logging

    import gensbi_sharding as gs
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.rule_config import rule_table
    from gensbi_sharding.harness.state import partition_axis_for

    mesh = gs.make_mesh(model_axis=2)
    logged = {}
    for model in ("flux1", "transformer"):
        cfg = compose_tiny(f"model={model}", "rule=tensor", "mesh.model_axis=2")
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
            axes = partition_axis_for(cfg, rule_table(cfg.rule)[1], mesh)
        assert axes.head_axis == "model"  # what the models are given is unchanged
        logged[model] = [r.getMessage() for r in caplog.records if "activation partition axes" in r.getMessage()]
    assert logged["flux1"] == ["activation partition axes (those model=flux1 reads): {'batch_axis': 'data'}"]
    assert logged["transformer"] == ["activation partition axes (those model=transformer reads): {'batch_axis': "
                                     "'data', 'head_axis': 'model'}"]


# ------------------------------------------------- a model section of one model's fields naming another model

@pytest.mark.parametrize("overrides, message", [
    # Was: "ConfigAttributeError: Key 'id_merge_mode' not in 'SimformerConfig'" (Flux1's checks ran on Simformer's
    # fields before the name was checked), and for the reverse "model.val_emb_dim=None must be an integer >= 1".
    (("model=simformer", "model.name=flux1"), "model.name=flux1 does not fit the settings model=simformer loaded "
     "(the fields of simformer); set model.name=simformer, or drop model.name=flux1 and choose the model with "
     "model=flux1, which loads its own"),
    (("model=flux1", "model.name=simformer"), "model.name=simformer does not fit the settings model=flux1 loaded "
     "(the fields of flux1); set model.name=flux1, or drop model.name=simformer and choose the model with "
     "model=simformer, which loads its own"),
    (("model=mlp", "model.name=flux1"), "model.name=flux1 does not fit the settings model=mlp loaded"),
])
def test_a_model_name_that_does_not_fit_the_loaded_fields_is_named_before_the_models_checks(overrides, message):
    from gensbi_sharding.harness.config_checks import validate

    with pytest.raises(ConfigError) as err:
        validate(compose_tiny(*overrides))
    assert str(err.value).startswith(message)
    validate(compose_tiny(*overrides, f"model.name={overrides[0].split('=')[1]}"))  # the fix it names


def test_a_preset_of_ones_own_naming_another_models_schema_names_its_file(tmp_path):
    # Was, for my_conf/model/mix.yaml (defaults: /simformer_schema, name: flux1, as the README's preset but
    # mixed): "ConfigAttributeError: Key 'id_merge_mode' not in 'SimformerConfig'", naming neither file nor fix.
    from gensbi_sharding.harness.name_hints import registered_name_problem

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "mix.yaml").write_text("defaults:\n  - /simformer_schema\n  - _self_\nname: flux1\n")
    cfg = compose_tiny(f"hydra.searchpath=[file://{tmp_path}]", "model=mix")
    choices = {"model": "mix", "data": "two_moons", "rule": "replicated"}
    assert registered_name_problem(cfg, choices) == (
        "model=mix holds the fields of simformer (its defaults name /simformer_schema) but names model flux1; set "
        "name: simformer in that file (or model.name=simformer), or list /flux1_schema in its defaults to build flux1")
    fixed = compose_tiny(f"hydra.searchpath=[file://{tmp_path}]", "model=mix", "model.name=simformer")
    assert registered_name_problem(fixed, choices) is None


# ------------------------------------------------- where a distributed=local process's log lines are

def test_a_local_process_names_its_own_log_file_where_the_lines_are(monkeypatch, caplog, devices):
    # Was, in model=flux1 distributed=local rule=fsdp mesh.model_axis=2: "[process 1/2] XLA warned (all its lines
    # are in launch.log)", and the fallback warning's "(every one: metrics.json 'fallbacks' and launch.log)", while
    # each process writes its lines to process_<i>.log and the job's launch.log holds none of them.
    import logging
    import os

    from hydra.core.hydra_config import HydraConfig

    import gensbi_sharding as gs
    from gensbi_sharding.harness import console
    from gensbi_sharding.harness.model_plan import model_plan

    remat = b"W1130 21:32:49.078772    8033 spmd_partitioner.cc:666] [SPMD] Involuntary full rematerialization.\n"
    model = nnx.Module()  # more fallbacks than the warning lists: it says where every one is
    model.blocks = nnx.List([nnx.Param(jnp.ones((2, 8)), **gs.axes("embed", "mlp")) for _ in range(5)])
    mesh, rule = gs.make_mesh(model_axis=1), gs.resolve_rule("fsdp")
    for job, log_file in ((None, "launch.log"), ("launch", "launch.log"), ("process_1", "process_1.log")):
        monkeypatch.setattr(HydraConfig.instance(), "cfg", job and OmegaConf.create({"hydra": {"job": {"name": job}}}))
        assert console.job_log_name() == log_file
        caplog.clear()
        with caplog.at_level(logging.INFO), console.native_output_to_log():
            os.write(2, remat)
        notices = [r.getMessage() for r in caplog.records if r.name == "gensbi_sharding"]
        assert notices == [f"XLA warned (all its lines are in {log_file}): [SPMD] Involuntary full rematerialization."]
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            model_plan(model, mesh, rule, strict=False)
        warned = [r.getMessage() for r in caplog.records if r.name == "gensbi_sharding"]
        assert len(warned) == 1 and warned[0].endswith(f"(every one: metrics.json 'fallbacks' and {log_file})")


# ------------------------------------------------- a model.* override the composed or swept models lack

def _multirun_master(*overrides):
    """Compose a multirun's first config as Hydra's sweeper does (the swept groups left at their defaults)."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    from faults_helpers import REPO
    from gensbi_sharding.harness.config import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return GlobalHydra.instance().config_loader().load_configuration("config", list(overrides), RunMode.MULTIRUN)


MODEL_KEYS = [  # (command line, the refusal, the fix it names, typed as written)
    # Was Hydra's "Key 'num_heads' not in 'MLPConfig'. To append to your config use +model.num_heads=2" (which
    # fails too): a sweep's first config is composed with the default model, though flux1 and simformer have it.
    (("-m", "model=flux1,simformer", "model.num_heads=2"),
     "model.num_heads=2: Hydra composes a sweep's first config with the default model (model=mlp), which has no "
     "field num_heads, before each job loads model=flux1,simformer; sweep it as one value, which only the jobs "
     "get: 'model.num_heads=choice(2)'", ("-m", "model=flux1,simformer", "model.num_heads=choice(2)")),
    # Was: the flux1 job ran, then the sweep stopped at the simformer job's composition.
    (("-m", "model=flux1,simformer", "model.depth_single_blocks=1"),
     "model.depth_single_blocks=1: model=simformer of this sweep has no field depth_single_blocks (a field of "
     "model=flux1), so its jobs would stop at composition after the others ran; sweep model=flux1 with it and "
     "model=simformer in a sweep of its own", ("-m", "model=flux1", "model.depth_single_blocks=1")),
    (("model.num_heads=2",), "model.num_heads=2: model=mlp (the default) has no field num_heads; model=flux1, "
     "model=simformer have it: add model=flux1, whose section it then sets", ("model=flux1", "model.num_heads=2")),
    (("model=simformer", "model.axes_dim=[8,0]"), "model.axes_dim=[8,0]: model=simformer has no field axes_dim; "
     "model=flux1 has it: set model=flux1 for it, or drop model.axes_dim=[8,0]", ("model=simformer",)),
    (("experiment=slcp_transformer", "model.width=2"), "model.width=2: model=transformer has no field width; "
     "model=mlp has it: set model=mlp for it, or drop model.width=2", ("experiment=slcp_transformer",)),
]


@pytest.mark.parametrize("args, message, fixed", MODEL_KEYS, ids=lambda a: " ".join(a) if isinstance(a, tuple) else "")
def test_a_model_key_the_models_lack_is_refused_naming_the_override_that_runs(args, message, fixed):
    from hydra.errors import ConfigCompositionException

    from gensbi_sharding.harness.key_checks import model_key_problem

    assert model_key_problem(args) == message
    assert model_key_problem(fixed) is None
    overrides = [a for a in args if a != "-m"]
    if "-m" in args and "choice(" in message:  # what Hydra itself does with the command and with the fix
        with pytest.raises(ConfigCompositionException, match="Could not override 'model.num_heads'"):
            _multirun_master(*overrides)
        assert _multirun_master(*[a for a in fixed if a != "-m"]).model.name == "mlp"  # the jobs get flux1, ...


@pytest.mark.parametrize("args", [
    ("-m", "model=flux1,simformer", "model.depth=1"),  # every model has it: Hydra runs it
    ("model=flux1", "model.nheads=2"),  # no model has it: a typo, which Hydra names
    ("model=my_flux1", "model.num_heads=2"),  # a preset of one's own: not known here
    ("-m", "experiment=quick,slcp_transformer", "model.num_heads=2"),  # each job's experiment may pick the model
    ("model.width=64",),
])
def test_model_keys_the_models_have_or_that_are_not_known_here_pass(args):
    from gensbi_sharding.harness.key_checks import model_key_problem

    assert model_key_problem(args) is None


@pytest.mark.slow
def test_launch_refuses_a_model_sweep_hydra_cannot_compose_before_any_folder(tmp_path):
    import subprocess
    import sys

    from faults_helpers import REPO

    proc = subprocess.run([sys.executable, str(REPO / "launch.py"), "-m", "model=flux1,simformer", "model.num_heads=2",
                           f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1 and proc.stderr == f"[ERROR] {MODEL_KEYS[0][1]}\n", proc.stderr
    assert not (tmp_path / "sweep").exists()


# ------------------------------------------------- the commands a run prints keep the search path of a preset of one's own

SEARCH = "hydra.searchpath=[file:///home/you/my_conf]"


def test_a_printed_command_keeps_the_search_path_that_finds_a_preset_of_ones_own(monkeypatch, tmp_path):
    # Was, for a run of python launch.py "hydra.searchpath=[file://$PWD/my_conf]" model=my_flux1 (README: A preset
    # of your own): "continue with: python launch.py model=my_flux1 ... train.resume=auto ...", "to train it further
    # ...: python launch.py model=my_flux1 ...", "launched with: model=my_flux1 ...": Hydra keeps the search path
    # apart from the job's overrides, and without it each named command failed with "Could not find 'model/my_flux1'".
    from hydra.core.hydra_config import HydraConfig

    from gensbi_sharding.harness import further_hint, sweep_hints
    from gensbi_sharding.harness.saving_record import launched_with

    job = {"overrides": {"hydra": [SEARCH, "hydra.sweep.subdir=${hydra.job.num}"], "task": ["model=my_flux1", "rule=tensor"]},
           "mode": "RUN"}
    monkeypatch.setattr(HydraConfig.instance(), "cfg", OmegaConf.create({"hydra": job}))
    quoted = f"'{SEARCH}'"
    assert sweep_hints.continue_command("/runs/a") == (
        f"python launch.py {quoted} model=my_flux1 rule=tensor train.resume=auto hydra.run.dir=/runs/a")
    assert further_hint.train_further_hint("/runs/a", 20, 20, ["model=my_flux1"]).endswith(
        f"python launch.py {quoted} model=my_flux1 train.steps=40 train.resume=/runs/a hydra.run.dir=/runs/a-steps40")
    monkeypatch.setattr(HydraConfig.instance(), "cfg", None)  # the sweep callback's refusal: no job yet
    assert sweep_hints.job_command(["rule=fsdp"], "/runs/a", multirun=False) == (
        "python launch.py rule=fsdp train.resume=auto hydra.run.dir=/runs/a")  # none to keep
    sweep = tmp_path / "sweep"
    for number, status in enumerate(("ok", "preempted")):
        (sweep / str(number) / ".hydra").mkdir(parents=True)
        (sweep / str(number) / ".hydra" / "overrides.yaml").write_text(f"- model=my_flux1\n- seed={number}\n")
        (sweep / str(number) / "metrics.json").write_text(f'{{"status": "{status}"}}')
    hint = sweep_hints.unfinished_jobs_hint([sweep / "0", sweep / "1"], ("preempted",), sweep_dir=sweep,
                                            search_path=[SEARCH])
    assert f"python launch.py {quoted} model=my_flux1 seed=1 train.resume=auto hydra.mode=RUN" in hint
    # A checkpoint's run, read from its folder: Hydra's hydra.yaml holds the search path.
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text("- model=my_flux1\n- rule=tensor\n")
    (run / ".hydra" / "hydra.yaml").write_text(  # an override holding an interpolation is read, not resolved
        f"hydra:\n  overrides:\n    hydra:\n    - {SEARCH}\n    - hydra.sweep.subdir=${{hydra.job.num}}\n")
    assert launched_with(run / "checkpoints" / "20") == (
        f"; the run that saved it was launched with: {quoted} model=my_flux1 rule=tensor")
    (run / ".hydra" / "hydra.yaml").unlink()  # an older record: the overrides it has
    assert launched_with(run / "checkpoints" / "20") == "; the run that saved it was launched with: model=my_flux1 rule=tensor"


@pytest.mark.slow
def test_launch_into_a_completed_run_of_a_preset_of_ones_own_names_its_search_path(tmp_path):
    import subprocess
    import sys

    from faults_helpers import REPO
    from gensbi_sharding.harness.paste_command import command_for

    (tmp_path / "my_conf" / "model").mkdir(parents=True)
    (tmp_path / "my_conf" / "model" / "my_flux1.yaml").write_text("defaults:\n  - /flux1_schema\n  - _self_\n"
                                                                  "name: flux1\nnum_heads: 2\n")
    done = tmp_path / "done"
    (done / "checkpoints" / "20").mkdir(parents=True)
    (done / "metrics.json").write_text('{"status": "ok", "final_step": 20}')
    search = f"hydra.searchpath=[file://{tmp_path / 'my_conf'}]"
    proc = subprocess.run([sys.executable, str(REPO / "launch.py"), search, "model=my_flux1", "train.steps=20",
                           f"hydra.run.dir={done}"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    # launch.py's path, as pasted in tmp_path, where no launch.py is (was pinned: python launch.py, which fails there)
    typed = command_for(folder=tmp_path)
    assert proc.returncode == 1 and f"into a new folder: {typed} '{search}' model=my_flux1 " in proc.stderr, \
        proc.stderr


@pytest.mark.slow
def test_local_processes_get_the_search_path_of_a_preset_of_ones_own(monkeypatch, tmp_path):
    # Was: python launch.py "hydra.searchpath=[file://$PWD/my_conf]" model=my_flux1 distributed=local stopped at once,
    # each process with Hydra's "Could not find 'model/my_flux1'": they were started with the task's overrides only.
    import subprocess
    import sys

    from hydra.conf import HydraConf
    from hydra.core.hydra_config import HydraConfig

    from gensbi_sharding.harness import local_cluster

    hydra = OmegaConf.create({"hydra": OmegaConf.structured(HydraConf)})
    hydra.hydra.runtime.output_dir, hydra.hydra.overrides.task = str(tmp_path), ["model=my_flux1", "distributed=local"]
    hydra.hydra.overrides.hydra = [SEARCH, "hydra.sweep.subdir=${hydra.job.num}"]
    monkeypatch.setattr(HydraConfig.instance(), "cfg", None)
    HydraConfig.instance().set_config(hydra)
    from faults_helpers import local_process_commands

    started = local_process_commands(monkeypatch, tmp_path)
    assert len(started) == 2 and all(command[2:5] == [SEARCH, "model=my_flux1", "distributed=local"]
                                     for command in started), started
