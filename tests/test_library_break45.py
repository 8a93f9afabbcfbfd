"""The library broken with bad and odd-but-valid input, round 45: arguments of another type given to
``partition_spec_for``, ``Plan.warn`` and a hand-built ``Plan``'s values; a Flax annotation that is no sequence;
``CheckpointWriter.save`` repeating its last step with a bad state or key; ``constrain`` without a mesh; a Module
given to ``shard_batch`` / ``replicate`` / ``host_to_global_array``; a ``wrt`` no nnx filter; a restore target that
is part of what was saved.

In-process, 8 simulated CPU devices (conftest); tiny arrays and models."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

import gensbi_sharding as gs
from gensbi_sharding.checkpoint import CheckpointWriter


@pytest.mark.parametrize("shape", [8, None, "8", (8.0,), (-8,), (True,)])
def test_partition_spec_for_names_a_shape_that_is_no_sequence_of_sizes(devices, shape):
    # Was: TypeError "object of type 'int' has no len()" (8, None), "not all arguments converted during string
    # formatting" ('8'), and (8.0,) or (-8,) planned as P('data') as if a size.
    mesh = gs.make_mesh(model_axis=2)
    with pytest.raises(TypeError, match=r"^shape=.* must be a sequence of sizes \(int >= 0\), e\.g\. \(8,\) or "
                                        r"value\.shape$"):
        gs.partition_spec_for(("embed",), shape, "fsdp", mesh)
    # The forms it takes: a tuple, a list, NumPy integers, a zero size.
    for good in [(8,), [8], (np.int64(8),)]:
        assert gs.partition_spec_for(("embed",), good, "fsdp", mesh) == (P("data"), None)
    assert gs.partition_spec_for(("embed",), (0,), "fsdp", mesh) == (P("data"), None)


@pytest.mark.parametrize("key", ["sharding_names", "out_sharding"])
def test_a_flax_annotation_no_sequence_is_a_fallback_naming_it_not_a_crash(devices, key):
    # Was: shard_model / plan_shardings raised TypeError "'int' object is not iterable" from logical_axes_of for
    # nnx.Linear(..., kernel_metadata={"sharding_names": 5}); an entry of the wrong type in a tuple was already a
    # fallback naming it, as is a bare int now.
    mesh = gs.make_mesh(model_axis=2)
    model = nnx.Linear(8, 16, kernel_metadata={key: 5, "eager_sharding": False}, rngs=nnx.Rngs(0))
    assert gs.logical_axes_of(model.kernel) == (5,)
    with pytest.warns(gs.ShardingFallbackWarning, match=r"kernel \(annotation entry 5 \(int\) is no logical axis "
                                                        r"name: give one str \(e\.g\. 'embed'\) or None per dimension"):
        gs.shard_model(model, mesh, "fsdp")
    assert gs.sharding_of(model)["kernel"].spec == P()
    assert gs.partition_spec_for(5, (8,), "fsdp", mesh)[0] == P()


@pytest.mark.parametrize("stacklevel", ["2", 2.0, None])
def test_plan_warn_names_a_stacklevel_no_int_before_any_warning(devices, stacklevel):
    # Was: TypeError "can only concatenate str (not "int") to str" (or "'float' object cannot be interpreted as an
    # integer" from warnings.warn, after the ExperimentalRuleWarning was already given).
    mesh = gs.make_mesh(model_axis=2)
    model = nnx.Linear(8, 16, rngs=nnx.Rngs(0))  # unannotated: fallbacks to warn
    plan = gs.plan_shardings(model, mesh, "fsdp")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(TypeError, match=r"^stacklevel=.* must be an int, as for warnings\.warn: e\.g\. "
                                            r"stacklevel=2$"):
            plan.warn(stacklevel=stacklevel)
    assert caught == []
    with pytest.warns(gs.ShardingFallbackWarning):
        plan.warn(stacklevel=np.int64(2))


@pytest.mark.parametrize("field, value, message", [
    ("fallbacks", {"kernel": 3}, "Plan fallbacks['kernel']=3 must be a str, e.g. 'no annotation'"),
    ("shapes", {"kernel": 8}, "Plan shapes['kernel']=8 must be a tuple of sizes, e.g. (8, 16)"),
    ("shapes", {"kernel": None}, "Plan shapes['kernel']=None must be a tuple of sizes, e.g. (8, 16)")])
def test_a_plan_built_by_hand_with_a_value_of_another_type_is_named(devices, field, value, message):
    # Was: accepted; a reason 3 raised AttributeError ('int' object has no attribute 'startswith') in warn, a shape 8
    # TypeError ("'int' object is not iterable") in place.
    mesh = gs.make_mesh(model_axis=2)
    model = nnx.Linear(8, 16, rngs=nnx.Rngs(0))
    fields = {"specs": {"kernel": P(), "bias": P()}, "fallbacks": {}, "shapes": {}, field: value}
    with pytest.raises(TypeError) as err:
        gs.Plan(mesh, "fsdp", **fields)
    assert str(err.value) == message
    placed = gs.Plan(mesh, "fsdp", {"kernel": P("data"), "bias": P()}, {"bias": "no annotation"},
                     {"kernel": [8, 16], "bias": (16,)})  # a list, as a plan read back from JSON holds
    gs.place(model, placed)
    assert gs.sharding_of(model)["kernel"].spec == P("data")


@pytest.mark.parametrize("bad", [
    {"state": None}, {"state": 3}, {"key": None}, {"key": jax.random.PRNGKey(0)}, {"info": 3}, {"info": {1: "a"}}])
def test_save_at_the_step_it_last_saved_still_names_a_bad_state_key_or_info(tmp_path, devices, bad):
    # Was: save(step, ...) at the writer's last saved step returned False before any check: maybe_save(30, ...) then
    # save(30, None, key) (the final save of a loop, state forgotten) passed without a word.
    state = nnx.state(nnx.Linear(2, 2, rngs=nnx.Rngs(0)))
    with CheckpointWriter(tmp_path / "ckpt", every=10, async_save=False) as writer:
        assert writer.maybe_save(10, state, jax.random.key(0))
        args = {"state": state, "key": jax.random.key(0), "info": None, **bad}
        with pytest.raises((TypeError, ValueError), match=r"(state|key|info)=|JSON keys are str"):
            writer.save(10, args["state"], args["key"], info=args["info"])
        assert writer.save(10, state, jax.random.key(0)) is False  # the same step, good arguments: nothing written
        assert writer.steps() == [10]


@pytest.mark.parametrize("names, message", [
    ("batch", r"activation names 'batch' must be a sequence, one per dimension: e\.g\. \('batch',\)"),
    (("batch",), r"activation names \('batch',\) have 1 entries for an array of shape \(8, 4\)"),
    (("batch", "embed"), r"unknown activation name 'embed'; known names: batch, sequence"),
    ((1, None), r"unknown activation name 1; known names")])
def test_constrain_without_a_mesh_names_bad_activation_names(devices, names, message):
    # Was: without a mesh (one device, a dry test of the model) constrain returned x for any names: the model's typo
    # surfaced only once it ran on a mesh.
    x = jnp.ones((8, 4))
    with pytest.raises(ValueError, match=message):
        gs.constrain(x, names, gs.PartitionAxis())
    with pytest.raises(ValueError, match=message):
        jax.jit(lambda v: gs.constrain(v, names, gs.PartitionAxis()))(x)
    assert gs.constrain(x, ("batch", None), gs.PartitionAxis()) is x  # good names: x itself, as before
    assert gs.constrain(x, ("batch", "embed"), None) is x  # no PartitionAxis: no constraint, names unread


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


@pytest.mark.parametrize("wrt", [3, 2.0, {"w": nnx.Param}, [nnx.Param, 3]])
def test_init_optimizer_sharded_names_a_wrt_no_nnx_filter(devices, wrt):
    # Was: ValueError "Invalid format specifier '!r' for object of type 'int'" (Flax's own message for a bad filter
    # fails to format), naming neither wrt nor a filter.
    import optax

    mesh = gs.make_mesh(model_axis=2)
    model = gs.init_sharded(lambda: nnx.Linear(4, 4, rngs=nnx.Rngs(0)), mesh, "fsdp")
    with pytest.raises(TypeError, match=r"^wrt=.* must be an nnx filter, e\.g\. nnx\.Param or \(nnx\.Param, "
                                        r"nnx\.BatchStat\)$"):
        gs.init_optimizer_sharded(model, optax.sgd(0.1), "fsdp", wrt=wrt)
    for good in [nnx.Param, (nnx.Param,), [nnx.Param], "params", ..., nnx.PathContains("kernel")]:
        assert isinstance(gs.init_optimizer_sharded(model, optax.sgd(0.1), "fsdp", wrt=good), nnx.Optimizer)


def test_restore_into_part_of_what_was_saved_names_the_whole_not_hyperparameters(tmp_path, devices):
    # Was: "6 variable(s) differ: state/1/opt_state/...: in the checkpoint, not in the model; ... Build the model with
    # the hyperparameters saved in .../config", though every variable of the target was saved at its shape: a target
    # of (model,) or the Params of (model, optimizer), under no prefix the "saved from a tuple" hint looks for.
    import optax

    from gensbi_sharding.checkpoint import abstract_state_for, restore

    mesh = gs.make_mesh(model_axis=2)

    def pair():
        model = nnx.Linear(4, 8, rngs=nnx.Rngs(0))
        return model, nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)

    with CheckpointWriter(tmp_path / "ckpt", async_save=False) as writer:
        writer.save(1, nnx.state(pair()), jax.random.key(0))
    for target in (abstract_state_for(lambda: (pair()[0],), mesh, "fsdp"),
                   nnx.state(gs.abstract_sharded(pair, mesh, "fsdp"), nnx.Param)):
        with pytest.raises(ValueError) as err:
            restore(tmp_path / "ckpt", target)
        assert str(err.value).endswith(
            "6 more variable(s): restore into a target of all it holds, e.g. abstract_state_for((model, optimizer), "
            "mesh, rule), and keep the part you need"), str(err.value)
        assert "hyperparameters" not in str(err.value)
    restored = restore(tmp_path / "ckpt", abstract_state_for(pair, mesh, "fsdp"))
    assert restored.step == 1 and restored.state[0]["kernel"][...].shape == (4, 8)


@pytest.mark.parametrize("init", [3, ("embed", "mlp")])
def test_partitioned_names_an_initializer_that_is_not_callable_before_any_layer_is_built(init):
    """``partitioned(3, names)`` (or the names passed first) was accepted, and building the layer raised Flax's
    "'int' object is not callable", naming neither the argument nor the fix."""
    with pytest.raises(TypeError, match=r"partitioned: init=.* must be an initializer, e\.g\. "
                                        r"nnx\.initializers\.lecun_normal\(\)"):
        gs.partitioned(init, ("embed", "mlp"))
    assert callable(gs.partitioned(nnx.initializers.lecun_normal(), ("embed", "mlp")))
