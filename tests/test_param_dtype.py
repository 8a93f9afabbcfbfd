"""Low-precision GenSBI models: the EMA keeps the step's state types (and the dry run checks that),
float16 compute refused where XLA cannot compile it, and Flux1 settings that have no effect named.

Were: model.param_dtype=bfloat16 crashed at the second train step (the EMA came back float32) while
dry_run=true approved it; model=flux1 model.dtype=float16 failed at compile on CPU after the simulations;
model.val_emb_dim / model.id_emb_dim under id_merge_mode=sum built the same model, silently.
"""

import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from faults_helpers import compose_tiny, run_tiny
from gensbi_sharding.harness import train as T
from gensbi_sharding.harness.dry_run import dry_run
from gensbi_sharding.harness.ema import EMA
from gensbi_sharding.harness.model_checks import ignored_settings, platform_problem
from gensbi_sharding.harness.registry import get_model
from gensbi_sharding.harness.rule_config import rule_table
from gensbi_sharding.harness.step_check import StateDriftError

TINY = {
    "flux1": dict(num_heads=2, axes_dim=[4, 0], depth=1, depth_single_blocks=1, mlp_ratio=2),
    "simformer": dict(val_emb_dim=8, id_emb_dim=4, cond_emb_dim=4, num_heads=4, qkv_features=8,
                      depth=1, fourier_features=8, mlp_ratio=2),
}


def batches(rows=32, batch=8, seed=0):
    rng = np.random.default_rng(seed)
    while True:
        theta = rng.standard_normal((batch, 2)).astype(np.float32)
        yield {"theta": theta, "x": np.concatenate([theta, rng.standard_normal((batch, 1))], 1).astype(np.float32)}


def types(tree):
    return [(a.dtype, a.shape) for a in jax.tree.leaves(tree)]


# Simformer's case alone: Flux1's (~20 s, make test only) ran the same code path (make_step_functions with an EMA,
# train, EMA.param_state: none of them reads the model's class). Flux1 with bfloat16 parameters still trains with an
# EMA end to end (test_the_launcher_trains_flux1_with_bfloat16_parameters: the default config keeps one), and its
# float32 average follows steps below bfloat16's precision
# (test_a_bfloat16_average_follows_steps_below_its_own_precision).
@pytest.mark.slow
@pytest.mark.parametrize("name, param_dtype", [("simformer", "bfloat16")])
def test_low_precision_parameters_train_with_an_ema(name, param_dtype):
    model = get_model(name)(dim_theta=2, dim_x=3, rngs=nnx.Rngs(0), param_dtype=param_dtype, **TINY[name])
    optimizer = nnx.Optimizer(model, T.make_optimizer(learning_rate=1e-2, weight_decay=0.0, steps=4), wrt=nnx.Param)
    ema = EMA(model, 0.999)
    start = [np.asarray(a, np.float32) for a in jax.tree.leaves(ema.params)]
    functions, state = T.make_step_functions(model, optimizer, None, ema=ema)
    before = types(state)
    result = T.train(functions, state, batches(), steps=4, key=jax.random.key(0), mesh=None, batch_size=8,
                     progress=False)
    assert types(result.state) == before and result.steps == 4 and np.isfinite(result.losses).all()
    params = jax.tree.leaves(nnx.state(model, nnx.Param))
    averages = jax.tree.leaves(functions.weights(result.state))
    assert {a.dtype for a in params if a.ndim} == {jnp.dtype(param_dtype)}
    assert {a.dtype for a in averages} == {jnp.dtype(jnp.float32)}  # a float32 copy: bfloat16 would freeze
    assert any(not np.array_equal(a, np.asarray(b)) for a, b in zip(start, averages))  # it moved
    # Sampling merges the average back in the parameters' own dtype.
    merged = jax.tree.leaves(EMA.param_state(nnx.merge(functions.graphdef, result.state)[2],
                                             nnx.merge(functions.graphdef, result.state)[0]))
    assert [a.dtype for a in merged] == [a.dtype for a in params]


@pytest.mark.slow
def test_a_bfloat16_average_follows_steps_below_its_own_precision():
    model = get_model("flux1")(dim_theta=2, dim_x=3, rngs=nnx.Rngs(0), param_dtype="bfloat16", **TINY["flux1"])
    ema = EMA(model, 0.999)
    start = [np.asarray(a) for a in jax.tree.leaves(ema.params)]
    # Each jitted whole (as the train step runs the update), not one eager program per parameter shape and op
    # (~80 compiles); the shift's bfloat16 sums are rounded at its output, as eagerly.
    nnx.update(model, jax.jit(lambda state: jax.tree.map(lambda a: a + 1.0, state))(nnx.state(model, nnx.Param)))
    nnx.jit(EMA.update)(ema, model, jnp.uint32(10 ** 6))  # decay 0.999: a thousandth of the way, 1e-3 < 2^-8
    params = [np.asarray(a, np.float32) for a in jax.tree.leaves(nnx.state(model, nnx.Param))]
    for old, new, param in zip(start, jax.tree.leaves(ema.params), params):
        np.testing.assert_allclose(np.asarray(new) - old, 1e-3 * (param - old), rtol=1e-3, atol=1e-7)
        assert np.abs(np.asarray(new) - old).min() > 5e-4  # in bfloat16 it would not have moved at all


# Settings Flux1 ignores under its default id_merge_mode=sum: the run below sets them, so it also shows that a run
# says so (test_flux1_settings_without_effect_are_named); they change nothing it trains.
IGNORED = ("model.val_emb_dim=4", "model.id_emb_dim=4")


@pytest.fixture(scope="module")
def flux1_bfloat16_run(tmp_path_factory):
    """Flux1 with bfloat16 parameters and ``IGNORED`` trained by the harness (run_tiny): its metrics, and the
    messages of the warnings it logged (logger ``gensbi_sharding``, as caplog would read them)."""
    class Warnings(logging.Handler):
        def emit(self, record):
            if record.levelno == logging.WARNING:
                messages.append(record.getMessage())

    messages, logger, handler = [], logging.getLogger("gensbi_sharding"), Warnings()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    try:
        metrics = run_tiny(tmp_path_factory.mktemp("flux1_bf16") / "run", "model=flux1", "model.param_dtype=bfloat16",
                           *IGNORED)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return metrics, messages


@pytest.mark.slow  # an end-to-end run
def test_the_launcher_trains_flux1_with_bfloat16_parameters(flux1_bfloat16_run):
    metrics, _ = flux1_bfloat16_run
    assert metrics["status"] == "ok", metrics.get("error")
    assert metrics["steps"] == 8


@pytest.fixture
def patch_traced(monkeypatch):
    """``patch_traced(target, name, value)``: monkeypatch code the train step traces. The step's programs are kept
    per split graph (``step_programs.jitted_steps``), which a patched method leaves equal, so JAX's caches are
    cleared after the patch and at the test's end: the step is traced again with the patch, and again without it."""
    def patch(target, name, value):
        monkeypatch.setattr(target, name, value)
        jax.clear_caches()
    yield patch
    jax.clear_caches()


def drifting_update(self, model, updates):
    """The EMA update as it was before the fix, made to drift on a float32 model: averages come back bfloat16."""
    new = nnx.state(model, nnx.Param)
    jax.tree.map(lambda var, p: var.set_value(p.get_value().astype(jnp.bfloat16)), self.params, new,
                 is_leaf=lambda x: isinstance(x, nnx.Variable))


@pytest.mark.slow
def test_the_dry_run_refuses_a_step_that_changes_a_dtype(patch_traced, devices):
    cfg = compose_tiny("model.width=16", "model.depth=1")
    name, table = rule_table(cfg.rule)
    from gensbi_sharding import make_mesh

    report = dry_run(cfg, mesh=make_mesh(model_axis=1), rule_name=name, table=table, dim_theta=2, dim_x=2,
                     partition_axis=None)
    assert report["memory"]["argument_bytes"] > 0  # the honest step passes
    patch_traced(EMA, "update", drifting_update)
    with pytest.raises(StateDriftError) as err:
        dry_run(cfg, mesh=make_mesh(model_axis=1), rule_name=name, table=table, dim_theta=2, dim_x=2,
                partition_axis=None)
    message = str(err.value)
    assert "ema/params/blocks/0/up/kernel float32[16,32] -> bfloat16[16,32]" in message, message
    assert "train.ema_decay=0" in message and "model/" not in message


@pytest.mark.slow
def test_training_refuses_a_dtype_changing_step_before_its_first_step(patch_traced):
    patch_traced(EMA, "update", drifting_update)
    from gensbi_sharding.harness.models.mlp import make_mlp

    model = make_mlp(dim_theta=2, dim_x=3, rngs=nnx.Rngs(0), width=16, depth=1, time_embed_dim=8)
    optimizer = nnx.Optimizer(model, T.make_optimizer(learning_rate=1e-2, weight_decay=0.0, steps=4), wrt=nnx.Param)
    functions, state = T.make_step_functions(model, optimizer, None, ema=EMA(model, 0.9))
    stepped = []
    with pytest.raises(StateDriftError, match=r"ema/params/blocks/0/up/kernel float32\[16,32\] -> bfloat16"):
        T.train(functions, state, batches(), steps=4, key=jax.random.key(0), mesh=None, batch_size=8,
                progress=False, on_step=lambda step, st: stepped.append(step))
    assert stepped == []


def test_flux1_float16_compute_is_refused_on_cpu_before_any_simulation(tmp_path, monkeypatch):
    from gensbi_sharding.harness import data

    message = platform_problem(compose_tiny("model=flux1", "model.dtype=float16").model, "cpu")
    assert message.startswith("model.dtype=float16 does not compile for model=flux1 on cpu")
    assert "model.dtype=bfloat16" in message and "model.dtype=float32" in message
    assert platform_problem(compose_tiny("model=flux1", "model.dtype=float16").model, "gpu") is None
    # What does compile on CPU passes: simformer in float16, flux1 with float16 parameters.
    assert platform_problem(compose_tiny("model=simformer", "model.dtype=float16").model, "cpu") is None
    assert platform_problem(compose_tiny("model=flux1", "model.param_dtype=float16").model, "cpu") is None
    monkeypatch.setattr(data, "simulate", lambda *a, **k: pytest.fail("simulated"))
    metrics = run_tiny(tmp_path / "run", "model=flux1", "model.dtype=float16")
    from gensbi_sharding.harness.python_words import in_python_words

    with in_python_words(reword=False):  # run(cfg) from Python says its fixes as cfg's settings (FIX78)
        message = platform_problem(compose_tiny("model=flux1", "model.dtype=float16").model, "cpu")
    assert metrics["status"] == "error" and metrics["error"] == f"ConfigError: {message}"


@pytest.mark.slow  # an end-to-end run
def test_simformer_float16_compute_still_trains_on_cpu(tmp_path):
    metrics = run_tiny(tmp_path / "run", "model=simformer", "model.dtype=float16")
    assert metrics["status"] == "ok", metrics.get("error")


@pytest.mark.slow  # an end-to-end run (a training or dry run, or processes)
def test_flux1_settings_without_effect_are_named(flux1_bfloat16_run):
    model = compose_tiny("model=flux1", *IGNORED).model
    assert ignored_settings(model) == (
        "no effect: model.val_emb_dim=4 and model.id_emb_dim=4 (only model.id_merge_mode=concat uses them; "
        "model.id_merge_mode=sum sizes the tokens by model.axes_dim)")
    theta = ignored_settings(compose_tiny("model=flux1", "model.theta=100").model)
    assert theta.startswith("no effect: model.theta=100 (the rope base") and "[rope1d,rope1d]" in theta
    # Used settings, and the presets, warn about nothing.
    for overrides in [(), ("model.id_merge_mode=concat", "model.val_emb_dim=4", "model.id_emb_dim=4"),
                      ("model.theta=100", "model.id_embedding_strategy=[rope1d,rope1d]")]:
        assert ignored_settings(compose_tiny("model=flux1", *overrides).model) is None, overrides
    assert ignored_settings(compose_tiny("model=simformer").model) is None
    # A run says it, once (the bfloat16 Flux1 run sets them).
    _, warned = flux1_bfloat16_run
    assert [message for message in warned if "no effect" in message] == [ignored_settings(model)]


@pytest.mark.slow
def test_flux1_axes_dim_under_concat_is_named_with_the_setting_that_applies_it():
    # Was: silently ignored. Flux1Params sizes concat's tokens by val_emb_dim and id_emb_dim, and reads
    # axes_dim only under sum (concat refuses rope1d, its other reader).
    concat = ("model.id_merge_mode=concat", "model.val_emb_dim=4", "model.id_emb_dim=4")
    assert ignored_settings(compose_tiny("model=flux1", *concat, "model.axes_dim=[4,4]").model) == (
        "no effect: model.axes_dim=[4,4] (only model.id_merge_mode=sum uses it, as hidden size = "
        "sum(axes_dim) * num_heads; model.id_merge_mode=concat sizes the tokens by model.val_emb_dim and "
        "model.id_emb_dim)")
    # One warning for everything ignored; the preset's axes_dim, null, and axes_dim under sum warn about nothing.
    both = ignored_settings(compose_tiny("model=flux1", *concat, "model.axes_dim=[2,2]", "model.theta=50").model)
    assert both.startswith("no effect: model.theta=50 (the rope base") and both.count("no effect") == 1
    assert "; model.axes_dim=[2,2] (only model.id_merge_mode=sum uses it" in both
    # (axes_dim=[4,4] under sum with absolute ids: its split is without effect, tests/test_gensbi_harness_faults.py)
    for overrides in [concat, (*concat, "model.axes_dim=null"),
                      ("model.axes_dim=[4,4]", "model.id_embedding_strategy=[rope1d,rope1d]")]:
        assert ignored_settings(compose_tiny("model=flux1", *overrides).model) is None, overrides


@pytest.mark.slow
def test_flux1_float16_compute_on_cpu_is_refused_by_the_check_before_any_folder_where_cpu_is_known():
    # Was: job_problem (the check of a run's or each sweep job's config before Hydra makes a folder) left it to the
    # run, which refused it once JAX had started, inside the job's folder; a sweep ran every earlier job first.
    from gensbi_sharding.harness.job_check import job_problem

    message = platform_problem(compose_tiny("model=flux1", "model.dtype=float16").model, "cpu")
    assert job_problem(compose_tiny("model=flux1", "model.dtype=float16")) == f"ConfigError: {message}"
    assert job_problem(compose_tiny("model=flux1", "model.dtype=float16", "dry_run=true")) == f"ConfigError: {message}"
    # Jobs a scheduler runs elsewhere (in_process=False) may get a GPU: refused only where the config says cpu
    assert job_problem(compose_tiny("model=flux1", "model.dtype=float16"), in_process=False) is None
    assert job_problem(compose_tiny("model=flux1", "model.dtype=float16", "devices.platform=cpu"),
                       in_process=False) == f"ConfigError: {message}"
    assert job_problem(compose_tiny("model=flux1", "model.dtype=bfloat16")) is None
