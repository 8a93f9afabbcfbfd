"""Meshes from odd specs (``make_mesh``, ``resolve_mesh``, ``mesh_init_simulate``): each refusal names the spec or
call that builds the mesh meant.

In-process, 8 simulated CPU devices (conftest).
"""

import jax
import numpy as np
import pytest

import gensbi_sharding as gs


@pytest.mark.parametrize("args, needle", [
    ((0, np.ones((5, 4)), float("inf"), 4), "features must be castable to int, got inf"),
    ((2**70, np.ones((5, 4)), 3, 4), f"seed={2**70} must fit in 64 bits")])
def test_mesh_init_simulate_names_a_number_out_of_range(args, needle):
    # Was OverflowError "cannot convert float infinity to integer" / "Python int too large to convert to C long".
    with pytest.raises(ValueError, match=needle):
        gs.mesh_init_simulate(*args)


def test_make_mesh_of_a_device_array_of_two_dimensions_names_both_fixes(devices):
    # Was "devices must be jax.Device objects (or ids, through resolve_mesh), got array([CpuDevice(id=0), ...])".
    grid = np.array(jax.devices()).reshape(4, 2)
    with pytest.raises(ValueError) as error:
        gs.make_mesh(grid, model_axis=2)
    assert str(error.value) == (
        "devices is an array of shape (4, 2); make_mesh takes them flat, in mesh order, and lays them out "
        "(len // model_axis, model_axis): pass list(devices.flat) with model_axis=2, or keep this layout: "
        "jax.sharding.Mesh(devices, ('data', 'model'))")
    mesh = gs.make_mesh(list(grid.flat), model_axis=2)  # the first fix: the very layout asked for
    assert mesh.devices.tolist() == grid.tolist() and mesh == jax.sharding.Mesh(grid, ("data", "model"))
    assert gs.make_mesh(np.array(jax.devices()[:4])).shape == {"data": 4, "model": 1}  # a flat array as before
