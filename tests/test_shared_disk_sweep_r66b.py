"""launch.py -m, explicit mode, two processes per job on one disk: process 0 alone writes the sweep's summary and each
job's Hydra record (``.hydra/``), and they read as one process's sweep."""

from __future__ import annotations

import csv
import io
import json
import os
import socket
import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from faults_helpers import TINY
from test_later_job_refusal_r66m import LAUNCH, sweep_on_two


@pytest.mark.slow  # two launch.py processes, two dry-run jobs; bounded by 240 s
def test_a_sweep_of_two_processes_on_one_disk_is_recorded_by_process_0_alone(tmp_path):
    # Was: both processes printed and wrote sweep_summary.*, and process 1's Hydra rewrote each job's
    # .hydra/overrides.yaml, so the summary had a distributed.process_id column: 0 for one job, 1 for the other
    (zero, code0), (one, code1) = sweep_on_two(tmp_path / "s", "seed=0,1")
    assert (code0, code1) == (0, 0), (zero[-3000:], one[-3000:])
    assert "Sweep summary (2 jobs" in zero and "Sweep summary" not in one, one[-3000:]
    header = next(csv.reader(io.StringIO((tmp_path / "s" / "sweep_summary.csv").read_text())))
    assert header[:2] == ["job", "seed"] and not [c for c in header if "process_id" in c], header
    for job, seed in (("0", 0), ("1", 1)):
        overrides = list(OmegaConf.load(tmp_path / "s" / job / ".hydra" / "overrides.yaml"))
        assert f"seed={seed}" in overrides and "distributed.process_id=0" in overrides, overrides
        assert OmegaConf.load(tmp_path / "s" / job / ".hydra" / "config.yaml").distributed.process_id == 0
    assert "distributed.process_id=0" in OmegaConf.load(tmp_path / "s" / "multirun.yaml").hydra.overrides.task


def auto_sweep_on_two(sweep, *overrides, bound=240):
    """Processes 0 and 1 of one ``launch.py -m`` sweep (dry runs) under ``distributed=auto``, each started as srun
    starts a task (SLURM's variables; the coordinator on a free local port JAX derives from SLURM_JOB_ID): their
    console output and exit codes."""
    for port in range(65535 - 4095, 65536):  # JAX's SLURM coordinator port: SLURM_JOB_ID % 4096 + 61440
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        break
    slurm = {"SLURM_JOB_ID": str(port - (65535 - 4095)), "SLURM_STEP_NODELIST": "localhost", "SLURM_NTASKS": "2"}
    args = [str(LAUNCH), "-m", *TINY, "dry_run=true", "distributed=auto", "distributed.timeout_s=60",
            f"hydra.sweep.dir={sweep}", *overrides]
    procs = [subprocess.Popen([sys.executable, *args], env={**os.environ, **slurm, "SLURM_PROCID": str(rank),
                                                           "SLURM_LOCALID": str(rank)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for rank in (0, 1)]
    try:
        return [(proc.communicate(timeout=bound)[0], proc.returncode) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.slow  # two launch.py processes, two dry-run jobs; bounded by 240 s
def test_an_auto_sweep_whose_processes_each_run_launch_is_claimed_by_process_0_alone(tmp_path):
    # Was: under srun every process ran launch.py -m distributed=auto and locked the sweep folder (its rank unknown
    # before JAX joined them): one was refused 'is in use by another run' (exit 1), the other aborted (exit 134)
    (zero, code0), (one, code1) = auto_sweep_on_two(tmp_path / "s", "seed=0,1")
    assert (code0, code1) == (0, 0), (zero[-3000:], one[-3000:])
    assert "in use" not in zero + one and "Sweep summary" not in one, one[-3000:]
    for job in ("0", "1"):
        assert json.loads((tmp_path / "s" / job / "metrics.json").read_text())["status"] == "ok"
    header = next(csv.reader(io.StringIO((tmp_path / "s" / "sweep_summary.csv").read_text())))
    assert header[:3] == ["job", "seed", "mesh_shape"], header

