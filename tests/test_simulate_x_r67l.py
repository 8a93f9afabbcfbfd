"""``mesh_init_simulate``'s ``x`` that has no array shape (a mesh, a ragged list): refused naming x, not a KeyError
or NumPy's words.

Found by round 67's fuzzer: x=mesh raised "KeyError: -1" (a Mesh's shape is a dict of axis sizes), and a ragged list
NumPy's "setting an array element with a sequence ... inhomogeneous shape", neither naming x.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gensbi_sharding as gs


@pytest.mark.parametrize("x", ["mesh", "ragged"])
def test_an_x_without_an_array_shape_is_named_and_an_array_of_that_shape_works(devices, x):
    value = gs.make_mesh(model_axis=2) if x == "mesh" else [[1.0, 2.0], [3.0]]
    with pytest.raises(ValueError, match=r"^x must be array-like \(only its shape is read\), got (Mesh|list) .*; "
                                         r"pass e\.g\. x of shape \(batch, d_in\)$"):
        gs.mesh_init_simulate(0, value, 3, 4)
    np.testing.assert_array_equal(gs.mesh_init_simulate(0, np.ones((5, 2)), 3, 4), [3.0, 4.0, 2.0])


@pytest.mark.slow
def test_array_likes_keep_working(devices):
    for x in ([[1.0, 2.0]], jax.ShapeDtypeStruct((5, 4), jnp.float32), jnp.ones((2, 7))):
        np.testing.assert_array_equal(gs.mesh_init_simulate(1, x, 2, 8), [2.0, 8.0, 2.0])
