"""``resolve_mesh({'devices': ...})`` given ids as NumPy/JAX values: a 0-d array is refused by name, and a JAX array
of ids is read as ids, as a NumPy one already was.

Found by round 67's fuzzer: devices=np.array(4) or jnp.int32(4) raised NumPy's "TypeError: iteration over a 0-d
array", naming neither devices nor the fix; devices=jnp.arange(4) was refused with "devices must be jax.Device objects
(or ids, through resolve_mesh), got Array(0, dtype=int32)", advice the call had followed.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gensbi_sharding as gs


@pytest.mark.parametrize("ids", [np.array(4), jnp.int32(4)], ids=["numpy", "jax"])
def test_a_0d_array_of_devices_is_named_and_the_list_it_means_builds(devices, ids):
    with pytest.raises(ValueError, match=r"^mesh spec devices must be a list of device ids or jax\.Device objects, "
                                         r"got (array|Array)\(4"):
        gs.resolve_mesh({"devices": ids, "model_axis": 1})
    mesh = gs.resolve_mesh({"devices": [int(ids)], "model_axis": 1})
    assert [d.id for d in mesh.devices.flat] == [4]


@pytest.mark.parametrize("ids", [np.arange(4), jnp.arange(4), [jnp.int32(1), 2]], ids=["numpy", "jax", "mixed"])
def test_ids_held_as_array_values_are_read_as_ids(devices, ids):
    mesh = gs.resolve_mesh({"devices": ids, "model_axis": 2})
    assert [d.id for d in mesh.devices.flat] == [int(i) for i in ids]
    assert dict(mesh.shape) == {"data": len(ids) // 2, "model": 2}
    assert all(isinstance(d, jax.Device) for d in mesh.devices.flat)
