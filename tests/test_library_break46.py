"""The library broken with bad and odd-but-valid input, round 46: a shape given as an array of sizes.

In-process, 8 simulated CPU devices (conftest); tiny arrays."""

import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import gensbi_sharding as gs


@pytest.mark.parametrize("shape", [np.array((8, 16)), np.array((8, 16), dtype=np.int32), jnp.array((8, 16)),
                                   (np.int64(8), np.uint8(16))], ids=["int64", "int32", "jax", "numpy-ints"])
def test_partition_spec_for_takes_the_sizes_of_an_integer_array(devices, shape):
    # Was: TypeError "shape=array([ 8, 16]) must be a sequence of sizes", though np.array(x.shape) holds sizes.
    mesh = gs.make_mesh(model_axis=2)
    assert gs.partition_spec_for(("embed", "mlp"), shape, "fsdp", mesh) == (P("data", None), None)
    assert gs.partition_spec_for(("embed", "mlp"), shape, "tensor", mesh) == (P(None, "model"), None)
    # The sizes are read, not the array: one the mesh cannot split falls back, naming the size.
    assert gs.partition_spec_for(("embed",), np.array([6]), "fsdp", mesh) == (
        P(), "size 6 of logical axis 'embed' is not divisible by mesh axis 'data' of size 4")


@pytest.mark.parametrize("shape", [np.array((8.0, 16.0)), np.array((True, True)), np.array((-8, 16)),
                                   np.ones((2, 2), dtype=int), np.array(8)])
def test_partition_spec_for_still_refuses_an_array_of_no_sizes(devices, shape):
    with pytest.raises(TypeError, match=r"(?s)^shape=.* must be a sequence of sizes \(int >= 0\), e\.g\. \(8,\) or "
                                        r"value\.shape$"):
        gs.partition_spec_for(("embed", "mlp"), shape, "fsdp", gs.make_mesh(model_axis=2))
