"""A mesh spec's devices given as rows (a 2-D layout, as ``jax.sharding.Mesh`` takes them) are refused naming the flat
list and model_axis that build that layout (round 67's review: ``resolve_mesh({"devices": np.arange(4).reshape(2,
2)})`` said "devices must be jax.Device objects (or ids, through resolve_mesh), got array([0, 1])", though ids were
passed through resolve_mesh)."""

import ast
import re

import jax
import numpy as np
import pytest

import gensbi_sharding as gs


@pytest.mark.parametrize("rows", [np.arange(4).reshape(2, 2), [[0, 1], [2, 3]],
                                  np.array(jax.devices()[:4], dtype=object).reshape(2, 2)],
                         ids=["ids array", "ids lists", "devices array"])
def test_rows_of_devices_are_refused_with_the_flat_spec_that_builds_them(devices, rows):
    with pytest.raises(ValueError, match=r"^mesh spec devices must be a flat list in mesh order") as refused:
        gs.resolve_mesh({"devices": rows})
    message = str(refused.value)
    assert len(message.splitlines()) == 1
    spec = ast.literal_eval(re.search(r"pass (\{.*\})$", message).group(1))
    assert spec == {"devices": [0, 1, 2, 3], "model_axis": 2}
    mesh = gs.resolve_mesh(spec)  # the advice, followed: the same layout
    assert [[d.id for d in row] for row in mesh.devices] == [[0, 1], [2, 3]]
