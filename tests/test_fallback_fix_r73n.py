"""A size the mesh's axes do not divide: the fallback names only sizes this mesh's axes make (r73n)."""

import jax.numpy as jnp
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

import gensbi_sharding as gs


def test_a_fallback_on_a_mesh_whose_axes_make_no_fitting_size_names_the_mesh_that_would(devices):
    # Was (Simformer under rule=fsdp on 8 devices): "...; map 'embed' to None or to mesh axes of total size 2": the
    # (8, 1) mesh's axes make sizes 1 and 8 only, so that advice named a mesh axis that cannot exist.
    model = nnx.Module()
    model.w = nnx.Param(jnp.ones((90, 4)), **gs.axes("embed", None))
    plan = gs.plan_shardings(model, gs.make_mesh(model_axis=1), "fsdp")
    assert plan.fallbacks == {"w": "size 90 of logical axis 'embed' is not divisible by mesh axis 'data' of size 8; "
                                   "map 'embed' to None, or annotate this dimension None, or use a mesh with an "
                                   "axis of size 2 (here: data=8, model=1)"}


@pytest.mark.parametrize("size, said", [
    (6, "; map 'embed' to None or to mesh axes of total size 2, or annotate this dimension None"),  # 'model' makes 2
    (12, "; map 'embed' to None or to mesh axes of total size 2 or 4, or annotate this dimension None"),
    (7, "; map 'embed' to None, or annotate this dimension None"),  # no mesh of 8 devices splits 7: nothing more said
])
def test_a_fallback_names_the_sizes_the_mesh_axes_make(devices, size, said):
    mesh = gs.make_mesh(model_axis=2)  # {'data': 4, 'model': 2}: its axes make sizes 2, 4 and 8
    assert gs.partition_spec_for(("embed",), (size,), {"embed": ("data", "model")}, mesh) == (
        P(), f"size {size} of logical axis 'embed' is not divisible by mesh axis ('data', 'model') of size 8{said}")
