"""The library broken as users break it, on less-trodden paths: checkpoint paths written with ``~``, checkpoints
restored into a model whose optimizer or attribute names changed.

In-process, 8 simulated CPU devices (conftest); tiny models, a save or two each."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

import gensbi_sharding as gs
from gensbi_sharding.checkpoint import (CheckpointWriter, abstract_state_for, committed_steps, find_checkpoint,
                                        restore)


class Small(nnx.Module):
    def __init__(self, rngs, first="up"):
        setattr(self, first, nnx.Linear(4, 8, rngs=rngs, kernel_init=gs.partitioned(
            nnx.initializers.lecun_normal(), ("embed", "mlp"))))
        self.down = nnx.Linear(8, 4, rngs=rngs)


def save(directory, state, step=1, **kwargs):
    with CheckpointWriter(directory, **kwargs) as writer:
        assert writer.save(step, state, jax.random.key(0))
        return writer.directory


def test_a_path_with_a_tilde_is_the_home_folder_for_every_checkpoint_function(tmp_path, monkeypatch, devices):
    """``CheckpointWriter("~/ck")`` wrote into a folder named ``~`` under the working directory, and
    ``committed_steps`` and ``base_dir`` read it there, while ``restore("~/ck")`` looked in the home folder."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    model = Small(nnx.Rngs(0))
    assert save("~/run/checkpoints", nnx.state(model)) == home / "run" / "checkpoints"
    assert not (cwd / "~").exists()
    assert committed_steps("~/run/checkpoints") == [1]
    mesh = gs.make_mesh(model_axis=2)
    restored = restore("~/run", abstract_state_for(Small(nnx.Rngs(1)), mesh, "fsdp"))
    assert restored.path == home / "run" / "checkpoints" / "1"
    np.testing.assert_array_equal(restored.state["up"]["kernel"].get_value(), model.up.kernel.get_value())
    assert find_checkpoint("run", base_dir="~") == restored.path


@pytest.fixture(scope="module")
def adam_run(tmp_path_factory, devices):
    """A (model, adam optimizer) checkpoint saved under tensor on (4, 2)."""
    mesh = gs.make_mesh(model_axis=2)
    model = gs.init_sharded(lambda: Small(nnx.Rngs(0)), mesh, "tensor", warn=False)
    optimizer = gs.init_optimizer_sharded(model, optax.adam(1e-3), "tensor")
    return save(tmp_path_factory.mktemp("adam") / "checkpoints", nnx.state((model, optimizer))), model


def test_a_checkpoint_of_another_optimizer_names_the_optimizer_and_how_to_switch(adam_run, devices):
    """adam saved, sgd restored: every difference is optimizer state, but the fix named the model's hyperparameters;
    following the fix given (the optimizer as saved, then the new one over the restored model) restores the weights."""
    directory, saved = adam_run
    mesh = gs.make_mesh(model_axis=1)
    model = Small(nnx.Rngs(1))
    for tx in (optax.sgd(1e-3), optax.sgd(1e-3, momentum=0.9), optax.lion(1e-3)):
        with pytest.raises(ValueError, match=r"opt_state.*Only the optimizer state differs: the checkpoint was saved "
                                             r"with another optimizer.*nnx.Optimizer\(model, new_tx") as error:
            restore(directory, abstract_state_for((model, nnx.Optimizer(model, tx, wrt=nnx.Param)), mesh, "fsdp"))
        assert "hyperparameters" not in str(error.value)
    restored = restore(directory, abstract_state_for((model, nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)),
                                                     mesh, "fsdp"))
    nnx.update(model, restored.state[0])
    switched = nnx.Optimizer(model, optax.sgd(1e-3), wrt=nnx.Param)
    np.testing.assert_array_equal(model.up.kernel.get_value(), saved.up.kernel.get_value())
    assert switched.step.get_value() == 0 and jax.tree.leaves(switched.opt_state) == []  # plain sgd keeps no state


def test_a_renamed_attribute_is_named_with_both_names(adam_run, devices):
    """self.up renamed self.up_proj: every difference is that name (in the model and in the optimizer's moments), but
    the fix named the model's hyperparameters; a layer added still names them."""
    directory, saved = adam_run
    mesh = gs.make_mesh(model_axis=2)

    def target(model):
        return abstract_state_for((model, nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)), mesh, "tensor")

    with pytest.raises(ValueError, match=r"up_proj/kernel: missing.*Every difference is one name: the checkpoint's "
                                         r"'up' is the target's 'up_proj'.*name it 'up' again"):
        restore(directory, target(Small(nnx.Rngs(1), first="up_proj")))
    bigger = Small(nnx.Rngs(1))
    bigger.extra = nnx.Linear(4, 4, rngs=nnx.Rngs(2))
    with pytest.raises(ValueError, match="extra/kernel: missing.*Build the model with the hyperparameters"):
        restore(directory, target(bigger))
    restored = restore(directory, target(Small(nnx.Rngs(1))))
    np.testing.assert_array_equal(restored.state[0]["up"]["kernel"].get_value(), saved.up.kernel.get_value())


BIG = np.array([2**40 + i for i in range(8)], np.int64)  # an id or a nanosecond clock: beyond int32


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


class WithIds(nnx.Module):
    def __init__(self, rngs, ids=BIG):
        self.ids = nnx.Variable(ids)
        self.lin = nnx.Linear(2, 4, rngs=rngs)


def test_a_model_value_its_32_bit_place_cannot_hold_is_refused(tmp_path, devices):
    """shard_model, init_sharded and CheckpointWriter.save (whose restore places every array) placed or saved int64 2**40
    to come back 0; now each names the variable, before anything moves or is written."""
    mesh = gs.make_mesh(model_axis=2)
    model = WithIds(nnx.Rngs(0))
    before = gs.sharding_of(model)
    with pytest.raises(ValueError, match=r"place / shard_model: ids \(shape \(8,\)\) holds 1099511627776 \(int64\)"):
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


def test_a_hand_built_spec_naming_a_mesh_axis_twice_or_unconstrained_is_named_with_its_variable(devices):
    """A Plan built by hand: P('data', 'data') raised JAX's DuplicateSpecError naming no variable, P(('data', 'data'))
    was 'not divisible by ... of size 16', P(UNCONSTRAINED) a TypeError ('UnconstrainedSingleton' object is not
    iterable), in host_to_global_array's partition too; now each names the variable (leaf) and the fix."""
    P = jax.sharding.PartitionSpec
    mesh = gs.make_mesh(model_axis=2)
    model = Small(nnx.Rngs(0))
    plan = gs.plan_shardings(model, mesh, "fsdp")
    before = gs.sharding_of(model)
    for spec, why in ((P("data", "data"), "names mesh axis 'data' twice"), (P(("data", "data")), "'data' twice"),
                      (P(P.UNCONSTRAINED), "UNCONSTRAINED leaves a layout to jit's compiler.*give None")):
        bad = gs.Plan(mesh, "fsdp", {**plan.specs, "up/kernel": spec}, {})
        for call, name in ((lambda: gs.place(model, bad), "place"), (lambda: bad.abstract_state(model),
                                                                     "Plan.abstract_state")):
            with pytest.raises(ValueError, match=rf"{name}: the plan splits up/kernel as .*{why}.*fix that spec"):
                call()
        assert gs.sharding_of(model) == before  # nothing moved
    for spec in (P(P.UNCONSTRAINED), P("data", P.UNCONSTRAINED)):
        with pytest.raises(ValueError, match=r"for leaf \['x'\] holds PartitionSpec.UNCONSTRAINED.*give None"):
            gs.host_to_global_array({"x": np.ones((8, 8))}, mesh=mesh, partition={"x": spec})


class Counted(nnx.Module):
    """A step count and a seed kept as Python numbers (values, not arrays), one beyond int32."""

    def __init__(self):
        self.seen = nnx.Variable(2**40)
        self.flag = nnx.Variable(True)
        self.stats = nnx.Variable({"n": 2**40, "mean": jnp.ones((8,))})
        self.w = nnx.Param(jnp.ones((8, 4)), **gs.axes("embed", None))


def test_a_python_int_beyond_int32_in_a_factory_keeps_its_value(devices):
    """init_sharded, abstract_sharded and abstract_state_for(factory) raised OverflowError ('Python int 1099511627776
    too large to convert to int32', from the trace), though a scalar variable stays a value, as factory() holds it."""
    mesh = gs.make_mesh(model_axis=2)
    built = gs.init_sharded(Counted, mesh, "fsdp", warn=False)
    assert (built.seen.get_value(), built.flag.get_value(), built.stats.get_value()["n"]) == (2**40, True, 2**40)
    assert type(built.seen.get_value()) is int and built.w.get_value().sharding.spec == jax.sharding.PartitionSpec(
        "data", None)
    assert gs.abstract_sharded(Counted, mesh, "fsdp", warn=False).seen.get_value() == 2**40
    assert abstract_state_for(Counted, mesh, "fsdp")["stats"].get_value()["n"] == 2**40


def test_an_optimizer_over_a_model_holding_a_python_int_beyond_int32(devices):
    """init_optimizer_sharded passed the model's state to jit, scalars too: OverflowError ('An overflow was encountered
    while parsing an argument to a jitted computation ... model_state['seen'].value')."""
    mesh = gs.make_mesh(model_axis=2)
    model = gs.init_sharded(Counted, mesh, "fsdp", warn=False)
    optimizer = gs.init_optimizer_sharded(model, optax.adam(1e-3), "fsdp")
    assert model.seen.get_value() == 2**40 and model.stats.get_value()["n"] == 2**40
    assert gs.sharding_of(optimizer)["opt_state/0/mu/w"].spec == jax.sharding.PartitionSpec("data", None)
    np.testing.assert_array_equal(optimizer.opt_state[0].mu["w"].get_value(), np.zeros((8, 4)))


def test_the_optimizers_own_step_counter_is_a_step(tmp_path, devices):
    """optimizer.step[...] (a 0-d uint32 array) was refused as no integer, naming no fix, and due() gave an array."""
    model = Small(nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
    optimizer.step.set_value(optimizer.step.get_value() + 4)
    with CheckpointWriter(tmp_path / "checkpoints", every=2) as writer:
        assert writer.due(optimizer.step[...]) is True and writer.due(np.int64(3)) is False
        assert writer.maybe_save(optimizer.step[...], nnx.state((model, optimizer)), jax.random.key(0)) is True
        assert writer.last_saved == 4 and type(writer.last_saved) is int
        assert writer.save(np.asarray(6), nnx.state((model, optimizer)), jax.random.key(0))
        with pytest.raises(ValueError, match=r"step=8.0 must be an integer >= 0 .*e.g. int\(optimizer.step\[...\]\)"):
            writer.save(8.0, nnx.state((model, optimizer)), jax.random.key(0))
    assert committed_steps(tmp_path / "checkpoints") == [4, 6]


def test_saving_an_abstract_state_is_refused_naming_the_variable(tmp_path, devices):
    """abstract_sharded's model saved by mistake: Orbax's ValueError ('TypeHandler lookup failed for: type=<class
    'jax.ShapeDtypeStruct'>, keypath=(DictKey(key='state'), ...') named no fix, and left a temporary step folder."""
    mesh = gs.make_mesh(model_axis=2)
    abstract = gs.abstract_sharded(lambda: Small(nnx.Rngs(0)), mesh, "fsdp", warn=False)
    with CheckpointWriter(tmp_path / "checkpoints") as writer:
        with pytest.raises(TypeError, match=r"CheckpointWriter.save: down/bias is abstract \(ShapeDtypeStruct.*save a "
                                            r"built state \(init_sharded's"):
            writer.save(1, nnx.state(abstract), jax.random.key(0))
        assert writer.last_saved is None and list((tmp_path / "checkpoints").iterdir()) == []
        assert writer.save(1, nnx.state(gs.init_sharded(lambda: Small(nnx.Rngs(0)), mesh, "fsdp", warn=False)),
                           jax.random.key(0))
    assert committed_steps(tmp_path / "checkpoints") == [1]


def test_a_table_of_rules_passed_as_a_rule_names_one_rule_to_pass(devices):
    """gs.RULES itself (or {'fsdp': table}) as a rule: the message offered {'replicated': None}, which fixes nothing."""
    mesh = gs.make_mesh(model_axis=2)
    model = Small(nnx.Rngs(0))
    for wrong, name in ((gs.RULES, "replicated"), ({"fsdp": dict(gs.RULES["fsdp"])}, "fsdp")):
        for call in (lambda: gs.shard_model_by_table(model, mesh, wrong), lambda: gs.PartitionAxis.for_rule(wrong, mesh),
                     lambda: gs.plan_shardings(model, mesh, wrong)):
            with pytest.raises(ValueError, match=rf"key '{name}' is not a logical axis.*'{name}' names a rule: this is "
                                                 rf"a table of rules \(RULES itself\?\); pass one rule, e.g. '{name}' or "
                                                 rf"RULES\['{name}'\]") as error:
                call()
            assert f"{{'{name}': None}}" not in str(error.value)
    with pytest.warns(gs.ShardingFallbackWarning, match="no annotation"):  # down/kernel, and the biases
        gs.shard_model_by_table(model, mesh, gs.RULES["fsdp"])  # the fix given
    assert gs.sharding_of(model)["up/kernel"].spec == jax.sharding.PartitionSpec("data", None)


def test_the_key_restored_by_default_goes_where_a_one_device_target_is(tmp_path, devices):
    """A target on device 3 (no mesh): the key went to device 0, and the first step mixing them raised 'Received
    incompatible devices for jitted computation'."""
    model = Small(nnx.Rngs(0))
    save(tmp_path / "checkpoints", nnx.state(model))
    three = jax.sharding.SingleDeviceSharding(jax.devices()[3])
    target = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=three), nnx.state(Small(nnx.Rngs(1))))
    restored = restore(tmp_path / "checkpoints", target)
    assert restored.key.sharding == three == restored.state["up"]["kernel"].get_value().sharding
    noised = jax.jit(lambda s, k: jax.tree.map(lambda a: a + jax.random.normal(k, a.shape), s))(restored.state, restored.key)
    assert jax.tree.leaves(noised)[0].sharding == three


def test_a_key_holding_a_dot_beside_a_nested_key_is_refused(tmp_path, devices):
    """{"a.b": ones, "a": {"b": zeros}}: Orbax joins its arrays' keys with ".", so both were one array, saved once and
    restored into both places, without a word (as a key holding "/" was, which is refused)."""
    mesh = gs.make_mesh()
    for value in ({"a.b": jnp.ones(3), "a": {"b": jnp.zeros(3)}}, {"a": {"b.c": jnp.ones(3), "b": {"c": jnp.zeros(3)}}}):
        state = nnx.State({"stats": nnx.BatchStat(value)})
        with CheckpointWriter(tmp_path / "c") as writer, pytest.raises(
                ValueError, match=r"two leaves of the state are named 'stats/a/?.*' or one inside the other: a dict key "
                                  r"holding '/' or '.' beside a nested key"):
            writer.save(1, state, jax.random.key(0))
        assert committed_steps(tmp_path / "c") == []
    # A key holding "." alone, or beside other names, is saved and restored as it was.
    value = {"a.b": jnp.arange(3.0), "a": {"c": jnp.arange(3.0) + 10}}
    save(tmp_path / "ok", nnx.State({"stats": nnx.BatchStat(value)}))
    target = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=jax.sharding.NamedSharding(
        mesh, jax.sharding.PartitionSpec())), nnx.State({"stats": nnx.BatchStat(value)}))
    restored = restore(tmp_path / "ok", target).state["stats"].get_value()
    np.testing.assert_array_equal(restored["a.b"], np.arange(3.0))
    np.testing.assert_array_equal(restored["a"]["c"], np.arange(3.0) + 10)


def test_a_step_that_is_not_there_names_the_steps_that_are(tmp_path, devices):
    """runs/a/checkpoints/1 after keep=2 deleted it, or a step never saved: 'does not exist', naming none of those on
    disk; now they are named, and the one given restores."""
    model = Small(nnx.Rngs(0))
    with CheckpointWriter(tmp_path / "checkpoints", keep=2) as writer:
        for step in (1, 2, 3):
            writer.save(step, nnx.state(model), jax.random.key(0))
    for step in (1, 99):
        with pytest.raises(FileNotFoundError, match=rf"checkpoints/{step}' does not exist .*checkpoints holds steps "
                                                    rf"\[2, 3\]: pass one, e.g. .*checkpoints/3"):
            restore(tmp_path / "checkpoints" / str(step), abstract_state_for(model, None))
    assert restore(tmp_path / "checkpoints" / "3", abstract_state_for(model, None)).step == 3
    with pytest.raises(FileNotFoundError, match="nowhere/5' does not exist .*; pass a run dir, its checkpoints/ dir"):
        find_checkpoint(tmp_path / "nowhere" / "5")


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


@pytest.mark.parametrize("value, kept", [(1 + 2j, True), (np.str_("abc"), False), (np.datetime64("2020-01-01"), False),
                                         (np.void(b"ab"), False)])
def test_a_scalar_variable_is_saved_as_it_is_or_refused_by_name(tmp_path, devices, value, kept):
    """A Python complex was taken as a scalar and refused by Orbax ('TypeHandler lookup failed for: type=<class
    'complex'>'), a temporary step folder left; np.str_, np.datetime64 and np.void (np.generic, not numbers) were taken
    as scalars too, and refused alike, naming no fix, where a str is refused naming it."""
    class Holds(nnx.Module):
        def __init__(self):
            self.v = nnx.Variable(value)
            self.w = nnx.Param(jnp.ones(2))

    mesh = gs.make_mesh()
    with CheckpointWriter(tmp_path / "checkpoints") as writer:
        if kept:
            assert writer.save(1, nnx.state(Holds()), jax.random.key(0))
        else:
            for call in (lambda: writer.save(1, nnx.state(Holds()), jax.random.key(0)),
                         lambda: gs.init_sharded(Holds, mesh)):
                with pytest.raises(TypeError, match=rf"v holds {type(value).__name__} .*must be an array \(JAX or "
                                                    r"NumPy\) or a Python/NumPy number or bool"):
                    call()
    if kept:
        restored = restore(tmp_path / "checkpoints", abstract_state_for(Holds(), mesh)).state["v"].get_value()
        assert type(restored) is complex and restored == value
        assert gs.init_sharded(Holds, mesh).v.get_value() == value
    else:
        assert list((tmp_path / "checkpoints").iterdir()) == []


def test_init_sharded_refuses_a_value_its_place_cannot_hold_before_placing_any_group(devices, monkeypatch):
    """Checked group by group, a later group's value was refused after earlier groups had moved to the mesh."""
    import gensbi_sharding.init as init

    monkeypatch.setattr(init, "GROUP_BYTES", 16)  # one variable a group: ids (32 B) comes last
    mesh = gs.make_mesh(model_axis=2)
    before = {id(a) for a in jax.live_arrays()}
    with pytest.raises(ValueError, match=r"init_sharded: ids \(shape \(8,\)\) holds 1099511627776") as refused:
        gs.init_sharded(lambda: WithIds(nnx.Rngs(0)), mesh)
    # The traceback keeps init_sharded's frame, and with it every group it had placed: none is on the mesh.
    spread = set(mesh.devices.flat)
    on_mesh = [a.shape for a in jax.live_arrays() if id(a) not in before and a.sharding.device_set == spread]
    assert refused.tb is not None and on_mesh == []


def test_a_writer_given_a_run_folder_is_refused_naming_its_checkpoints_folder(tmp_path, devices):
    """CheckpointWriter(run) beside run/checkpoints/: its steps went to run/<step>, while restore(run) reads
    run/checkpoints and gave the older step there, without a word."""
    model = Small(nnx.Rngs(0))
    save(tmp_path / "run" / "checkpoints", nnx.state(model), step=1)
    with pytest.raises(FileExistsError, match=rf"{tmp_path / 'run'} is a run folder, holding checkpoints/, which "
                                              rf"restore reads.*pass {tmp_path / 'run' / 'checkpoints'}"):
        CheckpointWriter(tmp_path / "run")
    save(tmp_path / "run" / "checkpoints", nnx.state(model), step=2)  # the folder given
    assert restore(tmp_path / "run", abstract_state_for(model, None)).step == 2
