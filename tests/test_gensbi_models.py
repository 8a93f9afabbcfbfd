"""GenSBI's Flux1 and Simformer in the harness: the velocity contract, errors, sharded init,
fallbacks, checkpoints across meshes, the dry run and an end-to-end run of launch.py.

Training equivalence under every rule is in ``test_equivalence.py``.
"""

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from hydra import compose, initialize_config_dir

import gensbi_sharding as contract
from gensbi_sharding.checkpoint import CheckpointWriter, abstract_state_for, restore
from gensbi_sharding.harness.config import register_configs
from gensbi_sharding.harness.dry_run import dry_run
from gensbi_sharding.harness.registry import get_model, model_names
from gensbi_sharding.harness.rule_config import rule_table
from gensbi_sharding import init_sharded

REPO = Path(__file__).resolve().parents[1]
DIM_THETA, DIM_X = 2, 3
COMPILER_OPTIONS = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}
TINY = {
    "flux1": dict(num_heads=2, axes_dim=[4, 0], depth=1, depth_single_blocks=1, mlp_ratio=2),
    "simformer": dict(val_emb_dim=8, id_emb_dim=4, cond_emb_dim=4, num_heads=4, qkv_features=8,
                      depth=1, fourier_features=8, mlp_ratio=2),
}


def build(name, seed=0, **overrides):
    return get_model(name)(dim_theta=DIM_THETA, dim_x=DIM_X, rngs=nnx.Rngs(seed),
                           **{**TINY[name], **overrides})


def flat(node):
    """Path -> array of every variable; typed PRNG keys (Simformer keeps an nnx.Rngs) as their data."""
    def value(v):
        v = v.get_value()
        return jax.random.key_data(v) if jnp.issubdtype(v.dtype, jax.dtypes.prng_key) else v
    return {"/".join(map(str, p)): value(v) for p, v in nnx.to_flat_state(nnx.state(node))}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TINY))
def test_velocity_contract(name):
    graphdef, state = nnx.split(build(name))
    # GenSBI zero-initialises its adaLN gates (Flux1 ignores x until trained): random values
    # everywhere make every input reach the output. Drawn by numpy: a JAX draw per variable compiled
    # one program per shape (~3 s of Flux1's ~5 s), and any random values show the contract alike.
    leaves, treedef = jax.tree.flatten(state)
    draw = np.random.default_rng(1)
    state = jax.tree.unflatten(treedef, [(draw.standard_normal(l.shape) * 0.3).astype(l.dtype)
                                         if jnp.issubdtype(l.dtype, jnp.floating) else l for l in leaves])
    forward = jax.jit(lambda th, x, t: nnx.merge(graphdef, state)(th, x, t))
    rng = np.random.default_rng(0)
    theta, x = rng.normal(size=(5, DIM_THETA)).astype(np.float32), rng.normal(size=(5, DIM_X)).astype(np.float32)
    t = np.full(5, 0.3, np.float32)
    with pytest.raises(ValueError, match=r"x must have shape \(5, 3\)"):
        forward.lower(theta, x[:, :2], t)
    velocity = forward.lower(theta, x, t).compile(COMPILER_OPTIONS)
    v = velocity(theta, x, t)
    assert v.shape == (5, DIM_THETA) and v.dtype == jnp.float32
    assert not np.allclose(velocity(theta, x + 1.0, t), v, atol=1e-3)  # conditioned on x
    assert not np.allclose(velocity(theta, x, t + 0.6), v, atol=1e-3)  # and on t


@pytest.mark.slow
def test_models_are_registered_with_their_config_fields():
    assert {"flux1", "simformer"} <= set(model_names())
    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        for name in TINY:
            cfg = compose(config_name="config", overrides=[f"model={name}"])
            hparams = {k: v for k, v in cfg.model.items() if k not in ("name", "init")}
            model = nnx.eval_shape(lambda: get_model(name)(dim_theta=DIM_THETA, dim_x=DIM_X,
                                                           rngs=nnx.Rngs(0), **hparams))
            assert model.dim_theta == DIM_THETA and model.dim_x == DIM_X


def test_without_gensbi_the_error_names_the_extra(monkeypatch):
    for module in [m for m in sys.modules if m == "gensbi" or m.startswith("gensbi.")] + ["gensbi"]:
        monkeypatch.setitem(sys.modules, module, None)  # "import gensbi" now fails
    for name in TINY:
        with pytest.raises(ModuleNotFoundError, match=rf'model={name} needs gensbi.*pip install -e "\.\[gensbi\]"'):
            get_model(name)
        with pytest.raises(ModuleNotFoundError, match=r"gensbi_sharding\[gensbi\]"):
            build(name)
    assert get_model("mlp")  # the other models do not need it


@pytest.mark.parametrize("name,overrides,match", [
    ("flux1", dict(id_embedding_strategy=["pos2d", "absolute"]), "model.id_embedding_strategy"),
    ("flux1", dict(dtype="float64"), "model.dtype='float64'"),
    ("flux1", dict(depth=0, depth_single_blocks=0), "model.depth=0 and model.depth_single_blocks=0: the velocity "
                                                    "would ignore x"),  # depth=0 alone: single-stream blocks only
    ("flux1", dict(depth=-1), "model.depth=-1 must be an integer >= 0"),
    ("flux1", dict(depth_single_blocks=1.5), "model.depth_single_blocks=1.5 must be an integer >= 0"),
    ("flux1", dict(id_merge_mode="concat"), "model.id_merge_mode=concat needs val_emb_dim and id_emb_dim"),
    ("simformer", dict(qkv_features=10), "model.qkv_features=10 must be a multiple of model.num_heads=4"),
])
def test_bad_fields_are_value_errors_naming_the_field(name, overrides, match):
    with pytest.raises(ValueError, match=match):
        build(name, **overrides)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TINY))
def test_sharded_init_equals_eager_and_places_by_the_plan(name):
    mesh = contract.make_mesh(model_axis=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", contract.ExperimentalRuleWarning)
        model = init_sharded(lambda: build(name), mesh, "fsdp")
    specs = contract.plan_shardings(model, mesh, dict(contract.RULES["fsdp"])).specs
    eager = flat(build(name))
    got = flat(model)
    assert got.keys() == eager.keys()
    assert [k for k in got if not np.array_equal(got[k], eager[k])] == []
    assert [k for k in specs if not got[k].sharding.is_equivalent_to(
        jax.sharding.NamedSharding(mesh, specs[k]), got[k].ndim)] == []
    assert any(not got[k].sharding.is_fully_replicated for k in specs)  # fsdp split something


@pytest.mark.slow
def test_unsplittable_gensbi_variables_are_reported_as_fallbacks():
    # GenSBI's default Flux1 width: hidden 6 * 6 = 36 does not split over 8 devices.
    mesh = contract.make_mesh(model_axis=1)
    abstract = nnx.eval_shape(lambda: build("flux1", num_heads=6, axes_dim=[6, 0]))
    fallbacks = contract.plan_shardings(abstract, mesh, dict(contract.RULES["fsdp"])).fallbacks
    assert "flux/obs_in/kernel" in fallbacks and "36" in fallbacks["flux/obs_in/kernel"]


@pytest.mark.slow
def test_checkpoint_restores_onto_another_mesh_and_rule(tmp_path):
    tx = optax.adamw(1e-3)

    def pair():
        model = build("flux1")
        return model, nnx.Optimizer(model, tx, wrt=nnx.Param)

    saved_mesh, new_mesh = contract.make_mesh(model_axis=2), contract.make_mesh(model_axis=1)
    model, optimizer = pair()
    with warnings.catch_warnings():  # the experimental-rule notice; 3 id rows do not split over 2
        warnings.simplefilter("ignore", contract.ExperimentalRuleWarning)
        warnings.simplefilter("ignore", contract.ShardingFallbackWarning)
        contract.shard_model(model, saved_mesh, "tensor")
        contract.shard_model(optimizer, saved_mesh, "tensor")
    state = nnx.state((model, optimizer))
    key = contract.replicate(jax.random.key(3), saved_mesh)
    with CheckpointWriter(tmp_path / "checkpoints", config={"model": {"name": "flux1"}}) as writer:
        writer.save(1, state, key)
    table = dict(contract.RULES["fsdp"])
    target = abstract_state_for(pair, new_mesh, table)
    restored = restore(tmp_path, target)
    expected, got = flat(state), {"/".join(map(str, p)): v.get_value() for p, v in nnx.to_flat_state(restored.state)}
    want = {"/".join(map(str, p)): v.get_value().sharding for p, v in nnx.to_flat_state(target)}
    assert [k for k in got if not np.array_equal(got[k], expected[k])] == []
    assert [k for k in got if not got[k].sharding.is_equivalent_to(want[k], got[k].ndim)] == []
    kernel = got["0/flux/double_blocks/layers/0/obs_mlp/layers/0/kernel"]  # ("embed", "mlp")
    assert kernel.sharding.is_equivalent_to(jax.sharding.NamedSharding(new_mesh, jax.sharding.PartitionSpec("data", None)), 2)


@pytest.mark.slow  # an end-to-end run (a training or dry run, or processes)
def test_dry_run_reports_memory_and_collectives():
    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[
            "model=simformer", "rule=fsdp", *(f"model.{k}={v}" for k, v in TINY["simformer"].items())])
    name, table = rule_table(cfg.rule)
    report = dry_run(cfg, mesh=contract.make_mesh(model_axis=1), rule_name=name, table=table,
                     dim_theta=DIM_THETA, dim_x=DIM_X, partition_axis=None)
    assert report["collectives"]["all-gather"]["count"] >= 1  # fsdp gathers the split weights
    assert report["memory"]["argument_bytes"] > 0
    # The model's own paths, as a training run's metrics.json lists them: (1, 1, 4), 4 rows over 8 devices.
    assert "simformer/condition_embedding" in report["fallbacks"]



_TRACED_FIRST = """
import math, sys
from flax import nnx
import gensbi_sharding.harness.models
from gensbi_sharding.harness.registry import get_model
nnx.eval_shape(lambda: get_model(sys.argv[1])(dim_theta=2, dim_x=3, rngs=nnx.Rngs(0)))
import gensbi.models.tarflow.model as tarflow
print(math.isclose(float(tarflow._LOG2PI), math.log(2 * math.pi), rel_tol=1e-6))
"""


@pytest.mark.slow
@pytest.mark.parametrize("name", ["flux1", "simformer"])
def test_a_gensbi_model_traced_first_leaves_no_tracer_in_gensbi(name):
    # Was: a process's first GenSBI model built under a trace (model.init=sharded, the dry run, the check before
    # any folder) imported gensbi.models inside it: tarflow's module constant _LOG2PI (jnp at import) was left a
    # leaked tracer, and float() of it raised ConcretizationTypeError.
    proc = subprocess.run([sys.executable, "-c", _TRACED_FIRST, name], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"}, timeout=300)
    assert proc.returncode == 0 and proc.stdout == "True\n", proc.stdout + proc.stderr[-2000:]

@pytest.fixture(scope="module")
def flux1_launch(tmp_path_factory):
    """launch.py with model=flux1 under tensor on a (2, 4) mesh, and its folder: read by the end-to-end test, and its
    checkpoint restored into GenSBI's own Flux1 (a Flux1 run in this process cost ~10 s of CPU more)."""
    tmp_path = tmp_path_factory.mktemp("flux1_launch")
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("HYDRA_FULL_ERROR", None)
    proc = subprocess.run(
        [sys.executable, str(REPO / "launch.py"), "experiment=quick", "model=flux1", "rule=tensor",
         "mesh.model_axis=4", "train.steps=4", "train.log_every=2", "data.num_simulations=768",  # quick, smaller
         # Through the prior's bijection every draw lies inside the prior: one draw, one compile of Flux1's ODE
         # program (theta as simulated, two_moons' default, draws again for the rows rejected: a second compile,
         # ~3 s of CPU; test_launch.py's mesh=none run checks that path).
         "data.theta_transform=support", f"hydra.run.dir={tmp_path}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    return proc, tmp_path


@pytest.mark.slow
def test_launch_runs_flux1_end_to_end_and_reports_fallbacks(flux1_launch):
    """launch.py with model=flux1 under tensor on a (2, 4) mesh: trains, samples, prints a C2ST."""
    proc, tmp_path = flux1_launch
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert (metrics["model"], metrics["rule"], metrics["status"]) == ("flux1", "tensor", "ok")
    assert 0.0 <= metrics["c2st"] <= 1.0 and "C2ST" in out
    # Flux1's id embeddings have one row per token (2 for two_moons): not split over model=4,
    # reported in metrics.json and in the one fallback warning of the job's log.
    assert "flux/cond_ids_embedder/embedder/embed/embedding" in metrics["fallbacks"]
    assert "replicated instead of split under rule 'tensor'" in out
    assert metrics["placements"]["flux/single_blocks/layers/0/linear1/kernel"] == "P(None, 'model')"


@pytest.mark.slow
def test_a_flux1_runs_weights_go_into_gensbis_own_flux1_by_the_read_the_refusal_names(flux1_launch):
    # Was: restore(<run>, abstract_state_for(<Flux1 from Flux1Params>, mesh, rule)) refused, naming only a target of
    # the run's every node, abstract_state_for({'0': <node>, '1': <node>, '2': <node>, 'best': <node>}, mesh, rule):
    # the harness's optimizer, EMA and best weights, which a GenSBI user cannot build.
    import re

    import orbax.checkpoint as ocp
    from gensbi.models import Flux1, Flux1Params

    from gensbi_sharding.harness.models.flux1 import Flux1Velocity

    _, tmp_path = flux1_launch  # experiment=quick's Flux1: 2 heads of 8, 1 + 1 blocks
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["status"] == "ok", metrics.get("error")

    def flux1_factory():  # as docs/gensbi_models.md builds it, the run's sizes (two_moons: 2 and 2 tokens)
        with jax.ensure_compile_time_eval():
            params = Flux1Params(in_channels=1, vec_in_dim=None, context_in_dim=1, mlp_ratio=2.0, num_heads=2,
                                 depth=1, depth_single_blocks=1, qkv_bias=True, rngs=nnx.Rngs(0), dim_obs=2,
                                 dim_cond=2, axes_dim=[8], dtype="float32")
        return Flux1Velocity(Flux1(params))

    mesh = contract.make_mesh(model_axis=1)  # another mesh and rule than the run's
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", contract.ExperimentalRuleWarning)
        with pytest.raises(ValueError) as refused:
            restore(tmp_path, abstract_state_for(flux1_factory, mesh, "fsdp"))
        call = re.search(r"or read the part under '0/' alone with Orbax: target = abstract_state_for\(model, mesh, "
                         r"rule\); (.*)$", str(refused.value)).group(1)
        model, fresh = contract.abstract_sharded(flux1_factory, mesh, "fsdp"), flux1_factory()
        exec(call, {"ocp": ocp, "nnx": nnx, "model": model, "target": abstract_state_for(flux1_factory, mesh, "fsdp")})
    trained, initial = flat(model), flat(fresh)
    assert sorted(trained) == sorted(initial) and any(not np.array_equal(trained[k], initial[k]) for k in trained)
    kernel = model.flux.double_blocks.layers[0].obs_mlp.layers[0].kernel[...]  # ("embed", "mlp"): fsdp's split
    assert kernel.sharding.spec == jax.sharding.PartitionSpec("data", None)
    # One compiled call of the restored model (eagerly, each of Flux1's ops compiled a program of its own: ~2 s of CPU).
    velocity = nnx.jit(lambda m, *inputs: m(*inputs))(model, jnp.zeros((8, 2)), jnp.zeros((8, 2)), jnp.full((8,), 0.5))
    assert velocity.shape == (8, 2) and bool(jnp.isfinite(velocity).all())
