"""The batch-size message's count of dropped simulations is every shard's, whoever counted them.

Two processes are stood in for by JAX's process count and an all-gather that returns each process's values (both
processes alike but for their shards' digests, so the shards are distinct), as tests/test_own_data_factory.py does.
"""

import numpy as np
import pytest


def two_processes(x, **_):
    x = np.asarray(x)
    return np.stack([x, np.where(x != 0, ~x, 0) if x.ndim == 2 else x])


def dropping_five(*, num_simulations, val_fraction, seed, process_index, process_count, x_transform, **_):
    """A data set of one's own that drops 5 simulations of its shard and counts those (not every shard's)."""
    from gensbi_sharding.harness.data import split_sizes
    from gensbi_sharding.harness.simulation_data import SimulationData

    rng = np.random.default_rng([seed, process_index])
    n = num_simulations // process_count - 5
    theta = rng.normal(size=(n, 2)).astype(np.float32)
    x = (theta + 0.1 * rng.normal(size=(n, 2))).astype(np.float32)
    n_train, _ = split_sizes(n, val_fraction)
    ones, zeros = np.ones(2, np.float32), np.zeros(2, np.float32)
    return SimulationData("mine", theta[:n_train], x[:n_train], theta[n_train:], x[n_train:], observation=zeros,
                          reference_samples=np.zeros((0, 2), np.float32), theta_mean=zeros, theta_std=ones,
                          x_mean=zeros, x_std=ones, x_transform=x_transform, dropped_non_finite=5)


@pytest.fixture
def stood_in(monkeypatch):
    import jax
    from jax.experimental import multihost_utils

    monkeypatch.setattr(jax, "process_count", lambda: 2)
    monkeypatch.setattr(multihost_utils, "process_allgather", two_processes)


def test_a_factory_counting_its_own_shards_drops_is_told_every_shards(request, stood_in):
    # Typed: distributed=local distributed.local_processes=2 data=mine data.num_simulations=200 data.batch_size=176.
    # Was: "... after dropping 5 non-finite simulations": process 0's shard's, of the 10 dropped.
    from faults_helpers import registered
    from gensbi_sharding.harness.config import ConfigError, DataConfig
    from gensbi_sharding.harness.pipeline import build_pipeline

    registered(request, "data", "mine", dropping_five)
    with pytest.raises(ConfigError) as err:
        build_pipeline(DataConfig(name="mine", num_simulations=200, batch_size=176, theta_transform="none"),
                       seed=0, mesh=None)
    assert "at most 170 (2 shards x 85 training pairs (the smallest shard's), after dropping 10 non-finite " \
           "simulations)" in str(err.value), err.value
    pipe = build_pipeline(DataConfig(name="mine", num_simulations=200, batch_size=170, theta_transform="none"),
                          seed=0, mesh=None)  # the batch size it named
    assert pipe.dropped_non_finite == 10


@pytest.mark.slow
def test_load_tasks_drops_are_counted_once_over_the_processes(monkeypatch, stood_in):
    # load_task now counts its own shard's (its log line every shard's): summed once, not the total summed again.
    import gensbi_sharding.harness.data as D
    from gensbi_sharding.harness.config import DataConfig
    from gensbi_sharding.harness.pipeline import build_pipeline

    real = D.simulate

    def faulty(task, key, n):
        theta, x = (a.copy() for a in real(task, key, n))
        x[:3] = np.nan
        return theta, x

    monkeypatch.setattr(D, "simulate", faulty)
    cfg = DataConfig(name="two_moons", num_simulations=200, batch_size=32)
    assert D.load_task("two_moons", num_simulations=200, process_count=2).dropped_non_finite == 3
    assert build_pipeline(cfg, seed=0, mesh=None).dropped_non_finite == 6
