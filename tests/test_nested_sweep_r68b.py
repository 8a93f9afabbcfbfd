"""A sweep into a folder inside another sweep's folder is refused in one line, before anything is written.

Was: ``-m ... hydra.sweep.dir=<sweep>/3`` ran there, in the folder that sweep's job 3 would take; the first sweep,
rerun with a fourth job, was then refused offering ``python launch.py ... train.resume=auto hydra.mode=RUN
hydra.run.dir=<sweep>/3`` to continue it, which, pasted, was refused in turn as a sweep's folder.
"""

import subprocess
import sys

import pytest

from faults_helpers import REPO
from gensbi_sharding.harness.sweep_subdirs import nested_sweep_problem


def test_a_folder_inside_a_sweeps_folder_is_named_with_one_beside_it(tmp_path):
    (tmp_path / "sw").mkdir()
    assert nested_sweep_problem(tmp_path / "sw" / "3") is None  # no sweep there yet: a plain folder
    (tmp_path / "sw" / "multirun.yaml").write_text("hydra: {}\n")
    assert nested_sweep_problem(tmp_path / "sw") is None  # the sweep's own folder: continued, not nested
    assert nested_sweep_problem(tmp_path / "sw2") is None
    assert nested_sweep_problem(tmp_path / "sw" / "a" / "b") == (
        f"hydra.sweep.dir={tmp_path / 'sw' / 'a' / 'b'} lies inside the folder of the sweep {tmp_path / 'sw'}: a "
        "sweep never writes into another sweep's folder, whose job folders are that sweep's; choose one outside it, "
        f"e.g. hydra.sweep.dir={tmp_path / 'sw'}-a-b")


@pytest.mark.slow
def test_a_sweep_into_another_sweeps_job_slot_is_refused_before_it_writes(tmp_path):
    sweep = tmp_path / "sw"
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    done = subprocess.run([sys.executable, "launch.py", "-m", "experiment=quick", "seed=0,1",
                           f"hydra.sweep.dir={sweep / '3'}"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1] == nested_sweep_problem(sweep / "3").join(("[ERROR] ", ""))
    assert sorted(p.name for p in sweep.iterdir()) == ["multirun.yaml"]  # was: its jobs 0, 1 and a summary there
