"""Sharded initialisation equals eager construction + shard_model: values, placements, warnings.

Values are bit-identical on every mesh, rule and device count, and equal eager
construction up to float rounding: ``init_sharded`` runs the constructor's ops fused in
jitted programs, eager construction runs them one by one (largest difference measured,
``EAGER_ATOL``: a gamma draw of ``Unusual``; the harness's models are bit-identical).
"""

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec as P

import gensbi_sharding.init
from compile_count import compiles
from gensbi_sharding import (RULES, ExperimentalRuleWarning, ShardingFallbackWarning, abstract_sharded, axes,
                             init_optimizer_sharded, init_sharded, make_mesh, shard_batch, shard_model,
                             shard_model_by_table)
from gensbi_sharding.harness.registry import get_model

# Largest |init_sharded - eager| measured over every variable of this file's modules and
# the harness's models, on every mesh and rule: 3.8e-6 (Unusual.gamma, values up to ~10).
EAGER_ATOL = 4e-6

TINY = {
    "mlp": dict(width=16, depth=2, mlp_ratio=2, time_embed_dim=8),
    "transformer": dict(embed=16, depth=1, heads=4, mlp_ratio=2, time_embed_dim=8),
}


def factory_for(name, seed=0):
    return lambda: get_model(name)(dim_theta=2, dim_x=3, rngs=nnx.Rngs(seed), **TINY[name])


def flat(node):
    return {"/".join(map(str, p)): v.get_value() for p, v in nnx.to_flat_state(nnx.state(node))}


def assert_equal_up_to_rounding(got, want, err_msg=""):
    got, want = np.asarray(got), np.asarray(want)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=0, atol=EAGER_ATOL, err_msg=err_msg)
    else:
        np.testing.assert_array_equal(got, want, err_msg=err_msg)


def recorded(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, caught


class Annotated(nnx.Module):
    """One splittable kernel, one whose dim does not divide, and one unannotated Param."""

    def __init__(self, rngs):
        init = nnx.initializers.lecun_normal()
        self.good = nnx.Param(init(rngs.params(), (16, 24)), **axes("embed", "mlp"))
        self.odd = nnx.Param(init(rngs.params(), (24, 12)), **axes("mlp", "embed"))
        self.bare = nnx.Param(jnp.ones((6,)))


# make test-fast keeps one case (the mlp on (4, 2)): sharded init equal to eager construction, every rule
@pytest.mark.parametrize("name,model_axis", [
    pytest.param(name, model_axis, marks=() if (name, model_axis) == ("mlp", 2) else pytest.mark.slow)
    for name in sorted(TINY) for model_axis in (1, 2, 4)])
def test_values_and_placements_equal_eager(name, model_axis):
    mesh = make_mesh(model_axis=model_axis)
    factory = factory_for(name)
    eager = factory()
    for rule in RULES:
        reference = nnx.clone(eager)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ExperimentalRuleWarning)
            shard_model(reference, mesh, rule)
            built = init_sharded(factory, mesh, rule)
        want, got = flat(reference), flat(built)
        assert got.keys() == want.keys()
        for path, value in want.items():
            assert got[path].dtype == value.dtype, (rule, path)
            assert_equal_up_to_rounding(got[path], value, err_msg=f"{rule} {path}")
            assert got[path].sharding.is_equivalent_to(value.sharding, value.ndim), (rule, path)



@pytest.mark.slow
def test_arrays_computed_on_one_cpu_device_are_placed_compiling_no_slicing_program(devices):
    # Was a slicing program compiled by JAX per shape and sharding as each array computed on one device was put onto a
    # split sharding: 5 for this MLP under fsdp in init_sharded and in shard_model alike, one per leaf shape in
    # shard_batch, 0.1 s each on 2 cores. A NumPy view of each is sliced on the host: the same values and placements.
    mesh = make_mesh(model_axis=2)
    def factory():  # shapes no other test places: nothing cached
        return get_model("mlp")(dim_theta=2, dim_x=7, rngs=nnx.Rngs(0), width=40, depth=2, mlp_ratio=2, time_embed_dim=8)

    eager, batch = factory(), {"x": jnp.arange(56.0).reshape(8, 7), "n": jnp.arange(8 * 3).reshape(8, 3)}
    with compiles() as compiled:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ExperimentalRuleWarning)
            shard_model(eager, mesh, "fsdp")
            placed_eager, compiled[:] = list(compiled), []
            built = init_sharded(factory, mesh, "fsdp")
            placed_built, compiled[:] = list(compiled), []
        placed = shard_batch(batch, mesh)
    assert placed_eager == [] and compiled == [], (placed_eager, compiled)
    assert len(placed_built) == 1, placed_built  # the group's own program, which computes the variables
    want, got = flat(eager), flat(built)
    assert got.keys() == want.keys() and any(not v.sharding.is_fully_replicated for v in want.values())
    for path, value in want.items():
        assert got[path].dtype == value.dtype and got[path].sharding == value.sharding, path
        assert_equal_up_to_rounding(got[path], value, err_msg=path)
    for name, value in batch.items():
        assert placed[name].sharding == NamedSharding(mesh, P("data")) and placed[name].dtype == value.dtype, name
        np.testing.assert_array_equal(np.asarray(placed[name]), np.asarray(value))


@pytest.mark.slow
def test_arrays_computed_on_one_cpu_device_are_freed_once_placed(devices):
    # Was: each group, computed on one device, stayed alive as long as its shards did (XLA:CPU's shards aliased the
    # NumPy view they were cut from), so that device held every group: 0.66 GB of a 1.07 GB model, not 0.26 GB.
    import gc

    mesh = make_mesh(model_axis=1)
    # Kernels of 2 MiB (sliced on the device) and arrays under 1 MiB (copied to the host): both ways of placing.
    factory = lambda: get_model("mlp")(dim_theta=3, dim_x=5, rngs=nnx.Rngs(1), width=512, depth=1, mlp_ratio=2,  # noqa: E731
                                       time_embed_dim=8)
    gc.collect()
    before = {id(a) for a in jax.live_arrays()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalRuleWarning)
        model = init_sharded(factory, mesh, "fsdp")
        placed = shard_model(eager := factory(), mesh, "fsdp")
    gc.collect()
    kept = {id(v) for node in (model, eager) for v in flat(node).values()}
    left = [a for a in jax.live_arrays() if id(a) not in before and id(a) not in kept]
    assert placed is None and left == [], [(a.shape, a.sharding) for a in left]
    assert any(not v.sharding.is_fully_replicated for v in flat(model).values())


class Shapes(nnx.Module):
    """Shapes whose device blocks round differently on XLA:CPU if computed where they live.

    Split over a mesh, ``short_rows``, ``cube`` and ``tall`` get blocks with rows shorter
    than a vector register: jitted straight into their shards, some elements came out
    one ulp off, by mesh. Computed on one device, then placed, they cannot.
    """

    def __init__(self, rngs):
        lecun, normal = nnx.initializers.lecun_normal(), nnx.initializers.normal(0.02)
        self.wide = nnx.Param(lecun(rngs.params(), (16, 64)), **axes("embed", "mlp"))
        self.tall = nnx.Param(lecun(rngs.params(), (64, 16)), **axes("mlp", "embed"))
        self.cube = nnx.Param(lecun(rngs.params(), (8, 2, 16)), **axes("heads", None, "embed"))
        self.vector = nnx.Param(normal(rngs.params(), (64,)), **axes("mlp"))
        self.short_rows = nnx.Param(normal(rngs.params(), (64, 6)), **axes("mlp", None))


@pytest.mark.slow  # a sweep: 3 meshes x 5 rules
@pytest.mark.parametrize("module", ["Shapes", "Unusual"])
def test_values_are_identical_on_every_mesh_rule_and_device_count(devices, module):
    factory = {"Shapes": lambda: Shapes(nnx.Rngs(7)), "Unusual": lambda: Unusual(nnx.Rngs(0))}[module]
    meshes = [make_mesh(model_axis=1), make_mesh(model_axis=4), make_mesh(devices[6:], model_axis=1)]
    first = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for mesh in meshes:
            for rule in [*RULES, {"embed": "model", "mlp": "data", "heads": "data"}]:
                got = {p: np.asarray(v) for p, v in flat(init_sharded(factory, mesh, rule)).items()}
                first = first or got
                for path, value in got.items():
                    np.testing.assert_array_equal(value, first[path], err_msg=f"{dict(mesh.shape)} {rule} {path}")


class OneLargeManySmall(nnx.Module):
    """A 16 KiB kernel and eight variables of 16-64 bytes: 320 bytes in all."""

    def __init__(self, rngs):
        self.large = nnx.Param(nnx.initializers.lecun_normal()(rngs.params(), (64, 64)), **axes("embed", "mlp"))
        self.small = nnx.List([nnx.Linear(4, 4, rngs=rngs) for _ in range(4)])


@pytest.mark.slow
def test_constructor_is_traced_once_per_group_and_grouping_keeps_values(monkeypatch):
    """Once to plan, once per group; a group holds up to max(GROUP_BYTES, model bytes / mesh size)."""
    calls = []

    def factory():
        calls.append(None)
        return OneLargeManySmall(nnx.Rngs(0))

    mesh = make_mesh(model_axis=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one_group = flat(init_sharded(factory, mesh, "fsdp"))
        assert len(calls) == 2  # the model is under GROUP_BYTES: one group
        calls.clear()
        monkeypatch.setattr(gensbi_sharding.init, "GROUP_BYTES", 1)
        grouped = flat(init_sharded(factory, mesh, "fsdp"))
    assert len(calls) == 1 + 2  # groups of up to 16,704 / 8 bytes: the small ones together, the kernel alone
    for path, value in one_group.items():
        np.testing.assert_array_equal(np.asarray(grouped[path]), np.asarray(value), err_msg=path)
        assert grouped[path].sharding == value.sharding, path


def check_equal_to_eager(factory, mesh, rule):
    reference = factory()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shard_model(reference, mesh, rule)
        built = init_sharded(factory, mesh, rule)
    want, got = flat(reference), flat(built)
    assert got.keys() == want.keys()
    for path, value in want.items():
        assert_equal_up_to_rounding(got[path], value, err_msg=f"{rule} {path}")
        assert type(got[path]) is type(value), (rule, path)  # Python scalars stay Python scalars
        if isinstance(value, jax.Array):
            assert got[path].sharding.is_equivalent_to(value.sharding, value.ndim), (rule, path)
    return built


R = jax.random


class Unusual(nnx.Module):
    """Constructors beyond plain initialisers: each must still equal eager construction."""

    def __init__(self, rngs):
        self.affine = nnx.Param(R.normal(rngs.params(), (64, 64)) * 0.02 + 1.0, **axes("embed", "mlp"))
        w = R.normal(rngs.params(), (64, 64))
        self.normalised = nnx.Param(w / jnp.linalg.norm(w), **axes("embed", "mlp"))
        self.reshaped = nnx.Param(R.normal(rngs.params(), (1024, 4)).reshape(64, 64), **axes("embed", "mlp"))
        self.transposed = nnx.Param(R.normal(rngs.params(), (64, 4)).T, **axes("heads", "embed"))
        self.gamma = nnx.Param(R.gamma(rngs.params(), 2.5, (64, 64)), **axes("embed", "mlp"))
        pos, i = jnp.arange(64.0)[:, None], jnp.arange(64.0)[None]
        self.sinusoid = nnx.Variable(jnp.sin(pos / 10000 ** (i / 64)))
        self.general = nnx.LinearGeneral((4, 8), 4, axis=(-2, -1), rngs=rngs,
                                         kernel_metadata=axes("heads", None, "embed"))
        self.table = nnx.Variable(np.arange(64 * 16, dtype=np.float32).reshape(64, 16))
        self.temperature = nnx.Param(0.5)
        self.numpy_float, self.numpy_int = nnx.Variable(np.float64(0.1)), nnx.Variable(np.int64(7))
        # 3-d: split on its leading dimension, a fused draw rounded differently here.
        self.heads = nnx.Param(nnx.initializers.normal(0.02)(rngs.params(), (8, 4, 12)),
                               **axes("heads", None, "embed"))
        # Literals that XLA would fold if baked into the program (eagerly they are arguments).
        self.squared = nnx.Param(R.normal(rngs.params(), (64, 64)) ** 2.0, **axes("embed", "mlp"))
        self.root = nnx.Param(R.uniform(rngs.params(), (1000,)) ** 0.5, **axes("mlp"))
        bounded = nnx.initializers.truncated_normal(0.02, lower=-1.5, upper=1.5)
        self.bounded = nnx.Param(bounded(rngs.params(), (64, 64)), **axes("embed", "mlp"))
        x = R.normal(rngs.params(), (64, 64))  # a comparison: its bool output cannot take x's buffer
        self.gated = nnx.Param(jax.nn.gelu(jnp.where(x > 0, x * 0.1, x * 3.0)), **axes("embed", "mlp"))
        y = R.normal(rngs.params(), (64, 64))
        self.product = nnx.Param(y * y, **axes("embed", "mlp"))  # one input twice: not donated
        # Transcendental functions on small blocks rounded differently in place: computed eagerly.
        self.tanh = nnx.Param(jnp.tanh(R.normal(rngs.params(), (8, 20)) * 1.3), **axes("embed", "mlp"))
        self.sigmoid = nnx.Param(jax.nn.sigmoid(R.normal(rngs.params(), (16, 32)) * 1.3), **axes("embed", "mlp"))


class Stacked(nnx.Module):
    """Layers built under nnx.vmap: each layer draws with its own key (batched keys)."""

    def __init__(self, rngs):
        @nnx.vmap(in_axes=0, out_axes=0)
        def make(r):
            return nnx.Linear(16, 4, kernel_metadata=axes("embed", None), rngs=r)
        self.layers = make(rngs.split(8))


@pytest.mark.slow
@pytest.mark.parametrize("model_axis", [1, 2])
@pytest.mark.parametrize("module", [Unusual, Stacked])
def test_unusual_constructors_equal_eager(module, model_axis):
    for rule in RULES:
        check_equal_to_eager(lambda: module(nnx.Rngs(0)), make_mesh(model_axis=model_axis), rule)


@pytest.mark.slow
def test_no_warnings_beyond_shard_models():
    mesh = make_mesh(model_axis=2)
    _, expected = recorded(lambda: shard_model(Unusual(nnx.Rngs(0)), mesh, "tensor"))
    _, caught = recorded(lambda: init_sharded(lambda: Unusual(nnx.Rngs(0)), mesh, "tensor"))
    assert [str(w.message) for w in caught] == [str(w.message) for w in expected]


def closing_over(value):
    table = np.full((64, 64), value, np.float32)

    @jax.jit
    def init(key):
        return R.normal(key, (64, 64)) * 0.0 + table
    return init


class Closures(nnx.Module):
    """Two draws whose programs print alike but close over different constants."""

    def __init__(self, rngs):
        self.a = nnx.Param(closing_over(1.0)(rngs.params()), **axes("embed", "mlp"))
        self.b = nnx.Param(closing_over(2.0)(rngs.params()), **axes("embed", "mlp"))


@pytest.mark.slow
def test_programs_that_print_alike_are_not_confused():
    mesh = make_mesh(model_axis=1)
    built = check_equal_to_eager(lambda: Closures(nnx.Rngs(0)), mesh, "fsdp")
    assert float(built.a[0, 0]) == 1.0 and float(built.b[0, 0]) == 2.0
    again = check_equal_to_eager(lambda: Closures(nnx.Rngs(0)), mesh, "fsdp")  # across calls too
    assert float(again.b[0, 0]) == 2.0


def test_constructor_reading_its_values_is_a_clear_error():
    class ReadsBack(nnx.Module):
        def __init__(self, rngs):
            w = R.normal(rngs.params(), (16, 32))
            self.w = nnx.Param(w / float(jnp.abs(w).max()))

    ReadsBack(nnx.Rngs(0))  # fine eagerly
    with pytest.raises(ValueError, match=r"reads a value it computed.*under jax\.ensure_compile_time_eval\(\) if it "
                                         r"depends on no random draw.*"
                                         r"model = factory\(\); shard_model\(model, mesh, rule\)"):
        init_sharded(lambda: ReadsBack(nnx.Rngs(0)), make_mesh(), "fsdp")


def test_constructor_warnings_are_shown_once():
    class Warns(nnx.Module):
        def __init__(self, rngs):
            warnings.warn("constructor says hello", UserWarning)
            self.w = nnx.Param(jnp.ones((8, 8)))

    _, caught = recorded(lambda: init_sharded(lambda: Warns(nnx.Rngs(0)), make_mesh(), "replicated"))
    assert [str(w.message) for w in caught].count("constructor says hello") == 1


@pytest.mark.slow
def test_model_runs_after_sharded_init():
    mesh = make_mesh(model_axis=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalRuleWarning)
        model = init_sharded(factory_for("mlp"), mesh, "tensor")
    theta, x = jnp.ones((8, 2)), jnp.ones((8, 3))
    np.testing.assert_allclose(model(theta, x, jnp.full((8,), 0.5)),
                               factory_for("mlp")()(theta, x, jnp.full((8,), 0.5)), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_fallback_warning_parity_with_shard_model():
    mesh = make_mesh(model_axis=1)
    eager, expected = recorded(lambda: shard_model(Annotated(nnx.Rngs(0)), mesh, "fsdp"))
    built, caught = recorded(lambda: init_sharded(lambda: Annotated(nnx.Rngs(0)), mesh, "fsdp"))
    assert [(type(w.message), str(w.message)) for w in caught] == \
           [(type(w.message), str(w.message)) for w in expected]
    fallbacks = [w for w in caught if issubclass(w.category, ShardingFallbackWarning)]
    assert len(fallbacks) == 1
    assert "odd (size 12 of logical axis 'embed' is not divisible" in str(fallbacks[0].message)
    assert "bare (no annotation)" in str(fallbacks[0].message)
    assert all(w.filename == __file__ for w in caught)  # reported at the caller, as shard_model does
    assert flat(built)["good"].sharding.spec == P("data", None)
    assert flat(built)["odd"].sharding.spec == P()


def test_a_cut_fallback_warning_from_init_sharded_names_plan_shardings_as_shard_models_does():
    # Was: "(every one: Plan.fallbacks)", but an init_sharded / abstract_sharded caller holds no Plan.
    def factory():
        model = nnx.Module()
        model.blocks = nnx.List([nnx.Param(jnp.ones((6, 8)), **axes("embed", "mlp")) for _ in range(4)])
        return model

    mesh = make_mesh(model_axis=2)
    expected = [str(w.message) for w in recorded(lambda: shard_model(factory(), mesh, "fsdp"))[1]
                if issubclass(w.category, ShardingFallbackWarning)]
    assert len(expected) == 1 and expected[0].endswith("(every one: gs.plan_shardings(node, mesh, rule).fallbacks)")
    for build in (init_sharded, abstract_sharded):
        caught = recorded(lambda: build(factory, mesh, "fsdp"))[1]
        assert [str(w.message) for w in caught if issubclass(w.category, ShardingFallbackWarning)] == expected


def test_abstract_sharded_plans_and_warns_like_init_sharded():
    mesh = make_mesh(model_axis=2)
    built, expected = recorded(lambda: init_sharded(lambda: Annotated(nnx.Rngs(0)), mesh, "fsdp"))
    abstract, caught = recorded(lambda: abstract_sharded(lambda: Annotated(nnx.Rngs(0)), mesh, "fsdp"))
    assert [(type(w.message), str(w.message)) for w in caught] == \
           [(type(w.message), str(w.message)) for w in expected]
    for path, value in flat(built).items():
        assert isinstance(flat(abstract)[path], jax.ShapeDtypeStruct)
        assert flat(abstract)[path].sharding == value.sharding, path
    optimizer = init_optimizer_sharded(abstract, optax.adam(1e-3), "fsdp")
    moment = flat(optimizer)["opt_state/0/mu/good"]
    assert isinstance(moment, jax.ShapeDtypeStruct) and moment.sharding == flat(built)["good"].sharding


def test_rule_table_matches_shard_model_by_table():
    mesh = make_mesh(model_axis=2)
    table = {"embed": "model", "mlp": "data"}
    reference = Annotated(nnx.Rngs(3))
    _, expected = recorded(lambda: shard_model_by_table(reference, mesh, table))
    built, caught = recorded(lambda: init_sharded(lambda: Annotated(nnx.Rngs(3)), mesh, table))
    assert [str(w.message) for w in caught] == [str(w.message) for w in expected]
    for path, value in flat(reference).items():
        assert_equal_up_to_rounding(flat(built)[path], value)
        assert flat(built)[path].sharding.is_equivalent_to(value.sharding, value.ndim)
    assert flat(built)["good"].sharding.spec == P("model", "data")


def test_no_mesh_builds_eagerly():
    model = init_sharded(factory_for("mlp"), None, "fsdp")
    for path, value in flat(factory_for("mlp")()).items():
        np.testing.assert_array_equal(flat(model)[path], value)
        assert len(flat(model)[path].sharding.device_set) == 1


@pytest.mark.parametrize("rule, match", [("zero", "unknown sharding rule 'zero'"),
                                         (["fsdp"], "rule must be a name")])
def test_bad_rule_is_a_value_error(rule, match):
    with pytest.raises(ValueError, match=match):
        init_sharded(factory_for("mlp"), make_mesh(), rule)
    with pytest.raises(ValueError, match=match):
        init_sharded(factory_for("mlp"), None, rule)


def test_factory_must_be_callable():
    with pytest.raises(ValueError, match="zero-argument callable"):
        init_sharded(factory_for("mlp")(), make_mesh(), "fsdp")


def test_factory_that_needs_arguments_is_named_before_tracing():
    def make(width):
        return factory_for("mlp")()

    with pytest.raises(ValueError, match=r"factory 'make' must be callable with no arguments .*width.*lambda"):
        init_sharded(make, make_mesh(), "fsdp")


def test_factory_without_an_inspectable_signature_is_called():
    # inspect.signature raises ValueError for some C callables (next, a partial of one): calling the factory tells.
    model = factory_for("mlp")()
    assert init_sharded(functools.partial(next, iter([model])), None) is model


@pytest.mark.slow
def test_values_equal_with_threefry_partitionable_off():
    mesh = make_mesh(model_axis=1)
    with jax.threefry_partitionable(False), warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalRuleWarning)
        reference = factory_for("mlp", seed=5)()
        shard_model(reference, mesh, "fsdp")
        built = init_sharded(factory_for("mlp", seed=5), mesh, "fsdp")
    for path, value in flat(reference).items():
        assert_equal_up_to_rounding(flat(built)[path], value, err_msg=path)


@pytest.mark.slow
@pytest.mark.parametrize("rule, model_axis", [("fsdp", 1), ("tensor", 2)])
def test_optimizer_moments_placed_like_params(rule, model_axis):
    mesh = make_mesh(model_axis=model_axis)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalRuleWarning)
        model = init_sharded(factory_for("transformer"), mesh, rule)
        reference = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
        shard_model(reference, mesh, rule)
    optimizer = init_optimizer_sharded(model, optax.adam(1e-3), rule)
    params, got, want = flat(model), flat(optimizer), flat(reference)
    assert got.keys() == want.keys()
    for path, value in want.items():
        np.testing.assert_array_equal(np.asarray(got[path]), np.asarray(value), err_msg=path)
        assert got[path].dtype == value.dtype
        assert got[path].sharding.is_equivalent_to(value.sharding, value.ndim), path
    moments = [p for p in got if p.startswith(("opt_state/0/mu/", "opt_state/0/nu/"))]
    assert len(moments) == 2 * len(params)
    for path in moments:
        param = params[path.split("/", 3)[3]]
        assert got[path].sharding.is_equivalent_to(param.sharding, param.ndim), path
    assert any(not got[p].sharding.is_fully_replicated for p in moments)


def test_optimizer_without_mesh_is_plain():
    optimizer = init_optimizer_sharded(factory_for("mlp")(), optax.sgd(0.1))
    assert isinstance(optimizer, nnx.Optimizer) and int(optimizer.step[...]) == 0


class WithEmpty(nnx.Module):
    """A zero-size Param (0 bytes: the smallest variable, grouped first) beside an ordinary kernel."""

    def __init__(self, rngs):
        self.empty = nnx.Param(jnp.zeros((0,)))
        self.kernel = nnx.Param(jax.random.normal(rngs.params(), (8, 4)), **axes("embed", "mlp"))


@pytest.mark.parametrize("rule", ["replicated", "fsdp"])
def test_zero_size_variables_are_initialised_like_the_rest(rule):
    # Was: IndexError in the grouping (a group appended to before any existed) for any model with one.
    mesh = make_mesh(model_axis=2)
    placed = init_sharded(lambda: WithEmpty(nnx.Rngs(0)), mesh, rule)
    eager = WithEmpty(nnx.Rngs(0))
    shard_model(eager, mesh, rule)
    assert placed.empty.get_value().shape == (0,) and placed.empty.get_value().dtype == jnp.float32
    np.testing.assert_array_equal(placed.kernel.get_value(), eager.kernel.get_value())
    assert placed.kernel.get_value().sharding == eager.kernel.get_value().sharding
