"""``distributed=local`` and ``distributed.mode=explicit`` as users run them: memory refused before any process
starts, an explicit-mode run ending with its result line.
"""

import pytest

from faults_helpers import REPO, compose_tiny
from gensbi_sharding.harness import local_cluster, memory_check
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.job_check import job_problem


@pytest.mark.slow  # a launch of launch.py (explicit mode, one process: about 8 s)
def test_a_run_in_explicit_mode_ends_with_its_result_line(tmp_path):
    # Typed (README, "Running on several hosts": distributed.mode=explicit takes coordinator_address, num_processes
    # and process_id), one command per host. Was: process 0's console ended at "[7/7] outputs: ...", without the
    # line every other run ends with ("done in ... s: ...; outputs in ..."): distributed.process_id set was taken
    # for one of distributed=local's processes, whose parent says it.
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.run([sys.executable, "launch.py", "experiment=quick", "train.steps=4", "eval.enabled=false",
                           "distributed.mode=explicit", f"distributed.coordinator_address=localhost:{port}",
                           "distributed.num_processes=1", "distributed.process_id=0", f"hydra.run.dir={tmp_path / 'r'}"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()[-1]  # (the progress bar: stderr)
    assert last.startswith("done in ") and last.endswith(f"outputs in {tmp_path / 'r'}"), last


@pytest.mark.slow
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
