"""A sweep of several processes per job started with sweeps of different lengths on its processes (a typo: ``seed=0,1``
on process 0, ``seed=0,1,2`` on process 1): every process stops before the first job with one line naming each
process's count of jobs and the fix, not JAX's abort (exit 134 on each, XLA's fatal error and stack trace) once the
shorter sweep's process ends and the longer's starts a job alone."""

from __future__ import annotations

import sys

import pytest

from faults_helpers import LAUNCH, TINY, free_port, run_together


@pytest.mark.slow  # two launch.py processes (dry runs) stopped before the first job; bounded by 240 s
def test_processes_started_with_sweeps_of_different_lengths_stop_before_the_first_job(tmp_path):
    sweep, port = tmp_path / "s", free_port()
    args = [str(LAUNCH), "-m", *TINY, "dry_run=true", "distributed.mode=explicit", "distributed.num_processes=2",
            f"distributed.coordinator_address=127.0.0.1:{port}", "distributed.timeout_s=60",
            "distributed.heartbeat_s=10", f"hydra.sweep.dir={sweep}"]
    seeds = ("seed=0,1", "seed=0,1,2")
    results = run_together([[sys.executable, *args, seeds[rank], f"distributed.process_id={rank}"]
                            for rank in (0, 1)], bound=240)
    said = ("the processes' sweeps differ in length (process 0: 2 jobs, process 1: 3 jobs): start every process "
            "with the same -m command, its distributed.process_id aside")
    for rank, (output, code) in enumerate(results):
        errors = [line for line in output.splitlines() if line.startswith("[ERROR]")]
        assert (code, errors) == (1, [f"[ERROR] {'[process 1/2] ' if rank else ''}{said}"]), output[-3000:]
        assert "Terminating process" not in output
    assert not list(sweep.glob("*/metrics.json"))  # no job ran
