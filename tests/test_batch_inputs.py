"""``shard_batch``, ``replicate``, ``host_to_global_array`` and ``pad_for_mesh`` given odd-but-valid or bad batches:
narrow and foreign dtypes, rows that differ, modules given as batches, calls inside ``jit`` and ``shard_map``.

In-process, 8 simulated CPU devices (conftest); tiny arrays.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

import gensbi_sharding as gs
from gensbi_sharding.batch import check_batch_divisible
from gensbi_sharding.checkpoint import CheckpointWriter, abstract_state_for
from library_helpers import BIG, _refusal, mesh, model


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


@pytest.mark.parametrize("place", [gs.shard_batch, gs.shard_sample_init, gs.replicate])
def test_placing_inside_jit_on_a_mesh_other_than_the_active_one_names_both_meshes(devices, place):
    # Was JAX's "Received incompatible devices for jitted computation. Got jit's context mesh with device ids [0, 1, 2,
    # 3] ... and sharding_constraint inside jit with device ids [0, ..., 7] ... (_put_leaves)", naming no fix.
    given, active = gs.make_mesh(model_axis=2), gs.make_mesh(jax.devices()[:4], model_axis=2)
    with gs.mesh_context(active), pytest.raises(ValueError) as error:
        jax.jit(lambda x: place(x, given))(jnp.ones((8, 4)))
    assert str(error.value) == (
        f"{place.__name__} under a JAX transformation (jax.jit, jax.grad, ...) was given mesh {{'data': 4, 'model': 2}} "
        "while mesh {'data': 2, 'model': 2} is active (jax.set_mesh or mesh_context), the one the step is traced on: "
        "pass that one, or call the step under this one: `with mesh_context(mesh):`")
    with gs.mesh_context(active):  # the active mesh itself is placed on
        assert jax.jit(lambda x: place(x, active))(jnp.ones((8, 4))).sharding.mesh.shape == active.shape


def test_placing_under_an_eager_grad_says_transformation_not_jit(devices):
    # Was "shard_batch inside jax.jit was given mesh ...": no jit there, an eager jax.grad's arrays are tracers too.
    given, active = gs.make_mesh(model_axis=2), gs.make_mesh(jax.devices()[:4], model_axis=2)
    with gs.mesh_context(active), pytest.raises(ValueError) as error:
        jax.grad(lambda x: gs.shard_batch(x, given).sum())(jnp.ones((8, 4)))
    assert str(error.value).startswith("shard_batch under a JAX transformation (jax.jit, jax.grad, ...) was given "
                                       "mesh {'data': 4, 'model': 2} while mesh {'data': 2, 'model': 2} is active")
    explicit = jax.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Explicit,) * 2)
    with pytest.raises(ValueError, match=r"^batch under a JAX transformation \(jax.jit, jax.grad, ...\) on a mesh with "
                                         r"AxisType.Explicit axes"):  # JAX refuses there too: no mesh active
        jax.grad(lambda x: gs.shard_batch(x, explicit).sum())(jnp.ones((8, 4)))


@pytest.mark.parametrize("place", [gs.shard_batch, gs.shard_sample_init, gs.replicate])
@pytest.mark.parametrize("order", ["reversed", "other devices"])
def test_placing_inside_jit_on_the_active_layout_over_other_devices_names_both_device_orders(devices, place, order):
    # Was JAX's "Received incompatible devices for jitted computation. Got jit's context mesh with device ids [0, 1, 2,
    # 3, 4, 5, 6, 7] ... and sharding_constraint inside jit with device ids [6, 7, 4, 5, 2, 3, 0, 1]", naming no fix:
    # the two meshes' layouts (all a trace shows) are the same.
    active = gs.make_mesh(jax.devices()[:4], model_axis=2)
    others = np.asarray(active.devices)[::-1] if order == "reversed" else np.asarray(jax.devices()[4:]).reshape(2, 2)
    given = jax.sharding.Mesh(others, active.axis_names, axis_types=active.axis_types)
    with gs.mesh_context(active), pytest.raises(ValueError) as error:
        jax.jit(lambda x: place(x, given))(jnp.ones((8, 4)))
    given_ids = [2, 3, 0, 1] if order == "reversed" else [4, 5, 6, 7]
    assert str(error.value) == (
        f"{place.__name__} under a JAX transformation (jax.jit, jax.grad, ...) was given mesh {{'data': 2, 'model': 2}} "
        f"on devices {given_ids} while that layout on devices [0, 1, 2, 3] is active (jax.set_mesh or mesh_context), "
        "the one the step is traced on: pass that one, or call the step under this one: `with mesh_context(mesh):`")
    same = jax.sharding.Mesh(np.asarray(active.devices), active.axis_names, axis_types=active.axis_types)
    with gs.mesh_context(active):  # another Mesh object of the same devices in the same order is placed on
        assert jax.jit(lambda x: place(x, same))(jnp.ones((8, 4))).sharding.mesh.device_ids.ravel().tolist() == [
            0, 1, 2, 3]
    with jax.sharding.use_abstract_mesh(active.abstract_mesh):  # no devices to compare: traced as before
        assert jax.jit(lambda x: place(x, given)).trace(jnp.ones((8, 4))).out_info.shape == (8, 4)


@pytest.mark.parametrize("mesh", ["auto", {"model_axis": 2}, 8])
def test_host_to_global_array_given_a_mesh_of_another_type_names_how_to_build_one(devices, mesh):
    # Was: "mesh must be a concrete jax.sharding.Mesh, got str", naming no fix (each other function's names one).
    with pytest.raises(ValueError, match=r"mesh must be a concrete jax.sharding.Mesh, got \w+ .*; build one with "
                                         r"make_mesh\(...\) or resolve_mesh\(spec\), or pass mesh=None"):
        gs.host_to_global_array({"x": np.ones((8, 2))}, mesh=mesh)


@pytest.mark.parametrize("types", [("Explicit", "Explicit"), ("Explicit", "Auto"), ("Auto", "Explicit")])
def test_shard_batch_inside_jit_on_an_explicit_mesh_pins_by_the_batch_axes_type_or_names_mesh_context(devices, types):
    # Was, with an Explicit batch axis and the mesh not active: JAX's error at compilation, "Length of device assignment
    # 1 is not equal to the size of the mesh 8", or "cannot reshape array of size 1 into shape (4,2)" on a mesh of both
    # axis types; with an Auto batch axis beside an Explicit "model", even active: "PartitionSpec passed to reshard
    # cannot contain axis names that are of type Auto".
    mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=tuple(getattr(AxisType, t) for t in types))
    x = jnp.arange(16.0).reshape(8, 2)
    step = jax.jit(lambda v: gs.shard_batch(v, mesh) * 2)
    outputs = []
    if types[0] == "Explicit":  # reshard pins it, which reads the axis types from the active mesh
        with pytest.raises(ValueError, match=r"batch under a JAX transformation \(jax.jit, jax.grad, ...\) on a mesh "
                                             r"with AxisType.Explicit axes \(.*\) needs "
                                             r"it active while the step is traced: call the step inside `with "
                                             r"mesh_context\(mesh\):`, or build the mesh with make_mesh"):
            step(x)
    else:
        outputs.append(step(x))
    with gs.mesh_context(mesh):  # the fix, as named
        outputs.append(step(x))
    for y in outputs:
        assert y.sharding.is_equivalent_to(NamedSharding(mesh, P("data")), 2)
        np.testing.assert_array_equal(np.asarray(y), 2 * np.asarray(x))


class _Tied(nnx.Module):
    def __init__(self):
        self.a = nnx.Linear(4, 4, rngs=nnx.Rngs(0))
        self.b = self.a  # tied: one variable under two names


@pytest.mark.parametrize("place, tree, where", [
    (lambda tree, mesh: gs.replicate(tree, mesh), "model", "replicate <root> is an NNX _Tied"),
    (lambda tree, mesh: gs.shard_batch(tree, mesh), {"x": "rows", "model": "model"}, "batch ['model'] is an NNX _Tied"),
    (lambda tree, mesh: gs.shard_sample_init(tree, mesh), ["optimizer"], "sampler initial state [0] is an NNX Optimizer"),
    (lambda tree, mesh: gs.host_to_global_array(tree, mesh=mesh), {"x": "rows", "model": "model"},
     "host_arrays ['model'] is an NNX _Tied")])
def test_placing_a_module_as_a_pytree_is_refused_naming_shard_model(devices, place, tree, where):
    # Was: replicate(model, mesh) returned a copy of the Module, its tied variables untied (copy.a is not copy.b) and
    # the model itself left on one device; shard_batch split its (4, 4) kernel over "data" as if rows, or raised
    # "batch leaves have differing leading sizes [4, 4, 8]" for a batch holding it.
    import optax

    mesh = gs.make_mesh(model_axis=2)
    model = _Tied()
    parts = {"model": model, "rows": np.ones((8, 2), np.float32),
             "optimizer": nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)}
    tree = jax.tree.map(parts.get, tree)
    with pytest.raises(TypeError) as err:
        place(tree, mesh)
    assert str(err.value).startswith(where + ", which this would copy (shared variables untied), leaving it where it "
                                             "was: place a Module, nnx.Optimizer or a tuple of them in place with "
                                             "shard_model(node, mesh, rule) (rule 'replicated': whole on every device)")
    assert model.a is model.b and len(model.a.kernel[...].sharding.device_set) == 1  # untouched
    # Its state is a pytree of arrays (each shared variable once): replicated as such, and nnx.update puts it back.
    state = gs.replicate(nnx.state(model), mesh)
    assert state["a"]["kernel"][...].sharding.is_fully_replicated and "b" not in state
    nnx.update(model, state)
    assert model.a is model.b and len(model.a.kernel[...].sharding.device_set) == 8


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


@pytest.mark.parametrize("dtype", ["datetime64[D]", "timedelta64[s]", "U3"])
def test_a_numpy_array_of_a_dtype_jax_lacks_is_named_by_every_function_placing_or_saving_it(devices, tmp_path, dtype):
    # Was: JAX's "Dtype datetime64[D] is not a valid JAX array type" (shard_batch, replicate, host_to_global_array,
    # constrain, shard_model: its variables before this one already moved), "function build ... traced for jit returned
    # a value of type <class 'numpy.ndarray'>" (init_sharded, abstract_sharded) and Orbax's "Unsupported data type"
    # from its writing threads (CheckpointWriter.save), naming neither the leaf nor the fix. A str array was already
    # refused as a batch leaf (a dtype of kind "U"); datetime64, timedelta64 and float128 (kind "M", "m", "f") were not.
    mesh, odd = gs.make_mesh(model_axis=2), np.zeros(8, dtype=dtype)

    class Model(nnx.Module):
        def __init__(self):
            self.kernel = nnx.Param(jnp.ones((8, 4)))
            self.when = nnx.Variable(odd)  # after kernel: shard_model moved the kernel, then failed on this

    lacking = rf"has dtype {re.escape(str(odd.dtype))}, which no JAX array holds: pass numbers"
    for place in (lambda: gs.shard_batch({"x": np.ones(8), "when": odd}, mesh),
                  lambda: gs.replicate({"when": odd}, mesh),
                  lambda: gs.host_to_global_array({"when": odd}, mesh=mesh),
                  lambda: gs.constrain(odd, ("batch",), gs.PartitionAxis(), mesh)):
        with pytest.raises(TypeError, match=rf"(leaf \['when'\]|x) \(shape \(8,\)\) {lacking}"):
            place()
    model = Model()
    with pytest.raises(TypeError, match=rf"^shard_model: when \(shape \(8,\)\) {lacking}"):
        gs.shard_model(model, mesh)
    assert model.kernel[...].sharding == jax.sharding.SingleDeviceSharding(jax.devices()[0])  # nothing moved
    as_variable = rf": when holds ndarray of dtype {re.escape(str(odd.dtype))}; a variable's value"
    for build in (gs.init_sharded, gs.abstract_sharded):
        with pytest.raises(TypeError, match=rf"^{build.__name__}{as_variable}"):
            build(Model, mesh)
    with CheckpointWriter(tmp_path / "checkpoints", async_save=False) as writer:
        with pytest.raises(TypeError, match=rf"^CheckpointWriter\.save{as_variable}"):
            writer.save(1, model, jax.random.key(0))
        assert list((tmp_path / "checkpoints").iterdir()) == []  # nothing written
        model.when = nnx.Variable(np.arange(8))  # the fix the message names: numbers
        assert writer.save(1, model, jax.random.key(0)) and writer.steps() == [1]


@pytest.mark.skipif(np.dtype(np.longdouble).itemsize <= 8, reason="np.longdouble is float64 here: JAX holds it")
def test_a_numpy_scalar_of_a_dtype_jax_lacks_is_named(devices, tmp_path):
    # Was: np.longdouble(1.5) (float128), a NumPy number, kept as a scalar; Orbax's writing thread then failed,
    # "Unsupported data type: float128", naming no variable.
    class Model(nnx.Module):
        def __init__(self):
            self.kernel = nnx.Param(jnp.ones(4))
            self.scale = nnx.Variable(np.longdouble(1.5))

    message = r": scale holds longdouble of dtype float128; a variable's value"
    with pytest.raises(TypeError, match=rf"^init_sharded{message}"):
        gs.init_sharded(Model, gs.make_mesh(model_axis=2))
    with CheckpointWriter(tmp_path / "checkpoints", async_save=False) as writer:
        with pytest.raises(TypeError, match=rf"^CheckpointWriter\.save{message}"):
            writer.save(1, Model(), jax.random.key(0))
        assert writer.steps() == []


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


@pytest.mark.skipif(np.dtype(np.longdouble).itemsize <= 8, reason="np.longdouble is float64 here: JAX holds it")
def test_numpy_longdouble_is_told_to_cast_wherever_it_is_refused(devices, tmp_path):
    # Was: "pass numbers (e.g. integer codes ...)" as a batch leaf (it is numbers) and "keep other data as a plain
    # attribute of the Module" as a variable's value (it is a model's number); a NumPy longdouble scalar in a batch was
    # kept unplaced, failing in the jitted step. The fix is a cast.
    mesh = gs.make_mesh(model_axis=2)
    cast = r"which no JAX array holds: cast it to float64, x\.astype\(np\.float64\) \(placed as float32"
    for leaf in (np.ones(8, np.longdouble), np.longdouble(1.5)):
        with pytest.raises(TypeError, match=rf"leaf \['x'\] \(shape {re_shape(leaf)}\) has dtype float128, {cast}"):
            gs.shard_batch({"x": leaf}, mesh)
        # The cast told goes through: placed as float32, the scalar too (as a 0-d array, as every NumPy scalar).
        assert gs.shard_batch({"x": leaf.astype(np.float64)}, mesh)["x"].dtype == jnp.float32
    with pytest.raises(TypeError, match=r"\['x'\] \(shape \(8,\)\) has dtype complex256, which no JAX array holds: "
                                        r"cast it to complex128, x\.astype\(np\.complex128\)"):
        gs.replicate({"x": np.ones(8, np.clongdouble)}, mesh)

    class Model(nnx.Module):
        def __init__(self):
            self.kernel = nnx.Param(jnp.ones(4))
            self.scale = nnx.Variable(np.longdouble(1.5))

    told = r"must be an array \(JAX or NumPy\) or a Python/NumPy number or bool: cast it to float64, x\.astype"
    with pytest.raises(TypeError, match=rf"^init_sharded: scale holds longdouble of dtype float128; .*{told}"):
        gs.init_sharded(Model, mesh)
    with CheckpointWriter(tmp_path / "checkpoints", async_save=False) as writer:
        with pytest.raises(TypeError, match=rf"^CheckpointWriter\.save: scale holds longdouble .*{told}"):
            writer.save(1, Model(), jax.random.key(0))


def re_shape(leaf: np.ndarray) -> str:
    """``leaf``'s shape as a regular expression."""
    return str(leaf.shape).replace("(", r"\(").replace(")", r"\)")


@pytest.mark.parametrize("spec, twice, fixed", [
    (P("data", "data"), "data", "P('data', None)"),
    (P(("data", "model"), "data"), "data", "P(('data', 'model'), None)"),
    (P(("model", "model")), "model", "P('model',)"),
])
def test_host_to_global_array_names_a_mesh_axis_used_twice(mesh, spec, twice, fixed):
    # Was JAX's DuplicateSpecError from inside NamedSharding, raised while the arrays were built.
    with pytest.raises(ValueError) as err:
        gs.host_to_global_array(np.ones((8, 8)), partition=spec, mesh=mesh)
    assert f"PartitionSpec {spec} for leaf <root> names mesh axis {twice!r} twice" in str(err.value)
    assert f"use e.g. {fixed}" in str(err.value)


@pytest.mark.parametrize("call", [
    lambda batch, mesh: gs.shard_batch(batch, mesh),
    lambda batch, mesh: gs.shard_sample_init(batch, mesh),
    lambda batch, mesh: gs.host_to_global_array(batch, mesh=mesh),
    lambda batch, mesh: gs.host_to_global_array(batch, partition="data", mesh=mesh),
    lambda batch, mesh: gs.check_batch_divisible(batch, mesh, "train"),
])
def test_batch_leaves_with_differing_rows_are_refused_alike(mesh, call):
    # shard_batch placed both (rows of x and y no longer lined up); host_to_global_array did too.
    with pytest.raises(ValueError, match=r"leaves have differing leading sizes \[8, 16\] \(\['x'\] 8, \['y'\] 16\)"):
        call({"x": np.ones((8, 3)), "y": np.ones((16,)), "s": np.ones(())}, mesh)


def test_leaves_not_split_along_rows_may_differ(mesh):
    got = gs.host_to_global_array({"x": np.ones((8, 3)), "table": np.ones((3,))},
                                  partition={"x": P("data"), "table": P()}, mesh=mesh)
    assert got["x"].shape == (8, 3) and got["table"].shape == (3,) and got["table"].sharding.spec == P()
    assert gs.host_to_global_array({"x": np.ones((8, 3)), "y": np.ones((5,))}, partition="replicated",
                                   mesh=mesh)["y"].shape == (5,)


class Series:
    """What pandas' Series shows JAX: an object (a pytree leaf) with ``__array__``."""

    def __init__(self, values):
        self.values = values

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.values, dtype)


@pytest.mark.parametrize("place", [gs.shard_batch, gs.shard_sample_init, gs.replicate,
                                   lambda tree, mesh: gs.host_to_global_array(tree, mesh=mesh)])
@pytest.mark.parametrize("bad", [np.array(["a"] * 8), np.array([object()] * 8)])
def test_a_leaf_of_strings_or_objects_is_named(mesh, place, bad):
    # Was JAX's "Dtype <U1 is not a valid JAX array type", naming neither the leaf nor the fix.
    with pytest.raises(TypeError, match=rf"leaf \['tag'\] \(shape \(8,\)\) has dtype {bad.dtype}, which no JAX "
                                        r"array holds: pass numbers \(e\.g\. integer codes"):
        place({"x": np.ones((8, 2), np.float32), "tag": bad}, mesh)
    # An array-like that is no array (a pandas Series, a torch tensor): was kept as it was, unplaced.
    with pytest.raises(TypeError, match=r"leaf \['tag'\] is a Series, an array-like that is no array: pass "
                                        r"np\.asarray\(it\)"):
        place({"x": np.ones((8, 2), np.float32), "tag": Series(np.arange(8.0))}, mesh)
    # Numbers, booleans and PRNG keys still go through.
    placed = place({"x": np.ones((8, 2), np.float32), "done": np.ones(8, bool),
                    "keys": jax.random.split(jax.random.key(0), 8)}, mesh)
    assert (placed["done"].dtype, placed["keys"].shape) == (np.dtype(bool), (8,))


def test_shard_batch_places_an_abstract_batch_as_it_places_the_concrete_one(devices):
    # Was: jax.ShapeDtypeStruct leaves came back unplaced, so jax.jit(step).lower(state, batch) of a dry run compiled
    # for a batch whole on one device: compiled_report gave the wrong per-device memory, and no size was checked.
    mesh = gs.make_mesh(model_axis=2)
    abstract = gs.shard_batch({"x": jax.ShapeDtypeStruct((32, 64), jnp.float32),
                               "t": jax.ShapeDtypeStruct((), jnp.float32), "n": 3}, mesh)
    concrete = gs.shard_batch({"x": jnp.ones((32, 64)), "t": jnp.float32(0), "n": 3}, mesh)
    assert abstract["x"].sharding == concrete["x"].sharding == NamedSharding(mesh, P("data"))
    assert abstract["t"].sharding == concrete["t"].sharding == NamedSharding(mesh, P()) and abstract["n"] == 3
    step = jax.jit(lambda batch: batch["x"].sum() * batch["t"])
    memory = [gs.compiled_report(step.lower(batch).compile())["memory"] for batch in (abstract, concrete)]
    assert memory[0] == memory[1] and memory[0]["argument_bytes"] < 32 * 64 * 4  # each device's rows only
    assert gs.replicate(jax.ShapeDtypeStruct((3,), jnp.float32), mesh).sharding == NamedSharding(mesh, P())
    with pytest.raises(ValueError, match=r"shape \(30, 3\)\) has leading size 30, not divisible by the data-parallel "
                                         r"size 4; use 28 or 32 rows \(pad_for_mesh\(30, mesh\) returns"):
        gs.shard_batch(jax.ShapeDtypeStruct((30, 3), jnp.float32), mesh)
    with pytest.raises(ValueError, match=r"differing leading sizes \[8, 12\]"):
        gs.shard_batch((jax.ShapeDtypeStruct((8, 3), jnp.float32), jnp.ones((12,))), mesh)
    with pytest.raises(ValueError) as error:  # each process's rows: no abstract global array to build (was returned)
        gs.host_to_global_array({"x": jax.ShapeDtypeStruct((8, 3), jnp.float32)}, mesh=mesh)
    assert str(error.value) == ("leaf ['x'] is abstract (ShapeDtypeStruct(shape=(8, 3), dtype=float32)); "
                                "host_to_global_array builds arrays from each process's rows: for a dry run's batch, "
                                "shard_batch(the global batch as jax.ShapeDtypeStruct, mesh)")


class _Batch(nnx.Pytree):  # a batch container as Flax suggests one: plain arrays, no nnx.Variable
    def __init__(self, theta, x):
        self.theta, self.x = nnx.data(theta), nnx.data(x)


def test_an_nnx_pytree_of_plain_arrays_is_placed_as_a_batch(devices):
    # Was (round 45's Module refusal): TypeError "batch <root> is an NNX _Batch, which this would copy (shared
    # variables untied)" for a container holding no variable; placed as any pytree before, as now. A Module inside
    # it is still refused.
    import numpy as np

    mesh = gs.make_mesh(model_axis=2)
    batch = _Batch(np.arange(16, dtype=np.float32).reshape(8, 2), np.ones((8, 3), np.float32))
    placed = gs.shard_batch(batch, mesh)
    assert isinstance(placed, _Batch) and placed.theta.sharding.spec == P("data")
    np.testing.assert_array_equal(np.asarray(placed.theta), batch.theta)
    assert gs.replicate(batch, mesh).x.sharding.is_fully_replicated
    assert gs.shard_sample_init(batch, mesh).x.sharding.spec == P("data")
    holding = _Batch(np.ones((8, 2), np.float32), nnx.Linear(2, 2, rngs=nnx.Rngs(0)))
    try:
        gs.shard_batch(holding, mesh)
    except TypeError as err:
        assert str(err).startswith("batch <root> is an NNX _Batch, which this would copy")
    else:
        raise AssertionError("a container holding a Linear was copied")


def test_pad_for_mesh_given_a_traced_count_in_jit_names_a_fix_that_works_there(devices):
    # Was (round 46's 0-d fix): "got JitTracer(~int32[]); pass int(n)", which raises inside jax.jit.
    import jax
    import jax.numpy as jnp

    import gensbi_sharding as gs

    mesh = gs.make_mesh(model_axis=2)
    with pytest.raises(ValueError, match=r"got JitTracer\(~?int32\[\]\); pass a static count \(x\.shape\[0\], or n "
                                         r"in jax\.jit's static_argnums\)"):
        jax.jit(lambda n: gs.pad_for_mesh(n, mesh))(jnp.array(10))
    assert jax.jit(lambda n: gs.pad_for_mesh(n, mesh), static_argnums=0)(10) == (12, 10)  # the fix named
    assert jax.jit(lambda x: gs.pad_for_mesh(x.shape[0], mesh))(jnp.ones((10, 2))) == (12, 10)
    # Was: "pass int(n)" for a count int() changes (10.5 -> 10, True -> 1) or that stays refused (-3, NaN).
    import numpy as np

    for count in (np.array(10.5), np.float32(10.5), jnp.array(10.5), np.array(True), np.array(-3), np.array(np.nan)):
        with pytest.raises(ValueError, match=r"got .*; pass the whole row count, e\.g\. x\.shape\[0\]$"):
            gs.pad_for_mesh(count, mesh)
    for count in (np.array(10), np.float64(10.0), jnp.array(10)):  # int(n) keeps these: it is the fix named
        with pytest.raises(ValueError, match=r"; pass int\(n\)$"):
            gs.pad_for_mesh(count, mesh)
        assert gs.pad_for_mesh(int(count), mesh) == (12, 10)


@pytest.mark.parametrize("place, name", [
    (lambda tree, mesh: gs.shard_batch(tree, mesh), "batch"),
    (lambda tree, mesh: gs.shard_sample_init(tree, mesh), "sampler initial state"),
    (lambda tree, mesh: gs.replicate(tree, mesh), "replicate"),
    (lambda tree, mesh: gs.host_to_global_array(tree, mesh=mesh), "host_arrays"),
    (lambda tree, mesh: {"ids": gs.constrain(tree["ids"], ("batch",), gs.PartitionAxis(), mesh)}, "constrain: x")])
def test_a_batch_value_its_32_bit_place_cannot_hold_is_refused(place, name, devices):
    """With 64-bit types off (JAX's default), int64 2**40 was placed as 0 and float64 1e300 as inf, without a word."""
    mesh = gs.make_mesh(model_axis=2)
    for leaf, got, changed in ((BIG, r"1099511627776 \(int64\)", "0"), (np.full(8, 1e300), r"1e\+300 \(float64\)", "inf"),
                               (np.full(8, 2.0**63, np.uint64), r"9223372036854775808 \(uint64\)", "0")):
        with pytest.raises(ValueError, match=rf"{name}( leaf \['ids'\])? \(shape \(8,\)\) holds {got}, beyond .*change it "
                                             rf"silently \(to {changed}\); enable 64-bit types.*jax_enable_x64"):
            place({"x": np.ones((8, 2)), "ids": leaf}, mesh)
    # Values that fit (NaN and inf stay themselves), and 64-bit types on, as the message says: placed unchanged.
    kept = np.array([np.nan, np.inf, -np.inf, 1e30, -3e38, 0.5, 2.0**31 - 1, -(2.0**31)])
    np.testing.assert_array_equal(place({"ids": kept}, mesh)["ids"], kept.astype(np.float32))
    with jax.enable_x64(True):
        np.testing.assert_array_equal(place({"ids": BIG}, mesh)["ids"], BIG)


@pytest.mark.parametrize("place, name", [
    (lambda tree, mesh: gs.shard_batch(tree, mesh), "batch"),
    (lambda tree, mesh: gs.shard_sample_init(tree, mesh), "sampler initial state"),
    (lambda tree, mesh: gs.replicate(tree, mesh), "replicate"),
    (lambda tree, mesh: gs.host_to_global_array(tree, mesh=mesh), "host_arrays")])
def test_a_numpy_scalar_its_32_bit_place_cannot_hold_is_refused_as_its_0d_array(place, name, devices):
    """np.int64(2**40) was placed as 0, np.uint64(2**63) as 0 and np.float64(1e300) as inf, without a word, while the
    0-d array of the same value was refused: a NumPy scalar goes through the checks of the 0-d array it is a value of."""
    mesh = gs.make_mesh(model_axis=2)
    for value, got, changed in ((np.int64(2**40), r"1099511627776 \(int64\)", "0"),
                                (np.uint64(2**63), r"9223372036854775808 \(uint64\)", "0"),
                                (np.float64(1e300), r"1e\+300 \(float64\)", "inf")):
        for leaf in (value, np.asarray(value)):
            with pytest.raises(ValueError, match=rf"{name} leaf \['t'\] \(shape \(\)\) holds {got}, beyond .*change "
                                                 rf"it silently \(to {changed}\); enable 64-bit types"):
                place({"x": np.zeros((8, 2), np.float32), "t": leaf}, mesh)
    # A scalar that fits is placed as its value; with 64-bit types on, the big one is kept exactly.
    assert int(place({"t": np.int64(2**31 - 1)}, mesh)["t"]) == 2**31 - 1
    with jax.enable_x64(True):
        placed = place({"t": np.int64(2**40)}, mesh)["t"]
        assert placed.dtype == np.int64 and int(placed) == 2**40


def test_a_numpy_masked_array_is_named_by_every_function_placing_or_saving_it(devices, tmp_path):
    # Was: JAX's "numpy masked arrays are not supported as direct inputs to JAX functions" (shard_batch, replicate,
    # shard_sample_init, host_to_global_array, constrain, shard_model, CheckpointWriter.save), naming no leaf.
    mesh = gs.make_mesh(model_axis=2)
    masked = np.ma.masked_array(np.ones((8, 2)), mask=np.eye(8, 2, dtype=bool))
    fix = (r"\(shape \(8, 2\)\) is a NumPy masked array, whose mask no JAX array holds: pass x\.filled\(value\), and "
           r"the mask as a leaf of its own if a step needs it \(np\.ma\.getmaskarray\(x\)\)$")

    class Model(nnx.Module):
        def __init__(self):
            self.kernel = nnx.Param(jnp.ones((8, 4)))
            self.seen = nnx.Variable(masked)

    for place, where in ((lambda: gs.shard_batch({"x": masked}, mesh), r"batch leaf \['x'\]"),
                         (lambda: gs.shard_batch({"x": masked}, None), r"batch leaf \['x'\]"),
                         (lambda: gs.replicate({"x": masked}, mesh), r"replicate leaf \['x'\]"),
                         (lambda: gs.shard_sample_init(masked, mesh), "sampler initial state leaf <root>"),
                         (lambda: gs.host_to_global_array({"x": masked}, mesh=mesh), r"host_arrays leaf \['x'\]"),
                         (lambda: gs.constrain(masked, ("batch", None), gs.PartitionAxis(), mesh), "constrain: x")):
        with pytest.raises(TypeError, match=f"^{where} {fix}"):
            place()
    model = Model()
    with pytest.raises(TypeError, match=f"^shard_model: seen {fix}"):
        gs.shard_model(model, mesh)
    assert model.kernel[...].sharding == jax.sharding.SingleDeviceSharding(jax.devices()[0])  # nothing moved
    with CheckpointWriter(tmp_path / "checkpoints", async_save=False) as writer:
        with pytest.raises(TypeError, match=f"^CheckpointWriter.save: seen {fix}"):
            writer.save(1, model, jax.random.key(0))
        assert list((tmp_path / "checkpoints").iterdir()) == []  # nothing written
        model.seen = nnx.Variable(masked.filled(0.0))  # the fix the message names
        assert writer.save(1, model, jax.random.key(0)) and writer.steps() == [1]


@pytest.mark.parametrize("value, where", [(np.ma.masked, r"seen \(shape \(\)\)"),
                                          ({"first": np.ma.masked_array([1.0, 2.0], mask=[0, 1])},
                                           r"seen/first \(shape \(2,\)\)")], ids=["np.ma.masked", "in a dict"])
def test_a_masked_value_a_traced_factory_builds_is_refused_as_every_placing_function_refuses_it(mesh, value, where):
    # Was JAX's "numpy masked arrays are not supported as direct inputs to JAX functions. Use arr.filled() ...",
    # naming no leaf, from init_sharded, abstract_sharded and abstract_state_for (shard_model named it, as above).
    class Model(nnx.Module):
        def __init__(self, seen):
            self.kernel = nnx.Param(jnp.ones((8, 4)))
            self.seen = nnx.Variable(seen)

    for build in (gs.init_sharded, gs.abstract_sharded, abstract_state_for):
        with pytest.raises(TypeError, match=rf"^{build.__name__}: {where} is a NumPy masked array, whose mask no JAX "
                           r"array holds: pass x\.filled\(value\), and the mask as a leaf of its own if a step needs"):
            build(lambda: Model(value), mesh)
    filled = jax.tree.map(lambda v: np.ma.filled(v, 0.0), value)  # the fix the message names
    assert gs.init_sharded(lambda: Model(filled), mesh).kernel[...].sharding.mesh == mesh


@pytest.mark.parametrize("dtype", [">f4", ">i8"])
def test_big_endian_numpy_data_is_told_to_take_native_byte_order(devices, dtype):
    # Was, for big-endian data (as FITS files and some HDF5 files hold): ">f4 ... cast it to float64, x.astype(
    # np.float64)", a widening that kept the byte order JAX refuses; ">i8 ... pass numbers (e.g. integer codes", which
    # it is. JAX holds the values once in native byte order.
    mesh, host = gs.make_mesh(model_axis=2), np.arange(16).reshape(8, 2).astype(dtype)

    class Model(nnx.Module):
        def __init__(self):
            self.kernel = nnx.Param(host)

    told = (rf"has dtype {re.escape(dtype)}, which no JAX array holds: convert it to native byte order, "
            rf"x\.astype\(x\.dtype\.newbyteorder\('='\)\) \({np.dtype(dtype).name}\)$")
    for place in (lambda x: gs.shard_batch(x, mesh), lambda x: gs.host_to_global_array(x, mesh=mesh),
                  lambda x: gs.replicate(x, mesh), lambda x: gs.constrain(x, ("batch", None), gs.PartitionAxis(), mesh)):
        with pytest.raises(TypeError, match=told):
            place(host)
        np.testing.assert_array_equal(np.asarray(place(host.astype(host.dtype.newbyteorder("=")))), np.asarray(host))
    with pytest.raises(TypeError, match=rf"^shard_model: kernel \(shape \(8, 2\)\) {told}"):
        gs.shard_model(Model(), mesh)


@pytest.mark.parametrize("dtype, told", [(">M8[D]", r"pass numbers \(e\.g\. integer codes"),
                                         (">U3", r"pass numbers \(e\.g\. integer codes"),
                                         (np.dtype(np.longdouble).newbyteorder(">").str,
                                          r"cast it to float64, x\.astype\(np\.float64\)" if np.dtype(np.longdouble)
                                          != np.float64 else r"convert it to native byte order")])
def test_big_endian_data_no_jax_array_holds_even_native_is_told_the_fix_of_its_native_form(devices, dtype, told):
    # Was "convert it to native byte order, x.astype(x.dtype.newbyteorder('='))" for big-endian datetime64, str or
    # float128 too: done, it was refused again (datetime64[D] ... pass numbers; float128 ... cast it to float64), a
    # second round trip; the native form's fix serves at once (x.astype(np.float64) takes any byte order).
    host = np.zeros((8, 2), dtype)
    with pytest.raises(TypeError, match=rf"has dtype {re.escape(str(host.dtype))}, which no JAX array holds: {told}"):
        gs.shard_batch({"x": host}, gs.make_mesh(model_axis=2))


def test_host_to_global_array_names_a_later_dim_the_mesh_does_not_divide_and_how_to_leave_it_whole(mesh):
    # Was "process 0 passes size of dim 1 3 for leaf ['x']": the dim and its size ran together, and the fix offered
    # ("a multiple of 2 per process") was for the batch dimension, not this one.
    x = {"x": np.ones((8, 3), np.float32), "y": np.arange(8)}
    with pytest.raises(ValueError, match=re.escape(
            "process 0 passes size 3 in dim 1 of leaf ['x'] (shape (8, 3)), not a multiple of 2, the number of shards "
            "it holds along mesh axes ('model',); make dim 1 a multiple of 2, or leave it unsplit: P('data', None)")):
        gs.host_to_global_array(x, partition={"x": P("data", "model"), "y": P()}, mesh=mesh)
    placed = gs.host_to_global_array(x, partition={"x": P("data", None), "y": P()}, mesh=mesh)
    assert placed["x"].sharding.spec == P("data", None) and placed["x"].shape == (8, 3)


@pytest.mark.parametrize("where", ["outside", "jit"])
def test_a_numpy_scalar_leaf_is_placed_as_a_0d_array_is(devices, where):
    # Was: {"t": np.float32(0.5)} came back an unplaced np.float32 while np.array(0.5, np.float32) came back a jax.Array
    # at P(): one NumPy value, two rules. Now both placed P(); a Python float stays a Python float (no dtype of its own).
    mesh = gs.make_mesh(model_axis=2)
    batch = {"scalar": np.float32(0.5), "zero_d": np.array(0.5, np.float32), "flag": np.bool_(True), "python": 0.5,
             "x": np.ones((8, 2), np.float32)}
    for place in (gs.shard_batch, gs.replicate):
        out = (place(batch, mesh) if where == "outside" else  # in jit: the batch a closure's constants, not arguments
               jax.jit(lambda: {k: v for k, v in place(batch, mesh).items() if k != "python"})())
        for key in ("scalar", "zero_d", "flag"):
            assert isinstance(out[key], jax.Array) and out[key].shape == () and out[key].sharding.is_equivalent_to(
                NamedSharding(mesh, P()), 0), (place, key, out[key])
        assert (out["scalar"].dtype, out["flag"].dtype, float(out["scalar"])) == (jnp.float32, jnp.bool_, 0.5)
        if where == "outside":
            assert out["python"] == 0.5 and type(out["python"]) is float
