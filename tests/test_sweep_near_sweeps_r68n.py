"""Sweeps beside (not inside the job folders of) another sweep are accepted; a sweep into a checkout is refused; a
folder a sweep cannot make is told the fix its errno asks for; a run into a checkout is refused.

Was: (A) after ``-m ... hydra.sweep.dir=<day>``, ``hydra.sweep.dir=<day>/ablation`` (or ``<day>/16-40-00``,
``<day>/notes/lr``) was refused as inside that sweep's folder, though its job folders are ``0``..``N``; (B)
``-m ... hydra.sweep.dir=.`` in a checkout ran there, and its multirun.yaml refused every later default sweep
(``multirun/<date>/<time>``); (C) a sweep folder made read-only midway was told "free space there (or make it
writable)", a full disk the same.
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
from gensbi_sharding.harness.folder_lock import folder_problem
from gensbi_sharding.harness.sweep_subdirs import nested_sweep_problem
from test_hydra_room import sweep_at_job_zero


def host_sweep(folder, subdir="${hydra.job.num}"):
    folder.mkdir(parents=True)
    (folder / "multirun.yaml").write_text(f"hydra:\n  sweep:\n    dir: {folder}\n    subdir: {subdir}\n")
    return folder


def refusal(host, inside):
    return (f"hydra.sweep.dir={host / inside} lies inside the folder of the sweep {host}: a sweep never writes into "
            f"another sweep's folder, whose job folders are that sweep's; choose one outside it, e.g. "
            f"hydra.sweep.dir={host}-{inside.replace('/', '-')}")


def test_only_a_folder_a_sweeps_job_takes_or_could_take_is_refused(tmp_path):
    day = host_sweep(tmp_path / "day")
    for beside in ("ablation", "16-40-00", "notes/lr", "3a"):
        assert nested_sweep_problem(day / beside) is None, beside  # was: refused, as inside <day>
    for job in ("3", "3/x", "12"):  # a job number of ${hydra.job.num}: refused, as before
        assert nested_sweep_problem(day / job) == refusal(day, job)
    (day / "ablation" / ".hydra").mkdir(parents=True)  # a job folder already there, whatever its name
    (day / "old").mkdir()
    (day / "old" / "metrics.json").write_text("{}")
    assert nested_sweep_problem(day / "ablation") == refusal(day, "ablation")
    assert nested_sweep_problem(day / "old" / "b") == refusal(day, "old/b")
    named = host_sweep(tmp_path / "named", "job_${hydra.job.num}/${seed}")
    assert nested_sweep_problem(named / "job_3" / "a") == refusal(named, "job_3/a")
    assert nested_sweep_problem(named / "3") is None and nested_sweep_problem(named / "job_x") is None
    anyname = host_sweep(tmp_path / "any", "${hydra.job.override_dirname}")  # any name may be a job's
    assert nested_sweep_problem(anyname / "ablation") == refusal(anyname, "ablation")


def fake_checkout(folder):
    (folder / "conf").mkdir(parents=True)
    (folder / "launch.py").write_text("")
    (folder / "conf" / "config.yaml").write_text("")
    return folder


def test_a_sweep_into_a_checkout_is_refused_and_an_old_one_there_blocks_no_default_sweep(tmp_path):
    checkout = fake_checkout(tmp_path / "co")
    instead = checkout / "multirun" / "new_sweep"
    assert folder_problem(checkout, sweep=True) == (
        f"hydra.sweep.dir={checkout} is a checkout of the harness (launch.py, conf/): a sweep never writes its "
        "multirun.yaml and job folders among its files, where every later sweep under multirun/ would lie inside it; "
        f"choose a new folder, e.g. hydra.sweep.dir={instead}")
    assert nested_sweep_problem(instead) is None and folder_problem(instead, sweep=True) is None  # the advice works
    (checkout / "multirun.yaml").write_text("hydra:\n  sweep:\n    subdir: ${hydra.job.num}\n")  # an earlier one's
    (checkout / "0" / ".hydra").mkdir(parents=True)
    assert nested_sweep_problem(checkout / "multirun" / "2026-12-06" / "16-40-00") is None  # was: refused


@pytest.mark.parametrize("code, fix", [(errno.EPERM, "make it writable"), (errno.EROFS, "make it writable"),
                                       (errno.EACCES, "make it writable"), (errno.ENOSPC, "free space there")])
def test_a_next_job_folder_refused_is_told_the_fix_of_its_errno(tmp_path, monkeypatch, code, fix):
    sweep = tmp_path / "sw"
    config, _ = sweep_at_job_zero(sweep, task="seed=0,1", ended=False)
    real = tempfile.mkdtemp

    def refused(*args, dir=None, **kwargs):
        if dir is not None and os.path.samefile(dir, sweep):
            raise OSError(code, os.strerror(code))
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "mkdtemp", refused)
    before = HydraConfig.instance().cfg
    HydraConfig.instance().set_config(config)
    try:
        lines = hydra_room.next_job_room_lines(sweep / "0", 1, ["launch.py", "-m", "seed=0,1"])
    finally:
        HydraConfig.instance().cfg = before
    # was: "free space there (or make it writable)" for each
    assert lines[0] == (f"the sweep stops before job 1: {sweep / '1' / '.hydra'} could not be made: cannot write in "
                        f"{sweep} ({os.strerror(code)}); {fix}; 1 job(s) ended, each recorded in its folder's "
                        "metrics.json, and no later job started"), lines


def launch(*overrides):
    return subprocess.run([sys.executable, "launch.py", "-m", "experiment=quick", "train.steps=20", "dry_run=true",
                           *overrides], cwd=REPO, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_a_sweep_beside_another_sweeps_jobs_runs(tmp_path):
    day = host_sweep(tmp_path / "day")
    done = launch(f"hydra.sweep.dir={day / 'ablation'}")
    assert done.returncode == 0, done.stdout + done.stderr  # was: exit 1, refused as inside <day>
    assert (day / "ablation" / "0" / "metrics.json").is_file()


@pytest.mark.slow
def test_a_sweep_into_a_checkout_is_refused_before_it_writes(tmp_path):
    checkout = fake_checkout(tmp_path / "co")
    done = launch(f"hydra.sweep.dir={checkout}")
    assert done.returncode == 1, done.stdout + done.stderr  # was: 0, its multirun.yaml and 0/ among the files
    assert done.stderr.strip().splitlines()[-1] == folder_problem(checkout, sweep=True).join(("[ERROR] ", ""))
    assert sorted(p.name for p in checkout.iterdir()) == ["conf", "launch.py"]


def test_a_run_into_a_checkout_is_refused_naming_a_folder_that_is_taken(tmp_path):
    # hydra.run.dir=. in a checkout ran there: its .hydra/ and metrics.json made the checkout a run's folder, and
    # every later default run (outputs/<date>/<time>) was refused as lying inside that run.
    checkout = fake_checkout(tmp_path / "co")
    instead = checkout / "outputs" / "new_run"
    assert folder_problem(checkout, sweep=False) == (
        f"hydra.run.dir={checkout} is a checkout of the harness (launch.py, conf/): a run never writes its outputs "
        "among its files, where every later run under outputs/ would lie inside it; choose a new folder, e.g. "
        f"hydra.run.dir={instead}")
    assert folder_problem(instead, sweep=False) is None  # the advice works
    assert folder_problem(checkout / "outputs", sweep=False) is None  # beside it, as before


@pytest.mark.slow
def test_a_run_into_a_checkout_is_refused_before_it_writes(tmp_path):
    checkout = fake_checkout(tmp_path / "co")
    done = subprocess.run([sys.executable, str(REPO / "launch.py"), "experiment=quick", "train.steps=2",
                           "eval.enabled=false", "dry_run=true", f"hydra.run.dir={checkout}"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1] == folder_problem(checkout, sweep=False).join(("[ERROR] ", ""))
    assert sorted(p.name for p in checkout.iterdir()) == ["conf", "launch.py"]
