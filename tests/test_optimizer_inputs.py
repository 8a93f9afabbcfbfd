"""``init_optimizer_sharded`` given odd models, rules and ``wrt`` filters: refused naming the fix, or placed as
the model is.

In-process, 8 simulated CPU devices (conftest); tiny modules.
"""

import warnings

import jax
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec as P

import gensbi_sharding as gs
from library_helpers import Annotated, Block, Counted, mesh, model


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


@pytest.mark.parametrize("wrt", [3, 2.0, {"w": nnx.Param}, [nnx.Param, 3]])
@pytest.mark.fast_cases(2)
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


def placed(rule, mesh):
    """A Block placed under ``rule`` (a name or a table); the plan's warnings are not what these tests check."""
    model = Block(nnx.Rngs(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (gs.shard_model if isinstance(rule, str) else gs.shard_model_by_table)(model, mesh, rule)
    return model


@pytest.mark.parametrize("placed_under, given, needles", [
    ("tensor", "fsdp", ["rule 'fsdp' places up/kernel at P('data', None), but the model holds it at "
                        "P(None, 'model')", "pass rule='tensor'"]),
    ("tensor", "replicated", ["rule 'replicated' places up/kernel at P(), but the model holds it at "
                              "P(None, 'model')", "pass rule='tensor'"]),
    ({"embed": "model", "mlp": "data"}, "tensor", ["rule 'tensor' places up/kernel at P(None, 'model'), but the "
                                                   "model holds it at P('model', 'data')", "pass the rule table"]),
])
def test_init_optimizer_sharded_refuses_a_rule_other_than_the_models(mesh, placed_under, given, needles):
    # Was silent: the optimizer state laid out under `given` while its parameters sat under `placed_under`.
    model = placed(placed_under, mesh)
    with pytest.raises(ValueError) as err:
        gs.init_optimizer_sharded(model, optax.adam(1e-3), given)
    for needle in needles:
        assert needle in str(err.value), str(err.value)


def test_init_optimizer_sharded_refuses_an_abstract_model_planned_otherwise(mesh):
    abstract = gs.abstract_sharded(lambda: Block(nnx.Rngs(0)), mesh, "tensor", warn=False)
    with pytest.raises(ValueError, match=r"rule 'fsdp' places up/kernel .* pass rule='tensor'"):
        gs.init_optimizer_sharded(abstract, optax.adam(1e-3), "fsdp")


def test_init_optimizer_sharded_under_the_models_rule_still_works(mesh):
    model = placed("tensor", mesh)
    optimizer = gs.init_optimizer_sharded(model, optax.adam(1e-3), "tensor")
    assert optimizer.opt_state[0].mu["up"]["kernel"][...].sharding.spec == P(None, "model")


@pytest.mark.parametrize("move, needle", [
    (lambda v: jax.device_put(v, jax.devices()[0]), "up/bias on SingleDeviceSharding on "),
    (lambda v: np.asarray(v), "up/bias on no device"),
])
def test_a_model_partly_off_the_mesh_names_a_variable_of_each_placement(mesh, move, needle):
    model = placed("tensor", mesh)
    model.up.bias.set_value(move(model.up.bias.get_value()))
    with pytest.raises(ValueError) as err:
        gs.init_optimizer_sharded(model, optax.adam(1e-3), "tensor")
    message = str(err.value)
    assert "on 1 mesh(es) and 1 other placement(s)" in message and needle in message, message
    assert "up/kernel on mesh {'data': 4, 'model': 2}" in message, message


def test_init_optimizer_sharded_takes_a_nested_filter_tuple(devices):
    # Was (round 45's wrt check): TypeError "wrt=... must be an nnx filter" for (nnx.Param, (nnx.BatchStat,)),
    # which Flax reads as Any(Param, Any(BatchStat)); a nested non-filter is still refused.
    mesh = gs.make_mesh(model_axis=2)
    model = nnx.Linear(4, 8, rngs=nnx.Rngs(0))
    gs.shard_model(model, mesh, "replicated")
    for wrt in [(nnx.Param, (nnx.BatchStat,)), [nnx.Param, [nnx.BatchStat, "tag"]]]:
        optimizer = gs.init_optimizer_sharded(model, optax.adam(1e-3), "replicated", wrt=wrt)
        assert isinstance(optimizer, nnx.Optimizer)
        counts = jax.tree.leaves(nnx.state(optimizer.opt_state))
        assert sorted(leaf.shape for leaf in counts if leaf.ndim) == [(4, 8), (4, 8), (8,), (8,)]
    try:
        gs.init_optimizer_sharded(model, optax.adam(1e-3), "replicated", wrt=(nnx.Param, (3,)))
    except TypeError as err:
        assert str(err).startswith("wrt=(") and "must be an nnx filter" in str(err)
    else:
        raise AssertionError("a nested 3 was taken as a filter")


def test_an_optimizer_over_a_model_holding_a_python_int_beyond_int32(devices):
    """init_optimizer_sharded passed the model's state to jit, scalars too: OverflowError ('An overflow was encountered
    while parsing an argument to a jitted computation ... model_state['seen'].value')."""
    mesh = gs.make_mesh(model_axis=2)
    model = gs.init_sharded(Counted, mesh, "fsdp", warn=False)
    optimizer = gs.init_optimizer_sharded(model, optax.adam(1e-3), "fsdp")
    assert model.seen.get_value() == 2**40 and model.stats.get_value()["n"] == 2**40
    assert gs.sharding_of(optimizer)["opt_state/0/mu/w"].spec == jax.sharding.PartitionSpec("data", None)
    np.testing.assert_array_equal(optimizer.opt_state[0].mu["w"].get_value(), np.zeros((8, 4)))


@pytest.mark.parametrize("make_tx", [
    lambda: optax.inject_hyperparams(optax.adamw)(learning_rate=1e-3, weight_decay=1e-4),
    lambda: optax.contrib.schedule_free_adamw(1e-3),
])
@pytest.mark.parametrize("on_mesh", [True, False])
def test_an_abstract_model_takes_an_optimizer_whose_init_reads_its_parameters(mesh, make_tx, on_mesh):
    """Was: TypeError "float() argument must be a string or a real number, not 'ShapeDtypeStruct'" from inside optax's
    init (inject_hyperparams' tree dtype, schedule_free's copy), which read the abstract model closed over by eval_shape."""
    tx, factory = make_tx(), lambda: Block(nnx.Rngs(0))
    abstract = gs.abstract_sharded(factory, mesh if on_mesh else None, "tensor", warn=False)
    optimizer = gs.init_optimizer_sharded(abstract, tx, "tensor")
    want = nnx.state(gs.init_optimizer_sharded(gs.init_sharded(factory, mesh, "tensor", warn=False), tx, "tensor"))
    got = nnx.state(optimizer)
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        assert isinstance(a, jax.ShapeDtypeStruct) and (a.shape, a.dtype) == (b.shape, b.dtype)
        assert a.sharding.is_equivalent_to(b.sharding, b.ndim) if on_mesh else a.sharding is None


class ScaledBlock(nnx.Module):
    """A linear layer and a learned NumPy-scalar gain: optax's schedule-free state copies it as such (its ``z``)."""

    def __init__(self, rngs):
        self.linear = nnx.Linear(8, 4, rngs=rngs, kernel_init=gs.partitioned(nnx.initializers.lecun_normal(),
                                                                             ("embed", "mlp")))
        self.gain = nnx.Param(np.float32(0.5))


def test_an_optimizer_state_copying_a_numpy_scalar_parameter_is_placed_as_planned(devices):
    # Was: ValueError "pytree structure error: different lengths of list at key path pjit out_shardings ... of
    # length 12, but the full pytree ... of length 11": eval_shape's optimizer (the plan) held z/gain as an array,
    # the state created in jit as the NumPy scalar optax copied, so the two lists of variables differed.
    mesh = gs.make_mesh(model_axis=2)
    model = gs.init_sharded(lambda: ScaledBlock(nnx.Rngs(0)), mesh, "tensor", warn=False)
    optimizer = gs.init_optimizer_sharded(model, optax.contrib.schedule_free_adamw(1e-3), "tensor")
    z = optimizer.opt_state.z
    assert gs.sharding_of(optimizer)["opt_state/z/linear/kernel"].spec == P(None, "model")
    assert z["gain"].get_value().sharding.spec == P() and z["gain"].get_value().dtype == np.float32
    assert float(z["gain"].get_value()) == 0.5
    np.testing.assert_array_equal(z["linear"]["kernel"].get_value(), model.linear.kernel.get_value())
