"""The library broken from a user's own training script, round 34: activations constrained inside ``shard_map``.

In-process, 8 simulated CPU devices (conftest); tiny arrays and models."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import gensbi_sharding as gs


@pytest.mark.parametrize("manual", [None, {"data"}])
def test_constrain_inside_shard_map_leaves_its_manual_axes_and_pins_the_rest(manual):
    # Inside shard_map x is one device's block, already split over the Manual axes: constraining it over them
    # raised "can only refer to Auto axes", and a block too small for them warned of a fallback that was none.
    mesh = gs.make_mesh(model_axis=2)
    pa = gs.PartitionAxis(hidden_state_axis="model") if manual else gs.PartitionAxis.for_rule("tensor", mesh)
    x = jnp.arange(32 * 4 * 6, dtype=jnp.float32).reshape(32, 4, 6)

    def body(block, mesh_arg=None):
        return gs.constrain(block, ("batch", None, "hidden"), pa, mesh_arg) * 2

    kwargs = {} if manual is None else {"axis_names": manual}
    for fn in (body, lambda b: body(b, mesh), lambda b: body(b[:1], mesh)):
        mapped = jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=P("data"), out_specs=P("data"), **kwargs))
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no fallback: nothing was left unsplit that could be split
            with gs.mesh_context(mesh):
                out = mapped(x)
        rows = out.shape[0]  # 32, or 4 where each block kept one row
        expected = 2 * np.asarray(x).reshape(4, -1, 4, 6)[:, :rows // 4].reshape(rows, 4, 6)
        np.testing.assert_array_equal(np.asarray(out), expected)
        if manual:  # the Auto axis "model" still pins the hidden dimension
            assert out.sharding.spec == P("data", None, "model")


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn", "int4"])
def test_a_numpy_batch_of_jax_narrow_dtypes_is_placed_as_it_holds(dtype):
    # np.asarray of a bfloat16 jax.Array (or a dataset stored so) is an ml_dtypes array, of NumPy kind "V": it was
    # refused as a dtype "which no JAX array holds".
    mesh = gs.make_mesh(model_axis=2)
    host = np.arange(8 * 3).reshape(8, 3).astype(jnp.dtype(dtype))
    for placed in (gs.shard_batch({"x": host}, mesh)["x"], gs.replicate({"x": host}, mesh)["x"],
                   gs.host_to_global_array({"x": host}, mesh=mesh)["x"]):
        assert placed.dtype == host.dtype
        np.testing.assert_array_equal(np.asarray(placed).astype(np.float32), host.astype(np.float32))
    with pytest.raises(TypeError, match="which no JAX array holds"):  # a structured (void) dtype still is refused
        gs.shard_batch({"x": np.zeros(8, dtype=[("a", np.int32)])}, mesh)


def test_a_state_donated_to_a_step_is_named_by_save_and_shard_model_and_nothing_is_written(tmp_path):
    # A script that donates its state (jax.jit(step, donate_argnums=0)) and then saves or places the old one got JAX's
    # "Array has been deleted with shape=float32[4]": no variable named, no fix; now both name it and the fix.
    from flax import nnx

    from gensbi_sharding.checkpoint import CheckpointWriter

    mesh = gs.make_mesh(model_axis=2)
    model = gs.init_sharded(lambda: nnx.Linear(8, 4, rngs=nnx.Rngs(0)), mesh, "fsdp")
    graphdef, state = nnx.split(model)
    new = jax.jit(lambda s: jax.tree.map(lambda a: a * 0.5, s), donate_argnums=0)(state)
    with CheckpointWriter(tmp_path / "ckpt") as writer:
        with pytest.raises(RuntimeError, match=r"CheckpointWriter.save: bias \(shape \(4,\)\) was deleted: donated"):
            writer.save(1, state, jax.random.key(0))
        assert writer.steps() == []
        assert writer.save(1, new, jax.random.key(0))  # the state the step returned saves
    with pytest.raises(RuntimeError, match=r"shard_model: bias \(shape \(4,\)\) was deleted.*state = step\(state\)"):
        gs.shard_model(model, mesh, "tensor")
    x = jnp.ones((8, 3))
    x.delete()
    with pytest.raises(RuntimeError, match=r"batch leaf \['x'\] \(shape \(8, 3\)\) was deleted"):
        gs.shard_batch({"x": x}, mesh)
    with pytest.raises(RuntimeError, match=r"host_arrays leaf \[.x.\] \(shape \(8, 3\)\) was deleted"):
        gs.host_to_global_array({"x": x}, mesh=mesh)


def test_shard_batch_inside_jit_splits_the_batch_and_inside_shard_map_names_the_fix():
    # A batch simulated inside the jitted step, then shard_batch'ed (or a sampler's x_init by shard_sample_init):
    # jax.device_put under jit left its layout to the compiler and the batch came out replicated, P(), silently.
    mesh = gs.make_mesh(model_axis=2)
    host = np.arange(32.0).reshape(32, 1)  # a NumPy constant beside the traced leaf is split alike

    @jax.jit
    def step(key):
        theta = jax.random.normal(key, (32, 4))
        batch = gs.shard_batch({"theta": theta, "c": host}, mesh)
        return batch, gs.shard_sample_init(theta, mesh), gs.replicate(theta, mesh)

    batch, x_init, whole = step(jax.random.key(0))
    assert batch["theta"].sharding.spec == P("data") and batch["c"].sharding.spec == P("data")
    assert x_init.sharding.spec == P("data") and whole.sharding.spec == P()
    expected = jax.random.normal(jax.random.key(0), (32, 4))
    np.testing.assert_array_equal(np.asarray(batch["theta"]), np.asarray(expected))
    np.testing.assert_array_equal(np.asarray(batch["c"]), host.astype(np.float32))
    mapped = jax.shard_map(lambda x: gs.shard_batch(x, mesh), mesh=mesh, in_specs=P("data"), out_specs=P("data"))
    with pytest.raises(ValueError, match=r"batch inside jax.shard_map: .*place the batch before the shard_map"):
        jax.jit(mapped)(jnp.ones((32, 4)))


def test_init_optimizer_sharded_inside_a_jitted_function_is_refused_naming_the_variable():
    # Flax's idiom builds an optimizer under nnx.jit; init_optimizer_sharded there saw no mesh on the traced model
    # and returned a plain Optimizer: its state came back replicated (P()) where the plan splits it, silently.
    import optax
    from flax import nnx

    mesh = gs.make_mesh(model_axis=2)
    model = gs.init_sharded(lambda: nnx.Linear(8, 4, rngs=nnx.Rngs(0), kernel_init=gs.partitioned(
        nnx.initializers.lecun_normal(), ("embed", "mlp"))), mesh, "replicated")
    gs.shard_model_by_table(model, mesh, dict(gs.RULES["tensor"]))
    with pytest.raises(ValueError, match=r"init_optimizer_sharded got (bias|kernel) as a traced array: call it outside"):
        nnx.jit(lambda m: gs.init_optimizer_sharded(m, optax.adam(1e-3), dict(gs.RULES["tensor"])))(model)
    optimizer = gs.init_optimizer_sharded(model, optax.adam(1e-3), dict(gs.RULES["tensor"]))  # outside: at its plan
    assert optimizer.opt_state[0].mu["kernel"].get_value().sharding.spec == P(None, "model")


def test_a_partition_axis_given_lists_is_a_static_module_attribute_as_one_given_tuples():
    # PartitionAxis(batch_axis=["data"]) held by a Module: nnx.split (its graphdef hashes static attributes) raised
    # "unhashable type: 'list'", naming neither the field nor the fix.
    from flax import nnx

    mesh = gs.make_mesh(model_axis=2)

    class Block(nnx.Module):
        def __init__(self, pa):
            self.pa = pa
            self.w = nnx.Param(jnp.ones((4, 4)))

        def __call__(self, x):
            return gs.constrain(x @ self.w[...], ("batch", "heads"), self.pa)

    pa = gs.PartitionAxis(batch_axis=["data"], head_axis=["model"])
    assert hash(pa) == hash(gs.PartitionAxis(batch_axis=("data",), head_axis=("model",)))
    block = Block(pa)
    graphdef, _ = nnx.split(block)
    hash(graphdef)
    with gs.mesh_context(mesh):
        out = nnx.jit(lambda b, x: b(x))(block, jnp.ones((8, 4)))
    assert out.sharding.spec == P("data", "model")
    np.testing.assert_array_equal(np.asarray(out), np.full((8, 4), 4.0))
