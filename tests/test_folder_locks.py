"""Output folders another run holds, or a run's refusal names: each folder named as the shell, Hydra and Python
read it back; a run and a sweep never share a job folder.
"""

import ast
import json
import os
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from faults_helpers import REPO, run_tiny
from gensbi_sharding.harness import folder_lock


def test_every_folder_a_refusal_names_as_an_override_is_one_the_shell_and_hydra_read_back(tmp_path):
    # Was: "hydra.sweep.dir=<sweep> holds a sweep whose jobs continue other runs ..." (dropped_runs), and each
    # refusal of a folder ("hydra.run.dir=<folder> is a sweep's folder ..."), named the folder as is: with a space
    # or a parenthesis in it, no override one could paste. Now as the commands the harness prints write it.
    import shlex

    from omegaconf import OmegaConf

    from gensbi_sharding.harness import outputs
    from gensbi_sharding.harness.console_lines import completed_jobs_lead
    from gensbi_sharding.harness.folder_lock import folder_problem
    from gensbi_sharding.harness.sweep_rerun import dropped_runs

    sweep = tmp_path / "my sweep (2)"
    sweep.mkdir()
    record = {"hydra": {"overrides": {"task": ["train.resume=r1,r2"]}}}
    OmegaConf.save(OmegaConf.create(record), sweep / "multirun.yaml")
    refused = dropped_runs(sweep, [["train.resume=auto"]])
    assert refused is not None and shlex.split(refused)[0] == f'hydra.sweep.dir="{sweep}"', refused
    assert folder_problem(sweep, sweep=False).startswith(f"'hydra.run.dir=\"{sweep}\"' is a sweep's folder")
    (sweep / "0").mkdir()
    outputs.write_json(sweep / "0" / "metrics.json", {"status": "ok"})
    assert completed_jobs_lead(sweep, [sweep / "0"], "", 2).startswith(f"'hydra.sweep.dir=\"{sweep}\"': 1 of its 2")


_HOLD_LOCK = """
import sys, time
from gensbi_sharding.harness.folder_lock import FolderLock
lock = FolderLock(sys.argv[1])
lock.acquire()
print("locked", flush=True)
time.sleep(120)
"""


@pytest.mark.slow
def test_a_folder_refusal_of_a_run_started_from_python_names_the_settings_it_sets(tmp_path, monkeypatch):
    # Was: run(cfg) from Python into a folder holding a run was told "choose another hydra.run.dir", "rerun with
    # train.resume=auto", "the same command plus train.resume=auto ... hydra.run.dir=<new folder>": launch.py's
    # overrides, which no Python call takes (its continue hint already said cfg.output_dir in open_dict, round 45).
    import pytest
    from faults_helpers import compose_tiny
    from hydra.conf import HydraConf
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    from gensbi_sharding.harness import outputs, run_folder
    from gensbi_sharding.harness.folder_lock import FolderInUseError
    from gensbi_sharding.harness.run import run

    done, stopped, killed, used = (tmp_path / name for name in ("done", "stopped", "killed", "used"))
    outputs.write_json(done / "metrics.json", {"status": "ok", "final_step": 8})
    outputs.write_json(stopped / "metrics.json", {"status": "preempted", "stopped_at_step": 3})
    (killed / "checkpoints" / "5").mkdir(parents=True)
    python = "; set cfg.output_dir in omegaconf.open_dict(cfg)"
    for out, said in [
        (done, "which are never overwritten; choose another cfg.output_dir" + python),
        (stopped, "rerun with cfg.train.resume='auto' to start it again in this folder (it saved no complete "
                  "checkpoint: it trains from step 0), or choose another cfg.output_dir" + python),
        (killed, f"continue it here by the same call with cfg.train.resume='auto', or in a new folder with "
                 f"cfg.train.resume={str(killed)!r} and cfg.output_dir='<new folder>'" + python),
    ]:
        metrics = run(compose_tiny(output_dir=out))
        assert metrics["status"] == "error" and metrics["error"].endswith(said), metrics["error"]
        assert "hydra" not in metrics["error"]
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_LOCK, str(used)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)})  # another run writing there
    try:
        assert holder.stdout.readline() == "locked\n"
        with pytest.raises(FolderInUseError, match=r"wait for it to end, or choose another cfg\.output_dir; set "):
            run_folder.RunFolder(used, compose_tiny()).claim()
    finally:
        holder.kill()
        holder.wait()
    # Under launch.py (a Hydra job) the overrides it takes, as before.
    hydra = OmegaConf.create({"hydra": OmegaConf.structured(HydraConf)})
    hydra.hydra.runtime.output_dir, hydra.hydra.overrides.task = str(stopped), []
    monkeypatch.setattr(HydraConfig.instance(), "cfg", None)
    HydraConfig.instance().set_config(hydra)
    with pytest.raises(FileExistsError, match=r"rerun with train.resume=auto to start it again in this folder \(it "
                                              r"saved no complete checkpoint: it trains from step 0\), or choose "
                                              "another hydra.run.dir$"):
        run_folder.RunFolder(stopped, compose_tiny()).claim()


def test_a_python_callers_folder_refusal_names_a_folder_with_a_space_or_quote_as_python_takes_it(tmp_path):
    # Was (run(cfg) from Python, the folder "my runs/killed"): "... or in a new folder with
    # cfg.train.resume='<tmp>/my' runs/killed' hydra.run.dir ..." -- the shell's quotes read as the value's end, the
    # folder cut at its space, and the two settings not joined; a quote in the folder's name came out as '"'"'.
    from faults_helpers import compose_tiny

    from gensbi_sharding.harness.run import run

    for name in ("my runs", "it's (1), a=b"):
        killed = tmp_path / name / "killed"
        (killed / "checkpoints" / "5").mkdir(parents=True)
        error = run(compose_tiny(output_dir=killed))["error"]
        found = re.search(r"or in a new folder with cfg\.train\.resume=(.*) and cfg\.output_dir='<new folder>'; set "
                          r"cfg\.output_dir in omegaconf\.open_dict\(cfg\)$", error)
        assert found and ast.literal_eval(found[1]) == str(killed), error
        # A refusal before the lock (folder_problem): the folder it names, as Python's repr.
        (tmp_path / name / "file").write_text("")
        error = run(compose_tiny(output_dir=tmp_path / name / "file" / "sub"))["error"]
        found = re.fullmatch(r"ConfigError: cfg\.output_dir=(.*): (.*) is a file, not a folder; choose another "
                             r"cfg\.output_dir; set cfg\.output_dir in omegaconf\.open_dict\(cfg\)", error)
        assert found and ast.literal_eval(found[1]) == str(tmp_path / name / "file" / "sub"), error
        assert found[2] == str(tmp_path / name / "file"), error
    # Was (a folder whose name ends in punctuation, "killed."): "cfg.train.resume='<tmp>/killed'. cfg.output_dir=..."
    # -- the sentence's reading of a plain word's last character took it out of the value.
    for end in ".:,;":
        killed = tmp_path / f"killed{end}"
        (killed / "checkpoints" / "5").mkdir(parents=True)
        error = run(compose_tiny(output_dir=killed))["error"]
        found = re.search(r"or in a new folder with cfg\.train\.resume=(.*) and cfg\.output_dir='<new folder>'; set "
                          r"cfg\.output_dir in omegaconf\.open_dict\(cfg\)$", error)
        assert found and ast.literal_eval(found[1]) == str(killed), error
        error = run(compose_tiny(output_dir=tmp_path / name / "file" / f"sub{end}"))["error"]
        found = re.fullmatch(r"ConfigError: cfg\.output_dir=(.*): .* is a file, not a folder; choose another "
                             r"cfg\.output_dir; set cfg\.output_dir in omegaconf\.open_dict\(cfg\)", error)
        assert found and ast.literal_eval(found[1]) == str(tmp_path / name / "file" / f"sub{end}"), error


HOLD = ("import sys; from filelock import FileLock; lock = FileLock(sys.argv[1], timeout=0); lock.acquire(); "
        "print('held', flush=True); sys.stdin.read()")


@pytest.mark.slow
def test_a_python_callers_refusal_of_a_busy_folder_quotes_the_other_runs_command_as_it_ran(tmp_path):
    # run(cfg) from Python into a folder another run (launch.py ... hydra.run.dir=<it> train.steps=100) holds. Was:
    # "(pid 4321 ...: launch.py cfg.output_dir='<it>' and cfg.train.steps=100)": the other run's command line
    # reworded into settings it was never given. Now as it ran; only this call's fix is in Python's words.
    import json
    import subprocess
    import sys

    from faults_helpers import compose_tiny

    from gensbi_sharding.harness.folder_lock import FolderLock
    from gensbi_sharding.harness.run import run

    busy = tmp_path / "busy"
    busy.mkdir()
    command = f"launch.py experiment=quick hydra.run.dir={busy} train.steps=100 train.resume=auto"
    (busy / FolderLock.OWNER).write_text(json.dumps({"pid": 4321, "host": "node7", "started": "2026-12-04 07:00:00",
                                                     "command": command}))
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(busy / FolderLock.LOCK)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        error = run(compose_tiny(output_dir=busy))["error"]
    finally:
        holder.communicate("", timeout=30)  # stdin closed: it lets go and ends
    assert error == (f"FolderInUseError: {busy} is in use by another run (pid 4321 on node7, started 2026-12-04 "
                     f"07:00:00: {command}): two runs must not write into one folder; wait for it to end, or choose "
                     "another cfg.output_dir; set cfg.output_dir in omegaconf.open_dict(cfg)")


def _held_elsewhere(folder: Path) -> subprocess.Popen:
    """A process holding ``folder``'s run lock and owner note (as ``FolderLock`` does for a running run or sweep)."""
    code = ("import json, os, sys, time\nfrom filelock import FileLock\nfolder = sys.argv[1]\n"
            "lock = FileLock(os.path.join(folder, '.run.lock'), timeout=0)\nlock.acquire()\n"
            "json.dump({'pid': os.getpid(), 'host': 'here', 'started': 'now', 'command': 'launch.py'}, "
            "open(os.path.join(folder, '.run.owner.json'), 'w'))\nprint('held', flush=True)\ntime.sleep(120)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(folder)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


@pytest.mark.slow
def test_a_run_and_a_sweep_never_share_a_job_folder_while_either_runs(tmp_path):
    # launch.py ... hydra.run.dir=<sweep>/1 while `-m` ran that sweep: the sweep, reaching job 1, had Hydra replace the
    # run's .hydra/ record, then failed the job (FolderInUseError) and still ended "sweep done: 1 ok, 0 failed" with
    # exit code 1. Now each is refused before Hydra writes: the run while the sweep runs, the sweep while the run does.
    from gensbi_sharding.harness.folder_lock import folder_problem

    sweep = tmp_path / "sweep"
    (sweep / "1").mkdir(parents=True)
    (sweep / "multirun.yaml").write_text("")
    holder = _held_elsewhere(sweep)
    try:
        refusal = folder_problem(sweep / "1", sweep=False, before_hydra=True)
        assert refusal == (f"hydra.run.dir={sweep / '1'} is a job folder of the sweep {sweep}, which is running (pid "
                           f"{holder.pid} on here, started now: launch.py): the sweep writes its jobs; wait for it to end, "
                           "or choose another hydra.run.dir")
        assert folder_problem(sweep / "1", sweep=False) is None  # the sweep's own job: its sweep holds the lock
    finally:
        holder.kill()
        holder.wait()
    assert folder_problem(sweep / "1", sweep=False, before_hydra=True) is None  # a stopped sweep's job, continued
    holder = _held_elsewhere(sweep / "1")
    try:
        refusal = folder_problem(sweep, sweep=True, before_hydra=True)
        assert refusal == (f"hydra.sweep.dir={sweep}: its job folder {sweep / '1'} is in use by a run (pid "
                           f"{holder.pid} on here, started now: launch.py); wait for that run to end, or choose another "
                           "hydra.sweep.dir")
    finally:
        holder.kill()
        holder.wait()
    assert folder_problem(sweep, sweep=True, before_hydra=True) is None


HOLD_LOCK = textwrap.dedent("""
    import sys, time
    from gensbi_sharding.harness.folder_lock import FolderLock
    with FolderLock(sys.argv[1]):
        print("locked", flush=True)
        time.sleep(60)
""")


@pytest.mark.slow
def test_a_second_run_into_a_busy_folder_stops_naming_the_other(tmp_path, devices):
    out = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(out)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        metrics = run_tiny(out)
        assert metrics["status"] == "error"
        assert f"{out} is in use by another run (pid {holder.pid} on {socket.gethostname()}" in metrics["error"]
        assert "two runs must not write into one folder" in metrics["error"]
        assert sorted(p.name for p in out.iterdir()) == [".run.lock", ".run.owner.json"]  # nothing written
    finally:
        holder.kill()
        holder.wait(timeout=30)
    with folder_lock.FolderLock(out):  # the lock went with its holder
        assert json.loads((out / folder_lock.FolderLock.OWNER).read_text())["pid"] == os.getpid()
