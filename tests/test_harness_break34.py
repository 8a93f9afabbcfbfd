"""Faults found by using the harness as a user would, round 34: features meeting states a real user gets into.

Each test names what was typed, what happened, and what happens now.
"""

import subprocess
import sys
from pathlib import Path

import pytest

from faults_helpers import compose_tiny
from gensbi_sharding.harness import local_cluster, memory_check
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.sweep_check import job_problem

REPO = Path(__file__).resolve().parents[1]


def test_local_processes_beyond_the_hosts_memory_are_refused_before_any_starts(monkeypatch, tmp_path):
    # launch.py distributed=local data.num_simulations=100000000: was refused by each started process (after JAX's
    # import, one refusal per process); the sweep's pre-check did not check it at all. Now the parent refuses.
    monkeypatch.setattr(memory_check, "host_available_bytes", lambda: 10**9)
    monkeypatch.setattr(local_cluster.subprocess, "Popen", lambda *a, **k: pytest.fail("a process started"))
    cfg = compose_tiny("distributed=local", "devices.cpu_count=8", "data.num_simulations=100000000")
    refusal = ("data.num_simulations=100000000 cannot fit: its simulations need about 6.4 GB on this host (2 processes "
               "of distributed=local share it) (4 copies of theta and x as float32), but 1.0 GB is available; set "
               "data.num_simulations=7800000 or fewer (half of it)")
    with pytest.raises(ConfigError) as err:
        local_cluster.run_local_processes(cfg, tmp_path)
    assert str(err.value) == refusal
    assert job_problem(cfg) == f"ConfigError: {refusal}"  # a sweep's pre-check: before its first job
    assert job_problem(compose_tiny("distributed=local", "devices.cpu_count=8", "data.num_simulations=7800000")) is None
    assert job_problem(compose_tiny("distributed=local", "devices.cpu_count=8", "data.num_simulations=100000000",
                                    "dry_run=true")) is None  # a dry run simulates none
