"""The library broken with odd-but-valid input, round 49: an optimizer state holding inf outside the known sentinels
(a user's running max) refused once saved as a plain dict.

In-process, 8 simulated CPU devices (conftest); tiny arrays."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

import gensbi_sharding as gs
from gensbi_sharding.checkpoint import CheckpointWriter, abstract_state_for, restore


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
