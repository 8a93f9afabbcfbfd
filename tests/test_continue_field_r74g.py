"""``distributed=local``'s parent words a continue command into the job's error: it sets ``continue_with`` too.

Was: the stop while its processes started up, and a process killed from outside, added "continue with: <command>"
(or "run it again with: <command>") to the job's error and left ``continue_with`` unset, so sample.py's warnings and
the sweep table cut the command out of the text again (the fallback for records of older versions). And whether
process 0's own error named a command was tested as the text "with: ": XLA's "... failed with: Connection reset by
peer" read as one, and the killed job got no command at all.
"""

import json
import signal
import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from faults_helpers import as_hydra_job
from gensbi_sharding.harness.continue_field import CONTINUE_FIELD, continue_of

CFG = {"distributed": {"local_processes": 2, "run_timeout_s": 1, "heartbeat_s": 1}, "devices": {"cpu_count": 8},
       "mesh": {"spec": "auto", "devices": None}}


@pytest.mark.slow  # starts processes
def test_a_killed_process_gets_its_command_though_process_0_s_error_holds_other_with_words(tmp_path, monkeypatch):
    from gensbi_sharding.harness import local_cluster

    out = tmp_path / "run"
    out.mkdir()
    as_hydra_job(monkeypatch, out, ["distributed=local", "train.steps=2000"])
    real_popen = subprocess.Popen
    lost = "JaxRuntimeError: INTERNAL: Gloo AllGather failed with: Connection reset by peer"  # no command in it

    def killed_child(command, env, pass_fds, stderr):  # rank 1 is killed; rank 0 records its error, then aborts
        rank = int(next(c for c in command if c.startswith("distributed.process_id=")).split("=")[1])
        record = {"status": "error", "error": lost, CONTINUE_FIELD: None}  # as failure_outcome records it
        code = ("import os, signal, time; time.sleep(0.1); os.kill(os.getpid(), signal.SIGKILL)" if rank else
                f"import os, signal, time; time.sleep(0.4); open({str(out / 'metrics.json')!r}, 'w')"
                f".write({json.dumps(record)!r}); os.kill(os.getpid(), signal.SIGABRT)")
        return real_popen([sys.executable, "-c", code], stderr=stderr)

    monkeypatch.setattr(local_cluster.subprocess, "Popen", killed_child)
    metrics = local_cluster.run_local_processes(OmegaConf.create({**CFG, "distributed": {
        **CFG["distributed"], "run_timeout_s": 60}}), out)
    command = f"python launch.py distributed=local train.steps=2000 train.resume=auto hydra.run.dir={out}"
    assert metrics["process_exit_codes"] == [-signal.SIGABRT, -signal.SIGKILL]
    # Was: "...; process 0 reported: <lost>" and nothing after it: its "failed with: " read as a command offered
    assert metrics["error"].endswith(f"; process 0 reported: {lost}; it saved no checkpoint: run it again with: "
                                     f"{command}"), metrics["error"]
    assert metrics[CONTINUE_FIELD] == command and continue_of(metrics) == command


@pytest.mark.slow  # starts processes
def test_processes_stopped_at_the_run_bound_record_a_command_with_it_raised(tmp_path, monkeypatch):
    # Was: process 0's continue_with repeated distributed.run_timeout_s=1, which stopped them: sample.py's "to finish
    # it: <command>" stopped at 1 s again, though the console said to raise it (e.g. distributed.run_timeout_s=2).
    from gensbi_sharding.harness import local_cluster

    out = tmp_path / "run"
    out.mkdir()
    as_hydra_job(monkeypatch, out, ["distributed=local", "distributed.run_timeout_s=1"])
    command = ("python launch.py distributed=local distributed.run_timeout_s={} train.resume=auto hydra.run.dir="
               + str(out))
    record = {"status": "preempted", "error": f"preempted by SIGTERM at step 11; continue with: {command.format(1)}",
              CONTINUE_FIELD: command.format(1)}
    stopped = (f"import json, signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: (json.dump("
               f"{record!r}, open({str(out / 'metrics.json')!r}, 'w')), sys.exit(75))); "
               "time.sleep(30)")  # as process 0 stops: its record, exit 75
    real_popen = subprocess.Popen
    monkeypatch.setattr(local_cluster.subprocess, "Popen", lambda command, env, pass_fds, stderr: real_popen(
        [sys.executable, "-c", stopped], stderr=stderr))
    metrics = local_cluster.run_local_processes(OmegaConf.create(CFG), out)
    assert metrics["status"] == "preempted" and metrics["process_exit_codes"] == [75, 75]
    assert metrics[CONTINUE_FIELD] == command.format(2)
    assert metrics["error"] == (f"stopped at distributed.run_timeout_s=1 s: preempted by SIGTERM at step 11; continue "
                                f"with: {command.format(2)}; raise distributed.run_timeout_s for the rest")
