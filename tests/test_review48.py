"""Round 48's review: last round's fixes broken where they covered one instance of their kind.

In-process, 8 simulated CPU devices (conftest); tiny arrays."""

import jax
import jax.numpy as jnp
import optax
import pytest
from flax import nnx

import gensbi_sharding as gs
from gensbi_sharding.checkpoint import CheckpointWriter, committed_steps


def test_an_optimizers_inf_sentinel_is_checkpointed_in_a_mapping_of_states(tmp_path, devices):
    # Was: saved as a node or one nnx.State, yet refused as {"model": nnx.state(model), "opt": nnx.state(optimizer)}
    # (a mapping of states, a form save takes): "not finite (... e.g. opt/opt_state/1/best_value)".
    mesh = gs.make_mesh(model_axis=2)
    model = gs.init_sharded(lambda: nnx.Linear(8, 4, rngs=nnx.Rngs(0)), mesh)
    optimizer = gs.init_optimizer_sharded(model, optax.chain(optax.adam(1e-3), optax.contrib.reduce_on_plateau()))
    with CheckpointWriter(tmp_path / "checkpoints", async_save=False) as writer:
        assert writer.save(1, {"model": nnx.state(model), "opt": nnx.state(optimizer)}, jax.random.key(0))
        optimizer.opt_state[1].best_value[...] = jnp.nan  # NaN in it, or inf in the model, still refused
        with pytest.raises(FloatingPointError, match=r"e\.g\. opt/opt_state/1/best_value\)"):
            writer.save(2, {"model": nnx.state(model), "opt": nnx.state(optimizer)}, jax.random.key(0))
        optimizer.opt_state[1].best_value[...] = jnp.inf
        model.bias[...] = model.bias[...].at[0].set(jnp.inf)
        with pytest.raises(FloatingPointError, match=r"e\.g\. model/bias\)"):
            writer.save(2, {"model": nnx.state(model), "opt": nnx.state(optimizer)}, jax.random.key(0))
    assert committed_steps(tmp_path / "checkpoints") == [1]
