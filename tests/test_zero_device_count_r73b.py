"""An environment asking for 0 simulated CPU devices (``JAX_NUM_CPU_DEVICES=0``, ``XLA_FLAGS``' count ``=0``).

Was: the 0 was dropped without a word and the run used 8 devices, its console saying "cpu_count=8 (from default)";
JAX itself cannot start on 0 ("Unable to initialize backend 'cpu': ... Could not determine process_index"), so the
user's own scripts in that environment fail while the harness claims nothing was set. Now ``resolve_cpu_count``
refuses it naming the variable and two fixes; ``-1``, which JAX reads as "not set", stays unset.
"""

from __future__ import annotations

import pytest

from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.cpu_count import resolve_cpu_count

FLAG = "--xla_force_host_platform_device_count"


def test_jax_num_cpu_devices_zero_is_refused():  # beside devices.cpu_count: test_device_count_zero_r73x
    with pytest.raises(ConfigError) as err:
        resolve_cpu_count(None, {"JAX_NUM_CPU_DEVICES": "0"})
    assert str(err.value) == ("JAX_NUM_CPU_DEVICES=0 asks for no simulated CPU devices, on which JAX cannot start; "
                              "unset JAX_NUM_CPU_DEVICES to use the default count (8), or set "
                              "JAX_NUM_CPU_DEVICES=8")


def test_xla_flags_zero_is_refused_keeping_the_other_flags():
    environ = {"XLA_FLAGS": f"--xla_dump_to=/tmp/d {FLAG}=0"}
    with pytest.raises(ConfigError) as err:
        resolve_cpu_count(None, environ)
    fix = f"XLA_FLAGS='--xla_dump_to=/tmp/d '{FLAG}=8"
    assert str(err.value) == (f"XLA_FLAGS's {FLAG}=0 asks for no simulated CPU devices, on which JAX cannot start; "
                              f"remove the count from XLA_FLAGS to use the default count (8), or set "
                              f"{fix}")
    assert resolve_cpu_count(None, {"XLA_FLAGS": f"--xla_dump_to=/tmp/d {FLAG}=8"}) == (8, "XLA_FLAGS")  # it works


@pytest.mark.parametrize(("environ", "configured", "expected"), [
    ({"JAX_NUM_CPU_DEVICES": "-1"}, None, (8, "default")),  # JAX's "not set"
    ({"JAX_NUM_CPU_DEVICES": "-1"}, 4, (4, "devices.cpu_count")),
    ({"JAX_NUM_CPU_DEVICES": "2"}, None, (2, "JAX_NUM_CPU_DEVICES")),
    ({}, None, (8, "default")),
])
def test_other_counts_resolve_as_before(environ, configured, expected):
    assert resolve_cpu_count(configured, environ) == expected
