"""GenSBI's models wrapped for the harness (``Flux1Velocity``, ``SimformerVelocity``): what failed late or said
nothing, now refused when wrapped.

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


@pytest.mark.slow
def test_a_guidance_distilled_flux1_is_refused_when_wrapped_not_at_its_first_call():
    # Was: wrapped without a word, then GenSBI's "Didn't get guidance strength for guidance distilled model." at
    # the first call (inside the first training step's trace, in the harness).
    flux = Flux1(_flux1_params(guidance_embed=True, vec_in_dim=4))
    with pytest.raises(ValueError, match=r"guidance_embed=True .* Flux1Velocity .* never passes; build its params "
                                         r"with guidance_embed=False"):
        Flux1Velocity(flux)
    assert Flux1Velocity(Flux1(_flux1_params())).dim_theta == DIM_THETA  # the fix it names


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_gensbis_other_joint_model_is_wrapped_as_simformer_is():
    # Flux1Joint is called as Simformer is (JointWrapper.conditioned): accepted, and its guidance refused up front.
    v = SimformerVelocity(Flux1Joint(_joint_params()), dim_theta=DIM_THETA)
    # Jitted, as a run calls it: one program, not one compiled per op of Flux1Joint's (op by op: ~2 s of CPU more)
    out = nnx.jit(lambda model, *inputs: model(*inputs))(v, *_inputs())
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


def test_pos1d_ids_are_refused_only_where_init_sharded_traces_them(compose_config):
    # Was: refused without a mesh too ("with model.init=sharded ... e.g. model.init=eager"), where the model is built
    # whole whatever model.init says (the console: "init=eager (no mesh)"); and in a dry run, whose trace then
    # refused model.init=eager in turn: two refusals, the first naming a fix that does not work there.
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.config_checks import validate
    from gensbi_sharding.harness.model_plan import dry_run_traces, trace_model
    from gensbi_sharding.harness.state import builder

    pos1d = ("model=flux1", "model.id_embedding_strategy=[pos1d,pos1d]", "model.depth=1", "model.depth_single_blocks=0",
             "model.num_heads=1", "model.axes_dim=[4,0]")
    validate(compose_config(*pos1d, "mesh=none"))  # trains: nothing traces it
    with pytest.raises(ConfigError, match=r"with model.init=sharded: GenSBI's pos1d .* e.g. model.init=eager"):
        validate(compose_config(*pos1d))  # a mesh: init_sharded traces it
    cfg = compose_config(*pos1d, "dry_run=true")
    with pytest.raises(ConfigError, match=r"\[pos1d,pos1d\] with dry_run=true: GenSBI's pos1d .* so this model has no "
                                          r"dry run; drop dry_run=true and train it with model.init=eager"):
        validate(cfg)  # the dry run's refusal, known from the config (was: passed, refused once traced, below)
    with pytest.raises(ConfigError, match=r"cannot be traced .* drop dry_run=true and train it with model.init=eager"):
        trace_model(builder(cfg, dim_theta=DIM_THETA, dim_x=DIM_X, partition_axis=None), cfg, needed_by=dry_run_traces)


@pytest.mark.slow
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


@pytest.mark.slow  # launch.py processes (forked from one that imported the harness)
def test_a_dry_run_of_pos1d_ids_is_refused_in_one_line_before_any_folder(tmp_path):
    # Was: "[dry run] compile one train step ...", then "[ERROR] model=flux1 cannot be traced ..." and
    # "traceback in outputs/<date>/<time>/error.txt": a run folder made (.hydra/, launch.log, error.txt) for a dry run
    # the config alone refuses, with or without a mesh.
    import os

    from fork_launch import run_forked, script_imports

    from faults_helpers import REPO
    commands = [["model=flux1", "model.id_embedding_strategy=[pos1d,absolute]", "dry_run=true", *mesh]
                for mesh in ([], ["mesh=none"])]
    runs = [{"args": args, "cwd": tmp_path / str(i)} for i, args in enumerate(commands)]
    for run in runs:
        run["cwd"].mkdir()
    (tmp_path / "fork").mkdir()
    procs = run_forked(runs, env={**os.environ, "JAX_PLATFORMS": "cpu"}, timeout=300, workdir=tmp_path / "fork",
                       imports=tuple(script_imports(REPO / "launch.py")))
    for proc, run in zip(procs, runs):
        assert proc.returncode == 1, proc.stderr
        assert (proc.stdout + proc.stderr).strip().splitlines() == [
            "[ERROR] model.id_embedding_strategy=[pos1d,absolute] with dry_run=true: GenSBI's pos1d id "
            "embedding sizes its table with jnp.maximum inside the constructor, which the dry run's trace (it allocates "
            "nothing) cannot evaluate, so this model has no dry run; drop dry_run=true and train it with "
            "model.init=eager; e.g. model.id_embedding_strategy=[absolute,absolute]"]
        assert list(run["cwd"].iterdir()) == []  # no outputs/ folder
