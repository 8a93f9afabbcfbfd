"""The public API under unusual but plausible inputs: each case was a traceback, a misleading error or a silently
wrong result, found by calling the library as a user would (rule forms, annotations, batches, checkpoints).
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec as P

import gensbi_sharding as gs
from gensbi_sharding import checkpoint


@pytest.fixture(scope="module")
def mesh(devices):
    return gs.make_mesh(model_axis=2)


@pytest.mark.parametrize("table", [gs.RULES["fsdp"], "fsdp", gs.resolve_rule("fsdp"), dict(gs.RULES["fsdp"])])
def test_partition_spec_for_takes_every_rule_form_and_a_bare_name(mesh, table):
    # Was AttributeError "'tuple' object has no attribute 'get'" for RULES["fsdp"] itself (pairs), a name or a Rule.
    assert gs.partition_spec_for(("embed", None), (8, 3), table, mesh) == (P("data", None), None)
    # Was read one name per character: "annotation rank 5 != array rank 1".
    assert gs.partition_spec_for("embed", (8,), table, mesh) == (P("data"), None)


@pytest.mark.parametrize("value", ["", ["data", ""]])
def test_an_empty_mesh_axis_name_in_a_table_is_refused(mesh, value):
    # Was taken: every variable it covers fell back ("maps to mesh axis '', absent from the mesh"), warned per run.
    with pytest.raises(ValueError, match=r"rule table entry \{'embed': .*\}: a value must be a mesh axis name \(e\.g\. "
                                         r"'data' or 'model'\), a list of them, or None"):
        gs.shard_model_by_table(OddAnnotation("embed"), mesh, {"embed": value})


class OddAnnotation(nnx.Module):
    def __init__(self, entry):
        self.w = nnx.Param(jnp.ones((8, 8)), out_sharding=(entry, "mlp"), eager_sharding=False)


@pytest.mark.parametrize("entry, shown", [
    (["embed"], "['embed'] (list)"), (("embed", "mlp"), "('embed', 'mlp') (tuple)"), (1, "1 (int)")])
def test_an_annotation_entry_that_is_no_name_falls_back_saying_so(mesh, entry, shown):
    # Was TypeError "unhashable type: 'list'" from shard_model; a tuple or int was "unknown logical axis" with the
    # fix "a rule table with {1: None}", which check_table refuses.
    model = OddAnnotation(entry)
    plan = gs.plan_shardings(model, mesh, "tensor")
    assert plan.specs["w"] == P()
    assert plan.fallbacks["w"] == (f"annotation entry {shown} is no logical axis name: give one str (e.g. 'embed') "
                                   f"or None per dimension, got {(entry, 'mlp')!r}")
    with pytest.warns(gs.ShardingFallbackWarning, match=r"w \(annotation entry"):
        gs.shard_model_by_table(model, mesh, dict(gs.RULES["tensor"]))


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
        with pytest.raises(ValueError, match=r"place / shard_model got (bias|kernel) as a traced array: it places a "
                                             r"model outside jax\.jit and nnx\.jit .* place it before the step"):
            step(model)
        gs.shard_model(model, mesh, "tensor")  # outside: placed
    assert model.kernel.get_value().sharding.spec == P(None, "model")


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


@pytest.mark.parametrize("saved_typed", [True, False])
@pytest.mark.parametrize("target_typed", [True, False])
def test_restore_gives_a_key_as_the_target_holds_it(tmp_path, mesh, saved_typed, target_typed):
    # Was the saved kind whatever the target: a raw uint32 (2,) array where the model held a typed key, or the reverse.
    with checkpoint.CheckpointWriter(tmp_path) as writer:
        writer.save(1, {"k": jax.random.key(3) if saved_typed else jax.random.PRNGKey(3)}, jax.random.key(0))
    key = jax.random.key(0) if target_typed else jax.random.PRNGKey(0)
    target = {"k": jax.ShapeDtypeStruct(key.shape, key.dtype, sharding=NamedSharding(mesh, P()))}
    restored = checkpoint.restore(tmp_path, target)
    value = restored.state["k"]
    assert (value.dtype, value.shape) == (key.dtype, key.shape)
    assert (jax.random.key_data(value) if target_typed else value).tolist() == [0, 3]
    assert jax.random.key_data(restored.key).tolist() == [0, 0]  # the saved RNG key stays typed


def test_a_zero_size_key_array_is_saved_and_restored_as_its_target_holds_it(tmp_path, mesh):
    # Was Orbax's 'Cannot save arrays with zero size' inside save, then a TimeoutError when the writer exited.
    with checkpoint.CheckpointWriter(tmp_path) as writer:
        writer.save(1, {"none": jax.random.split(jax.random.key(1), 0), "two": jax.random.split(jax.random.key(1), 2)},
                    jax.random.key(0))
    keys = {"none": jax.random.split(jax.random.key(0), 0), "two": jax.random.split(jax.random.key(0), 2)}
    target = {k: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=NamedSharding(mesh, P())) for k, v in keys.items()}
    state = checkpoint.restore(tmp_path, target).state
    assert [(state[k].dtype, state[k].shape) for k in keys] == [(keys[k].dtype, keys[k].shape) for k in keys]
    assert (jax.random.key_data(state["two"]) == jax.random.key_data(jax.random.split(jax.random.key(1), 2))).all()


@pytest.mark.parametrize("spec", [P("data"), P(None, "model")])
def test_restore_refuses_a_key_sharding_that_cannot_split_the_key(tmp_path, mesh, spec):
    # Was "checkpoint ... is damaged ... (IndivisibleError ...); ... start without it" for a sound checkpoint, or
    # JAX's rank error naming no argument.
    with checkpoint.CheckpointWriter(tmp_path) as writer:
        writer.save(1, {"a": jnp.ones(8)}, jax.random.key(0))
    target = {"a": jax.ShapeDtypeStruct((8,), jnp.float32, sharding=NamedSharding(mesh, P("data")))}
    with pytest.raises(ValueError, match=r"restore target rng \(shape \(2,\)\) cannot be split as .* key_sharding "
                                         r"must fit the saved key's data, e\.g\. PartitionSpec\(\)"):
        checkpoint.restore(tmp_path, target, key_sharding=NamedSharding(mesh, spec))
    assert checkpoint.restore(tmp_path, target).state["a"].tolist() == [1.0] * 8


@pytest.mark.parametrize("args, needle", [
    ((0, np.ones((5, 4)), float("inf"), 4), "features must be castable to int, got inf"),
    ((2**70, np.ones((5, 4)), 3, 4), f"seed={2**70} must fit in 64 bits")])
def test_mesh_init_simulate_names_a_number_out_of_range(args, needle):
    # Was OverflowError "cannot convert float infinity to integer" / "Python int too large to convert to C long".
    with pytest.raises(ValueError, match=needle):
        gs.mesh_init_simulate(*args)


@pytest.mark.parametrize("call, flag", [
    (lambda mesh: gs.init_sharded(lambda: nnx.Linear(2, 2, rngs=nnx.Rngs(0)), mesh, warn="no"), "warn"),
    (lambda mesh: gs.abstract_sharded(lambda: nnx.Linear(2, 2, rngs=nnx.Rngs(0)), mesh, warn="no"), "warn"),
    (lambda mesh: gs.host_to_global_array({"x": np.ones((8, 2))}, mesh=mesh, check_processes="no"), "check_processes")])
def test_a_flag_that_is_no_bool_is_refused(mesh, call, flag):
    # Was taken as truthy: warn="no" warned, check_processes="no" ran the collective.
    with pytest.raises(TypeError, match=rf"^{flag}='no' must be True or False$"):
        call(mesh)


def linear():
    kernel_init = gs.partitioned(nnx.initializers.lecun_normal(), ("embed", "mlp"))
    return nnx.Linear(8, 8, rngs=nnx.Rngs(0), kernel_init=kernel_init)


@pytest.mark.parametrize("specs, error, message", [
    # Was JAX's "Resource axis: mdl of P(None, 'mdl') is not found in mesh" / "only valid for values of rank at least
    # 2" from device_put, naming no variable; AttributeError "'tuple' object has no attribute 'partitions'".
    ({"kernel": P(None, "mdl"), "bias": P()}, ValueError,
     "place: the plan splits kernel as P(None, 'mdl'), but mesh axis 'mdl' is not in the mesh ('data', 'model')"),
    ({"kernel": P(), "bias": P("data", "model")}, ValueError,
     "place: the plan splits bias as P('data', 'model'), but it has 2 entries for an array of shape (8,)"),
    ({"kernel": P(None, "model"), "bias": P("model")}, None, None),  # fits: placed
    ({"kernel": (None, "model"), "bias": P()}, TypeError,
     "Plan specs['kernel']=(None, 'model') must be a PartitionSpec, e.g. P(None, 'model')"),
])
def test_a_plan_built_by_hand_is_checked_naming_the_variable(mesh, specs, error, message):
    model = linear()
    if error is None:
        gs.place(model, gs.Plan(mesh, "tensor", specs, {}))
        assert model.kernel.get_value().sharding.spec == P(None, "model")
        return
    with pytest.raises(error) as caught:
        gs.place(model, gs.Plan(mesh, "tensor", specs, {}))
    assert str(caught.value).startswith(message)
    if error is ValueError:  # an abstract state too: an unfit spec was taken as it was, refused only by the compiler
        with pytest.raises(ValueError) as caught:
            gs.Plan(mesh, "tensor", specs, {}).abstract_state(nnx.eval_shape(linear))
        assert str(caught.value).startswith(message.replace("place:", "Plan.abstract_state:"))


def test_a_plan_built_by_hand_takes_a_rule_name(mesh):
    # Was AttributeError "'str' object has no attribute 'builtin'" from Plan.warn.
    plan = gs.Plan(mesh, "tensor", {"kernel": P(None, "model"), "bias": P()}, {"bias": "no annotation"})
    assert plan.rule == gs.resolve_rule("tensor")
    with pytest.warns(gs.ShardingFallbackWarning, match=r"bias \(no annotation\)"):
        with pytest.warns(gs.ExperimentalRuleWarning):  # a built-in splitting rule, as plan_shardings' plan warns
            plan.warn()
    with pytest.raises(TypeError, match="mesh must be a jax.sharding.Mesh, got None"):
        gs.Plan(None, "tensor", {}, {})


class FlaxAnnotated(nnx.Module):
    """Annotated the Flax way, eager sharding left at Flax's default (on)."""

    def __init__(self):
        self.up = nnx.Linear(8, 16, rngs=nnx.Rngs(0),
                             kernel_init=nnx.with_partitioning(nnx.initializers.lecun_normal(), ("embed", "mlp")))
        self.scale = nnx.Param(jnp.ones((16,)), sharding_names=("mlp",))


@pytest.mark.parametrize("active", [False, True])
@pytest.mark.parametrize("call", ["init_sharded", "abstract_sharded", "abstract_state_for"])
def test_a_factory_annotated_the_flax_way_is_built_unplaced_then_planned(mesh, call, active):
    # Was Flax's "An auto mesh context or metadata is required if creating a variable with annotation
    # out_sharding=P('embed', 'mlp')", or under mesh_context "Resource axis: embed of P('embed', 'mlp') is not found
    # in mesh: ('data', 'model')", naming neither the function nor the fix.
    build = {"init_sharded": gs.init_sharded, "abstract_sharded": gs.abstract_sharded,
             "abstract_state_for": checkpoint.abstract_state_for}[call]
    with gs.mesh_context(mesh if active else None), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the experimental rule, the bias's missing annotation
        built = build(FlaxAnnotated, mesh, "tensor")
    state = built if call == "abstract_state_for" else nnx.state(built)
    assert state["up"]["kernel"].get_value().sharding.spec == P(None, "model")
    assert state["scale"].get_value().sharding.spec == P("model")


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


def test_constrain_names_an_activation_that_is_no_array(mesh):
    # Was AttributeError "'list' object has no attribute 'shape'".
    with pytest.raises(TypeError, match=r"^constrain takes an array, got list \[\[1\.0, 2\.0\]\]; pass "
                                        r"jnp\.asarray\(x\)$"):
        gs.constrain([[1.0, 2.0]], ("batch", None), gs.PartitionAxis(), mesh)
    assert gs.constrain(np.ones((8, 2)), ("batch", None), gs.PartitionAxis(), mesh).sharding.spec == P("data", None)
