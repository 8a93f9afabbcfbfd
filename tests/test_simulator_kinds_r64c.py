"""Tasks of one name but other settings, simulated in one process, each by its own simulator."""

from __future__ import annotations

import pytest
import jax
import numpy as np
from sbibm_jax.tasks.gaussian_linear.task import GaussianLinear

from gensbi_sharding.harness.tasks import get_task, simulate_at


def _row_by_row(task, key, theta):
    simulator = task.get_simulator(key)
    return np.stack([np.asarray(simulator(k, t[None])[0]) for k, t in zip(jax.random.split(key, len(theta)), theta)])


@pytest.mark.slow
def test_a_gaussian_linear_of_other_settings_after_the_default_is_simulated_by_its_own(tmp_path):
    # Was: the jitted simulator was shared by (type, name): dim=5 after the default dim=10 raised AssertionError,
    # and simulator_scale=1.0 was simulated with the default's 0.1, other data without a word
    key = jax.random.key(3)
    simulate_at(get_task("gaussian_linear"), key, np.zeros((2, 10), np.float32))  # the default one first
    for task, dim in ((GaussianLinear(dim=5), 5), (GaussianLinear(simulator_scale=1.0), 10)):
        theta = np.linspace(-1, 1, 3 * dim, dtype=np.float32).reshape(3, dim)
        _, x = simulate_at(task, key, theta)
        np.testing.assert_allclose(x, _row_by_row(task, key, jax.numpy.asarray(theta)), rtol=1e-5, atol=1e-6)
    _, default = simulate_at(get_task("gaussian_linear"), key, np.zeros((3, 10), np.float32))
    _, wide = simulate_at(GaussianLinear(simulator_scale=1.0), key, np.zeros((3, 10), np.float32))
    assert np.abs(wide).mean() > 2 * np.abs(default).mean()  # its own, wider noise (was: the default's)
