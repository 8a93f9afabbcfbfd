"""partition_specs and describe show a leaf's PartitionSpec alike (one formatter), whatever JAX's repr."""

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec as P

import gensbi_sharding as gs


class Two(nnx.Module):
    def __init__(self, mesh):
        self.bias = nnx.Param(jax.device_put(jnp.zeros(8), NamedSharding(mesh, P("data"))))
        self.kernel = nnx.Param(jax.device_put(jnp.zeros((2, 8)), NamedSharding(mesh, P(None, "data"))))


def test_partition_specs_show_a_one_axis_spec_as_describe_does():
    # Was: partition_specs gave str(spec), JAX's repr: "P('data',)" (and "PartitionSpec('data',)" in older JAX),
    # while describe showed "P('data')".
    mesh = gs.make_mesh(model_axis=1)
    model = Two(mesh)
    assert gs.partition_specs(model) == {"bias": "P('data')", "kernel": "P(None, 'data')"}
    assert gs.partition_specs(model) == gs.describe(model, mesh).placements
    assert gs.bytes_per_device(model) == {d.id: 4 * (1 + 2) for d in jax.devices()}  # 8 and 16 floats over 8
