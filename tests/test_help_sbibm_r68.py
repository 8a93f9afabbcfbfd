"""``--help`` says that ``experiment=sbibm`` is always a multirun and how large, and the one-job command it gives
overrides every swept key (a new user typed ``python launch.py experiment=sbibm`` from the group list and got a
24-job sweep of hours, announced only by Hydra's "Launching 24 jobs locally")."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

REPO = Path(__file__).resolve().parents[1]
ONE_JOB = "python launch.py -m experiment=sbibm data=two_moons data.num_simulations=10000"


@pytest.mark.slow
def test_help_names_the_sbibm_presets_jobs_and_one_job_of_it():
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    proc = subprocess.run([sys.executable, str(REPO / "launch.py"), "--help"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = " ".join(proc.stdout.split())  # the note wraps over two lines
    params = OmegaConf.load(REPO / "conf" / "experiment" / "sbibm.yaml").hydra.sweeper.params
    tasks, budgets = (len(str(params[key]).split(",")) for key in ("data", "data.num_simulations"))
    assert f"experiment=sbibm is always a multirun, -m or not: {tasks * budgets} jobs ({tasks} tasks x {budgets} " \
           "simulation budgets)" in text
    assert ONE_JOB in text
    # The one-job command sets every key the preset sweeps, one value each: one job.
    assert set(params) == {"data", "data.num_simulations"}
    assert all(f" {key}=" in ONE_JOB and "," not in ONE_JOB.split(f" {key}=")[1].split()[0] for key in params)
