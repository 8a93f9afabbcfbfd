"""A data set of one's own (a factory returning ``SimulationData``, docs/gensbi_models.md): what it returns checked
before training, its shards over processes checked, its held-out pairs and statistics counted over processes.
"""

import numpy as np
import pytest


def test_z_score_statistics_over_processes_are_those_of_one_process_holding_every_row(monkeypatch):
    # Was, on 2 real processes (jax.distributed, gloo; x ~ 1000 +- 1): std [1.0308, 0.9354, 0.9354] for the rows'
    # [1.0083, 0.9790, 0.9984], 2-6 % off: the all-gather places the float64 sums on devices, which without
    # jax_enable_x64 hold float32, and the sum of squares minus the squared mean cancelled. Every multi-process run
    # normalised so, and (round 46) every data.shards above the process count. The all-gather is stood in for by
    # what it does with each process's values: placed on a device, then stacked (two processes, alike).
    import jax
    import numpy as np
    from jax.experimental import multihost_utils

    from gensbi_sharding.harness.simulation_data import global_stats

    monkeypatch.setattr(jax, "process_count", lambda: 2)
    monkeypatch.setattr(multihost_utils, "process_allgather",
                        lambda x, **_: np.stack([np.asarray(jax.device_put(x))] * 2))
    rows = (1000.0 + np.random.default_rng(0).standard_normal((1000, 3))).astype(np.float32)
    (dropped,), (mean, std) = global_stats([3], [rows], 2)
    assert dropped == 6
    np.testing.assert_array_equal(mean, rows.mean(0, dtype=np.float64).astype(np.float32))
    np.testing.assert_array_equal(std, rows.std(0, dtype=np.float64).astype(np.float32))


def _shards_of_mine(*, size, seed_of):
    """A data set of one's own whose shard ``process_index`` holds ``size(num_simulations, index, count)`` pairs,
    drawn from the seed stream ``(seed, seed_of(index))``."""
    from gensbi_sharding.harness.data import split_sizes
    from gensbi_sharding.harness.simulation_data import SimulationData, global_stats

    def factory(*, num_simulations, val_fraction, seed, process_index, process_count, x_transform, **_):
        n = size(num_simulations, process_index, process_count)
        rng = np.random.default_rng([seed, seed_of(process_index)])
        theta = rng.normal(size=(n, 2)).astype(np.float32)
        x = (theta + 0.1 * rng.normal(size=(n, 2))).astype(np.float32)
        n_train, _ = split_sizes(n, val_fraction)
        _, (tm, ts), (xm, xs) = global_stats([], [theta[:n_train], x[:n_train]], process_count)
        return SimulationData("mine", theta[:n_train], x[:n_train], theta[n_train:], x[n_train:],
                              observation=np.zeros(2, np.float32), reference_samples=np.zeros((0, 2), np.float32),
                              theta_mean=tm, theta_std=ts, x_mean=xm, x_std=xs, x_transform=x_transform)
    return factory


def test_a_data_factory_whose_last_shard_takes_the_remainder_trains(request):
    # Typed: data=mine data.num_simulations=1031 data.shards=4, the factory giving each shard num_simulations //
    # process_count pairs and the last one the remainder too (260), every pair of the budget simulated once. Was:
    # "returned 260 pairs for one of 4 shards ... more than its share of 258: it ignores process_count".
    from faults_helpers import registered

    from gensbi_sharding.harness.config import DataConfig
    from gensbi_sharding.harness.pipeline import build_pipeline

    def last_takes_rest(n, index, count):
        return n // count + (n % count if index == count - 1 else 0)

    registered(request, "data", "mine", _shards_of_mine(size=last_takes_rest, seed_of=lambda index: index))
    cfg = DataConfig(name="mine", num_simulations=1031, batch_size=64, theta_transform="none", shards=4)
    assert build_pipeline(cfg, seed=0, mesh=None, shards=4).val_pairs == 3 * 26 + 26  # split_sizes(257 / 260, 0.1)


def test_a_data_factory_giving_two_later_shards_the_same_pairs_is_refused(request):
    # Typed: data.shards=3, the factory seeding by min(process_index, 1): shards 1 and 2 the very same pairs, shard
    # 0 its own. Was: trained (only shard 0's pairs were compared with the others').
    from faults_helpers import registered

    from gensbi_sharding.harness.config import ConfigError, DataConfig
    from gensbi_sharding.harness.pipeline import build_pipeline

    registered(request, "data", "mine", _shards_of_mine(size=lambda n, index, count: n // count,
                                                        seed_of=lambda index: min(index, 1)))
    cfg = DataConfig(name="mine", num_simulations=1026, batch_size=60, theta_transform="none", shards=3)
    with pytest.raises(ConfigError, match=r"the same simulations for shards 1 and 2 of 3: it ignores process_index"):
        build_pipeline(cfg, seed=0, mesh=None, shards=3)


def _one_shard(seed):
    from gensbi_sharding.harness.simulation_data import SimulationData

    rows = np.random.default_rng(seed).standard_normal((8, 2)).astype(np.float32)
    zeros, ones = np.zeros(2, np.float32), np.ones(2, np.float32)
    return SimulationData("mine", rows[:6], rows[:6] + 1, rows[6:], rows[6:] + 1, observation=zeros,
                          reference_samples=np.zeros((0, 2), np.float32), theta_mean=zeros, theta_std=ones,
                          x_mean=zeros, x_std=ones)


def test_a_data_factory_that_ignores_process_index_over_processes_is_refused(monkeypatch):
    # Typed: distributed=local with 2 processes, data=mine, the factory drawing with a seed of its own whatever
    # process_index says: each process one shard, the very same pairs. Was: trained, every process on the same
    # pairs (only the shards of one process were compared). The all-gather is stood in for by what it does here:
    # the other process's words, alike, stacked after this one's.
    import jax
    from jax.experimental import multihost_utils

    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.own_data import check_shards

    monkeypatch.setattr(jax, "process_count", lambda: 2)
    monkeypatch.setattr(multihost_utils, "process_allgather", lambda words, **_: np.stack([words, words]))
    with pytest.raises(ConfigError, match=r"the same simulations for shards 0 and 1 of 2: it ignores process_index"):
        check_shards([_one_shard(0)], "mine", num_simulations=16, shards=2)


def test_a_refusal_on_another_process_ends_this_one_at_the_shards_all_gather_naming_it(monkeypatch):
    # distributed=local, 2 processes: process 1's shard refused (here: its NaN), process 0's fine. Was: process 1
    # ended; process 0 waited for it in the shards' all-gather until distributed.heartbeat_s, then both died by
    # SIGABRT and the job's error named no refusal. Stood in for: process 0's row, then process 1's as it gathers it.
    import jax
    from jax.experimental import multihost_utils

    from gensbi_sharding.harness import own_data
    from gensbi_sharding.harness.config import ConfigError

    bad = _one_shard(1)
    bad.theta_train[0, 0] = np.nan
    with pytest.raises(ConfigError) as refused:  # process 1's own, in one process: as it always was
        own_data.agreed_shards(lambda: [own_data.check_factory_result(bad, "mine")], "mine", num_simulations=16,
                               shards=2)
    theirs = str(refused.value)
    said = f"CConfigError: {theirs}".encode()  # process 1's row: no digest (no shard), then its refusal's bytes
    text = np.zeros(own_data._TEXT_BYTES, np.uint8)
    text[:len(said)] = np.frombuffer(said, np.uint8)
    row_1 = np.concatenate([np.zeros(4, np.uint32), text.view(np.uint32)])[None]
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    monkeypatch.setattr(multihost_utils, "process_allgather", lambda rows, **_: np.stack([rows, row_1]))
    with pytest.raises(ConfigError) as ours:
        own_data.agreed_shards(lambda: [_one_shard(0)], "mine", num_simulations=16, shards=2)
    assert str(ours.value) == f"{theirs} (process 1 of 2: its data shards)"
    assert theirs.startswith("data=mine's factory returned theta_train with NaN or inf in 1 row(s) of 6")


def test_a_data_factorys_float64_values_beyond_float32_are_named_so_not_as_nan_or_inf():
    # A factory returning float64 x ~ 1e39 (finite). Was: "returned x_train with NaN or inf in 6 row(s) of 6: drop
    # those simulations ... count them in dropped_non_finite" -- the infinities were the float32 cast's, not its own.
    import dataclasses

    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.own_data import check_factory_result

    good = _one_shard(0)
    huge = dataclasses.replace(good, x_train=np.full((6, 2), 1e39))
    with pytest.raises(ConfigError, match=r"^data=mine's factory returned x_train with values beyond float32's range "
                                          r"\(e\.g\. 1e\+39; the largest is 3\.4e\+38\), which SimulationData holds: "
                                          r"rescale them in the factory$"):
        check_factory_result(huge, "mine")
    assert check_factory_result(dataclasses.replace(good, x_train=np.full((6, 2), 1e38)), "mine").x_train[0, 0] == (
        np.float32(1e38))


def test_a_fixed_size_data_set_read_whole_is_refused_naming_num_simulations_and_the_fix_trains(request):
    # Typed: data=mine, a factory reading a file of 2,000 pairs whole (split by process_index / process_count),
    # data.num_simulations left at 1000. Was: "returned 2000 pairs for one of 1 shards ...: it ignores process_count"
    # -- one shard, and process_count honoured. Now num_simulations is named, and the fix it names trains.
    from faults_helpers import registered

    from gensbi_sharding.harness.config import ConfigError, DataConfig
    from gensbi_sharding.harness.pipeline import build_pipeline

    registered(request, "data", "mine", _shards_of_mine(size=lambda n, index, count: 2000 // count,
                                                        seed_of=lambda index: index))
    cfg = DataConfig(name="mine", num_simulations=1000, batch_size=64, theta_transform="none")
    with pytest.raises(ConfigError, match=r"returned 2000 pairs for a shard of data\.num_simulations=1000 over 1 "
                                          r"shard\(s\), more than a share holds \(1000\): it ignores num_simulations "
                                          r"or process_count; .* \(a data set of a fixed size: set "
                                          r"data\.num_simulations to its size, and give each shard its "
                                          r"process_index-th share\)$"):
        build_pipeline(cfg, seed=0, mesh=None)
    cfg = DataConfig(name="mine", num_simulations=2000, batch_size=64, theta_transform="none")
    assert build_pipeline(cfg, seed=0, mesh=None).val_pairs == 200
