"""Round 46: a new user, following the README and docs/*.md in a fresh clone, added a data set of their own.

Each test names what was typed, what happened, and checks what happens now.
"""

import numpy as np


def _my_simulator(*, num_simulations, val_fraction, seed, process_index, process_count, **_):
    """A data set of one's own as docs/gensbi_models.md describes it: a SimulationData, val_pairs left out."""
    from gensbi_sharding.harness.data import split_sizes
    from gensbi_sharding.harness.simulation_data import SimulationData, global_stats

    rng = np.random.default_rng([seed, process_index])
    n = num_simulations // process_count
    theta = rng.normal(size=(n, 2)).astype(np.float32)
    x = (theta + 0.1 * rng.normal(size=(n, 2))).astype(np.float32)
    n_train, _ = split_sizes(n, val_fraction)
    _, (theta_mean, theta_std), (x_mean, x_std) = global_stats([], [theta[:n_train], x[:n_train]], process_count)
    return SimulationData("mygauss", theta[:n_train], x[:n_train], theta[n_train:], x[n_train:],
                          observation=np.zeros(2, np.float32), reference_samples=np.zeros((0, 2), np.float32),
                          theta_mean=theta_mean, theta_std=theta_std, x_mean=x_mean, x_std=x_std)


def test_a_data_set_of_ones_own_counts_its_held_out_pairs(monkeypatch):
    # Typed: @register_data("mygauss") on the factory above, conf/data/mygauss.yaml, then python launch.py
    # experiment=quick data=mygauss eval.enabled=false. Was: "val loss 1.6409 over 0 pairs" on the console and
    # val_pairs 0 in metrics.json, for the 102 held-out pairs the validation had just used (SimulationData's
    # val_pairs defaulted to 0, a count only load_task set).
    from gensbi_sharding.harness import registry
    from gensbi_sharding.harness.config import DataConfig
    from gensbi_sharding.harness.pipeline import build_pipeline

    registry.data_names()  # the built-ins first, so the registration below is the only addition
    monkeypatch.setitem(registry._DATA, "mygauss", _my_simulator)
    cfg = DataConfig(name="mygauss", num_simulations=1024, batch_size=64, theta_transform="none")
    one_shard = build_pipeline(cfg, seed=0, mesh=None)
    assert one_shard.val_pairs == len(one_shard.sims.theta_val) == 102
    two_shards = build_pipeline(cfg, seed=0, mesh=None, shards=2)  # emulated shards: summed over both
    assert two_shards.val_pairs == 2 * 51
    assert sum(w.sum() for w in (b["weight"] for b in two_shards.val_batches)) == 102  # the pairs validated
