"""Hydra launchers off their cluster (SLURM without SLURM): named, not a traceback, and nothing written."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from faults_helpers import REPO


def test_a_scheduler_launcher_off_its_cluster_is_named_not_a_traceback():
    from gensbi_sharding.harness.preflight import launcher_problem

    slurm = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    message = launcher_problem(slurm, which=lambda command: None)
    assert message.startswith("hydra/launcher=slurm submits the jobs to SLURM, but `srun` and `sbatch` are not on "
                              "PATH")
    assert "but `sbatch` is not on PATH" in launcher_problem(slurm, which=lambda c: "/bin/srun" if c == "srun" else None)
    assert message.endswith("leave out hydra/launcher=slurm to run the jobs here one after another")
    assert launcher_problem(slurm, which=lambda command: f"/usr/bin/{command}") is None  # on a login node
    assert launcher_problem("hydra._internal.core_plugins.basic_launcher.BasicLauncher",
                            which=lambda command: None) is None


@pytest.mark.slow  # a launch.py process (refused before any folder: about 2 s)
def test_slurm_launcher_without_slurm_stops_before_writing_anything(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    env["PATH"] = str(Path(sys.executable).parent)  # python only: no srun here (nor on CI)
    proc = subprocess.run([sys.executable, str(REPO / "launch.py"), "-m", "hydra/launcher=slurm", "experiment=quick",
                           f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.stderr.strip().startswith("[ERROR] hydra/launcher=slurm submits the jobs to SLURM")
    assert list(tmp_path.iterdir()) == []  # no sweep folder, lock or multirun.yaml left behind


def test_submitit_local_on_several_nodes_is_named_with_its_fix():
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.preflight import launcher_problem

    local = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher"
    assert launcher_problem(local, launcher=OmegaConf.create({"nodes": 2, "tasks_per_node": 1})) == (
        "hydra.launcher.nodes=2: hydra/launcher=submitit_local runs the jobs on this host, one node; pass "
        "hydra.launcher.nodes=1 (hydra.launcher.tasks_per_node sets the processes on it), or hydra/launcher=slurm on "
        "a cluster for several nodes")
    assert launcher_problem(local, launcher=OmegaConf.create({"nodes": 1, "tasks_per_node": 2})) is None


@pytest.mark.slow  # a launch.py process (refused before any folder: about 2 s)
def test_submitit_local_on_two_nodes_stops_before_writing_anything(tmp_path):
    # Was: submitit's traceback ("LocalExecutor can use only one node"), and the sweep folder kept multirun.yaml,
    # .run.lock and .submitit
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    proc = subprocess.run([sys.executable, str(REPO / "launch.py"), "-m", "hydra/launcher=submitit_local",
                           "hydra.launcher.nodes=2", "experiment=quick", f"hydra.sweep.dir={tmp_path / 'sweep'}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.stderr.strip().startswith("[ERROR] hydra.launcher.nodes=2: hydra/launcher=submitit_local runs")
    assert list(tmp_path.iterdir()) == []  # no sweep folder, lock or multirun.yaml left behind
