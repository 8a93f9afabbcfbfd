"""``init_sharded`` and ``abstract_sharded`` given odd constructors: inside ``jit``, placing inside the traced
constructor, Flax-annotated factories, global RNG draws and fixed NumPy values.

In-process, 8 simulated CPU devices (conftest); tiny modules.
"""

import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

import gensbi_sharding as gs
import gensbi_sharding.init
from gensbi_sharding import abstract_sharded, checkpoint, init_sharded, make_mesh, replicate, shard_batch
from gensbi_sharding.checkpoint import abstract_state_for
from library_helpers import Counted, WithIds, mesh


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


class DrawsFrom(nnx.Module):
    """A kernel and a bias from ``draw(shape)``: NumPy's global random state, or a generator seeded inside."""

    def __init__(self, draw):
        self.kernel = nnx.Param(jnp.asarray(draw((64, 64)), jnp.float32), **gs.axes("embed", "mlp"))
        self.bias = nnx.Param(jnp.asarray(draw((64,)), jnp.float32), **gs.axes("mlp"))


def test_init_sharded_refuses_a_constructor_whose_groups_would_hold_other_draws(devices, monkeypatch):
    # Was silent: each group of variables is computed by its own trace of the constructor, so with np.random's global
    # state the kernel and the bias came from two other draws than any eager construction makes (a permutation and
    # its inverse kept in two variables would no longer match).
    monkeypatch.setattr(gensbi_sharding.init, "GROUP_BYTES", 1)  # every variable its own group, as a model of GBs has
    mesh = gs.make_mesh(model_axis=2)

    def unseeded():
        return DrawsFrom(lambda shape: np.random.standard_normal(shape))

    with pytest.raises(ValueError) as error:
        gs.init_sharded(unseeded, mesh, "fsdp", warn=False)
    assert str(error.value).startswith("init_sharded traces the factory 'unseeded' once per group of variables, and "
                                       "two traces built different values"), str(error.value)
    assert "np.random.default_rng(0)" in str(error.value)
    assert "model = factory(); shard_model(model, mesh, rule)" in str(error.value)

    def seeded():
        rng = np.random.default_rng(0)
        return DrawsFrom(lambda shape: rng.standard_normal(shape))

    built, eager = gs.init_sharded(seeded, mesh, "fsdp", warn=False), seeded()
    for name in ("kernel", "bias"):
        np.testing.assert_array_equal(getattr(built, name)[...], getattr(eager, name)[...])
    assert built.kernel[...].sharding.spec == P("data", None)


class Buffers(nnx.Module):
    def __init__(self, rngs):
        self.lin = nnx.Linear(4, 8, rngs=rngs)
        self.table = nnx.Variable(np.arange(16, dtype=np.float32))  # a fixed NumPy buffer, in one group's trace only
        self.count = nnx.BatchStat(3)


def test_init_sharded_takes_a_constructor_holding_fixed_numpy_values(devices, monkeypatch):
    # Was refused as "two traces built different values": a NumPy-valued variable is a constant only its own group's
    # trace returns, so that trace's digest held one constant more than the others'.
    monkeypatch.setattr(gensbi_sharding.init, "GROUP_BYTES", 1)
    mesh = gs.make_mesh(model_axis=2)
    built = gs.init_sharded(lambda: Buffers(nnx.Rngs(0)), mesh, "fsdp", warn=False)
    eager = Buffers(nnx.Rngs(0))
    np.testing.assert_array_equal(built.table[...], np.arange(16, dtype=np.float32))
    np.testing.assert_array_equal(built.lin.kernel[...], eager.lin.kernel[...])
    assert built.count.get_value() == 3  # a Python scalar stays one, as factory() holds it

    def unseeded_buffer():  # a global draw kept as NumPy: still told apart, the buffer being in every trace's digest
        model = Buffers(nnx.Rngs(0))
        model.table = nnx.Variable(np.random.standard_normal(16).astype(np.float32))
        return model

    with pytest.raises(ValueError, match="two traces built different values"):
        gs.init_sharded(unseeded_buffer, mesh, "fsdp", warn=False)


def test_init_sharded_digests_its_traces_only_when_there_are_groups_to_compare(devices, monkeypatch):
    # Was: every call digested its one trace (str of every operation: ~0.5 s per 2,700), with nothing to compare.
    calls = []
    digest = gensbi_sharding.init.trace_digest
    monkeypatch.setattr(gensbi_sharding.init, "trace_digest", lambda *a: calls.append(1) or digest(*a))
    mesh = gs.make_mesh(model_axis=2)
    gs.init_sharded(lambda: Buffers(nnx.Rngs(0)), mesh, "fsdp", warn=False)
    assert calls == []
    monkeypatch.setattr(gensbi_sharding.init, "GROUP_BYTES", 1)  # 3 groups (kernel, bias, table): each digested
    gs.init_sharded(lambda: Buffers(nnx.Rngs(0)), mesh, "fsdp", warn=False)
    assert len(calls) == 3


def _lazy_model(place):
    """A constructor running a sample forward pass on a batch it places itself (``place(array, mesh)``)."""
    mesh = make_mesh()

    class Lazy(nnx.Module):
        def __init__(self, rngs):
            self.linear = nnx.Linear(4, 4, rngs=rngs)
            x = place(np.ones((8, 4), np.float32), mesh)
            self.mean = nnx.BatchStat(self.linear(x).mean(0))

    return lambda: Lazy(nnx.Rngs(0)), mesh


@pytest.mark.parametrize("place", [shard_batch, replicate], ids=["shard_batch", "replicate"])
@pytest.mark.parametrize("init", [init_sharded, abstract_sharded], ids=["init_sharded", "abstract_sharded"])
def test_placing_inside_a_traced_constructor_names_the_cause_and_fix(place, init):
    # Was: JAX's bare "Received incompatible devices for jitted computation" (abstract_sharded: no error, its dry
    # run passing what the real init then failed on).
    factory, mesh = _lazy_model(place)
    with pytest.raises(ValueError, match=rf"{place.__name__} called inside the model's constructor while "
                       rf"{init.__name__} traces it.*unplaced inside the factory.*"
                       r"model = factory\(\); shard_model\(model, mesh"):
        init(factory, mesh)


def _placing_the_model(call, mesh, tmp_path):
    """``call`` run on the Module a constructor is building (``model``), as a user might place it there."""
    import optax
    from gensbi_sharding.checkpoint import CheckpointWriter, restore
    if call == "restore":
        source = nnx.Linear(4, 4, rngs=nnx.Rngs(1))
        with CheckpointWriter(tmp_path / "ckpt") as writer:
            writer.save(0, nnx.state(source), jax.random.key(0))

    def save(model):
        with CheckpointWriter(tmp_path / "out") as writer:
            writer.save(0, nnx.state(model), jax.random.key(0))
    return {"shard_model": lambda model: gs.shard_model(model, mesh, "fsdp"),
            "shard_model_by_table": lambda model: gs.shard_model_by_table(model, mesh, "tensor"),
            "place": lambda model: gs.place(model, gs.plan_shardings(model, mesh)),
            "init_sharded": lambda model: init_sharded(lambda: nnx.Linear(2, 2, rngs=nnx.Rngs(0)), mesh),
            "init_optimizer_sharded": lambda model: gs.init_optimizer_sharded(model, optax.adam(1e-3)),
            "host_to_global_array": lambda model: gs.host_to_global_array(np.ones((8, 4), np.float32), mesh=mesh),
            "shard_batch": lambda model: shard_batch(np.ones((8, 4), np.float32), mesh),
            "shard_sample_init": lambda model: gs.shard_sample_init(np.ones((8, 4), np.float32), mesh),
            "replicate": lambda model: replicate(np.ones((8, 4), np.float32), mesh),
            "restore": lambda model: restore(tmp_path / "ckpt", abstract_state_for(model, mesh)),
            "CheckpointWriter.save": save}[call]


# What each tracer returns, and how to build the model outside it: each fix's words hold for each tracer.
_RESULTS = {"init_sharded": "the model init_sharded returns", "abstract_sharded": "the abstract model abstract_sharded "
            "returns", "abstract_state_for": "the abstract state abstract_state_for returns"}
_PLACE_EAGERLY = ("place it: model = factory(); shard_model(model, mesh, rule) (a rule table: model = factory(); "
                  "shard_model_by_table(model, mesh, rule); in the harness: model.init=eager)")
_EAGER = {"init_sharded": _PLACE_EAGERLY, "abstract_sharded": _PLACE_EAGERLY,
          "abstract_state_for": "pass the built model: abstract_state_for(factory(), mesh, rule)"}
_PLACED_INPUT = ("an input placed on the mesh's devices cannot enter it: build the sample input unplaced inside the "
                 "factory (a NumPy or jnp array: jnp.ones((8, dim))), or build the model eagerly and {eager}")


@pytest.mark.parametrize("call, fix", [
    ("shard_model", "drop the call: {result} is laid out by its plan (another layout: another rule)"),
    ("shard_model_by_table", "drop the call: {result} is laid out by its plan (another layout: another rule)"),
    ("place", "drop the call: {result} is laid out by its plan (another layout: another rule)"),
    ("init_sharded", "build that part unplaced there (e.g. Inner(rngs)): {init} lays it all out"),
    ("init_optimizer_sharded", "build nnx.Optimizer(model, tx, wrt=nnx.Param) there instead: {init} lays it out with "
                               "the model"),
    ("host_to_global_array", _PLACED_INPUT), ("shard_batch", _PLACED_INPUT), ("shard_sample_init", _PLACED_INPUT),
    ("replicate", _PLACED_INPUT),
    ("restore", "build the model first, then restore into it: nnx.update(model, restore(path, "
                "abstract_state_for(model, mesh, rule)).state)"),
    ("CheckpointWriter.save", "save the model once built: writer.save(step, nnx.state(model), key)")])
@pytest.mark.parametrize("init", [init_sharded, abstract_sharded, abstract_state_for],
                         ids=["init_sharded", "abstract_sharded", "abstract_state_for"])
@pytest.mark.fast_cases(6)
def test_every_placing_entry_point_inside_a_traced_constructor_is_refused_naming_the_tracer_and_fix(
        call, fix, init, mesh, tmp_path):
    # Was JAX's or our words for a traced array, naming neither init_sharded nor the fix: shard_model, place
    # "place / shard_model got l/bias as a traced array: it places a model outside jax.jit"; a nested init_sharded
    # "called inside jax.jit"; host_to_global_array "Received incompatible devices for jitted computation"; restore
    # "checkpoint ... is damaged"; CheckpointWriter.save "The 'sharding' attribute is not available on traced array".
    # Then fixes untrue for some tracers: init_optimizer_sharded "... on the model abstract_state_for returns" (a
    # state), restore "restore into the model it returns" and save "save the model it returns" (abstract_sharded's
    # and abstract_state_for's hold no values), a nested init_sharded "the outer call places it all" (they place
    # nothing), "shard_model on the model then" (no model to place), a placed input's "place it: shard_model(...)"
    # under abstract_state_for.
    run = _placing_the_model(call, mesh, tmp_path)

    class Placing(nnx.Module):
        def __init__(self):
            self.linear = nnx.Linear(4, 4, rngs=nnx.Rngs(0))
            run(self)

    # Was, for abstract_sharded and abstract_state_for too: "builds the model itself, on one device, then places it
    # by its plan; drop the call: the model comes back placed", though they hold no values and place nothing.
    work = ("builds the model itself, on one device, then places it by its plan" if init is init_sharded else
            "traces the model itself, holding no values, and lays it out by its plan")
    name = init.__name__
    with pytest.raises(ValueError) as error, warnings.catch_warnings():
        warnings.simplefilter("error")  # refused before any plan warns (fsdp's ExperimentalRuleWarning)
        init(Placing, mesh)
    assert str(error.value) == f"{call} called inside the model's constructor while {name} traces it: {name} {work}; " + \
        fix.format(init=name, result=_RESULTS[name], eager=_EAGER[name])
    with warnings.catch_warnings(action="ignore"):
        run(nnx.Linear(4, 4, rngs=nnx.Rngs(0)))  # the same call outside a trace is not refused


def test_placing_outside_a_traced_constructor_still_places():
    # The refusal holds only while a sharded init traces the constructor: afterwards shard_batch places again.
    factory, mesh = _lazy_model(shard_batch)
    with pytest.raises(ValueError):
        init_sharded(factory, mesh)
    batch = shard_batch(np.ones((8, 4), np.float32), mesh)
    assert batch.sharding.spec == jax.sharding.PartitionSpec(("data",)) and len(batch.sharding.device_set) == 8
    model = factory()  # eager construction: placing its sample batch works
    np.testing.assert_allclose(np.asarray(model.mean.get_value()).shape, (4,))


@pytest.mark.parametrize("jit", [jax.jit, nnx.jit], ids=["jax.jit", "nnx.jit"])
def test_init_sharded_inside_jit_is_refused_naming_it_and_the_fix(jit):
    # Was: JAX's "`set_mesh` can only be used outside of `jax.jit`", naming neither init_sharded nor the fix.
    mesh = make_mesh()

    @jit
    def step(x):
        with warnings.catch_warnings(action="ignore"):
            init_sharded(lambda: nnx.Linear(4, 4, rngs=nnx.Rngs(0)), mesh)
        return x

    with pytest.raises(ValueError, match=r"init_sharded was called under a JAX transformation \(jax.jit, jax.grad, "
                                         r"...\): call it outside"):
        step(jnp.ones(()))


def test_init_sharded_inside_jit_without_mesh_still_builds():
    # mesh=None builds eagerly (no program of its own): inside jit that stays allowed.
    out = jax.jit(lambda x: init_sharded(lambda: nnx.Linear(2, 3, rngs=nnx.Rngs(0)), None).kernel.get_value() + x)
    assert out(jnp.zeros(())).shape == (2, 3)


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


@pytest.mark.parametrize("on_mesh", [True, False])
@pytest.mark.parametrize("abstract", ["eval_shape", "abstract_sharded", "one submodule"])
def test_a_factory_building_an_abstract_model_is_refused_naming_abstract_sharded(mesh, on_mesh, abstract):
    # Was, on a mesh: jnp.asarray's "TypeError: float() argument must be a string or a real number, not
    # 'ShapeDtypeStruct'" from inside JAX; with mesh=None the abstract model came back as if built.
    def linear():
        return nnx.Linear(8, 16, rngs=nnx.Rngs(0), kernel_metadata=gs.axes("embed", "mlp"))

    class Half(nnx.Module):
        def __init__(self):
            self.built, self.shape = linear(), nnx.eval_shape(linear)

    factory = {"eval_shape": lambda: nnx.eval_shape(linear), "one submodule": Half,
               "abstract_sharded": lambda: abstract_sharded(linear, mesh, "tensor")}[abstract]
    first = "shape/bias" if abstract == "one submodule" else "bias"
    with pytest.raises(ValueError) as err:
        init_sharded(factory, mesh if on_mesh else None, "tensor")
    assert str(err.value) == (
        f"init_sharded: the factory built an abstract model ({first} is a jax.ShapeDtypeStruct, as nnx.eval_shape's), "
        "holding no values; pass one that builds it: lambda: Model(..., rngs=nnx.Rngs(0)) (for a dry run: "
        "abstract_sharded(factory, mesh, rule))")
    built = init_sharded(linear, mesh if on_mesh else None, "tensor")  # the factory that builds it still does
    assert built.kernel[...].sharding.is_equivalent_to(
        jax.sharding.NamedSharding(mesh, P(None, "model")) if on_mesh else built.kernel[...].sharding, 2)


class ArrayInMetadata(nnx.Module):
    def __init__(self):
        self.w = nnx.Param(jnp.ones((8, 4)), **gs.axes("embed", "mlp"), scale=np.ones(3))  # a fresh array each build


@pytest.mark.parametrize("build", [gs.abstract_sharded, gs.init_sharded])
def test_an_array_in_a_variables_metadata_is_named_once_a_trace_compares_it(devices, build):
    # Was: ValueError "Cache keys should be comparable using __eq__ ... checking equality of metadata fields of pytree
    # node of type Param" from JAX's trace cache, on the second trace of such a factory (the first passed), no variable.
    name = build.__name__
    with pytest.raises(TypeError, match=rf"{name} traces the factory, and w's metadata 'scale' is an array, .*"
                                        r"tuple\(x.tolist\(\)\), or as a value, nnx.Variable\(x\)"):
        for _ in range(3):
            build(ArrayInMetadata, gs.make_mesh(model_axis=2), "fsdp", warn=False)


class ArraysInMetadata(nnx.Module):
    def __init__(self, scale):
        self.w = nnx.Param(jnp.ones((8, 4)), **gs.axes("embed", "mlp"), scale=scale())  # [array] or {"x": array}


@pytest.mark.parametrize("scale", [lambda: [np.ones(3)], lambda: {"x": np.ones(3)}], ids=["list", "dict"])
def test_arrays_inside_a_variables_metadata_are_named_once_a_trace_compares_them(devices, scale):
    # Was JAX's ValueError "Cache keys should be comparable using __eq__ ... metadata fields of pytree node of type
    # Param ... (Note: arrays cannot be passed as metadata fields!)", naming no variable: only a bare array was named.
    with pytest.raises(TypeError) as error:
        for _ in range(3):
            gs.abstract_sharded(lambda: ArraysInMetadata(scale), gs.make_mesh(model_axis=2), "fsdp", warn=False)
    assert str(error.value) == (
        "abstract_sharded traces the factory, and w's metadata 'scale' holds an array, which a trace's state holds as "
        "metadata, compared by equality (JAX's caches, nnx.jit of a model built anew, refuse it): hold it as a tuple, "
        "tuple(x.tolist()), or as a value, nnx.Variable(x)")


class Unannotated(nnx.Module):
    """One annotated layer (gs.partitioned: eager sharding off, as Flax keeps it) and plain ones, a norm's statistics."""

    def __init__(self, rngs):
        self.up = nnx.Linear(8, 16, rngs=rngs, kernel_init=gs.partitioned(nnx.initializers.lecun_normal(),
                                                                          ("embed", "mlp")))
        self.down = nnx.Linear(16, 8, rngs=rngs)
        self.norm = nnx.BatchNorm(8, rngs=rngs)


@pytest.mark.slow
@pytest.mark.parametrize("mesh_or_none", ["mesh", None])
def test_a_built_model_is_the_same_pytree_as_the_factorys_own(mesh_or_none, request):
    # Was: every variable came back with eager_sharding=False, Flax's default for an unannotated one being True, so
    # jax.tree.map(f, nnx.state(factory()), nnx.state(init_sharded(...))) (comparing them, a target network's soft
    # update) raised "pytree structure error: different pytree metadata at key path ['down']['bias']".
    target = request.getfixturevalue("mesh") if mesh_or_none else None

    def factory():
        model = Unannotated(nnx.Rngs(0))
        return model, nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gs.ExperimentalRuleWarning)
        built = init_sharded(factory, target, "fsdp")
    abstract = abstract_sharded(factory, target, "fsdp")
    eager = nnx.state(factory())
    same = jax.tree.map(lambda a, b: bool(np.array_equal(a, b)), eager, nnx.state(built))
    assert all(jax.tree.leaves(same))
    assert jax.tree.structure(nnx.state(abstract)) == jax.tree.structure(eager)
    assert jax.tree.structure(abstract_state_for(factory, target, "fsdp")) == jax.tree.structure(eager)
    assert built[0].up.kernel.get_metadata()["eager_sharding"] is False  # annotated: never placed at construction


class ExplicitFlags(nnx.Module):
    """Unannotated variables whose eager_sharding the user set, each against Flax's default."""

    def __init__(self, rngs):
        self.kept_off = nnx.Param(jnp.ones(4), eager_sharding=False)
        self.kept_on = nnx.BatchStat(jnp.zeros(4), eager_sharding=True)
        self.dense = nnx.Linear(4, 4, rngs=rngs)


@pytest.mark.parametrize("mesh_or_none", ["mesh", None])
def test_a_users_own_eager_sharding_flag_is_kept(mesh_or_none, request):
    # Was: build_unplaced set every unannotated variable to Flax's default (True), a user's eager_sharding=False too,
    # so jax.tree.map over nnx.state(factory()) and the built model's state raised "different pytree metadata at key
    # path ['kept_off']".
    target = request.getfixturevalue("mesh") if mesh_or_none else None
    factory = lambda: ExplicitFlags(nnx.Rngs(0))  # noqa: E731
    eager = nnx.state(factory())
    for built in (init_sharded(factory, target), abstract_sharded(factory, target)):
        assert jax.tree.structure(nnx.state(built)) == jax.tree.structure(eager)
        flags = [built.kept_off.eager_sharding, built.kept_on.eager_sharding, built.dense.bias.eager_sharding]
        assert flags == [False, True, nnx.using_eager_sharding()]
        assert all(type(flag) is bool for flag in flags), flags  # build_unplaced's marker (== False) never leaks


@pytest.mark.parametrize("ask", ["block_until_ready", "sharding"])
def test_a_constructor_asking_its_array_what_only_a_built_one_has_is_named_with_the_caller_and_fix(ask):
    # Was: JAX's AttributeError "The 'block_until_ready' method is not available on traced array with shape
    # float32[8,4]. The error occurred while tracing the function build at .../factory.py ..." (or 'sharding'),
    # naming neither init_sharded nor what to do, where reading a value (float(w.max())) names both.
    mesh = make_mesh(model_axis=2)

    class Asks(nnx.Module):
        def __init__(self):
            w = jax.random.normal(jax.random.key(0), (8, 4))
            getattr(w, ask)() if ask == "block_until_ready" else getattr(w, ask)
            self.w = nnx.Param(w, **gs.axes("embed", None))

    for build, caller in ((init_sharded, "init_sharded"), (abstract_sharded, "abstract_sharded")):
        with pytest.raises(ValueError, match=rf"{caller} traces the constructor, which asks an array it computed for "
                                             rf"what only a built array has \(The '{ask}' .* not available on traced "
                                             r"array.*build it eagerly and place it: "
                                             r"model = factory\(\); shard_model\(model, mesh"):
            build(Asks, mesh, "fsdp")
    with pytest.raises(ValueError, match=r"abstract_state_for traces the constructor.*pass the built model"):
        abstract_state_for(Asks, mesh, "fsdp")
    placed = Asks()  # eagerly, then placed: the fix given
    gs.shard_model(placed, mesh, "replicated")
    assert placed.w.get_value().sharding.spec == P()


@pytest.mark.parametrize("ask, words", [("devices", "The devices() method was called"),
                                        ("addressable_shards", "The 'addressable_shards' attribute is not available"),
                                        ("is_fully_replicated", "The is_fully_replicated property was called")])
def test_a_constructor_asking_what_jax_refuses_as_a_concretization_is_named_as_an_ask_too(ask, words):
    # Was: w.devices() (w.addressable_shards, w.is_fully_replicated) raise JAX's ConcretizationTypeError, not an
    # AttributeError, so the refusal said the constructor "reads a value it computed (... Abstract tracer value
    # encountered ...); compute that value under jax.ensure_compile_time_eval()", which does not give an array devices.
    mesh = make_mesh(model_axis=2)

    class Asks(nnx.Module):
        def __init__(self):
            w = jax.random.normal(jax.random.key(0), (8, 4))
            getattr(w, ask)() if ask == "devices" else getattr(w, ask)
            self.w = nnx.Param(w, **gs.axes("embed", None))

    with pytest.raises(ValueError, match=rf"init_sharded traces the constructor, which asks an array it computed for "
                                         rf"what only a built array has \({re.escape(words)} on traced array.*build it "
                                         r"eagerly and place it: model = factory\(\); shard_model\(model, mesh"):
        init_sharded(Asks, mesh, "fsdp")
    placed = Asks()  # eagerly, then placed: the fix given
    gs.shard_model(placed, mesh, "replicated")
    assert placed.w.get_value().sharding.spec == P()


def test_a_constructor_reading_its_values_by_tolist_is_still_told_to_compute_them_eagerly():
    """tolist() reads values (JAX words it as a method called on a tracer): the value-read advice stays."""
    mesh = make_mesh(model_axis=2)

    class Reads(nnx.Module):
        def __init__(self):
            self.sizes = nnx.Param(jnp.arange(4.0), **gs.axes(None))
            self.sizes[...].tolist()

    with pytest.raises(ValueError, match=r"init_sharded traces the constructor, which reads a value it computed "
                                         r"\(ConcretizationTypeError: .*ensure_compile_time_eval"):
        init_sharded(Reads, mesh, "fsdp")
