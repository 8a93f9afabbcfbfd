"""The library broken with bad and odd-but-valid input, round 48: a malformed ``PartitionAxis`` (and a batch of
differing rows or strings) refused on a mesh but passed without one; ``None`` in ``host_to_global_array``'s
``partition`` read as a bare tree mismatch; an array offloaded to host memory put back in device memory by
``shard_model`` (a second call too).

In-process, 8 simulated CPU devices (conftest); tiny arrays."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec as P

import gensbi_sharding as gs
from gensbi_sharding.batch import check_batch_divisible


def _refusal(call):
    with pytest.raises((ValueError, TypeError)) as err:
        call()
    return type(err.value), str(err.value)


@pytest.mark.parametrize("partition_axis", [gs.PartitionAxis(batch_axis=3), gs.PartitionAxis(batch_axis=()),
                                            gs.PartitionAxis(batch_axis=("data", "data")),
                                            gs.PartitionAxis(head_axis=["model", 1])])
def test_a_malformed_partition_axis_is_refused_without_a_mesh_as_on_one(devices, partition_axis):
    # Was: constrain(x, names, PartitionAxis(batch_axis=3)) returned x without a mesh, and raised on one: a model
    # built and tested on one device failed only once run on a mesh.
    x = jnp.ones((8, 4))
    with gs.mesh_context(gs.make_mesh(model_axis=2)):
        on_mesh = _refusal(lambda: gs.constrain(x, ("batch", None), partition_axis))
    assert on_mesh[0] is ValueError
    assert _refusal(lambda: gs.constrain(x, ("batch", None), partition_axis)) == on_mesh
    assert _refusal(lambda: jax.jit(lambda y: gs.constrain(y, ("batch", None), partition_axis))(x)) == on_mesh
    # A well-formed one naming axes no mesh has yet is still no constraint without a mesh.
    assert gs.constrain(x, ("batch", None), gs.PartitionAxis(batch_axis=("data", "model"))) is x


@pytest.mark.parametrize("batch", [{"a": np.ones((8, 2)), "b": np.ones((6, 2))}, {"a": np.ones((8, 2)),
                                                                               "b": np.array(["x"] * 8)}])
def test_a_batch_refused_on_a_mesh_is_refused_without_one(devices, batch):
    # Was: shard_batch(batch, None) (and replicate, shard_sample_init, check_batch_divisible) returned without a word
    # for rows that differ or a leaf of strings, which the same call refuses on a mesh.
    mesh = gs.make_mesh(model_axis=1)
    for call in (gs.shard_batch, gs.shard_sample_init):
        assert _refusal(lambda: call(batch, None)) == _refusal(lambda: call(batch, mesh))
    if batch["b"].dtype.kind == "U":
        assert _refusal(lambda: gs.replicate(batch, None)) == _refusal(lambda: gs.replicate(batch, mesh))
    else:
        assert _refusal(lambda: check_batch_divisible(batch, None, "train")) == _refusal(
            lambda: check_batch_divisible(batch, mesh, "train"))
    good = {"a": np.ones((8, 2)), "b": np.ones((8, 3))}
    assert gs.shard_batch(good, None) is good and gs.replicate(good, None) is good
    check_batch_divisible(good, None, "train")


def test_none_in_a_partition_is_named_with_what_it_means_and_the_spec_to_give(devices):
    # Was: "partition tree PyTreeDef({'x': *, 'y': None}) does not match the host_arrays tree ...; give one
    # PartitionSpec per array": None, read by JAX as an empty subtree, was never named.
    mesh = gs.make_mesh(model_axis=1)
    batch = {"x": np.ones((8, 2), np.float32), "y": np.arange(8, dtype=np.float32)}
    with pytest.raises(ValueError) as err:
        gs.host_to_global_array(batch, partition={"x": P("data"), "y": None}, mesh=mesh)
    assert str(err.value) == (
        "partition tree PyTreeDef({'x': *, 'y': None}) does not match the host_arrays tree PyTreeDef({'x': *, 'y': *}); "
        "give one PartitionSpec per array (or per subtree); partition['y'] is None, which a pytree reads as no leaf, "
        "not as a spec: to replicate that array give PartitionSpec()")
    placed = gs.host_to_global_array(batch, partition={"x": P("data"), "y": P()}, mesh=mesh)  # the fix it names
    assert placed["y"].sharding.is_fully_replicated and placed["y"].tolist() == list(range(8))
    with pytest.raises(ValueError, match=r"; give one PartitionSpec per array \(or per subtree\); partition is None, "):
        gs.host_to_global_array(batch, partition=None, mesh=mesh)
    kept = gs.host_to_global_array({"x": batch["x"], "y": None}, partition={"x": P("data"), "y": None}, mesh=mesh)
    assert kept["y"] is None  # None where host_arrays has None too: the trees match, as before


class Annotated(nnx.Module):
    def __init__(self):
        self.kernel = nnx.Param(jnp.arange(32.0).reshape(8, 4), **gs.axes("embed", "mlp"))
        self.bias = nnx.Param(jnp.zeros((4,)), **gs.axes("mlp"))


@pytest.mark.parametrize("kind", ["pinned_host", "unpinned_host"])
def test_shard_model_keeps_an_array_offloaded_to_host_memory_there(devices, kind):
    # Was: a kernel offloaded to host memory (as MaxText offloads optimizer state) went back to device memory at the
    # next shard_model, under the same rule too (a new buffer, where a second call keeps the very same ones).
    mesh = gs.make_mesh(model_axis=2)
    model = Annotated()
    gs.shard_model(model, mesh, "replicated")
    offloaded = jax.device_put(model.kernel[...], model.kernel[...].sharding.with_memory_kind(kind))
    model.kernel.set_value(offloaded)
    gs.shard_model(model, mesh, "replicated")
    assert model.kernel.get_value() is offloaded
    with pytest.warns(gs.ExperimentalRuleWarning):
        gs.shard_model(model, mesh, "tensor")
    kernel, bias = model.kernel.get_value(), model.bias.get_value()
    assert kernel.sharding == NamedSharding(mesh, P(None, "model"), memory_kind=kind)  # moved, in its memory
    assert bias.sharding == NamedSharding(mesh, P("model"), memory_kind="device")  # the rest in the default memory
    np.testing.assert_array_equal(np.asarray(kernel), np.arange(32.0).reshape(8, 4))


def test_init_optimizer_sharded_takes_a_model_with_an_offloaded_variable_as_placed(devices):
    # Was: "rule 'tensor' places kernel at P(None, 'model'), but the model holds it at P(None, 'model')": a kernel
    # offloaded to host memory, placed as the rule places it, read as placed otherwise.
    import optax

    mesh = gs.make_mesh(model_axis=2)
    model = Annotated()
    with pytest.warns(gs.ExperimentalRuleWarning):
        gs.shard_model(model, mesh, "tensor")
    model.kernel.set_value(jax.device_put(model.kernel[...], model.kernel[...].sharding.with_memory_kind("pinned_host")))
    optimizer = gs.init_optimizer_sharded(model, optax.adam(1e-3), "tensor")
    assert optimizer.opt_state[0].mu["kernel"][...].sharding == NamedSharding(mesh, P(None, "model"))
    with pytest.raises(ValueError, match=r"rule 'fsdp' places bias at P\(None,\), but the model holds it at "
                                         r"P\('model',\); the model is placed as rule 'tensor' places it: pass "
                                         r"rule='tensor'"):  # placed otherwise: still refused, the rule that fits named
        gs.init_optimizer_sharded(model, optax.adam(1e-3), "fsdp")
