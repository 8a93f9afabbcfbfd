"""An optimizer state holding ``inf`` (a sentinel, a running max) is checkpointed and restored as it is; ``nan``
is still refused.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

import gensbi_sharding as gs
from gensbi_sharding.checkpoint import CheckpointWriter, abstract_state_for, committed_steps, restore
from gensbi_sharding.checkpoint_items import non_finite


@pytest.mark.slow  # ~0.6 s on 2 cores
def test_an_optimizer_holding_inf_as_a_sentinel_is_checkpointed_and_nan_still_refused(tmp_path, devices, monkeypatch):
    # Was: FloatingPointError "the train state at step 1 is not finite (1 array(s) hold NaN or inf, e.g.
    # 1/opt_state/1/best_value)" at every save: optax.contrib.reduce_on_plateau starts best_value at inf (optax.lbfgs
    # its value), so such an optimizer could never be checkpointed.
    mesh = gs.make_mesh(model_axis=2)
    build = lambda: nnx.Linear(8, 4, rngs=nnx.Rngs(0))  # noqa: E731
    tx = lambda: optax.chain(optax.adam(1e-3), optax.contrib.reduce_on_plateau())  # noqa: E731
    model = gs.init_sharded(build, mesh)
    optimizer = gs.init_optimizer_sharded(model, tx())
    assert float(optimizer.opt_state[1].best_value[...]) == np.inf
    with CheckpointWriter(tmp_path / "checkpoints") as writer:
        assert writer.save(1, (model, optimizer), jax.random.key(0))
        # NaN in the optimizer's state, or inf in the model's, is still refused, naming it.
        optimizer.opt_state[1].best_value[...] = jnp.nan
        with pytest.raises(FloatingPointError, match=r"step 2 is not finite \(1 array\(s\) hold NaN or inf, e\.g\. "
                                                     r"1/opt_state/1/best_value\)"):
            writer.save(2, (model, optimizer), jax.random.key(0))
        optimizer.opt_state[1].best_value[...] = jnp.inf
        model.bias[...] = model.bias[...].at[0].set(jnp.inf)
        with pytest.raises(FloatingPointError, match=r"step 2 is not finite \(1 array\(s\) hold NaN or inf, e\.g\. "
                                                     r"0/bias\)"):
            writer.save(2, (model, optimizer), jax.random.key(0))
        assert writer.steps() == [1]
    target = abstract_state_for(lambda: (build(), nnx.Optimizer(build(), tx(), wrt=nnx.Param)), mesh)
    restored = restore(tmp_path / "checkpoints", target)
    assert float(restored.state[1]["opt_state"][1]["best_value"][...]) == np.inf
    # The same on the compiled check of several processes (or accelerators): inf allowed where named, NaN nowhere.
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    flat = {"opt": jnp.array([np.inf, 1.0]), "param": jnp.array([np.inf, 1.0]), "nan": jnp.array([np.nan, 1.0])}
    assert non_finite(flat, {"opt", "nan"}) == ["param", "nan"]


class _RunningMax(NamedTuple):
    largest: dict  # the largest update seen per parameter: -inf before the first
    bound: jax.Array  # [inf, 1.0]: inf in an array that is not all inf


def _running_max() -> optax.GradientTransformation:
    def init(params):
        return _RunningMax(jax.tree.map(lambda p: jnp.full(p.shape, -jnp.inf, p.dtype), params),
                           jnp.array([jnp.inf, 1.0]))

    def update(updates, state, params=None):
        return updates, state._replace(largest=jax.tree.map(jnp.maximum, state.largest, updates))

    return optax.GradientTransformation(init, update)


@pytest.mark.slow
def test_an_optimizer_state_holding_inf_anywhere_is_saved_and_restored_as_is_in_every_form(tmp_path, devices):
    # Was: saved as nnx.state(optimizer) (OptState variables), yet as a plain dict (nnx.to_pure_dict) refused,
    # "the train state at step 2 is not finite (3 array(s) hold NaN or inf, e.g. opt/opt_state/1/bound, ...)".
    mesh = gs.make_mesh(model_axis=2)
    build = lambda: nnx.Linear(8, 4, rngs=nnx.Rngs(0))  # noqa: E731
    tx = lambda: optax.chain(optax.adam(1e-3), _running_max())  # noqa: E731
    model = gs.init_sharded(build, mesh)
    optimizer = gs.init_optimizer_sharded(model, tx())
    pure = lambda: {"model": nnx.to_pure_dict(nnx.state(model)),  # noqa: E731
                    "opt": nnx.to_pure_dict(nnx.state(optimizer))}
    with CheckpointWriter(tmp_path / "checkpoints", keep=3, async_save=False) as writer:
        assert writer.save(1, {"model": nnx.state(model), "opt": nnx.state(optimizer)}, jax.random.key(0))
        assert writer.save(2, pure(), jax.random.key(0))
        # NaN in the optimizer's state, or inf in the model's, is still refused in the plain form too.
        optimizer.opt_state[1].bound[...] = jnp.array([jnp.nan, 1.0])
        with pytest.raises(FloatingPointError, match=r"step 3 is not finite \(1 array\(s\) hold NaN or inf, e\.g\. "
                                                     r"opt/opt_state/1/bound\)"):
            writer.save(3, pure(), jax.random.key(0))
        optimizer.opt_state[1].bound[...] = jnp.array([jnp.inf, 1.0])
        model.bias[...] = model.bias[...].at[0].set(jnp.inf)
        with pytest.raises(FloatingPointError, match=r"step 3 is not finite \(1 array\(s\) hold NaN or inf, e\.g\. "
                                                     r"model/bias\)"):
            writer.save(3, pure(), jax.random.key(0))
        assert writer.steps() == [1, 2]
    target = abstract_state_for(lambda: {"model": build(), "opt": nnx.Optimizer(build(), tx(), wrt=nnx.Param)}, mesh)
    for step in (1, 2):
        state = restore(tmp_path / "checkpoints" / str(step), target).state["opt"]["opt_state"][1]
        assert np.all(np.asarray(state["largest"]["kernel"][...]) == -np.inf)
        assert np.asarray(state["bound"][...]).tolist() == [np.inf, 1.0]


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
