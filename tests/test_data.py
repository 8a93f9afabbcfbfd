"""harness.data: simulated SBI data sets and mesh-aware batching."""

import subprocess
import sys

import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from gensbi_sharding.harness import data as D
from gensbi_sharding import make_mesh


@pytest.fixture(scope="module")
def moons():
    return D.load_task("two_moons", num_simulations=203, val_fraction=0.1, seed=3)


@pytest.fixture(scope="module")
def mesh(devices):
    return make_mesh(model_axis=1)


@pytest.mark.slow
def test_import_leaves_backend_unstarted():
    # If importing had started JAX's backend, changing the device count would fail.
    code = ("import gensbi_sharding.harness.data, gensbi_sharding.harness.evaluate, jax; "
            "jax.config.update('jax_platforms', 'cpu'); jax.config.update('jax_num_cpu_devices', 3); "
            "assert len(jax.devices()) == 3")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@pytest.mark.slow
def test_load_task_shapes_split_and_stats(moons):
    assert moons.name == "two_moons" and (moons.dim_theta, moons.dim_x) == (2, 2)
    assert moons.theta_train.shape == (183, 2) and moons.x_train.shape == (183, 2)
    assert moons.theta_val.shape == (20, 2) and moons.x_val.shape == (20, 2)
    assert moons.observation.shape == (2,) and moons.reference_samples.shape == (10000, 2)
    for arr in (moons.theta_train, moons.x_val, moons.observation, moons.theta_std):
        assert arr.dtype == np.float32
    # Disjoint splits: no validation row occurs among the training rows.
    train_rows = {tuple(r) for r in moons.theta_train}
    assert not any(tuple(r) in train_rows for r in moons.theta_val)
    # Statistics come from the training split only, in the model's space: theta through the
    # inverse of the prior's bijection (logit of the box U(-1, 1)^2).
    unconstrained = np.log1p(moons.theta_train) - np.log1p(-moons.theta_train)
    np.testing.assert_allclose(moons.theta_mean, unconstrained.mean(0), atol=1e-4)
    np.testing.assert_allclose(moons.x_std, moons.x_train.std(0), rtol=1e-5)
    everything = np.concatenate([moons.x_train, moons.x_val])
    assert not np.allclose(moons.x_mean, everything.mean(0), atol=1e-7, rtol=0)
    # The prior of two moons is U(-1, 1)^2.
    assert np.all(np.abs(moons.theta_train) <= 1.0)


@pytest.mark.slow
def test_normalization_round_trip(moons):
    theta, x = moons.normalized("train")
    np.testing.assert_allclose(theta.mean(0), 0.0, atol=1e-5)
    np.testing.assert_allclose(x.std(0), 1.0, atol=1e-4)
    np.testing.assert_allclose(moons.denormalize_theta(theta), moons.theta_train, atol=1e-5)
    np.testing.assert_allclose(moons.denormalize_x(moons.normalize_x(moons.x_val)), moons.x_val,
                               atol=1e-5)
    with pytest.raises(ValueError, match="'test'"):
        moons.normalized("test")


@pytest.mark.slow
def test_seed_reproducible():
    a = D.load_task("two_moons", num_simulations=20, seed=1)
    b = D.load_task("two_moons", num_simulations=20, seed=1)
    c = D.load_task("two_moons", num_simulations=20, seed=2)
    np.testing.assert_array_equal(a.x_train, b.x_train)
    assert not np.allclose(a.theta_train, c.theta_train)


TASK_DIMS = {"two_moons": (2, 2), "gaussian_linear": (10, 10), "gaussian_linear_uniform": (10, 10),
             "gaussian_mixture": (2, 2), "slcp": (5, 8), "sir": (2, 10), "lotka_volterra": (4, 20),
             "bernoulli_glm": (10, 10)}


@pytest.mark.slow
def test_all_eight_sbibm_tasks_are_registered():
    from gensbi_sharding.harness.registry import data_names

    assert set(D.TASKS) == set(TASK_DIMS) and set(D.TASKS) <= set(data_names())
    assert {name: D.task_dims(name) for name in D.TASKS} == TASK_DIMS


@pytest.mark.slow
@pytest.mark.parametrize("name", ["slcp", "lotka_volterra"])
def test_registered_tasks(name):
    from gensbi_sharding.harness.registry import get_data

    dims = TASK_DIMS[name]
    d = get_data(name)(num_simulations=16, num_observation=2,
                       x_transform="log" if name == "lotka_volterra" else "none")
    assert (d.dim_theta, d.dim_x) == dims and len(d.theta_train) + len(d.theta_val) + d.dropped_non_finite == 16
    assert d.observation.shape == (dims[1],) and d.reference_samples.shape == (10000, dims[0])
    theta, x = d.normalized("train")
    assert np.all(np.isfinite(theta)) and np.all(np.isfinite(x))


@pytest.mark.slow
def test_non_finite_simulations_are_dropped(monkeypatch):
    """A failed simulation (NaN) and a draw on the prior's bound (logit: inf) never reach the data."""
    real = D.simulate

    def faulty(task, key, n):
        theta, x = (a.copy() for a in real(task, key, n))
        x[3] = np.nan
        theta[5] = 1.0  # on the bound of U(-1, 1): its logit is infinite
        return theta, x

    monkeypatch.setattr(D, "simulate", faulty)
    d = D.load_task("two_moons", num_simulations=40, val_fraction=0.25)
    assert d.dropped_non_finite == 2 and len(d.theta_train) + len(d.theta_val) == 38
    assert len(d.theta_val) == 10  # the split is made on the 38 that remain
    assert np.all(np.isfinite(d.normalized("train")[0])) and np.all(np.isfinite(d.theta_mean))
    kept = D.load_task("two_moons", num_simulations=40, val_fraction=0.25, theta_transform="none")
    assert kept.dropped_non_finite == 1  # without the bijection the bound is an ordinary value


@pytest.mark.parametrize("kwargs,needle", [
    ({"num_simulations": 1}, "num_simulations=1"),
    ({"num_simulations": 100.0}, "num_simulations=100.0"),
    ({"val_fraction": 1.0}, "val_fraction=1.0"),
    ({"val_fraction": 0}, "val_fraction=0"),
    ({"num_observation": 11}, "num_observation=11"),
    ({"num_observation": 0}, "num_observation=0"),
    ({"process_index": 2, "process_count": 2}, "process_index=2"),
    ({"num_simulations": 3, "process_count": 2}, "at least 4"),
])
def test_load_task_rejects_bad_arguments(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        D.load_task("two_moons", **kwargs)


def test_unknown_task():
    with pytest.raises(ValueError, match="'no_such_task'"):
        D.load_task("no_such_task", num_simulations=4)


@pytest.mark.slow
def test_processes_split_the_budget():
    with pytest.warns(UserWarning, match="this process's share only"):
        p0 = D.load_task("two_moons", num_simulations=41, seed=0, process_index=0, process_count=2)
    with pytest.warns(UserWarning):
        p1 = D.load_task("two_moons", num_simulations=41, seed=0, process_index=1, process_count=2)
    assert len(p0.theta_train) + len(p0.theta_val) == 21
    assert len(p1.theta_train) + len(p1.theta_val) == 20
    assert not np.allclose(p0.theta_train[:5], p1.theta_train[:5])  # own seed streams
    np.testing.assert_array_equal(p0.observation, p1.observation)
    np.testing.assert_array_equal(p0.reference_samples, p1.reference_samples)


def _rows(n=50, dim_x=3):
    theta = np.arange(n * 2, dtype=np.float64).reshape(n, 2)
    x = np.repeat(theta[:, :1], dim_x, axis=1) * 10
    return theta, x


def test_batches_cover_an_epoch_and_reshuffle():
    theta, x = _rows()
    it = D.iterate_batches(theta, x, batch_size=16, seed=7, mesh=None)
    epoch1 = [next(it) for _ in range(3)]  # 50 // 16 = 3 full batches, last 2 rows dropped
    for b in epoch1:
        assert b["theta"].shape == (16, 2) and b["x"].shape == (16, 3)
        assert b["theta"].dtype == np.float32 and b["x"].dtype == np.float32
        np.testing.assert_array_equal(b["x"][:, 0], b["theta"][:, 0] * 10)  # pairs stay aligned
    seen = np.concatenate([b["theta"][:, 0] for b in epoch1])
    assert len(np.unique(seen)) == 48
    epoch2 = [next(it) for _ in range(3)]
    assert not np.array_equal(epoch1[0]["theta"], epoch2[0]["theta"])
    again = D.iterate_batches(theta, x, batch_size=16, seed=7, mesh=None)
    for b in epoch1 + epoch2:
        np.testing.assert_array_equal(next(again)["theta"], b["theta"])
    other = next(D.iterate_batches(theta, x, batch_size=16, seed=8, mesh=None))
    assert not np.array_equal(other["theta"], epoch1[0]["theta"])


def test_batches_unshuffled_keep_order():
    theta, x = _rows()
    it = D.iterate_batches(theta, x, batch_size=10, seed=0, mesh=None, epoch_shuffle=False)
    np.testing.assert_array_equal(next(it)["theta"], theta[:10])
    np.testing.assert_array_equal(next(it)["theta"], theta[10:20])


def test_batches_are_split_over_the_mesh(mesh):
    theta, x = _rows(64)
    batch = next(D.iterate_batches(theta, x, batch_size=32, seed=0, mesh=mesh))
    for key in ("theta", "x"):
        assert batch[key].sharding.is_equivalent_to(NamedSharding(mesh, P("data")), 2)
        assert {s.data.shape for s in batch[key].addressable_shards} == {(4, batch[key].shape[1])}
    raw = next(D.iterate_batches(theta, x, batch_size=32, seed=0, mesh=mesh, place=False))
    assert isinstance(raw["theta"], np.ndarray)
    np.testing.assert_array_equal(np.asarray(batch["theta"]), raw["theta"])


def test_indivisible_batch_fails_at_call_with_the_fix(mesh):
    theta, x = _rows(64)
    with pytest.raises(ValueError) as err:
        D.iterate_batches(theta, x, batch_size=12, seed=0, mesh=mesh)  # no next(): fails up front
    msg = str(err.value)
    assert "12" in msg and "8" in msg and "data.batch_size=8" in msg
    with pytest.raises(ValueError, match="data.batch_size=24"):
        D.iterate_batches(theta, x, batch_size=23, seed=0, mesh=mesh)


def test_batch_larger_than_data():
    theta, x = _rows(50)
    with pytest.raises(ValueError, match="batch_size=64.*50 training pairs"):
        D.iterate_batches(theta, x, batch_size=64, seed=0, mesh=None)
    with pytest.raises(ValueError, match="same number of rows"):
        D.iterate_batches(theta, x[:-1], batch_size=8, seed=0, mesh=None)
    with pytest.raises(ValueError, match="batch_size=0"):
        D.iterate_batches(theta, x, batch_size=0, seed=0, mesh=None)


@pytest.mark.slow
def test_simulate_at_given_parameters_is_simulate_at_the_prior_draws():
    """``simulate`` is ``simulate_at`` of its prior draws (the same rows); elsewhere x follows the theta given."""
    import jax

    from gensbi_sharding.harness import tasks

    task, key = tasks.get_task("gaussian_linear"), jax.random.key(5)
    theta, x = tasks.simulate(task, key, 64)
    _, sim_key = jax.random.split(key)
    again, x_again = tasks.simulate_at(task, sim_key, theta)
    np.testing.assert_array_equal(again, theta)
    np.testing.assert_array_equal(x_again, x)
    far, x_far = tasks.simulate_at(task, sim_key, np.full((64, 10), 50.0, np.float32))
    assert far.dtype == x_far.dtype == np.float32 and x_far.shape == (64, 10)
    assert abs(float(x_far.mean()) - 50.0) < 0.1  # likelihood N(theta, 0.1 I): centred on the theta given
