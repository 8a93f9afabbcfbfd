"""Sharded initialisation equals eager construction + shard_model: values, placements, warnings."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec as P

from gensbi_sharding import staging
from gensbi_sharding.compiled import abstract_sharded
from gensbi_sharding.harness.registry import get_model
from gensbi_sharding.init import generation_sharding, init_optimizer_sharded, init_sharded
from gensbi_sharding.sharding import (RULES, ExperimentalRuleWarning, ShardingFallbackWarning, axes,
                                      make_mesh, shard_model, shard_model_by_table)

TINY = {
    "mlp": dict(width=16, depth=2, mlp_ratio=2, time_embed_dim=8),
    "transformer": dict(embed=16, depth=1, heads=4, mlp_ratio=2, time_embed_dim=8),
}


def factory_for(name, seed=0):
    return lambda: get_model(name)(dim_theta=2, dim_x=3, rngs=nnx.Rngs(seed), **TINY[name])


def flat(node):
    return {"/".join(map(str, p)): v.get_value() for p, v in nnx.to_flat_state(nnx.state(node))}


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


@pytest.mark.parametrize("model_axis", [1, 2, 4])
@pytest.mark.parametrize("name", sorted(TINY))
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
            np.testing.assert_array_equal(np.asarray(got[path]), np.asarray(value),
                                          err_msg=f"{rule} {path}")
            assert got[path].sharding.is_equivalent_to(value.sharding, value.ndim), (rule, path)


class Shapes(nnx.Module):
    """Variables on both sides of the fused path's rule (1-d or >= 8 trailing elements)."""

    def __init__(self, rngs):
        lecun, normal = nnx.initializers.lecun_normal(), nnx.initializers.normal(0.02)
        self.wide = nnx.Param(lecun(rngs.params(), (16, 64)), **axes("embed", "mlp"))
        self.tall = nnx.Param(lecun(rngs.params(), (64, 16)), **axes("mlp", "embed"))
        self.cube = nnx.Param(lecun(rngs.params(), (8, 2, 16)), **axes("heads", None, "embed"))
        self.vector = nnx.Param(normal(rngs.params(), (64,)), **axes("mlp"))
        # Rows of 6: a fused draw rounds differently from eager here (seeds 0 and 7), so unfused.
        self.short_rows = nnx.Param(normal(rngs.params(), (64, 6)), **axes("mlp", None))


@pytest.mark.parametrize("seed", [0, 7])
@pytest.mark.parametrize("model_axis", [1, 2, 4])
def test_fused_and_unfused_draws_equal_eager(model_axis, seed, monkeypatch):
    mesh = make_mesh(model_axis=model_axis)
    calls = []
    program = staging.program
    monkeypatch.setattr(staging, "program", lambda jaxpr, sharding, fuse: (
        calls.append((jaxpr.outvars[0].aval.shape, sharding, fuse)) or program(jaxpr, sharding, fuse)))
    for rule in RULES:
        reference = Shapes(nnx.Rngs(seed))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            shard_model(reference, mesh, rule)
            built = init_sharded(lambda: Shapes(nnx.Rngs(seed)), mesh, rule)
        for path, value in flat(reference).items():
            np.testing.assert_array_equal(np.asarray(flat(built)[path]), np.asarray(value), err_msg=f"{rule} {path}")
            assert flat(built)[path].sharding.is_equivalent_to(value.sharding, value.ndim), (rule, path)
        want = {tuple(v.shape): v.sharding for v in flat(reference).values()}
        for shape, sharding, fuse in calls:
            assert fuse == (shape != (64, 6)), (rule, shape)
            if fuse:  # drawn where it lives: nothing moved afterwards
                assert sharding.is_equivalent_to(want[shape], len(shape)), (rule, shape)
        calls.clear()


def test_model_runs_after_sharded_init():
    mesh = make_mesh(model_axis=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalRuleWarning)
        model = init_sharded(factory_for("mlp"), mesh, "tensor")
    theta, x = jnp.ones((8, 2)), jnp.ones((8, 3))
    np.testing.assert_allclose(model(theta, x, jnp.full((8,), 0.5)),
                               factory_for("mlp")()(theta, x, jnp.full((8,), 0.5)), rtol=1e-5, atol=1e-6)


def test_fallback_warning_parity_with_shard_model():
    mesh = make_mesh(model_axis=1)
    eager, expected = recorded(lambda: shard_model(Annotated(nnx.Rngs(0)), mesh, "fsdp"))
    built, caught = recorded(lambda: init_sharded(lambda: Annotated(nnx.Rngs(0)), mesh, "fsdp"))
    assert [(type(w.message), str(w.message)) for w in caught] == \
           [(type(w.message), str(w.message)) for w in expected]
    fallbacks = [w for w in caught if issubclass(w.category, ShardingFallbackWarning)]
    assert len(fallbacks) == 1
    assert "odd (dim 12 of logical axis 'embed' is not divisible" in str(fallbacks[0].message)
    assert "bare (no annotation)" in str(fallbacks[0].message)
    assert all(w.filename == __file__ for w in caught)  # reported at the caller, as shard_model does
    assert flat(built)["good"].sharding.spec == P("data", None)
    assert flat(built)["odd"].sharding.spec == P()


def test_abstract_sharded_plans_and_warns_like_init_sharded():
    mesh = make_mesh(model_axis=2)
    built, expected = recorded(lambda: init_sharded(lambda: Annotated(nnx.Rngs(0)), mesh, "fsdp"))
    abstract, caught = recorded(lambda: abstract_sharded(lambda: Annotated(nnx.Rngs(0)), mesh, "fsdp"))
    assert [(type(w.message), str(w.message)) for w in caught] == \
           [(type(w.message), str(w.message)) for w in expected]
    for path, value in flat(built).items():
        assert isinstance(flat(abstract)[path], jax.ShapeDtypeStruct)
        assert flat(abstract)[path].sharding == value.sharding, path
    optimizer = init_optimizer_sharded(abstract, optax.adam(1e-3))
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
        np.testing.assert_array_equal(np.asarray(flat(built)[path]), np.asarray(value))
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


def test_values_equal_with_threefry_partitionable_off():
    mesh = make_mesh(model_axis=1)
    with jax.threefry_partitionable(False), warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalRuleWarning)
        reference = factory_for("mlp", seed=5)()
        shard_model(reference, mesh, "fsdp")
        built = init_sharded(factory_for("mlp", seed=5), mesh, "fsdp")
    for path, value in flat(reference).items():
        np.testing.assert_array_equal(np.asarray(flat(built)[path]), np.asarray(value), err_msg=path)


@pytest.mark.parametrize("rule, model_axis", [("fsdp", 1), ("tensor", 2)])
def test_optimizer_moments_placed_like_params(rule, model_axis):
    mesh = make_mesh(model_axis=model_axis)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalRuleWarning)
        model = init_sharded(factory_for("transformer"), mesh, rule)
        reference = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
        shard_model(reference, mesh, rule)
    optimizer = init_optimizer_sharded(model, optax.adam(1e-3))
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


@pytest.mark.parametrize("spec, shape, model_axis, expected", [
    (P(), (16, 16), 1, P(("data", "model"))),               # split over all 8 devices, then gathered
    (P("data", None), (16, 16), 1, P("data", None)),        # that split is the target: drawn in place
    (P(None, "data"), (16, 16), 1, P(("data", "model"))),   # drawn by rows, then an all-to-all
    (P("data", None), (16, 16), 2, P(("data", "model"))),   # no device repeats another's draw
    (P("data", None), (12, 16), 2, P("data", None)),        # 12 rows over 8 do not divide; over 4 do
    (P("data"), (24,), 1, P("data")),                       # 1-d blocks draw like the whole
    (P(None, "data"), (12, 16), 1, "one device"),           # no row split divides
    (P("data", None), (16, 4), 1, "one device"),            # rows of 4: XLA loops by the row count
    (P(None, "model"), (16, 16), 2, P(("model", "data"))),   # the target's axes first
    (P(None, "model", None), (4, 8, 16), 4, P("model")),    # 4 rows: over the target's axes only
    (P(), (), 1, "one device"),
])
def test_generation_sharding(spec, shape, model_axis, expected):
    mesh = make_mesh(model_axis=model_axis)
    born = generation_sharding(spec, shape, mesh)
    if expected == "one device":
        assert born.device_set == {jax.devices()[0]} and len(born.device_set) == 1
    else:
        assert born == NamedSharding(mesh, expected)
