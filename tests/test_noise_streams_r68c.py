"""Each (seed, observation) pair of a run's evaluation draws its own noise: no longer ``seed + k``, which gave seed 1's
observation 1 the noise of seed 0's observation 2."""

import pytest
import jax.numpy as jnp
import numpy as np

from gensbi_sharding.harness.data import load_task
from gensbi_sharding.harness.posterior import evaluate_observations, noise_seed


def samples_of(tmp_path, seed, k):
    sims = load_task("two_moons", num_simulations=64, seed=0, theta_transform="support")
    out = tmp_path / f"seed{seed}_obs{k}"
    out.mkdir()
    evaluate_observations(sims=sims, velocity=lambda theta, x, t: jnp.zeros_like(theta), params=None,  # the noise
                          observations=[k], num_samples=20, ode_steps=1, n_folds=2, seed=seed, mesh=None, out=out,
                          write=True, plot=False, title=lambda *a: "")
    with np.load(out / "posterior_samples.npz") as saved:
        return saved["samples"], int(saved["noise_seed"])


@pytest.mark.slow
def test_seed_1_observation_1_and_seed_0_observation_2_draw_other_noise(tmp_path):
    one, recorded = samples_of(tmp_path, 1, 1)
    two, _ = samples_of(tmp_path, 0, 2)
    assert not np.allclose(one, two)  # was equal: both integrated default_rng(2)'s noise
    assert recorded == noise_seed(1, 1) != noise_seed(0, 2)  # the seed sample.py --seed takes to draw them again


def test_noise_seeds_differ_over_seeds_and_observations():
    seeds = {noise_seed(s, k) for s in range(20) for k in range(1, 11)}
    assert len(seeds) == 200 and all(0 <= s < 2 ** 63 for s in seeds)
