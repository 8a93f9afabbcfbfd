"""A simulation budget beyond the host's memory is refused before any work, in a sweep too.

``run`` refused ``data.num_simulations=1000000000`` at its [2/7] step (``check_fits``), but a sweep's pre-check did
not: ``-m data.num_simulations=1024,1000000000`` trained job 0, then refused job 1. The pre-check runs before any
job fixes JAX's device count, so the task's sizes come from ``TASK_DIMS``, not from sbibm_jax (which starts JAX).
"""

import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from faults_helpers import compose_tiny
from gensbi_sharding.harness import memory_check
from gensbi_sharding.harness.job_check import job_problem
from gensbi_sharding.harness.tasks import TASK_DIMS, TASKS, task_dims


@pytest.mark.slow
def test_task_dims_known_without_sbibm_are_the_tasks_own():
    assert {name: task_dims(name) for name in TASKS} == TASK_DIMS


@pytest.mark.slow
def test_a_sweeps_job_beyond_the_hosts_memory_is_refused_before_the_first_job(monkeypatch):
    monkeypatch.setattr(memory_check, "host_available_bytes", lambda: 10**9)
    # two_moons: 4 floats x 4 bytes x 4 copies = 64 bytes a simulation; 6.4 GB against 1 GB, half of it fits
    assert job_problem(compose_tiny("data.num_simulations=100000000")) == (
        "ConfigError: data.num_simulations=100000000 cannot fit: its simulations need about 6.4 GB on this host "
        "(4 copies of theta and x as float32), but 1.0 GB is available; set data.num_simulations=7800000 or fewer "
        "(half of it)")
    assert job_problem(compose_tiny("data.num_simulations=7800000")) is None
    assert job_problem(compose_tiny("data.num_simulations=100000000", "dry_run=true")) is None  # simulates none


@pytest.mark.slow
def test_the_check_needs_no_sbibm_task():
    # sbibm_jax's tasks start JAX's backend: in a sweep's pre-check that would fix the device count before any job
    code = ("import sys\nfrom omegaconf import OmegaConf\nfrom gensbi_sharding.harness.memory_check import "
            "simulations_problem\ncfg = OmegaConf.create({'data': {'name': 'slcp', 'num_simulations': 10**9}})\n"
            "print(simulations_problem(cfg, host=10**9))\nprint('sbibm_jax' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.splitlines()[-2:] == [
        "data.num_simulations=1000000000 cannot fit: its simulations need about 208.0 GB on this host (4 copies of "
        "theta and x as float32), but 1.0 GB is available; set data.num_simulations=2400000 or fewer (half of it)",
        "False"], out.stderr[-2000:]
    assert memory_check.simulations_problem(OmegaConf.create({"data": {"name": "mine", "num_simulations": 10**9}}),
                                            host=1) is None  # a data set of one's own: its sizes are unknown here


@pytest.mark.parametrize("processes, sharing, fits", [(1, 1, "7800000"), (4, 1, "31000000"), (2, 2, "7800000")])
def test_the_budget_that_fits_counts_the_processes(processes, sharing, fits):
    cfg = OmegaConf.create({"data": {"name": "two_moons", "num_simulations": 10**9}})
    assert memory_check.simulations_problem(cfg, processes, sharing, host=10**9).endswith(
        f"set data.num_simulations={fits} or fewer (half of it)")
