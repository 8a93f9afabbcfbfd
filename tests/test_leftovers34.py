"""Round 34's leftovers: each fault, as a test that failed on the code before its fix."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from gensbi_sharding import abstract_sharded, init_sharded, make_mesh, replicate, shard_batch


def _lazy_model(place):
    """A constructor running a sample forward pass on a batch it places itself (``place(array, mesh)``)."""
    mesh = make_mesh()

    class Lazy(nnx.Module):
        def __init__(self, rngs):
            self.linear = nnx.Linear(4, 4, rngs=rngs)
            x = place(np.ones((8, 4), np.float32), mesh)
            self.mean = nnx.BatchStat(self.linear(x).mean(0))

    return lambda: Lazy(nnx.Rngs(0)), mesh


@pytest.mark.parametrize("place", [shard_batch, replicate], ids=["shard_batch", "replicate"])
@pytest.mark.parametrize("init", [init_sharded, abstract_sharded], ids=["init_sharded", "abstract_sharded"])
def test_placing_inside_a_traced_constructor_names_the_cause_and_fix(place, init):
    # Was: JAX's bare "Received incompatible devices for jitted computation" (abstract_sharded: no error, its dry
    # run passing what the real init then failed on).
    factory, mesh = _lazy_model(place)
    with pytest.raises(ValueError, match=rf"{place.__name__} called inside the model's constructor while "
                       rf"{init.__name__} traces it.*unplaced inside the factory.*shard_model\(factory\(\), mesh"):
        init(factory, mesh)


def test_placing_outside_a_traced_constructor_still_places():
    # The refusal holds only while a sharded init traces the constructor: afterwards shard_batch places again.
    factory, mesh = _lazy_model(shard_batch)
    with pytest.raises(ValueError):
        init_sharded(factory, mesh)
    batch = shard_batch(np.ones((8, 4), np.float32), mesh)
    assert batch.sharding.spec == jax.sharding.PartitionSpec(("data",)) and len(batch.sharding.device_set) == 8
    model = factory()  # eager construction: placing its sample batch works
    np.testing.assert_allclose(np.asarray(model.mean.get_value()).shape, (4,))


@pytest.mark.parametrize("jit", [jax.jit, nnx.jit], ids=["jax.jit", "nnx.jit"])
def test_init_sharded_inside_jit_is_refused_naming_it_and_the_fix(jit):
    # Was: JAX's "`set_mesh` can only be used outside of `jax.jit`", naming neither init_sharded nor the fix.
    mesh = make_mesh()

    @jit
    def step(x):
        with warnings.catch_warnings(action="ignore"):
            init_sharded(lambda: nnx.Linear(4, 4, rngs=nnx.Rngs(0)), mesh)
        return x

    with pytest.raises(ValueError, match=r"init_sharded was called inside jax.jit.*call it outside"):
        step(jnp.ones(()))


def test_init_sharded_inside_jit_without_mesh_still_builds():
    # mesh=None builds eagerly (no program of its own): inside jit that stays allowed.
    out = jax.jit(lambda x: init_sharded(lambda: nnx.Linear(2, 3, rngs=nnx.Rngs(0)), None).kernel.get_value() + x)
    assert out(jnp.zeros(())).shape == (2, 3)

