"""Faults found by using the library as its users do (8 simulated CPU devices), each pinned here.

A model holding Python or NumPy scalar variables (a counter, a flag), which ``init_sharded`` keeps as values, saved
by ``CheckpointWriter`` and restored onto another mesh and rule through every target ``abstract_state_for`` builds;
``partition_specs`` and ``bytes_per_device`` of an abstract model; ``constrain`` and ``compiled_report`` given the
wrong thing; ``CheckpointWriter`` given an older step, NaN on the host or a NumPy bool; ``restore`` a mesh as
``key_sharding``; a bare string annotation; ``shard_model`` of an abstract model; ``host_to_global_array`` in
jit; tied weights in a tuple of nodes (bytes, checkpoints); a ``Rule`` built directly.
"""

import re
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


class WithScalars(nnx.Module):
    def __init__(self, rngs):
        self.up = nnx.Linear(8, 16, rngs=rngs, kernel_metadata=gs.axes("embed", "mlp"))
        self.count = nnx.Variable(5)
        self.rate = nnx.Variable(2.5)
        self.flag = nnx.Variable(True)
        self.scale = nnx.Variable(np.float32(1.5))


def build():
    return WithScalars(nnx.Rngs(0))


@pytest.fixture(scope="module")
def saved(tmp_path_factory, devices):
    mesh = gs.make_mesh(model_axis=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the experimental-rule notice
        model = gs.init_sharded(build, mesh, "fsdp")
    model.count.set_value(7)  # a value the fresh model does not hold
    model.rate.set_value(0.25)
    model.flag.set_value(False)
    model.scale.set_value(np.float32(3.0))
    folder = tmp_path_factory.mktemp("scalars")
    with checkpoint.CheckpointWriter(folder) as writer:
        writer.save(4, nnx.state(model), jax.random.key(0))
    return folder, model


@pytest.mark.parametrize("target", ["factory", "model", "abstract"])
@pytest.mark.parametrize("where", ["tensor on 2x2", "no mesh"])
def test_scalar_variables_restore_as_saved_through_every_target(saved, target, where):
    # Was a ValueError either way: "saved () int64, target () int32 ... Build the model with the
    # hyperparameters saved" for a factory (nnx.eval_shape made the scalars int32/float32 arrays), and
    # "restore target state/count is int without a sharding" for a built or abstract model.
    folder, model = saved
    mesh = gs.make_mesh(jax.devices()[:4], model_axis=2) if where != "no mesh" else None
    node = {"factory": build, "model": build(),
            "abstract": gs.abstract_sharded(build, None if mesh is None else mesh, "tensor", warn=False)}[target]
    restored = checkpoint.restore(folder, checkpoint.abstract_state_for(node, mesh, "tensor"))
    state = restored.state
    got = {name: state[name].get_value() for name in ("count", "rate", "flag", "scale")}
    assert got == {"count": 7, "rate": 0.25, "flag": False, "scale": np.float32(3.0)}
    assert [type(v) for v in got.values()] == [int, float, bool, np.float32]
    kernel = state["up"]["kernel"].get_value()
    np.testing.assert_array_equal(np.asarray(kernel), np.asarray(model.up.kernel.get_value()))
    if mesh is not None:
        assert state["up"]["kernel"].get_value().sharding.spec == jax.sharding.PartitionSpec(None, "model")


def test_abstract_state_for_keeps_scalars_of_a_factory(devices):
    mesh = gs.make_mesh(model_axis=2)
    for where in (mesh, None):
        target = checkpoint.abstract_state_for(build, where, "fsdp")
        assert (target["count"].get_value(), target["scale"].get_value()) == (5, np.float32(1.5))
        assert isinstance(target["up"]["kernel"].get_value(), jax.ShapeDtypeStruct)


def test_abstract_state_for_names_itself_when_the_factory_returns_no_node():
    with pytest.raises(TypeError, match=r"abstract_state_for \(what the factory returned\).*got int 3"):
        checkpoint.abstract_state_for(lambda: 3, None)


def test_partition_specs_reads_an_abstract_model(devices):
    # Was {}: only concrete arrays were read, so a dry run's abstract_sharded model reported no placement at all.
    mesh = gs.make_mesh(model_axis=2)
    abstract = gs.abstract_sharded(build, mesh, "tensor", warn=False)
    assert gs.partition_specs(abstract) == {"up/bias": "P()", "up/kernel": "P(None, 'model')"}
    # nnx.eval_shape: no shardings, the scalars abstract too.
    assert set(gs.partition_specs(nnx.eval_shape(build)).values()) == {"unplaced"}
    placed = gs.init_sharded(build, mesh, "tensor", warn=False)
    assert gs.partition_specs(placed) == gs.partition_specs(abstract)


@pytest.mark.parametrize("names, example", [(None, "('batch', None)"), (3, "('batch', None)"), ("batch", "('batch',)")])
def test_constrain_names_not_a_sequence_is_a_clear_error(devices, names, example):
    # None (or a number) was a bare TypeError from len(): "object of type 'NoneType' has no len()".
    mesh = gs.make_mesh(model_axis=2)
    needle = rf"activation names {names!r} must be a sequence.*e\.g\. {re.escape(example)}"
    with pytest.raises(ValueError, match=needle):
        gs.constrain(jnp.ones((8, 4)), names, gs.PartitionAxis(), mesh)


@pytest.mark.parametrize("given, fix", [
    (lambda: jax.jit(lambda x: x).lower(np.ones(2)), "got Lowered; call its .compile()"),
    (lambda: jax.jit(lambda x: x), "got PjitFunction; pass jax.jit(f).lower(*args).compile()"),
    (lambda: (lambda x: x), "got function; pass jax.jit(f).lower(*args).compile()")])
def test_compiled_report_names_the_fix_that_fits_what_it_got(given, fix):
    # Every refusal said "(a Lowered: call .compile())", a plain function and a jitted one too.
    with pytest.raises(ValueError, match=re.escape(f"expected a compiled program, {fix}")):
        gs.compiled_report(given())


def test_bytes_per_device_reads_an_abstract_model(devices):
    # Was {}: the module promises bytes "of a state (abstract too: nothing allocated)", but only jax.Array counted.
    mesh = gs.make_mesh(model_axis=2)
    abstract = gs.abstract_sharded(build, mesh, "tensor", warn=False)
    placed = gs.init_sharded(build, mesh, "tensor", warn=False)
    # up/kernel (8, 16) float32 split in 2 over "model": 256 B; up/bias (16,) replicated: 64 B.
    assert gs.bytes_per_device(abstract) == gs.bytes_per_device(placed) == {d: 320 for d in range(8)}
    assert gs.bytes_per_device(nnx.eval_shape(build)) == {}


def replicated_target(mesh, **shapes):
    return {name: jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, P()))
            for name, shape in shapes.items()}


def test_a_step_older_than_the_newest_on_disk_is_refused(tmp_path):
    # Was saved: with steps [5, 6] and keep=2, saving 3 deleted 5 (newer) and latest() still named 6.
    with checkpoint.CheckpointWriter(tmp_path, keep=2) as writer:
        for step in (5, 6):
            writer.save(step, {"a": jnp.full(2, float(step))}, jax.random.key(0))
        with pytest.raises(ValueError, match=r"step 3 is older than step 6, the newest in .* \(steps \[5, 6\]\); "
                                             r"save under a step after 6"):
            writer.save(3, {"a": jnp.zeros(2)}, jax.random.key(0))
        with pytest.raises(ValueError, match=r"step 5 is already saved in"):
            writer.save(5, {"a": jnp.zeros(2)}, jax.random.key(0))
        assert writer.save(7, {"a": jnp.ones(2)}, jax.random.key(0))
    assert checkpoint.committed_steps(tmp_path) == [6, 7]


@pytest.mark.parametrize("leaf", [np.array([1.0, np.nan]), float("inf"), np.float32(np.nan)])
def test_non_finite_host_leaves_are_not_saved(tmp_path, leaf):
    # Was saved: only jax.Array leaves were checked, so NumPy and scalar NaN/inf went to disk.
    with checkpoint.CheckpointWriter(tmp_path) as writer:
        with pytest.raises(FloatingPointError, match=r"step 1 is not finite \(1 array\(s\) hold NaN or inf, e\.g\. b\)"
                           ):
            writer.save(1, {"a": jnp.ones(2), "b": leaf, "n": 3}, jax.random.key(0))
        assert writer.steps() == []


def test_a_numpy_bool_leaf_saves_and_restores(tmp_path, devices):
    # Was Orbax's "TypeHandler lookup failed for: type=<class 'numpy.bool'>" traceback: np.bool_ is no np.number.
    mesh = gs.make_mesh(model_axis=2)
    with checkpoint.CheckpointWriter(tmp_path) as writer:
        writer.save(1, {"a": jnp.ones(2), "done": np.bool_(True)}, jax.random.key(0))
    restored = checkpoint.restore(tmp_path, {**replicated_target(mesh, a=(2,)), "done": np.bool_(False)})
    assert type(restored.state["done"]) is np.bool_ and restored.state["done"]


def test_restore_refuses_a_key_sharding_that_is_no_sharding(tmp_path, devices):
    # Was JAX's "sharding should be an instance of `jax.sharding.Sharding`..." from deep inside Orbax.
    mesh = gs.make_mesh(model_axis=2)
    with checkpoint.CheckpointWriter(tmp_path) as writer:
        writer.save(1, {"a": jnp.ones(2)}, jax.random.key(0))
    with pytest.raises(TypeError, match=r"key_sharding=Mesh\(.* must be a jax\.sharding\.Sharding or None, e\.g\. "
                                        r"NamedSharding\(mesh, PartitionSpec\(\)\)"):
        checkpoint.restore(tmp_path, replicated_target(mesh, a=(2,)), key_sharding=mesh)
    key = checkpoint.restore(tmp_path, replicated_target(mesh, a=(2,)), key_sharding=NamedSharding(mesh, P())).key
    assert key.sharding == NamedSharding(mesh, P()) and jax.random.key_data(key).tolist() == [0, 0]


class StringAnnotated(nnx.Module):
    def __init__(self):
        self.p = nnx.Param(jnp.ones((8,)), out_sharding="embed", eager_sharding=False)
        self.q = nnx.Param(jnp.ones((8, 4)), out_sharding="embed", eager_sharding=False)


def test_a_bare_string_annotation_names_one_dimension(devices):
    # Was read one name per character: ('e', 'm', 'b', 'e', 'd'), "annotation rank 5 != array rank 1".
    mesh = gs.make_mesh(model_axis=2)
    model = StringAnnotated()
    assert gs.logical_axes_of(model.p) == ("embed",)
    plan = gs.plan_shardings(model, mesh, "fsdp")
    assert plan.specs == {"p": P("data"), "q": P()}
    # The reason goes on with the stacked-layer fix (one dimension more, as nnx.vmap leaves without transform_metadata)
    assert plan.fallbacks.keys() == {"q"} and plan.fallbacks["q"].startswith("annotation rank 1 != array rank 2: ")


def test_shard_model_places_an_abstract_model_as_abstract_sharded_does(devices):
    # Was JAX's "Argument of type <class 'jax.ShapeDtypeStruct'> is not a valid JAX type" from jax.device_put.
    mesh = gs.make_mesh(model_axis=2)
    abstract = gs.abstract_sharded(build, None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the experimental-rule notice
        gs.shard_model(abstract, mesh, "tensor")
    planned = gs.abstract_sharded(build, mesh, "tensor", warn=False)
    assert gs.partition_specs(abstract) == gs.partition_specs(planned) == {"up/bias": "P()",
                                                                           "up/kernel": "P(None, 'model')"}
    assert gs.bytes_per_device(abstract) == gs.bytes_per_device(planned)
    assert isinstance(abstract.up.kernel.get_value(), jax.ShapeDtypeStruct) and abstract.count.get_value() == 5
    gs.place(abstract, gs.plan_shardings(abstract, mesh, "fsdp"))  # then under another rule
    assert gs.partition_specs(abstract)["up/kernel"] == "P('data', None)"


def test_host_to_global_array_inside_jit_with_a_mesh_says_to_call_it_outside(devices):
    # Without mesh= it said so; with mesh= given it was JAX's ConcretizationTypeError (is_fully_addressable).
    mesh = gs.make_mesh(model_axis=2)
    for given in ({"mesh": mesh}, {}):
        with gs.mesh_context(mesh), pytest.raises(ValueError, match=r"host_to_global_array was called under a JAX "
                                                                    r"transformation \(jax.jit, jax.grad, ...\): it runs "
                                                                    "outside them; call it on host data before the step "
                                                                    "function"):
            jax.jit(lambda a: gs.host_to_global_array(a, **given))(np.ones((16, 2), np.float32))


class Tied(nnx.Module):
    def __init__(self, rngs):
        self.encode = nnx.Linear(8, 16, rngs=rngs, kernel_metadata=gs.axes("embed", "mlp"))
        self.decode = self.encode  # one variable, two attributes (tied weights)


def test_tied_weights_count_once_in_a_tuple_of_nodes(devices):
    # Was 2x for the model: a tuple, list or dict of nodes was read as a pytree, listing the shared variable twice.
    mesh = gs.make_mesh(model_axis=2)
    model = gs.init_sharded(lambda: Tied(nnx.Rngs(0)), mesh, "fsdp", warn=False)
    optimizer = gs.init_optimizer_sharded(model, optax.adam(1e-3), "fsdp")
    alone = gs.bytes_per_device(model)[0]
    assert alone == 128 // 4 * 4 + 64  # kernel (8, 16) f32 split over data=4, bias (16,) whole
    assert gs.bytes_per_device({"model": model})[0] == alone
    assert gs.bytes_per_device((model, optimizer))[0] == alone + gs.bytes_per_device(optimizer)[0]


@pytest.mark.slow
@pytest.mark.parametrize("given", ["model", "tuple"])
def test_a_model_with_tied_weights_saved_as_a_node_restores(tmp_path, devices, given):
    # Was saved as a pytree: "encode/kernel" and "decode/kernel" both, so restoring the very model it was
    # saved from failed with "state/decode/kernel: in the checkpoint, not in the model ... hyperparameters".
    mesh = gs.make_mesh(model_axis=2)
    model = gs.init_sharded(lambda: Tied(nnx.Rngs(0)), mesh, "fsdp", warn=False)
    optimizer = gs.init_optimizer_sharded(model, optax.adam(1e-3), "fsdp")
    nodes = model if given == "model" else (model, optimizer)
    with checkpoint.CheckpointWriter(tmp_path) as writer:
        writer.save(1, nodes, jax.random.key(0))
    # The tensor plan's target, and the nodes themselves (a target node is read as its nnx.state, where it lies).
    for target, spec in ((checkpoint.abstract_state_for(nodes, mesh, "tensor"), P(None, "model")),
                         (nodes, P("data", None))):
        state = checkpoint.restore(tmp_path, target).state
        (name, layer), = (state if given == "model" else state[0]).items()  # once, as nnx.state names it
        kernel = layer["kernel"].get_value()
        assert name in ("encode", "decode") and kernel.sharding.spec == spec
        np.testing.assert_array_equal(np.asarray(kernel), np.asarray(model.encode.kernel.get_value()))


def test_a_dict_of_states_sharing_variables_keeps_its_layout(tmp_path, devices):
    # The harness saves its best weights beside the weights they copy (one State's variables, twice): only graph
    # nodes holding a shared variable are read as nnx.state, never a pytree of states.
    mesh = gs.make_mesh(model_axis=2)
    state = nnx.state(gs.init_sharded(lambda: Tied(nnx.Rngs(0)), mesh, "fsdp", warn=False))
    with checkpoint.CheckpointWriter(tmp_path) as writer:
        writer.save(1, {"0": state, "best": state}, jax.random.key(0))
    target = checkpoint.abstract_state_for(lambda: Tied(nnx.Rngs(1)), mesh, "tensor")
    restored = checkpoint.restore(tmp_path, {"0": target, "best": target}).state
    assert sorted(restored) == ["0", "best"]
    (layer,) = state  # "decode" or "encode": nnx.state names the tied layer once
    for name in ("0", "best"):
        np.testing.assert_array_equal(np.asarray(restored[name][layer]["kernel"].get_value()),
                                      np.asarray(state[layer]["kernel"].get_value()))


@pytest.mark.parametrize("table, error", [
    ({"embd": "data"}, r"rule table key 'embd' is not a logical axis; valid keys: embed, mlp"),
    ({"embed": 3}, r"rule table entry \{'embed': 3\}: a value must be a mesh axis name"),
    ([("embed", "data")], r"Rule table=\[\('embed', 'data'\)\] must be a mapping of logical axis -> mesh axes")])
def test_a_rule_built_directly_is_checked_as_a_table_is(table, error):
    # Was unchecked: a typo split nothing without a word ({'embd': ...}), other values gave TypeError or
    # AttributeError from inside plan_shardings.
    with pytest.raises(ValueError, match=error):
        gs.Rule("mine", table)
    assert gs.resolve_rule(gs.Rule("mine", {"embed": ["data"]})).table == {"embed": ["data"]}


class ReadsBack(nnx.Module):
    def __init__(self, rngs):
        w = jax.random.normal(rngs.params(), (8, 4))
        self.w = nnx.Param(w / float(jnp.abs(w).max()), **gs.axes("embed", None))


def test_abstract_state_for_a_factory_reading_back_a_value_names_its_own_fix(devices):
    # Traced as init_sharded traces (to keep scalars): the refusal names abstract_state_for and the built model
    # (it was nnx.eval_shape's bare ConcretizationTypeError); init_sharded's still names shard_model.
    mesh = gs.make_mesh(model_axis=2)
    with pytest.raises(ValueError, match=r"^abstract_state_for traces the constructor, which reads a value it "
                                         r"computed .*build it eagerly and pass the built model: "
                                         r"abstract_state_for\(factory\(\), mesh, rule\)$"):
        checkpoint.abstract_state_for(lambda: ReadsBack(nnx.Rngs(0)), mesh, "fsdp")
    with pytest.raises(ValueError, match=r"^init_sharded traces .*place it: "
                                         r"model = factory\(\); shard_model\(model, mesh, rule\)"):
        gs.init_sharded(lambda: ReadsBack(nnx.Rngs(0)), mesh, "fsdp")
    with pytest.raises(ValueError, match=r"^abstract_sharded traces the constructor"):  # it said init_sharded
        gs.abstract_sharded(lambda: ReadsBack(nnx.Rngs(0)), mesh, "fsdp")
    target = checkpoint.abstract_state_for(ReadsBack(nnx.Rngs(0)), mesh, "fsdp")  # the fix it names
    assert target["w"].get_value().sharding.spec == P("data", None)


def test_host_to_global_array_of_numpy_rows_inside_jit_with_a_mesh_is_refused(devices):
    # Was: NumPy rows (a closure's constant) and mesh= inside jax.jit returned a traced value, the rows baked into the
    # program as this process's constant (on 2 processes: (b, ...) where outside it is (2 * b, ...)), while a traced
    # input was refused; the docstring says to call it outside jax.jit. Now refused alike, the fix named.
    mesh = gs.make_mesh(model_axis=2)
    rows = np.ones((16, 2), np.float32)
    with pytest.raises(ValueError) as error:
        jax.jit(lambda: gs.host_to_global_array({"x": rows}, mesh=mesh))()
    assert str(error.value) == ("host_to_global_array was called under a JAX transformation (jax.jit, jax.grad, ...): it "
                                "runs outside them; call it on host data before the step function")
    placed = gs.host_to_global_array({"x": rows}, mesh=mesh)["x"]  # the fix: outside, then pass it in
    assert placed.sharding.is_equivalent_to(NamedSharding(mesh, P(("data", "model"))), 2)
