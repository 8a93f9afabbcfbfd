"""The z-score statistics come from one function (``simulation_data.global_stats``), whichever path builds the data,
and it is numerically sound: E[x^2] - E[x]^2 cancelled for data far from 0."""

import numpy as np

from gensbi_sharding.harness.simulation_data import global_stats


def test_the_std_of_data_far_from_zero_is_its_std():
    rng = np.random.default_rng(0)
    rows = np.column_stack([1e8 + rng.standard_normal(1000), rng.standard_normal(1000)])
    (total,), (mean, std) = global_stats([7], [rows], 1)
    assert total == 7
    np.testing.assert_allclose(mean, rows.mean(0), rtol=1e-7)
    np.testing.assert_allclose(std, rows.std(0), rtol=1e-6)  # was 0 for the first column: the sums cancelled


def test_a_constant_column_is_scaled_by_1():
    (), (mean, std) = global_stats([], [np.full((5, 2), 3e7)], 1)
    np.testing.assert_array_equal(std, [1.0, 1.0])
    np.testing.assert_array_equal(mean, [3e7, 3e7])


def test_shards_emulated_in_one_process_are_normalised_by_global_stats(monkeypatch):
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness import pipeline

    called = []
    monkeypatch.setattr(pipeline, "global_stats", lambda *a: called.append(a) or global_stats(*a))
    cfg = compose_tiny()
    pipe = pipeline.build_pipeline(cfg.data, seed=0, mesh=None, shards=2)
    (call,) = called  # was: its own two-pass std where one process held every shard
    (), (theta_mean, theta_std), (x_mean, x_std) = global_stats(*call)
    np.testing.assert_array_equal(pipe.sims.theta_std, theta_std)
    np.testing.assert_array_equal(pipe.sims.x_mean, x_mean)
    assert len(call[1][0]) == len(call[1][1]) > 0  # theta and x over both shards' training rows
