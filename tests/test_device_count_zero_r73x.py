"""An environment's device count of 0 beside ``devices.cpu_count`` or the other variable's count.

B2, was (r73-break): ``JAX_NUM_CPU_DEVICES=0 launch.py devices.cpu_count=4`` refused ("asks for no simulated CPU
devices ... or set JAX_NUM_CPU_DEVICES=8"), and that fix then refused as "two device counts disagree:
devices.cpu_count=4 and JAX_NUM_CPU_DEVICES gives 8"; on main it ran on 4 devices (the harness sets JAX's count
itself, which JAX takes over the environment's). Now a 0 is refused only where it is the count JAX would use.
B3, was: ``JAX_NUM_CPU_DEVICES=0`` beside ``XLA_FLAGS``' count 4 said unsetting gives "devices.cpu_count's count
(8 by default)"; it gives 4. Now the count that remains is named, and both unsets where both are 0.
"""

from __future__ import annotations

import pytest

from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.cpu_count import resolve_cpu_count

FLAG = "--xla_force_host_platform_device_count"


@pytest.mark.parametrize("environ", [{"JAX_NUM_CPU_DEVICES": "0"}, {"XLA_FLAGS": f"{FLAG}=0"},
                                     {"JAX_NUM_CPU_DEVICES": "0", "XLA_FLAGS": f"--xla_dump_to=/tmp/d {FLAG}=0"},
                                     {"JAX_NUM_CPU_DEVICES": "0", "XLA_FLAGS": f"{FLAG}=4"}])
def test_a_zero_beside_devices_cpu_count_is_overridden_as_on_main(environ):
    assert resolve_cpu_count(4, environ) == (4, "devices.cpu_count")


def test_a_zero_the_other_variable_overrides_is_not_refused():
    # JAX_NUM_CPU_DEVICES comes first (JAX's own order): XLA_FLAGS' 0 is not the count used
    assert resolve_cpu_count(None, {"JAX_NUM_CPU_DEVICES": "4", "XLA_FLAGS": f"{FLAG}=0"}) == (4, "JAX_NUM_CPU_DEVICES")


def _refusal(environ):
    with pytest.raises(ConfigError) as err:
        resolve_cpu_count(None, environ)
    return str(err.value)


def test_the_refusal_names_the_count_unsetting_leaves():
    said = _refusal({"JAX_NUM_CPU_DEVICES": "0", "XLA_FLAGS": f"{FLAG}=4"})
    assert said == ("JAX_NUM_CPU_DEVICES=0 asks for no simulated CPU devices, on which JAX cannot start; unset "
                    "JAX_NUM_CPU_DEVICES to use XLA_FLAGS's count (4), or set XLA_FLAGS='' JAX_NUM_CPU_DEVICES=4")
    assert resolve_cpu_count(None, {"XLA_FLAGS": f"{FLAG}=4"}) == (4, "XLA_FLAGS")  # unset: 4, as said
    assert resolve_cpu_count(None, {"XLA_FLAGS": "", "JAX_NUM_CPU_DEVICES": "4"}) == (4, "JAX_NUM_CPU_DEVICES")


def test_both_zero_names_both_unsets():
    said = _refusal({"JAX_NUM_CPU_DEVICES": "0", "XLA_FLAGS": f"--xla_dump_to=/tmp/d {FLAG}=0"})
    assert said == ("JAX_NUM_CPU_DEVICES=0 asks for no simulated CPU devices, on which JAX cannot start; unset "
                    "JAX_NUM_CPU_DEVICES and remove the count from XLA_FLAGS to use the default count (8), or set "
                    "XLA_FLAGS=--xla_dump_to=/tmp/d JAX_NUM_CPU_DEVICES=8")
    assert resolve_cpu_count(None, {"XLA_FLAGS": "--xla_dump_to=/tmp/d", "JAX_NUM_CPU_DEVICES": "8"}) == (
        8, "JAX_NUM_CPU_DEVICES")  # the fix, pasted, is taken
