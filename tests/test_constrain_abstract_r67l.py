"""``constrain`` given an abstract activation (``jax.ShapeDtypeStruct``, a dry run's) outside jit: it takes the
sharding, as ``shard_batch`` gives an abstract batch its own, and lowers split.

Found by round 67's fuzzer: it raised JAX's "InvalidInputException: Argument of type <class
'jax.ShapeDtypeStruct'> is not a valid JAX type" from jax.device_put, naming neither x nor constrain.
"""

import warnings

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import gensbi_sharding as gs


@pytest.mark.parametrize("how", ["argument", "mesh_context"])
def test_an_abstract_activation_takes_the_sharding_and_lowers_split(devices, how):
    mesh = gs.make_mesh(model_axis=2)
    x = jax.ShapeDtypeStruct((8, 4), jnp.float32)
    if how == "argument":
        pinned = gs.constrain(x, ("batch", "heads"), gs.PartitionAxis(), mesh)
    else:
        with gs.mesh_context(mesh):
            pinned = gs.constrain(x, ("batch", "heads"), gs.PartitionAxis())
    assert (pinned.shape, pinned.dtype) == ((8, 4), jnp.float32)
    assert pinned.sharding == NamedSharding(mesh, P("data", "model"))
    lowered = jax.jit(lambda a: a * 2).lower(pinned).compile()
    assert lowered.input_shardings[0][0].spec == P("data", "model")


def test_an_abstract_activation_the_mesh_cannot_split_is_warned_and_left_unsplit_there(devices):
    mesh = gs.make_mesh(model_axis=2)
    with pytest.warns(gs.ShardingFallbackWarning, match=r"batch \(size 7 is not divisible by mesh axes \('data',\)"):
        pinned = gs.constrain(jax.ShapeDtypeStruct((7, 4), jnp.float32), ("batch", "heads"), gs.PartitionAxis(), mesh)
    assert pinned.sharding == NamedSharding(mesh, P(None, "model"))


def test_an_abstract_activation_without_a_mesh_comes_back_as_it_is(devices):
    x = jax.ShapeDtypeStruct((8, 4), jnp.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert gs.constrain(x, ("batch", "heads"), gs.PartitionAxis()) is x
