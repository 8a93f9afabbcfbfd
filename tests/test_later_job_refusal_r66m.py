"""launch.py -m, explicit mode, two processes per job: a sweep runs, and a refusal of a job after the first (by the
sweep's own checks, or before the next job between two jobs) stops every process with its words, the same exit code."""

from __future__ import annotations

import json

import pytest

from faults_helpers import sweep_on_two

# Process 0's disk has no room for the next job's Hydra files (its hosts' disks are its own): the real check, its
# statvfs reading 3 free blocks
FULL_DISK = """
import os, runpy, sys
from types import SimpleNamespace
from gensbi_sharding.harness import hydra_room
real_problem, real_statvfs = hydra_room.room_problem, os.statvfs
def full(path):
    return SimpleNamespace(f_frsize=4096, f_bsize=4096, f_bfree=3, f_bavail=3, f_blocks=real_statvfs(path).f_blocks,
                           f_flag=0)
def room_problem(*args, **kwargs):
    os.statvfs = full
    try:
        return real_problem(*args, **kwargs)
    finally:
        os.statvfs = real_statvfs
hydra_room.room_problem = room_problem
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.slow  # two launch.py processes, two dry-run jobs; bounded by 240 s
def test_a_sweep_of_two_processes_per_job_runs_each_job_on_both(tmp_path):
    # Was: every process locked the sweep folder in Hydra's callback; the first refused the others ('is in use by
    # another run'), process 0 perhaps, which left: the rest died on its coordinator (exit 134 on both)
    (zero, code0), (one, code1) = sweep_on_two(tmp_path / "s", "seed=0,1")
    assert (code0, code1) == (0, 0), (zero[-3000:], one[-3000:])
    assert "in use" not in zero + one, zero[-3000:]
    for job in ("0", "1"):
        assert json.loads((tmp_path / "s" / job / "metrics.json").read_text())["status"] == "ok"


@pytest.mark.slow  # two launch.py processes refused before the first job; bounded by 240 s
def test_a_later_jobs_folder_refused_to_process_0_ends_every_process_with_its_words(tmp_path):
    # Was: process 0 printed its refusal and left; process 1 was told it as its first job's error ('str: ...'), after
    # its Hydra wrote into the folder, went on to its second job and died there on the lost coordinator (exit 134)
    (tmp_path / "s" / "1").mkdir(parents=True)
    (tmp_path / "s" / "1" / "metrics.json").write_text(json.dumps({"status": "ok", "final_step": 4}))
    (zero, code0), (one, code1) = sweep_on_two(tmp_path / "s", "seed=0,1")
    assert (code0, code1) == (1, 1), (zero[-3000:], one[-3000:])
    said = next(line for line in zero.splitlines() if line.startswith("[ERROR]")).split("[ERROR] ", 1)[1]
    assert f"{tmp_path / 's' / '1'} holds a completed run" in said and said.endswith("in another hydra.sweep.dir")
    assert f"[ERROR] [process 1/2] {said}" in one and "Check failure" not in zero + one, one[-3000:]
    # joining the other process to tell it: the job's noise, not the console's (was: '[HYDRA] Starting JAX distributed
    # service on [::]:<port>', 'Unable to initialize backend 'tpu': ...' after the refusal)
    assert "JAX distributed service" not in zero and "initialize backend" not in zero, zero[-3000:]
    assert not (tmp_path / "s" / "0").exists() and not (tmp_path / "s" / "multirun.yaml").exists()  # nothing written
    assert json.loads((tmp_path / "s" / "1" / "metrics.json").read_text()) == {"status": "ok", "final_step": 4}


@pytest.mark.slow  # two launch.py processes, one dry-run job; bounded by 240 s
def test_a_next_job_process_0_has_no_room_for_ends_every_process_before_it(tmp_path):
    # Was: process 0 stopped the sweep after job 0 (its disk too full for job 1's Hydra files) and left; process 1
    # went on to job 1 and died there on the lost coordinator (exit 134 on both, after JAX's shutdown barrier's wait)
    (zero, code0), (one, code1) = sweep_on_two(tmp_path / "s", "seed=0,1", prelude0=FULL_DISK)
    assert (code0, code1) == (1, 1), (zero[-3000:], one[-3000:])
    said = next(line for line in zero.splitlines() if line.startswith("[ERROR]")).split("[ERROR] ", 1)[1]
    assert said.startswith(f"the sweep stops before job 1: {tmp_path / 's' / '1' / '.hydra'} could not be written")
    assert said in one and "Check failure" not in zero + one, one[-3000:]
    assert json.loads((tmp_path / "s" / "0" / "metrics.json").read_text())["status"] == "ok"  # the job that ran
    assert not (tmp_path / "s" / "1").exists()  # no process started job 1
    rows = (tmp_path / "s" / "sweep_summary.csv").read_text()
    assert "not run" in rows, rows
