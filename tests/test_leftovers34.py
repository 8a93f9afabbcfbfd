"""Round 34's leftovers: each fault, as a test that failed on the code before its fix."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from gensbi_sharding import abstract_sharded, init_sharded, make_mesh, replicate, shard_batch


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
                       rf"{init.__name__} traces it.*unplaced inside the factory.*shard_model\(factory\(\), mesh"):
        init(factory, mesh)


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

    with pytest.raises(ValueError, match=r"init_sharded was called inside jax.jit.*call it outside"):
        step(jnp.ones(()))


def test_init_sharded_inside_jit_without_mesh_still_builds():
    # mesh=None builds eagerly (no program of its own): inside jit that stays allowed.
    out = jax.jit(lambda x: init_sharded(lambda: nnx.Linear(2, 3, rngs=nnx.Rngs(0)), None).kernel.get_value() + x)
    assert out(jnp.zeros(())).shape == (2, 3)


class _Two(nnx.Module):
    def __init__(self, rngs):
        self.a = nnx.Linear(2, 3, rngs=rngs)
        self.b = nnx.Linear(3, 2, rngs=rngs)


def _save_train_state(directory, tx, wrt):
    from gensbi_sharding import checkpoint
    model = _Two(nnx.Rngs(0))
    with checkpoint.CheckpointWriter(directory) as writer:
        writer.save(1, nnx.state((model, nnx.Optimizer(model, tx, wrt=wrt))), jax.random.key(0))


@pytest.mark.parametrize("saved_wrt, target_wrt, example", [
    (nnx.Param, nnx.PathContains("a"), r"the checkpoint's covers b/(bias|kernel) \(state/1/opt_state/0/mu/b/"),
    (nnx.PathContains("a"), nnx.Param, r"the target's covers b/(bias|kernel) \(state/1/opt_state/0/mu/b/"),
], ids=["target-covers-fewer", "target-covers-more"])
def test_restoring_into_an_optimizer_of_another_wrt_names_wrt(tmp_path, saved_wrt, target_wrt, example):
    # Was: "another optax transformation or settings", never naming wrt= (the optimizer's transformation was the same).
    import optax
    from gensbi_sharding import checkpoint
    _save_train_state(tmp_path, optax.adam(1e-3), saved_wrt)
    model = _Two(nnx.Rngs(1))
    target = checkpoint.abstract_state_for((model, nnx.Optimizer(model, optax.adam(1e-3), wrt=target_wrt)), None)
    with pytest.raises(ValueError, match=rf"cover different parameters .*{example}.*another wrt= filter"):
        checkpoint.restore(tmp_path / "1", target)


def test_restoring_into_an_optimizer_of_another_transformation_still_names_it(tmp_path):
    # Same parameters covered, another transformation (adam saved, sgd with momentum now): not a wrt= difference.
    import optax
    from gensbi_sharding import checkpoint
    _save_train_state(tmp_path, optax.adam(1e-3), nnx.Param)
    model = _Two(nnx.Rngs(1))
    target = checkpoint.abstract_state_for((model, nnx.Optimizer(model, optax.sgd(1e-3, momentum=0.9), wrt=nnx.Param)),
                                           None)
    with pytest.raises(ValueError, match=r"another optax transformation or settings") as info:
        checkpoint.restore(tmp_path / "1", target)
    assert "wrt=" not in str(info.value).split("Only the optimizer state differs")[0]


def test_restoring_into_a_stateless_optimizer_names_the_transformation_not_wrt(tmp_path):
    # Plain sgd keeps no per-parameter state: its optimizer covers none, which is another transformation, not wrt=.
    import optax
    from gensbi_sharding import checkpoint
    _save_train_state(tmp_path, optax.adam(1e-3), nnx.Param)
    model = _Two(nnx.Rngs(1))
    target = checkpoint.abstract_state_for((model, nnx.Optimizer(model, optax.sgd(1e-3), wrt=nnx.Param)), None)
    with pytest.raises(ValueError, match=r"another optax transformation or settings") as info:
        checkpoint.restore(tmp_path / "1", target)
    assert "cover different parameters" not in str(info.value)


def test_sample_posterior_on_a_mesh_says_a_fallback_once(monkeypatch, caplog, tmp_path):
    # Was: the full list of fallback paths (logger gensbi_sharding.details, meant for a harness job's launch.log)
    # shown by Python beside the one-line fallback warning: the same fallback said twice.
    import logging

    import jax.numpy as jnp

    import optax

    from faults_helpers import saved_checkpoint
    from gensbi_sharding import axes, resolve_rule
    from gensbi_sharding.harness import own_observation, state
    from gensbi_sharding.harness.model_plan import model_plan
    from gensbi_sharding.harness.simulation_data import NORMALIZATION

    saved = {"seed": 0, "rule": "replicated", "model": {"name": "mlp"},
             "data": {"name": "two_moons", "x_transform": "none", "theta_transform": "none"},
             "eval": {"num_samples": 4, "ode_steps": 2}}
    statistics = {"theta_mean": [0.0, 0.0], "theta_std": [1.0, 1.0], "x_mean": [0.0, 0.0], "x_std": [1.0, 1.0]}
    saved_checkpoint(tmp_path, saved, {NORMALIZATION: statistics})

    class Velocity(nnx.Module):
        def __init__(self):
            self.w = nnx.Param(jnp.ones((2, 8)), **axes("embed", "mlp"))  # 2 rows: not split over data=8

        def __call__(self, theta, x, t):
            return jnp.zeros_like(theta) * self.w[0, 0]

    def build_state(cfg, *, mesh, **_):  # the run's model, planned on the mesh
        model = Velocity()
        model_plan(model, mesh, resolve_rule("fsdp"), strict=False)
        return state.TrainState(model=model, optimizer=nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param),
                                plan=None, key=jax.random.key(0))

    monkeypatch.setattr(state, "build_state", build_state)
    with caplog.at_level(logging.INFO):
        samples = own_observation.sample_posterior(tmp_path, np.zeros(2, np.float32), mesh=make_mesh())
    assert samples.shape == (4, 2)
    said = [r.getMessage() for r in caplog.records if "w" in r.getMessage() and "split" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("1 variable(s) replicated instead of split under rule 'fsdp'"), said
    # Outside sample_posterior the full list still reaches a job's log.
    with caplog.at_level(logging.INFO):
        caplog.clear()
        model = nnx.Module()
        model.w = nnx.Param(jnp.ones((2, 8)), **axes("embed", "mlp"))
        model_plan(model, make_mesh(), resolve_rule("fsdp"), strict=False)
    assert [r.name for r in caplog.records].count("gensbi_sharding.details") == 1
