"""Every test runs on 8 simulated CPU devices, whatever machine it runs on.

The device count must be fixed before JAX's backend starts, so it is set here,
once, at collection time. Tests that need another count run in a subprocess.
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402

jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_num_cpu_devices", 8)

import pytest  # noqa: E402

N_DEVICES = 8


@pytest.fixture(scope="session")
def devices():
    devs = jax.devices()
    assert len(devs) == N_DEVICES, f"conftest asked for {N_DEVICES} CPU devices, JAX has {len(devs)}"
    return devs
