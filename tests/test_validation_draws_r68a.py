"""Validation draws go by held-out pair, not by a row's place in its batch (review of session 68).

Was: every held-out batch got the same key and ``flow_matching_loss`` drew (t, z) by row, so the loss of the same
weights on the same pairs changed with ``data.batch_size`` (a resume at another batch size compared its losses
with the checkpoint's best from other draws), and the batches of one validation shared their (t, z).
"""

import json
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from faults_helpers import compose_tiny, run_tiny
from gensbi_sharding.harness.pipeline import build_pipeline
from gensbi_sharding.harness.registry import get_model
from gensbi_sharding.harness.step_programs import flow_matching_loss
from gensbi_sharding.harness.train import make_step_functions
from gensbi_sharding.harness.validation import validation_loss


def _functions():
    model = get_model("mlp")(dim_theta=2, dim_x=2, rngs=nnx.Rngs(0), width=8, depth=1)
    return make_step_functions(model, nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param), None)


@pytest.mark.slow
@pytest.mark.parametrize("shards", [1, 2])
def test_the_validation_loss_of_the_same_weights_is_the_same_at_every_batch_size(shards):
    functions, state = _functions()
    losses = []
    for batch_size in (64, 32, 16):
        cfg = compose_tiny(f"data.batch_size={batch_size}")
        pipe = build_pipeline(cfg.data, seed=0, mesh=None, shards=shards)
        assert pipe.val_pairs == {1: 77, 2: 76}[shards] and len(pipe.val_batches) == {64: 2, 32: 3, 16: 5}[batch_size]
        losses.append(validation_loss(functions, state, pipe.val_batches, jax.random.key(0), draws=3))
    # Was 1.0594 at 64, 1.0732 at 32 (one shard): each batch size drew other (t, z) for the same pairs.
    assert losses[1] == pytest.approx(losses[0], rel=1e-6) and losses[2] == pytest.approx(losses[0], rel=1e-6)


@pytest.mark.slow
def test_a_held_out_pair_keeps_its_index_at_every_batch_size_and_shard_layout():
    def indexed(batch_size, shards):
        pipe = build_pipeline(compose_tiny(f"data.batch_size={batch_size}").data, seed=0, mesh=None, shards=shards)
        real = [b["weight"] == 1 for b in pipe.val_batches]
        index = np.concatenate([b["index"][w] for b, w in zip(pipe.val_batches, real)])
        theta = np.concatenate([b["theta"][w] for b, w in zip(pipe.val_batches, real)])
        return dict(zip(index.tolist(), map(tuple, theta.tolist())))

    two = indexed(64, 2)
    assert len(two) == 76 and two == indexed(16, 2)  # every pair its own index, the same in both layouts
    assert indexed(64, 1) == indexed(32, 1) and sorted(indexed(64, 1)) == list(range(77))


@pytest.mark.slow
def test_every_held_out_pair_of_every_batch_has_its_own_draw():
    seen = []

    def model(theta_t, x, t):
        seen.append(np.asarray(t))
        return jnp.zeros_like(theta_t)

    def eval_loss(state, b, k):  # the real loss, outside jit, as step_programs' eval_loss calls it
        return flow_matching_loss(model, b["theta"], b["x"], k, b["weight"], b["index"]), jnp.sum(b["weight"])

    rng = np.random.default_rng(0)
    batches = [dict(theta=rng.standard_normal((8, 2)).astype(np.float32), x=np.zeros((8, 3), np.float32),
                    weight=np.ones(8, np.float32)) for _ in range(4)]
    validation_loss(SimpleNamespace(eval_loss=eval_loss), None, batches, jax.random.key(0), draws=2)
    assert len(seen) == 8
    # Was: the 4 batches of a draw shared their 8 values of t (16 distinct over 32 pairs x 2 draws).
    assert len(np.unique(np.concatenate(seen))) == 64


@pytest.mark.slow
def test_one_padded_batch_without_an_index_draws_by_row_as_one_with_its_rows_as_index():
    # One batch (two_moons' default: 1,000 pairs in one batch of 1,024) is indexed by row: a pair's index is its row.
    functions, state = _functions()
    rng = np.random.default_rng(3)
    weight = np.concatenate([np.ones(50, np.float32), np.zeros(14, np.float32)])
    batch = {"theta": rng.standard_normal((64, 2)).astype(np.float32) * weight[:, None],
             "x": rng.standard_normal((64, 2)).astype(np.float32) * weight[:, None], "weight": weight}
    key = jax.random.key(5)
    got = validation_loss(functions, state, [batch], key, draws=2)
    stream = jax.random.fold_in(key, 0x7FFFFFFF)
    by_row = [float(functions.eval_loss(state, batch, k)[0]) for k in (stream, jax.random.fold_in(stream, 1))]
    assert got == pytest.approx(np.mean(by_row), rel=1e-6)
    assert float(functions.eval_loss(state, {**batch, "index": np.arange(64, dtype=np.int32)}, stream)[0]) \
        == float(functions.eval_loss(state, batch, stream)[0])


@pytest.mark.slow  # two end-to-end runs and a checkpoint read
def test_a_resume_at_another_batch_size_compares_its_losses_with_the_checkpoints_best(tmp_path):
    from gensbi_sharding.harness.resume import saved_statistics
    from gensbi_sharding.harness.rule_config import rule_table
    from gensbi_sharding.harness.state import build_state

    first = run_tiny(tmp_path / "a", "mesh=none", "data.batch_size=64", "train.val_every=4",
                     "train.checkpoint_every=4")
    step_dir = tmp_path / "a" / "checkpoints" / "8"
    cfg = compose_tiny("mesh=none", "data.batch_size=32")
    rule_name, table = rule_table(cfg.rule)
    pipe = build_pipeline(cfg.data, seed=cfg.seed, mesh=None, statistics=saved_statistics(step_dir))
    ts = build_state(cfg, dim_theta=pipe.sims.dim_theta, dim_x=pipe.sims.dim_x, mesh=None, rule_name=rule_name,
                     table=table, resume_dir=step_dir)
    functions, state = make_step_functions(ts.model, ts.optimizer, None, ema=ts.ema)
    again = validation_loss(functions, state, pipe.val_batches, ts.key, draws=cfg.train.val_draws)
    history = dict(first["val_history"])
    # The checkpoint's step-8 loss, at batch 64, is the loss of its weights at batch 32 (was: other draws).
    assert again == pytest.approx(history[8], rel=1e-5)
    resumed = run_tiny(tmp_path / "b", "mesh=none", "data.batch_size=32", "train.val_every=4",
                       "train.checkpoint_every=4", "train.steps=16", f"train.resume={tmp_path / 'a'}")
    assert resumed["resumed_from_step"] == 8
    every = dict(resumed["val_history"])
    assert every[4] == history[4] and every[8] == history[8]  # carried over: comparable with the new ones
    best_step = min(every, key=every.get)
    assert resumed["best_step"] == best_step and resumed["best_val_loss"] == every[best_step]
    assert json.loads((tmp_path / "b" / "metrics.json").read_text())["best_step"] == best_step


@pytest.mark.slow
def test_under_threefry_partitionable_off_the_loss_is_still_the_same_at_every_batch_size():
    # Was: a pair took element `index` of one draw of every held-out row, alike at any count only under the
    # partitionable threefry; with it off, 128 rows' draws (batch 64) and 80's (batch 16) gave a pair other (t, z):
    # 2.0771 at 64, 1.8442 at 16.
    functions, state = _functions()
    losses = []
    with jax.threefry_partitionable(False):
        for batch_size in (64, 16):
            pipe = build_pipeline(compose_tiny(f"data.batch_size={batch_size}").data, seed=0, mesh=None, shards=1)
            losses.append(validation_loss(functions, state, pipe.val_batches, jax.random.key(0), draws=2))
    assert losses[1] == pytest.approx(losses[0], rel=1e-6)


def _drawn_shapes(jaxpr):
    """The shapes of every random_bits draw in ``jaxpr`` and the programs inside it."""
    shapes = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "random_bits":
            shapes += [tuple(v.aval.shape) for v in eqn.outvars]
        for param in eqn.params.values():
            for inner in param if isinstance(param, (tuple, list)) else (param,):
                inner = getattr(inner, "jaxpr", inner)  # a closed program's own
                if hasattr(inner, "eqns"):
                    shapes += _drawn_shapes(inner)
    return shapes


@pytest.mark.slow
def test_a_held_out_batch_draws_only_its_own_rows():
    # Was: every batch drew (t, z) for all held-out rows (2 x 16 here; 10^6 simulations at batch 256 added 45 s per
    # validation) and kept its own 16.
    functions, state = _functions()
    shapes = []

    def eval_loss(state, b, k, *rows):  # records the real program's draws, then runs it
        shapes.extend(_drawn_shapes(jax.make_jaxpr(lambda s, bb, kk: functions.eval_loss(s, bb, kk, *rows))(
            state, b, k).jaxpr))
        return functions.eval_loss(state, b, k, *rows)

    rng = np.random.default_rng(1)
    batches = [dict(theta=rng.standard_normal((16, 2)).astype(np.float32),
                    x=rng.standard_normal((16, 2)).astype(np.float32), weight=np.ones(16, np.float32))
               for _ in range(2)]
    validation_loss(SimpleNamespace(eval_loss=eval_loss), state, batches, jax.random.key(0))
    assert sorted(set(shapes)) == [(16,), (16, 2)]  # t and z of the batch's 16 pairs, twice
