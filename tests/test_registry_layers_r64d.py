"""What sbibm_jax ships is listed in one place (tasks, beside TASKS), and the registry names a factory without
importing a check module (factory_keywords)."""

import subprocess
import sys

import pytest

# A fresh interpreter (~0.3 s): which modules a path imports is only seen before anything else imported them.
PROBE = """
import functools, sys
from gensbi_sharding.harness import registry

def make(*, width=1):
    return width

registry.register_data("r64d_mine")(make)
try:
    registry.register_data("r64d_mine")(functools.partial(make, width=2))
except ValueError as err:
    print(err)
print("gensbi_sharding.harness.factory_keywords" in sys.modules)
"""


def test_the_tasks_sbibm_jax_ships_beyond_the_registered_ones_are_listed_beside_them():
    from gensbi_sharding.harness import tasks

    assert "SBIBM_JAX_OTHER_TASKS" in tasks.__all__  # was name_hints', a message module's
    assert "gaussian_random_field" in tasks.SBIBM_JAX_OTHER_TASKS and not set(tasks.SBIBM_JAX_OTHER_TASKS) & set(
        tasks.TASKS)


@pytest.mark.slow
def test_the_registry_names_a_factory_without_importing_a_check_module():
    # Was: registry._describe imported factory_name from factory_keywords (the run's keyword check).
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert done.stdout.splitlines() == [
        "data 'r64d_mine' is already registered (by __main__.make); pick another name", "False"], done.stderr[-2000:]
