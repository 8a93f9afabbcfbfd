"""Every rule trains like one device: same losses and final parameters as the run with no mesh.

For each rule (the three built-ins and the custom ``conf/rule/fsdp_tensor.yaml``) and each
``model_axis`` in 1, 2, 4 on 8 simulated devices, ``STEPS`` AdamW steps of the tiny ``mlp``
and ``transformer`` and of GenSBI's own ``Flux1`` and ``Simformer`` (float32 compute; see
``DEGENERATE``) from the same initial values on the same batches, with the activation
strategy ``PartitionAxis.for_rule`` in force, are compared with the unsharded run. Sharding
only changes the order of float32 reductions, so the runs agree to rounding; ``TOL`` bounds
the relative difference (largest |a - b| over a leaf, divided by the leaf's largest |b|).
Measured: at most 2.6e-7 on the losses and 1.2e-6 on the parameters.

Compiling dominates the run time (about 1 s per mlp case, 2 s per transformer case; the 50
steps take about 0.4 s), so both sides compile at XLA's CPU optimisation level 0, which
halves it; at the default level the differences are the same size (at most 1.7e-7 / 9.8e-7).
"""

import warnings
from functools import cache
from pathlib import Path

import jax
import numpy as np
import optax
import pytest
from flax import nnx
from omegaconf import OmegaConf

from gensbi_sharding.activations import PartitionAxis
from gensbi_sharding.harness.rule_config import rule_table
from gensbi_sharding.harness.models.flux1 import make_flux1
from gensbi_sharding.harness.models.mlp import make_mlp
from gensbi_sharding.harness.models.simformer import make_simformer
from gensbi_sharding.harness.models.transformer import make_transformer
from gensbi_sharding.harness.train import make_step_functions
from gensbi_sharding import (RULES, ExperimentalRuleWarning, make_mesh, mesh_context,
                                      replicate, shard_batch, shard_model, shard_model_by_table)

STEPS, BATCH, DIM_THETA, DIM_X = 50, 16, 2, 3
TOL = 1e-5
COMPILER_OPTIONS = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}
TINY = {
    "mlp": lambda: make_mlp(dim_theta=DIM_THETA, dim_x=DIM_X, rngs=nnx.Rngs(0), width=16,
                            depth=2, mlp_ratio=2, time_embed_dim=8),
    "transformer": lambda: make_transformer(dim_theta=DIM_THETA, dim_x=DIM_X, rngs=nnx.Rngs(0),
                                            embed=16, depth=1, heads=4, mlp_ratio=2, time_embed_dim=8),
    # GenSBI's own classes (hidden size 8 and 16 split evenly on 8 devices), float32 compute.
    "flux1": lambda: make_flux1(dim_theta=DIM_THETA, dim_x=DIM_X, rngs=nnx.Rngs(0), num_heads=2,
                                axes_dim=[4, 0], depth=1, depth_single_blocks=1, mlp_ratio=2),
    "simformer": lambda: make_simformer(dim_theta=DIM_THETA, dim_x=DIM_X, rngs=nnx.Rngs(0),
                                        val_emb_dim=8, id_emb_dim=4, cond_emb_dim=4, num_heads=4,
                                        qkv_features=8, depth=1, fourier_features=8, mlp_ratio=2),
}
# Parameters the loss does not depend on: a key bias adds q.b to every key of a query alike,
# which softmax cancels (Simformer's nnx.MultiHeadAttention; Flux1's QK-norm keeps it live).
# Their gradient is rounding noise that AdamW scales up to +-lr per step, so their final
# value is noise in any two runs; test_null_gradient_parameters_do_not_change_the_loss checks it.
NULL_GRADIENT = {"simformer": "attn/key/bias"}
CONF = Path(__file__).resolve().parents[1] / "conf"
CASES = [(rule, model_axis) for rule in ("replicated", "fsdp", "tensor", "fsdp_tensor")
         for model_axis in (1, 2, 4)]
# Every model but the mlp skips the three cases that place every variable and activation
# exactly as its replicated-1 row does: "replicated" ignores annotations (model_axis only
# changes the data-parallel size, covered by replicated-1 and by the mlp's rows) and "tensor"
# on model_axis=1 splits over a mesh axis of size 1 (PartitionAxis.for_rule drops it: the
# transformer's heads unsplit, as under replicated). The mlp's rows keep those branches (a
# smaller data-parallel size; a split over a size-1 axis that leaves every parameter whole).
DEGENERATE = {("replicated", 2), ("replicated", 4), ("tensor", 1)}
# The fast subset (a quick check: under 3 minutes in all) runs two rows, the mlp's fsdp and tensor on (4, 2), where
# its parameters are split two ways; the rest complete the sweep in ``make test`` (@pytest.mark.slow).
def _in_fast_subset(name, rule, model_axis):
    return name == "mlp" and rule in ("fsdp", "tensor") and model_axis == 2


ROWS = [pytest.param(name, rule, model_axis,
                     marks=() if _in_fast_subset(name, rule, model_axis) else pytest.mark.slow)
        for name in ("mlp", "transformer", "flux1", "simformer") for rule, model_axis in CASES
        if name == "mlp" or (rule, model_axis) not in DEGENERATE]


@pytest.fixture(scope="module", autouse=True)
def no_cache_writes():
    """This module's compiles stay out of the session's persistent compilation cache (tests/conftest.py): each row's
    step, compiled with ``COMPILER_OPTIONS`` (part of the cache's key), is compiled once in the whole suite, so no
    process ever reads it back, and writing it (serialising, compressing and storing 0.7-2 MB) cost 4-5 % of its
    compile. Reads are left on; the setting is put back for the modules after this one."""
    name = "jax_persistent_cache_min_compile_time_secs"
    before = getattr(jax.config, name)
    jax.config.update(name, float("inf"))
    yield
    jax.config.update(name, before)


def table_of(rule):
    """The built-in's table, or the custom rule as the harness reads it from conf/rule/."""
    if rule in RULES:
        return dict(RULES[rule])
    name, table = rule_table(OmegaConf.load(CONF / "rule" / f"{rule}.yaml"))
    assert name == rule and name not in RULES
    return table


def batches():
    rng = np.random.default_rng(0)
    return [{"theta": rng.standard_normal((BATCH, DIM_THETA), dtype=np.float32),
             "x": rng.standard_normal((BATCH, DIM_X), dtype=np.float32)} for _ in range(STEPS)]


def on_host(value):
    """A device array as NumPy (a PRNG key as it is)."""
    return value if jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key) else np.asarray(value)


def place(node, mesh, rule):
    # From host memory: device_put slices NumPy arrays, where from one device it compiles a slicing program for each
    # new shape and sharding (about 1 s of a Flux1 row). The same values and placements; shard_model of arrays on a
    # device is tested in test_sharding.py and test_init.py.
    nnx.update(node, jax.tree.map(on_host, nnx.state(node)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalRuleWarning)
        if rule in RULES:
            shard_model(node, mesh, rule)
        else:
            shard_model_by_table(node, mesh, table_of(rule))


def train(name, mesh=None, rule=None):
    """``(losses (STEPS,), {path: final param})`` of AdamW from the seed-0 model."""
    model = TINY[name]()
    if mesh is not None:
        model.partition_axis = PartitionAxis.for_rule(table_of(rule), mesh)
    optimizer = nnx.Optimizer(model, optax.adamw(1e-3, weight_decay=1e-4), wrt=nnx.Param)
    if mesh is not None:
        place(model, mesh, rule)
        place(optimizer, mesh, rule)
    functions, state = make_step_functions(model, optimizer, mesh)
    key, losses = replicate(jax.random.key(0), mesh), []
    with mesh_context(mesh):
        data = [shard_batch(batch, mesh) for batch in batches()]
        step = functions.train_step.lower(state, data[0], key).compile(COMPILER_OPTIONS)
        for batch in data:
            state, loss = step(state, batch, key)
            losses.append(loss)
    trained, _ = nnx.merge(functions.graphdef, state)
    return np.asarray(losses), param_arrays(trained)


def param_arrays(model):
    return {"/".join(map(str, path)): var.get_value()
            for path, var in nnx.graph.iter_graph(model) if isinstance(var, nnx.Param)}


@cache
def unsharded(name):
    """The no-mesh run's losses and final parameters, and the initial parameters (as NumPy)."""
    losses, params = train(name)
    initial = param_arrays(TINY[name]())
    return losses, {k: np.asarray(v) for k, v in params.items()}, {k: np.asarray(v) for k, v in initial.items()}


def relative_difference(a, b):
    return float(np.max(np.abs(np.asarray(a) - b)) / max(np.max(np.abs(b)), 1e-30))


@pytest.mark.parametrize("name,rule,model_axis", ROWS)
def test_rule_trains_like_one_device(name, rule, model_axis):
    mesh = make_mesh(model_axis=model_axis)
    expected_losses, expected_params, initial = unsharded(name)
    losses, params = train(name, mesh, rule)

    splits = rule != "replicated" and not (rule == "tensor" and model_axis == 1)
    assert any(not p.sharding.is_fully_replicated for p in params.values()) == splits
    assert relative_difference(losses, expected_losses) <= TOL
    params = {k: v for k, v in params.items() if not k.endswith(NULL_GRADIENT.get(name, "\0"))}
    worst = max(params, key=lambda k: relative_difference(params[k], expected_params[k]))
    assert relative_difference(params[worst], expected_params[worst]) <= TOL, worst
    # Training moved the parameters by far more than the tolerance: the comparison has teeth. Measured over all
    # parameters at once (was: per leaf, where a zero-initialised bias divided by 1e-30 passed whatever happened).
    moved = max(np.max(np.abs(expected_params[k] - initial[k])) for k in initial)
    assert moved / max(np.max(np.abs(initial[k])) for k in initial) > 100 * TOL


@pytest.mark.slow
def test_null_gradient_parameters_do_not_change_the_loss():
    """Shifting Simformer's key biases far leaves the loss unchanged; shifting its query biases does not."""
    from gensbi_sharding.harness.train import flow_matching_loss

    graphdef, params, rest = nnx.split(TINY["simformer"](), nnx.Param, ...)
    batch = batches()[0]
    loss = jax.jit(lambda p: flow_matching_loss(nnx.merge(graphdef, p, rest), batch["theta"], batch["x"],
                                                jax.random.key(0))).lower(params).compile(COMPILER_OPTIONS)

    def shifted(suffix):  # same tree structure, so the jitted loss compiles once
        hits = []
        def shift(path, leaf):
            hit = jax.tree_util.keystr(path, simple=True, separator="/").endswith(suffix + "/value")
            hits.append(hit)
            return leaf + 3.0 if hit else leaf
        out = jax.tree_util.tree_map_with_path(shift, params)
        assert any(hits), suffix
        return out

    base = float(loss(params))
    assert abs(float(loss(shifted(NULL_GRADIENT["simformer"]))) - base) <= 1e-6 * base
    assert abs(float(loss(shifted("attn/query/bias"))) - base) > 1e-3 * base
