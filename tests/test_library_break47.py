"""The library broken with bad and odd-but-valid input, round 47: variables offloaded to host memory counted as
device bytes by ``describe``/``bytes_per_device``; an activation name entry that is no str (a list) failing
``constrain`` with "unhashable type".

In-process, 8 simulated CPU devices (conftest); tiny arrays."""

import re

import jax
import jax.numpy as jnp
import pytest
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec as P

import gensbi_sharding as gs


@pytest.mark.parametrize("kind", ["pinned_host", "unpinned_host"])
def test_describe_counts_no_device_bytes_for_a_variable_in_host_memory(devices, kind):
    # Was: a kernel offloaded to host memory (memory_kind "pinned_host", as MaxText offloads optimizer state) counted
    # on every device (64 B each: 320 B with the bias), its row "P('data', None)", as if it took device memory.
    mesh = gs.make_mesh(model_axis=2)
    model = nnx.Linear(8, 8, rngs=nnx.Rngs(0))  # kernel 256 B, bias 32 B
    gs.shard_model(model, mesh, "replicated")
    model.kernel.set_value(jax.device_put(model.kernel[...], NamedSharding(mesh, P("data", None), memory_kind=kind)))
    assert gs.bytes_per_device(model) == dict.fromkeys(range(8), 32)  # the bias only, on every device
    report = gs.describe(model, mesh)
    assert report.bytes_per_device == dict.fromkeys(range(8), 32)
    assert report.placements == {"bias": "P()", "kernel": f"P('data', None) in {kind}"}
    assert [(v.path, v.nbytes, v.max_device_bytes) for v in report.variables] == [("bias", 32, 32),
                                                                                 ("kernel", 256, 0)]
    assert f"P('data', None) in {kind}" in str(report)
    # A replicated variable in host memory costs no device its bytes: not among the largest replicated.
    model.bias.set_value(jax.device_put(model.bias[...], NamedSharding(mesh, P(), memory_kind=kind)))
    model.kernel.set_value(jax.device_put(model.kernel[...], NamedSharding(mesh, P("data", None))))
    report = gs.describe(model, mesh)
    assert report.largest_replicated == ()
    assert report.bytes_per_device == dict.fromkeys(range(8), 64)  # the kernel's quarter
    # An abstract state planned into host memory (a dry run of an offloaded state): no device bytes either.
    abstract = jax.ShapeDtypeStruct((8, 8), jnp.float32, sharding=NamedSharding(mesh, P(), memory_kind=kind))
    assert gs.bytes_per_device({"w": abstract}) == {}


@pytest.mark.parametrize("entry", [["batch"], ("batch", "heads"), {"batch"}, 0])
def test_constrain_names_an_activation_name_entry_that_is_no_str(devices, entry):
    # Was: TypeError "unhashable type: 'list'" (or 'set') from the names' lookup, naming neither the entry nor the fix,
    # on a mesh and without one; an int was already "unknown activation name 0".
    mesh, x = gs.make_mesh(model_axis=2), jnp.ones((8, 4))
    partition_axis = gs.PartitionAxis.for_rule("tensor", mesh)
    message = rf"^unknown activation name {re.escape(repr(entry))}; known names: batch, .* \(or None for an unsplit"
    for where in (mesh, None):
        with pytest.raises(ValueError, match=message):
            gs.constrain(x, (entry, None), partition_axis, where)
    with pytest.raises(ValueError, match=message):
        jax.jit(lambda y: gs.constrain(y, (entry, None), partition_axis, mesh))(x)
    assert gs.constrain(x, ("batch", None), partition_axis, mesh).sharding.spec == P("data", None)
