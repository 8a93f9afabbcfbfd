"""model.dtype=bfloat16 and model.init=sharded for GenSBI's models at the tasks' own sizes (MODELS71B, r71n).

No fault was found here (docs/gensbi_models.md#precision): these pin what was checked, so a GenSBI upgrade or a
wrapper change that leaves bfloat16 in the weights, the output or the gradients, breaks a task's dims, or makes
sharded initialisation draw other values than the eager build, fails here rather than in a run.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from omegaconf import OmegaConf

pytest.importorskip("gensbi")

import gensbi_sharding as gs  # noqa: E402
from flax import nnx  # noqa: E402
from gensbi_sharding.harness.state import builder  # noqa: E402

pytestmark = pytest.mark.slow  # builds GenSBI models: seconds each on 2 cores

#: Small sizes of the presets' kinds (the presets' own differ only in depth and width).
FLUX1 = dict(name="flux1", init="eager", mlp_ratio=2.0, num_heads=2, depth=1, depth_single_blocks=1, qkv_bias=True,
             axes_dim=[4, 0], val_emb_dim=None, id_emb_dim=None, id_merge_mode="sum", theta=None,
             id_embedding_strategy=["absolute", "absolute"], param_dtype="float32", dtype="bfloat16")
SIMFORMER = dict(name="simformer", init="eager", val_emb_dim=8, id_emb_dim=8, cond_emb_dim=4, num_heads=2, depth=1,
                 num_hidden_layers=1, fourier_features=16, mlp_ratio=2, qkv_features=8, param_dtype="float32",
                 dtype="bfloat16")
TRAIN = dict(learning_rate=1e-3, weight_decay=0.0, steps=20, schedule="constant", warmup_steps=0)


def _build(model: dict, dims: tuple[int, int], **changes):
    cfg = OmegaConf.create({"model": {**model, **changes}, "seed": 0, "train": TRAIN})
    return builder(cfg, dim_theta=dims[0], dim_x=dims[1], partition_axis=None)


@pytest.mark.parametrize("model", [FLUX1, SIMFORMER], ids=["flux1", "simformer"])
# One task's sizes (all eight built and passed when checked): lotka_volterra's, the most x dims of the tasks checked
@pytest.mark.parametrize("dims", [(4, 20)], ids=["lotka_volterra"])
def test_bfloat16_compute_keeps_float32_weights_output_and_gradients(model, dims):
    theta = jax.random.normal(jax.random.key(1), (8, dims[0]))
    x = jax.random.normal(jax.random.key(2), (8, dims[1]))
    t = jax.random.uniform(jax.random.key(3), (8,))
    outs = {}
    for dtype in ("float32", "bfloat16"):
        net, _ = _build(model, dims, dtype=dtype)()
        # Jitted, as a run's train step is: run eagerly, op by op, the Flux1 case took 57 CPU-seconds, jitted 32. The
        # output is the step's own forward pass (its aux): a second, eager call compiled each of its ops again.
        def loss_and_output(m):
            output = m(theta, x, t)
            return jnp.mean((output - theta) ** 2), output

        (loss, output), grads = nnx.jit(nnx.value_and_grad(loss_and_output, has_aux=True))(net)
        outs[dtype] = np.asarray(output)
        assert outs[dtype].dtype == np.float32 and outs[dtype].shape == (8, dims[0])
        assert np.isfinite(float(loss)) and loss.dtype == jnp.float32
        assert {str(p.dtype) for p in jax.tree_util.tree_leaves(nnx.state(net, nnx.Param))} == {"float32"}
        leaves = jax.tree_util.tree_leaves(grads)
        assert {str(g.dtype) for g in leaves} == {"float32"}
        assert all(bool(jnp.all(jnp.isfinite(g))) for g in leaves)
    # The same weights computed at 8 bits of mantissa: close, not equal (measured up to 0.6 % of the output's scale)
    scale = np.max(np.abs(outs["float32"]))
    assert 0 < np.max(np.abs(outs["float32"] - outs["bfloat16"])) < 0.05 * scale


@pytest.mark.parametrize("model", [FLUX1, SIMFORMER], ids=["flux1", "simformer"])
@pytest.mark.parametrize("rule,model_axis", [("tensor", 4)])  # fsdp's sharded init: test_gensbi_models.py
def test_sharded_init_draws_the_eager_values(model, rule, model_axis):
    build = _build(model, (5, 8))
    eager, _ = build()
    sharded, _ = gs.init_sharded(build, gs.make_mesh(model_axis=model_axis), rule, warn=False)
    a = jax.tree_util.tree_leaves(nnx.state(eager, nnx.Param))
    b = jax.tree_util.tree_leaves(nnx.state(sharded, nnx.Param))
    assert len(a) == len(b) > 0
    for x, y in zip(a, b):
        assert y.dtype == x.dtype == jnp.float32
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    # No full copy on a device: the first device holds less than the whole model under either rule.
    on_first = sum(s.data.size for y in b for s in y.addressable_shards if s.device == jax.devices()[0])
    assert on_first < sum(y.size for y in b)
