"""A ``distributed=local`` dry run's stop advice works pasted: it runs the dry run again, as the parent was launched.

Was: stopped while its processes started up, the parent said "continue with: python launch.py distributed=local
dry_run=true train.resume=auto hydra.run.dir=<run>", refused pasted (a dry run continues nothing, and its folder takes
no dry run again); killed from outside, "it saved no checkpoint: run it again with:" the same command; stopped in its
run, process 0 said "run it again with:" its own share of the job (``distributed.process_id=0
distributed.local_processes=1 devices.cpu_count=4 ...``), which pasted started one process that waited at the
coordinator for the others. Now each names the parent's command into a new folder.
"""

import json
import os
import shlex
import signal
import subprocess
import sys
import threading

import pytest
from omegaconf import OmegaConf

from faults_helpers import REPO, as_hydra_job
from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.run_folder import ensure_fresh

PARENT = ["distributed=local", "dry_run=true", "experiment=quick"]
CFG = {"distributed": {"local_processes": 2, "run_timeout_s": 60, "heartbeat_s": 1}, "dry_run": True,
       "devices": {"cpu_count": 8}, "mesh": {"spec": "auto", "devices": None}}


def _again(out):
    return f"a dry run has nothing to continue: run it again with: python launch.py {' '.join(PARENT)} " \
           f"hydra.run.dir={out}-again"


def _pasted_words(line):
    words = shlex.split(line.split("run it again with: ", 1)[1])
    assert words[:2] == ["python", "launch.py"], line
    return words[2:]


@pytest.mark.slow  # two stand-in processes stopped as they start up (~2 s)
def test_a_stop_while_the_processes_start_up_names_the_dry_runs_command_again(tmp_path, monkeypatch):
    from gensbi_sharding.harness import local_cluster

    out = tmp_path / "run"
    out.mkdir()
    as_hydra_job(monkeypatch, out, PARENT)
    real_popen = subprocess.Popen
    monkeypatch.setattr(local_cluster.subprocess, "Popen", lambda command, env, pass_fds, stderr: real_popen(
        [sys.executable, "-c", "import time; time.sleep(30)"], stderr=stderr))  # still starting up
    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
    metrics = local_cluster.run_local_processes(OmegaConf.create(CFG), out)
    assert metrics["error"] == ("interrupted by Ctrl-C (SIGINT) while the processes were starting up, before training "
                                f"(nothing trained: no checkpoint to save); {_again(out)}")  # was: continue with ...
    assert command_problem(_pasted_words(metrics["error"])) is None
    assert ensure_fresh(tmp_path / "run-again", dry_run=True) is None  # a folder the dry run takes


def test_processes_killed_from_outside_name_the_dry_runs_command_again(tmp_path, monkeypatch):
    from gensbi_sharding.harness.local_children import continue_hint

    out = tmp_path / "run"
    out.mkdir()
    as_hydra_job(monkeypatch, out, PARENT)
    assert continue_hint(out, again=True, dry_run=True) == f"; {_again(out)}"  # was: ... train.resume=auto ...
    assert continue_hint(out, again=True) == (f"; it saved no checkpoint: run it again with: python launch.py "
                                              f"{' '.join(PARENT)} train.resume=auto hydra.run.dir={out}")


@pytest.mark.slow
def test_a_process_names_its_parents_command_not_its_own_share_of_the_job(tmp_path, monkeypatch):
    from gensbi_sharding.harness import local_cluster
    from gensbi_sharding.harness.interrupt_lines import JOB_OVERRIDES_ENV, stop_advice

    out = tmp_path / "run"
    out.mkdir()
    as_hydra_job(monkeypatch, out, PARENT)
    envs, real_popen = [], subprocess.Popen

    def record(command, env, pass_fds, stderr=None):
        envs.append(env)
        return real_popen([sys.executable, "-c", "pass"], stderr=stderr)

    monkeypatch.setattr(local_cluster.subprocess, "Popen", record)
    local_cluster.run_local_processes(OmegaConf.create(CFG), out)
    assert [json.loads(env[JOB_OVERRIDES_ENV]) for env in envs] == [{"overrides": PARENT, "multirun": False}] * 2
    # Process 0 as its parent started it: its own overrides are its share of the job
    as_hydra_job(monkeypatch, out, [*PARENT, "distributed.mode=explicit", "distributed.num_processes=2",
                                    "distributed.process_id=0", "distributed.local_processes=1", "devices.cpu_count=4"])
    monkeypatch.setenv(JOB_OVERRIDES_ENV, envs[0][JOB_OVERRIDES_ENV])
    assert stop_advice(out, dry_run=True) == _again(out)  # was: ... distributed.process_id=0 ... devices.cpu_count=4


@pytest.mark.slow  # the printed command pasted: a distributed=local dry run of two processes (~12 s on 2 cores)
def test_the_printed_command_runs_the_dry_run_again(tmp_path, monkeypatch):
    out = tmp_path / "run"
    out.mkdir()
    as_hydra_job(monkeypatch, out, PARENT)
    from gensbi_sharding.harness.interrupt_lines import stop_advice

    words = _pasted_words(stop_advice(out, dry_run=True))
    done = subprocess.run([sys.executable, "launch.py", *words], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    said = done.stdout + done.stderr
    assert done.returncode == 0 and "dry run done" in said, said[-3000:]
    assert json.loads((tmp_path / "run-again" / "metrics.json").read_text())["status"] == "ok"
