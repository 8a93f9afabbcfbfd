"""The library broken with bad and odd-but-valid input, round 45: arguments of another type given to
``partition_spec_for``, ``Plan.warn`` and a hand-built ``Plan``'s values; a Flax annotation that is no sequence;
``CheckpointWriter.save`` repeating its last step with a bad state or key; ``constrain`` without a mesh.

In-process, 8 simulated CPU devices (conftest); tiny arrays and models."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

import gensbi_sharding as gs
from gensbi_sharding.checkpoint import CheckpointWriter


@pytest.mark.parametrize("shape", [8, None, "8", (8.0,), (-8,), (True,)])
def test_partition_spec_for_names_a_shape_that_is_no_sequence_of_sizes(devices, shape):
    # Was: TypeError "object of type 'int' has no len()" (8, None), "not all arguments converted during string
    # formatting" ('8'), and (8.0,) or (-8,) planned as P('data') as if a size.
    mesh = gs.make_mesh(model_axis=2)
    with pytest.raises(TypeError, match=r"^shape=.* must be a sequence of sizes \(int >= 0\), e\.g\. \(8,\) or "
                                        r"value\.shape$"):
        gs.partition_spec_for(("embed",), shape, "fsdp", mesh)
    # The forms it takes: a tuple, a list, NumPy integers, a zero size.
    for good in [(8,), [8], (np.int64(8),)]:
        assert gs.partition_spec_for(("embed",), good, "fsdp", mesh) == (P("data"), None)
    assert gs.partition_spec_for(("embed",), (0,), "fsdp", mesh) == (P("data"), None)


@pytest.mark.parametrize("key", ["sharding_names", "out_sharding"])
def test_a_flax_annotation_no_sequence_is_a_fallback_naming_it_not_a_crash(devices, key):
    # Was: shard_model / plan_shardings raised TypeError "'int' object is not iterable" from logical_axes_of for
    # nnx.Linear(..., kernel_metadata={"sharding_names": 5}); an entry of the wrong type in a tuple was already a
    # fallback naming it, as is a bare int now.
    mesh = gs.make_mesh(model_axis=2)
    model = nnx.Linear(8, 16, kernel_metadata={key: 5, "eager_sharding": False}, rngs=nnx.Rngs(0))
    assert gs.logical_axes_of(model.kernel) == (5,)
    with pytest.warns(gs.ShardingFallbackWarning, match=r"kernel \(annotation entry 5 \(int\) is no logical axis "
                                                        r"name: give one str \(e\.g\. 'embed'\) or None per dimension"):
        gs.shard_model(model, mesh, "fsdp")
    assert gs.sharding_of(model)["kernel"].spec == P()
    assert gs.partition_spec_for(5, (8,), "fsdp", mesh)[0] == P()
