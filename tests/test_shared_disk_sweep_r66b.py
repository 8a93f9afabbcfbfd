"""launch.py -m, explicit mode, two processes per job on one disk: process 0 alone writes the sweep's summary and each
job's Hydra record (``.hydra/``), and they read as one process's sweep."""

from __future__ import annotations

import csv
import io

import pytest
from omegaconf import OmegaConf

from test_later_job_refusal_r66m import sweep_on_two


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

