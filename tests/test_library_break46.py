"""The library broken with bad and odd-but-valid input, round 46: a shape given as an array of sizes, row counts
given as NumPy integers or 0-d arrays, a batch leaf whose rows the mesh cannot split (named by its path, in jit
and out), a NumPy batch placed inside ``jax.jit``, a ``ref=True`` variable read inside ``mesh_context`` before it is
placed.

In-process, 8 simulated CPU devices (conftest); tiny arrays."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import AxisType, PartitionSpec as P

import gensbi_sharding as gs
from gensbi_sharding.checkpoint import CheckpointWriter, abstract_state_for, restore


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


def test_pad_for_mesh_returns_ints_and_names_the_fix_for_a_0d_count(devices):
    mesh = gs.make_mesh(model_axis=2)
    # Was (np.int64(12), np.int64(10)): json.dumps of them raised TypeError.
    padded = gs.pad_for_mesh(np.int64(10), mesh)
    assert padded == (12, 10) and all(type(n) is int for n in padded)
    # Was "got an array of shape (); pass n.shape[0]", which a 0-d array has not.
    for count in (np.array(10), jnp.array(10)):
        with pytest.raises(ValueError, match=r"got ([Aa]rray)\(10.*; pass int\(n\)$"):
            gs.pad_for_mesh(count, mesh)
    with pytest.raises(ValueError, match=r"got an array of shape \(10, 2\); pass n\.shape\[0\]$"):
        gs.pad_for_mesh(np.ones((10, 2)), mesh)


@pytest.mark.parametrize("where", ["outside", "jit"])
@pytest.mark.parametrize("other", [2.0, np.float32(2.0), np.array(2.0), jnp.array(2.0)],
                         ids=["python", "numpy-scalar", "numpy-0d", "jax-0d"])
def test_a_batch_leaf_the_mesh_cannot_split_is_named_by_its_path_in_jit_and_out(devices, where, other):
    # Was "batch leaf of shape (6, 3) has leading size 6": which leaf of the batch, it did not say.
    mesh = gs.make_mesh(model_axis=2)
    batch = {"scale": other, "theta": jnp.ones((6, 3))}
    place = (lambda b: gs.shard_batch(b, mesh)) if where == "outside" else jax.jit(lambda b: gs.shard_batch(b, mesh))
    with pytest.raises(ValueError, match=r"^batch leaf \['theta'\] \(shape \(6, 3\)\) has leading size 6, not "
                                         r"divisible by the data-parallel size 4; use 4 or 8 rows \(pad_for_mesh"):
        place(batch)
    placed = place({"scale": other, "theta": jnp.ones((8, 3))})
    assert placed["theta"].sharding.spec == P("data") and float(placed["scale"]) == 2.0


def test_a_numpy_batch_placed_inside_jit_is_split_over_the_batch_axes(devices):
    # Was P(): inside jax.jit device_put placed nothing on Auto axes, and the batch stayed whole on every device.
    mesh = gs.make_mesh(model_axis=2)
    x = np.arange(24.0).reshape(8, 3)
    for place in (gs.shard_batch, gs.shard_sample_init):
        out = jax.jit(lambda: place({"x": x, "n": np.array(3)}, mesh))()
        assert out["x"].sharding.spec == P("data") and out["n"].sharding.spec == P()
        np.testing.assert_array_equal(out["x"], x)
        assert {shard.data.shape for shard in out["x"].addressable_shards} == {(2, 3)}
    # On an Explicit mesh it was, and is, placed by device_put, with or without the mesh set.
    explicit = jax.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Explicit,) * 2)
    out = jax.jit(lambda: gs.shard_batch({"x": x}, explicit))()
    assert out["x"].sharding.spec == P("data", None)
    # replicate leaves it whole, as it did.
    assert jax.jit(lambda: gs.replicate({"x": x}, mesh))()["x"].sharding.is_fully_replicated
    # Inside jax.shard_map, refused as a traced batch is (the pin would have raised JAX's "contains a manual axes").
    blocks = jax.shard_map(lambda b: b + gs.shard_batch({"x": x}, mesh)["x"][:2], mesh=mesh, in_specs=P("data"),
                           out_specs=P("data"))
    with pytest.raises(ValueError, match=r"^batch inside jax\.shard_map: each array there is one device's block"):
        jax.jit(blocks)(jnp.ones((8, 3)))


class WithRef(nnx.Module):
    def __init__(self, rngs):
        self.up = nnx.Linear(4, 8, rngs=rngs, kernel_metadata=gs.axes("embed", "mlp"))
        self.scale = nnx.Param(jnp.arange(8.0), ref=True, **gs.axes("embed"))


def test_a_ref_variable_not_yet_placed_is_read_inside_mesh_context(devices, tmp_path):
    # Was: JAX's "Received incompatible devices for jitted computation ... get with shape Ref{float32[8]}" from
    # plan_shardings, shard_model, describe, sharding_of, partition_specs, abstract_state_for, CheckpointWriter.save
    # and init_optimizer_sharded: Flax reads a ref with a jitted program, which the mesh set refused (device 0 only).
    mesh = gs.make_mesh(model_axis=2)
    model = WithRef(nnx.Rngs(0))
    with gs.mesh_context(mesh):
        assert gs.plan_shardings(model, mesh, "fsdp").specs["scale"] == P("data")
        assert gs.describe(model, mesh).n_leaves == 3 and gs.partition_specs(model)["scale"] == "host"  # one device
        assert gs.sharding_of(model)["scale"].device_set == {jax.devices()[0]}
        assert type(gs.init_optimizer_sharded(model, optax.adam(1e-3))) is nnx.Optimizer  # no mesh yet: a plain one
        with CheckpointWriter(tmp_path / "unplaced") as writer:
            assert writer.save(1, nnx.state(model), jax.random.key(0))
        gs.shard_model(model, mesh, "fsdp")
        assert model.scale.get_raw_value().sharding.spec == P("data")
        np.testing.assert_array_equal(model.scale[...], np.arange(8.0))
        target = abstract_state_for(WithRef(nnx.Rngs(1)), mesh, "fsdp")
        restored = restore(tmp_path / "unplaced", target).state
    np.testing.assert_array_equal(restored["scale"].get_value(), np.arange(8.0))
    assert restored["scale"].get_value().sharding.spec == P("data")


class _HijaxModel(nnx.Module):
    def __init__(self):
        self.w = nnx.Param(jnp.ones((16, 8)), hijax=True, **gs.axes("embed", "mlp"))


@pytest.mark.parametrize("place", ["replicate", "shard_batch", "host_to_global_array"])
def test_the_state_of_a_hijax_model_given_as_a_batch_names_shard_model_not_np_asarray(place):
    # Was: "batch leaf ['w'] is a HijaxVariable, an array-like that is no array: pass np.asarray(it) (a torch tensor:
    # .numpy())", advice that drops the variable; nnx.state of a hijax model holds Variables, not arrays.
    model = _HijaxModel()
    mesh = gs.make_mesh(model_axis=2)
    with pytest.raises(TypeError) as err:
        if place == "host_to_global_array":
            gs.host_to_global_array(nnx.state(model), mesh=mesh)
        else:
            getattr(gs, place)(nnx.state(model), mesh)
    message = str(err.value)
    assert "['w'] is an NNX HijaxVariable, which this would copy" in message and "np.asarray" not in message
    assert message.endswith("shard_model(node, mesh, rule) (rule 'replicated': whole on every device)")
    gs.shard_model(model, mesh, "tensor")  # the fix named works
    assert model.w.hijax and model.w[...].sharding.spec == P(None, "model")
