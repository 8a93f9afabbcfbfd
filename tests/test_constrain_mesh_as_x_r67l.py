"""``constrain`` given a mesh where the activation goes (arguments swapped): refused naming x, not Python's
"not all arguments converted during string formatting".

Found by round 67's fuzzer: a Mesh has a ``shape`` (a dict of axis sizes), so it passed as an array; its axis names
were then taken for dimension sizes (``'data' % 4``), a TypeError naming neither x nor the fix.
"""

import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AbstractMesh, AxisType, PartitionSpec as P

import gensbi_sharding as gs


@pytest.mark.parametrize("which", ["mesh", "abstract", "one_axis"])
def test_a_mesh_given_as_the_activation_is_refused_naming_x_and_the_fix_places(devices, which):
    mesh = gs.make_mesh(model_axis=2)
    x = {"mesh": mesh, "abstract": AbstractMesh((4, 2), ("data", "model"), axis_types=(AxisType.Auto,) * 2),
         "one_axis": gs.make_mesh(model_axis=1)}[which]
    with pytest.raises(TypeError, match=r"^constrain takes an array, got (Abstract)?Mesh .*; pass jnp\.asarray\(x\)$"):
        gs.constrain(x, ("batch", "heads"), gs.PartitionAxis(), mesh)
    placed = gs.constrain(jnp.asarray(np.arange(32.0).reshape(8, 4)), ("batch", "heads"), gs.PartitionAxis(), mesh)
    assert placed.sharding.spec == P("data", "model")
    np.testing.assert_array_equal(placed, np.arange(32.0).reshape(8, 4))
