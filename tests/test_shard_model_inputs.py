"""``shard_model`` (and ``shard_model_by_table``) given odd-but-valid or bad models: each placed exactly, or refused
naming the variable and the fix.

In-process, 8 simulated CPU devices (conftest); tiny modules.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec as P

import gensbi_sharding as gs
from gensbi_sharding import checkpoint
from gensbi_sharding.checkpoint import CheckpointWriter, abstract_state_for, committed_steps, restore
from library_helpers import Annotated, AxesBlock, BIG, WithIds, mesh


class WithRef(nnx.Module):
    def __init__(self, rngs):
        self.up = nnx.Linear(4, 8, rngs=rngs, kernel_metadata=gs.axes("embed", "mlp"))
        self.scale = nnx.Param(jnp.arange(8.0), ref=True, **gs.axes("embed"))


@pytest.mark.slow
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


def test_shard_model_inside_jit_names_the_variable_and_where_to_place_it(mesh):
    # Was JAX's AttributeError "The 'sharding' attribute is not available on traced array with shape float32[8]".
    model = nnx.Linear(8, 8, rngs=nnx.Rngs(0),
                       kernel_init=gs.partitioned(nnx.initializers.lecun_normal(), ("embed", "mlp")))

    @nnx.jit
    def step(model):
        gs.shard_model(model, mesh, "tensor")
        return model.kernel.get_value().sum()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the experimental rule, the bias's missing annotation
        with pytest.raises(ValueError, match=r"shard_model got (bias|kernel) as a traced array: it places a "
                                             r"model outside jax\.jit and nnx\.jit .* place it before the step"):
            step(model)
        gs.shard_model(model, mesh, "tensor")  # outside: placed
    assert model.kernel.get_value().sharding.spec == P(None, "model")


@pytest.mark.parametrize("call", [
    lambda state, mesh: gs.shard_model(state, mesh), lambda state, mesh: gs.plan_shardings(state, mesh),
    lambda state, mesh: gs.describe(state, mesh), lambda state, mesh: checkpoint.abstract_state_for(state, mesh),
    lambda state, mesh: gs.init_sharded(lambda: state, mesh)])
def test_a_train_state_holding_a_plain_value_names_it(mesh, call):
    # Was "... got dict {'model': Linear( # Param: 20 (80 B)" cut mid-repr over lines, naming no offending entry.
    state = {"model": nnx.Linear(4, 4, rngs=nnx.Rngs(0)), "extra": [nnx.Linear(4, 4, rngs=nnx.Rngs(1)), 0]}
    with pytest.raises(TypeError) as caught:
        call(state, mesh)
    assert "; its ['extra'][1] is int 0, no NNX node: keep other values (a step count, arrays) out of it" in str(
        caught.value)
    assert "\n" not in str(caught.value)


def _pointers(array):
    return [shard.data.unsafe_buffer_pointer() for shard in array.addressable_shards]


@pytest.mark.parametrize("case", ["one device", "same layout, explicit axes"])
def test_shard_model_puts_every_array_on_the_plans_mesh_even_where_its_layout_already_matches(devices, case):
    # Was: place skipped an array whose placement was equivalent to the plan's, so on a 1-device mesh every variable
    # stayed on its SingleDeviceSharding (sharding_of(model)["up/kernel"].spec raised AttributeError, describe read
    # "single device", partition_specs "host"), and a model moved to an Explicit mesh of the same layout kept the
    # Auto one (describe(model, that mesh) then raised "on another mesh").
    model = AxesBlock(nnx.Rngs(0))
    values = np.asarray(model.up.kernel[...])
    if case == "one device":
        mesh = gs.make_mesh(jax.devices()[:1])
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gs.shard_model(model, gs.make_mesh(model_axis=2), "tensor")
        mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(jax.sharding.AxisType.Explicit,) * 2)
    before = _pointers(model.up.kernel[...])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gs.shard_model(model, mesh, "tensor")
    placed = gs.sharding_of(model)
    assert {path: (s.mesh, s.spec) for path, s in placed.items()} == {
        "up/kernel": (mesh, P(None, "model")), "up/bias": (mesh, P("model"))}
    assert _pointers(model.up.kernel[...]) == before  # the same buffers: nothing copied
    np.testing.assert_array_equal(model.up.kernel[...], values)
    assert gs.describe(model, mesh).placements == {"up/kernel": "P(None, 'model')", "up/bias": "P('model')"}
    assert gs.partition_specs(model)["up/kernel"] == "P(None, 'model')"
    first = model.up.kernel[...]
    gs.shard_model(model, mesh, "tensor")  # again: exactly as planned, the very arrays kept
    assert model.up.kernel[...] is first


@pytest.mark.slow
def test_a_model_value_its_32_bit_place_cannot_hold_is_refused(tmp_path, devices):
    """shard_model, init_sharded and CheckpointWriter.save (whose restore places every array) placed or saved int64 2**40
    to come back 0; now each names the variable, before anything moves or is written."""
    mesh = gs.make_mesh(model_axis=2)
    model = WithIds(nnx.Rngs(0))
    before = gs.sharding_of(model)
    with pytest.raises(ValueError, match=r"shard_model: ids \(shape \(8,\)\) holds 1099511627776 \(int64\)"):
        gs.shard_model(model, mesh, "replicated")
    assert gs.sharding_of(model) == before and isinstance(model.ids.get_value(), np.ndarray)  # nothing moved
    with pytest.raises(ValueError, match=r"init_sharded: ids \(shape \(8,\)\) holds 1099511627776 \(int64\)"):
        gs.init_sharded(lambda: WithIds(nnx.Rngs(0)), mesh)
    writer = CheckpointWriter(tmp_path / "checkpoints")
    with writer, pytest.raises(ValueError, match=r"CheckpointWriter.save: ids \(shape \(8,\)\) holds 1099511627776"):
        writer.save(1, nnx.state(model), jax.random.key(0))
    assert committed_steps(tmp_path / "checkpoints") == []
    small = gs.init_sharded(lambda: WithIds(nnx.Rngs(0), ids=BIG - 2**40), mesh)
    np.testing.assert_array_equal(small.ids.get_value(), np.arange(8))
    with jax.enable_x64(True):
        np.testing.assert_array_equal(gs.init_sharded(lambda: WithIds(nnx.Rngs(0)), mesh).ids.get_value(), BIG)


def test_a_bare_variable_is_refused_naming_the_tuple_that_works(tmp_path, devices):
    """model.up.kernel passed alone: shard_model placed it under the path "", sharding_of, describe, partition_specs,
    abstract_state_for and init_optimizer_sharded raised IndexError (tuple index out of range), init_sharded
    AttributeError (DynamicJaxprTracer has no attribute _mapping); (variable,) works everywhere."""
    mesh = gs.make_mesh(model_axis=2)

    def variable():
        return nnx.Param(jnp.ones((8, 4)), **gs.axes("embed", None))

    bare = variable()
    calls = {"shard_model": lambda: gs.shard_model(bare, mesh, "fsdp"),
             "plan_shardings": lambda: gs.plan_shardings(bare, mesh, "fsdp"), "sharding_of": lambda: gs.sharding_of(bare),
             "partition_specs": lambda: gs.partition_specs(bare), "describe": lambda: gs.describe(bare, mesh),
             "init_sharded": lambda: gs.init_sharded(variable, mesh, "fsdp", warn=False),
             "abstract_state_for": lambda: abstract_state_for(bare, mesh, "fsdp"),
             "init_optimizer_sharded": lambda: gs.init_optimizer_sharded(bare, optax.adam(1e-3), "fsdp")}
    for caller, call in calls.items():
        with pytest.raises(TypeError, match=rf"{caller}.*a bare nnx.Variable is a node's part: pass the Module holding "
                                            r"it, or \(variable,\) or \{'w': variable\}"):
            call()
    with CheckpointWriter(tmp_path / "checkpoints") as writer, pytest.raises(TypeError, match=r"a bare nnx.Variable"):
        writer.save(1, bare, jax.random.key(0))
    for build in (gs.init_sharded, gs.abstract_sharded):  # the variable itself as the factory: it is callable
        with pytest.raises(ValueError, match=r"factory must be a zero-argument callable building the module, got a "
                                             r"Param"):
            build(bare, mesh)
    # The fix given: a tuple of it.
    with pytest.warns(gs.ExperimentalRuleWarning):
        gs.shard_model((bare,), mesh, "fsdp")
    assert gs.sharding_of((bare,))["0"].spec == jax.sharding.PartitionSpec("data", None)
    assert gs.describe((bare,), mesh).variables[0].path == "0"
    built = gs.init_sharded(lambda: (variable(),), mesh, "fsdp", warn=False)
    assert built[0].get_value().sharding.spec == jax.sharding.PartitionSpec("data", None)


class _Holding(nnx.Module):
    """A variable holding what no mesh's placement takes, or an array in no variable."""

    def __init__(self, kind):
        if kind == "in no variable":
            self.buf = jnp.ones(3)
        else:
            self.v = nnx.Variable({"int64 beyond int32": np.full((8,), 2**40), "str": np.array(["a"] * 8),
                                   "masked": np.ma.masked_array(np.ones(8), mask=[0] * 7 + [1])}[kind])


@pytest.mark.parametrize("kind, error, message", [
    ("int64 beyond int32", ValueError, r": v \(shape \(8,\)\) holds 1099511627776 \(int64\), beyond int32"),
    ("str", TypeError, r": v (\(shape \(8,\)\) has|holds ndarray of) dtype <U1"),
    ("masked", TypeError, r": v \(shape \(8,\)\) is a NumPy masked array"),
    ("in no variable", TypeError, r": buf is an array in no nnx.Variable")])
def test_without_a_mesh_what_a_mesh_refuses_is_refused(devices, kind, error, message):
    # Was: shard_model(model, None, rule) and init_sharded(factory, None, rule) returned at once, so a model whose
    # values a mesh's run refuses (2**40 that JAX's cast makes 0, a mask it drops) passed on one device.
    one_device_mesh = gs.make_mesh(devices[:1])
    for mesh in (one_device_mesh, None):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(error, match=message):
                gs.shard_model(_Holding(kind), mesh, "fsdp")
            if kind != "in no variable":  # init_sharded refuses that one on either already
                with pytest.raises(error, match=message):
                    gs.init_sharded(lambda: _Holding(kind), mesh, "fsdp")
    model = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
    kernel = model.kernel.get_value()
    gs.shard_model(model, None, "tensor")
    assert model.kernel.get_value() is kernel  # a good model: nothing moves, as before


@pytest.mark.parametrize("call, caller", [
    (lambda node, mesh: gs.shard_model(node, mesh, "fsdp"), "shard_model"),
    (lambda node, mesh: gs.shard_model(node, None, "fsdp"), "shard_model"),
    (lambda node, mesh: gs.shard_model_by_table(node, mesh, dict(gs.RULES["fsdp"])), "shard_model_by_table"),
    (lambda node, mesh: gs.shard_model_by_table(node, None, dict(gs.RULES["fsdp"])), "shard_model_by_table"),
    (lambda node, mesh: gs.place(node, gs.plan_shardings(node, mesh, "fsdp")), "place")])
def test_each_placing_entry_point_names_itself_in_its_errors(mesh, call, caller):
    # Was: shard_model(_by_table) named plan_shardings for an array in no variable, shard_model_by_table said
    # "place / shard_model" for a value it cannot place and "shard_model places NNX graph nodes" for a non-node.
    class Bare(nnx.Module):
        def __init__(self):
            self.buf = jnp.ones(8)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the experimental rule
        with pytest.raises(ValueError, match=rf"^{caller}: ids \(shape \(8,\)\) holds 1099511627776 \(int64\)"):
            call(WithIds(nnx.Rngs(0)), mesh)
        if caller != "place":  # place plans first: plan_shardings, the function called, names it
            with pytest.raises(TypeError, match=rf"^{caller}: buf is an array in no nnx.Variable"):
                call(Bare(), mesh)
            with pytest.raises(TypeError, match=rf"^{caller} takes an NNX graph node .* got int 3; for a pytree of "
                                                r"arrays use shard_batch or replicate$"):
                call(3, mesh)


NOT_A_NODE = "takes an NNX graph node (a Module, nnx.Optimizer, nnx.State, or a tuple or dict of them)"
RETURNS_NONE = ("; shard_model, shard_model_by_table and place return None, placing the node they are given in place: "
                "pass that node")


def test_the_none_shard_model_returned_names_that_it_places_in_place(mesh, tmp_path):
    # Was "describe takes an NNX graph node (...), got NoneType None" after `model = gs.shard_model(model, ...)`, as
    # Flax's functional style reads: nothing said that None came from shard_model, which places in place.
    with warnings.catch_warnings(action="ignore"):
        model = gs.shard_model(nnx.Linear(4, 4, rngs=nnx.Rngs(0)), mesh)
    for name, call in (("describe", lambda: gs.describe(model, mesh)), ("sharding_of", lambda: gs.sharding_of(model)),
                       ("init_optimizer_sharded", lambda: gs.init_optimizer_sharded(model, optax.adam(1e-3)))):
        with pytest.raises(TypeError) as error:
            call()
        assert str(error.value) == f"{name} {NOT_A_NODE}, got NoneType None{RETURNS_NONE}"
    with pytest.raises(TypeError) as error:
        CheckpointWriter(tmp_path / "c", every=1).save(1, model, jax.random.key(0))
    assert str(error.value) == f"state=None must be an nnx.State (nnx.state(model)) or a mapping of arrays{RETURNS_NONE}"
    with pytest.raises(TypeError) as error:  # a factory's None is its missing return, not shard_model's
        gs.init_sharded(lambda: None, mesh)
    assert str(error.value) == (f"init_sharded (what the factory returned) {NOT_A_NODE}, got NoneType None; end the "
                                "factory with `return` of the node it builds")


def test_a_value_given_for_a_node_is_named_whole_or_cut_outside_its_quotes(mesh):
    # Was "got str '/home/user/gensbi/outputs/2026-12-05/20-51-03/checkp" and "its ['path'] is str '/home/user/gensbi/
    # outputs/2026-12, no NNX node": the value's repr cut at 60 and 40 characters, half a path, a quote left open.
    path = "/home/user/gensbi/outputs/2026-12-05/20-51-03/checkpoints/20"
    with pytest.raises(TypeError) as error:
        gs.describe(path, mesh)
    assert str(error.value) == f"describe {NOT_A_NODE}, got str {path!r}"
    with pytest.raises(TypeError) as error:
        gs.describe({"model": nnx.Linear(2, 2, rngs=nnx.Rngs(0)), "path": path}, mesh)
    assert f"; its ['path'] is str {path!r}, no NNX node: keep other values" in str(error.value), str(error.value)
    with pytest.raises(TypeError) as error:  # a long list: cut between two of its items, said so
        gs.describe(["an option"] * 20, mesh)
    assert f", got list {['an option'] * 4}"[:-1] + " ...; its [0] is str 'an option', no NNX node" in str(error.value)
