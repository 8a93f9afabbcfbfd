"""A sweep folder made read-only while a job runs: the sweep stops after that job in one line, with its continue command.

Was (``chattr +i multirun/<..>`` during job 0 of ``-m experiment=quick rule=replicated,fsdp,tensor``): job 1 died in
Hydra's traceback of its ``mkdir`` ("PermissionError: [Errno 1] Operation not permitted: '.../1'"), with no stop line
and no continue command: ``hydra_room.room_problem`` reads no room on a disk it cannot write and leaves that to the
folder check, which only ran before the sweep's first job.
"""

import errno
import os
import subprocess
import sys
import tempfile

import pytest
from hydra.core.hydra_config import HydraConfig

from faults_helpers import REPO
from gensbi_sharding.harness import hydra_room
from test_hydra_room import sweep_at_job_zero


def test_a_sweep_folder_that_turned_read_only_stops_the_sweep_before_its_next_job(tmp_path, monkeypatch):
    sweep = tmp_path / "sw"
    config, job = sweep_at_job_zero(sweep)
    real = tempfile.mkdtemp

    def read_only_sweep(*args, dir=None, **kwargs):  # as chattr +i (or a read-only remount) refuses a new entry
        if dir is not None and os.path.samefile(dir, sweep):
            raise PermissionError(errno.EPERM, os.strerror(errno.EPERM))
        return real(*args, dir=dir, **kwargs)

    before = HydraConfig.instance().cfg
    HydraConfig.instance().set_config(config)
    try:
        assert hydra_room.next_job_room_lines(job, 1, ["launch.py", "-m", "seed=0,1,2"]) is None  # writable
        monkeypatch.setattr(tempfile, "mkdtemp", read_only_sweep)
        lines = hydra_room.next_job_room_lines(job, 1, ["launch.py", "-m", "seed=0,1,2"])
    finally:
        HydraConfig.instance().cfg = before
    assert lines is not None  # was None: Hydra then failed to make job 1's folder, in its traceback
    assert lines[0] == (f"the sweep stops before job 1: {sweep / '1' / '.hydra'} could not be made: cannot write in "
                        f"{sweep} (Operation not permitted); make it writable; 1 job(s) ended, "
                        "each recorded in its folder's metrics.json, and no later job started"), lines
    assert any("seed=1 train.resume=auto" in line and "seed=2 train.resume=auto" in line for line in lines[1:]), lines
    assert not (sweep / "1").exists()


# launch.py as a user runs it, its sweep folder refusing new entries once job 0's folder is made there (as
# ``chattr +i`` during job 0 does): Hydra's mkdir of job 1's folder and any probe there are refused
_READ_ONLY_AFTER_JOB_0 = """
import os, runpy, sys
from pathlib import Path
sweep, real = Path(sys.argv[1]).absolute(), os.mkdir
def mkdir(path, *args, **kwargs):
    if Path(path).absolute().parent == sweep and Path(path).name != "0":
        raise PermissionError(1, "Operation not permitted", str(path))
    return real(path, *args, **kwargs)
os.mkdir = mkdir
sys.argv = ["launch.py", *sys.argv[2:]]
runpy.run_path("launch.py", run_name="__main__")
"""


@pytest.mark.slow
def test_a_sweep_whose_folder_turned_read_only_ends_in_one_line_and_its_continue_command(tmp_path):
    sweep = tmp_path / "sweep"
    done = subprocess.run(
        [sys.executable, "-c", _READ_ONLY_AFTER_JOB_0, str(sweep), "-m", "experiment=quick", "train.steps=2",
         "eval.enabled=false", "rule=replicated,fsdp", f"hydra.sweep.dir={sweep}"],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    assert "Traceback" not in said, said
    assert f"[ERROR] the sweep stops before job 1: {sweep / '1' / '.hydra'} could not be made: cannot write in " \
           f"{sweep} (Operation not permitted)" in said, said
    assert (f"python launch.py experiment=quick train.steps=2 eval.enabled=False rule=fsdp train.resume=auto "
            f"hydra.mode=RUN hydra.run.dir={sweep / '1'}") in said, said
    assert (sweep / "0" / "metrics.json").is_file() and not (sweep / "1").exists()
