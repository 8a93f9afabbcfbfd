"""``distributed=local`` processes stopped: killed from outside, stopped while starting up, a Ctrl-C of their sweep,
the run bound reached: each names its last checkpoint and the command that continues; a child dies with its parent.
"""

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time

import jax
import jax.numpy as jnp
import pytest
from omegaconf import OmegaConf

from faults_helpers import REPO, as_hydra_job, compose_tiny
from gensbi_sharding.checkpoint import CheckpointWriter
from gensbi_sharding.harness import outputs


PARENT = textwrap.dedent("""
    import os, subprocess, sys, time
    from gensbi_sharding.harness.processes import LOCAL_CHILD_ENV
    read_end, write_end = os.pipe()
    child = subprocess.Popen([sys.executable, "-c",
        "from gensbi_sharding.harness.local_cluster import watch_parent; import time; watch_parent(); "
        "print('watching', flush=True); time.sleep(60)"],
        env={**os.environ, LOCAL_CHILD_ENV: str(read_end)}, pass_fds=(read_end,))
    os.close(read_end)
    print(child.pid, flush=True)
    time.sleep(60)
""")


@pytest.mark.slow  # multi-process
def test_a_local_child_dies_with_its_parent():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], cwd=REPO, stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    # The child has started its watch: it says so on the stdout it shares with the parent (was a fixed 1 s sleep).
    assert parent.stdout.readline() == "watching\n"
    parent.send_signal(signal.SIGKILL)  # no cleanup code of the parent runs
    parent.wait(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and os.path.exists(f"/proc/{child}") \
            and open(f"/proc/{child}/stat").read().split()[2] != "Z":
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{child}") or open(f"/proc/{child}/stat").read().split()[2] == "Z"


@pytest.mark.slow  # an end-to-end run (resume, a stop, or processes)
def test_local_processes_killed_from_outside_name_their_last_checkpoint_and_the_command_that_continues(
        tmp_path, monkeypatch, caplog):
    # Was: process 1 killed (SIGKILL, e.g. the OOM killer) after checkpoint 300: metrics.json said only
    # "process 1 of 2 died (killed by SIGKILL) ...; process 0 died (killed by SIGABRT)", naming neither the
    # checkpoint that holds the work nor the command that continues it (train.resume=auto in its folder).

    from gensbi_sharding.harness import local_cluster

    out = tmp_path / "run"
    with CheckpointWriter(out / "checkpoints", every=1) as writer:  # what the processes had saved
        writer.save(300, {"w": jnp.ones(3)}, jax.random.key(0))
    (out / "checkpoints" / "400.orbax-checkpoint-tmp").mkdir()  # the save the kill cut short
    # The earlier attempt's record (train.resume=auto): not this attempt's, which wrote none.
    outputs.write_json(out / "metrics.json", {"status": "preempted", "error": "preempted by SIGTERM at step 200",
                                              "steps": 200})
    as_hydra_job(monkeypatch, out, ["distributed=local", "train.steps=2000"])
    real_popen = subprocess.Popen

    def killed_child(command, env, pass_fds, stderr):  # rank 1 is killed; rank 0 aborts as JAX's heartbeat check does
        rank = int(next(c for c in command if c.startswith("distributed.process_id=")).split("=")[1])
        return real_popen([sys.executable, "-c", "import os, signal, time; time.sleep(%s); os.kill(os.getpid(), "
                           "signal.%s)" % ((0.1, "SIGKILL") if rank else (0.6, "SIGABRT"))], stderr=stderr)

    monkeypatch.setattr(local_cluster.subprocess, "Popen", killed_child)
    cfg = OmegaConf.create({"distributed": {"local_processes": 2, "run_timeout_s": 60, "heartbeat_s": 1},
                            "devices": {"cpu_count": 8}, "mesh": {"spec": "auto", "devices": None}})
    with caplog.at_level(logging.INFO):
        metrics = local_cluster.run_local_processes(cfg, out)
    # The parent reads the folder names, not Orbax: Orbax started JAX there and put its notes on the console.
    assert [r.name for r in caplog.records if r.name != "gensbi_sharding"] == []
    # Was "started 2 local processes (...)" alone: launch.log holds the parent's lines only, the run's are elsewhere.
    assert caplog.messages[0].endswith(f"4 CPU devices each); each logs to process_<i>.log in {out}")
    assert metrics["status"] == "error" and metrics["process_exit_codes"] == [-signal.SIGABRT, -signal.SIGKILL]
    assert metrics["error"].startswith("process 1 of 2 died (killed by SIGKILL)")
    # Was "...; process 0 reported: preempted by SIGTERM at step 200" and steps 200: the earlier attempt's.
    assert "reported" not in metrics["error"] and "steps" not in metrics
    assert metrics["error"].endswith(
        f"process 0 died (killed by SIGABRT); its last checkpoint is step 300 ({out / 'checkpoints' / '300'}): "
        f"continue with: python launch.py distributed=local train.steps=2000 train.resume=auto hydra.run.dir={out}")
    # Nothing saved: nothing to continue from, so no such command; the one that runs it again, as a one-process run
    # that failed before its first save names it (was: none, though it was killed from outside, not by its settings).
    shutil.rmtree(out / "checkpoints")
    error = local_cluster.run_local_processes(cfg, out)["error"]
    assert "continue with" not in error and error.endswith(
        "process 0 died (killed by SIGABRT); it saved no checkpoint: run it again with: python launch.py "
        f"distributed=local train.steps=2000 train.resume=auto hydra.run.dir={out}")
    # The job's record, as run() writes it: was only status, error and exit codes (no config: process 0
    # wrote no metrics.json, and the parent's own record was replaced by the processes' outcome).
    from gensbi_sharding.harness.run import run

    (out / "metrics.json").unlink()
    job = run(compose_tiny("distributed=local", "distributed.heartbeat_s=1"))
    record = json.loads((out / "metrics.json").read_text())
    assert job["status"] == record["status"] == "error" and record["error"].startswith("process 1 of 2 died")
    assert record["config"]["distributed"]["local_processes"] == 2 and record["config"]["train"]["steps"] == 8


@pytest.mark.slow  # an end-to-end run (a training or dry run, or processes)
@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, "preempted"), (signal.SIGINT, "interrupted")])
def test_a_stop_while_the_local_processes_start_up_is_a_stop_not_a_death(tmp_path, monkeypatch, signum, status):
    # Was, for Ctrl-C (or SLURM's SIGTERM) a few seconds after `launch.py distributed=local`: "process 0 of 2
    # died (killed by SIGTERM) ...: process 1 died (killed by SIGTERM)", status error, exit code 1: the
    # forwarded signal had reached processes still importing, before their handlers were installed.

    from gensbi_sharding.harness import local_cluster

    out = tmp_path / "run"
    out.mkdir()
    as_hydra_job(monkeypatch, out, ["distributed=local"])
    real_popen = subprocess.Popen
    monkeypatch.setattr(local_cluster.subprocess, "Popen", lambda command, env, pass_fds, stderr: real_popen(
        [sys.executable, "-c", "import time; time.sleep(30)"],  # still starting up: the default handlers
        stderr=stderr))
    threading.Timer(1.0, os.kill, (os.getpid(), signum)).start()
    cfg = OmegaConf.create({"distributed": {"local_processes": 2, "run_timeout_s": 60, "heartbeat_s": 1},
                            "devices": {"cpu_count": 8}, "mesh": {"spec": "auto", "devices": None}})
    metrics = local_cluster.run_local_processes(cfg, out)
    assert metrics["status"] == status and metrics["process_exit_codes"] == [-signal.SIGTERM] * 2
    assert metrics["stop_signal"] == signum  # a preempted job's is handed on: submitit requeues on it
    stop = "interrupted by Ctrl-C (SIGINT)" if status == "interrupted" else "preempted by SIGTERM"
    assert metrics["error"] == (
        f"{stop} while the processes were starting up, before training (nothing trained: no checkpoint to save); "
        f"continue with: python launch.py distributed=local train.resume=auto hydra.run.dir={out}")


@pytest.mark.slow  # an end-to-end run (a training or dry run, or processes)
@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, "preempted"), (signal.SIGINT, "interrupted")])
def test_a_stop_that_ended_one_local_process_still_starting_up_ends_the_others_at_once(tmp_path, monkeypatch, signum,
                                                                                      status):
    # SLURM signals every process of the job, a terminal's Ctrl-C every process of its group: process 1, still
    # starting up (no handler: ended by it), before their parent; process 0 had started its run (its handler took
    # the stop) and waited at the coordinator for process 1. Was: "process 1 of 2 died (killed by SIGTERM)" once the
    # dead peer's grace (distributed.heartbeat_s + 5 s) ran out.
    from gensbi_sharding.harness import local_cluster

    out = tmp_path / "run"
    out.mkdir()
    as_hydra_job(monkeypatch, out, ["distributed=local"])
    real_popen = subprocess.Popen
    waits = "import signal, time; signal.signal(signal.SIGTERM, lambda *a: None); time.sleep(30)"  # its run's handler
    ended = f"import os, signal, time; time.sleep(0.5); os.kill(os.getpid(), {int(signum)})"  # no handler yet

    def start(command, env, pass_fds, stderr):
        rank = int(next(c for c in command if c.startswith("distributed.process_id=")).split("=")[1])
        return real_popen([sys.executable, "-c", ended if rank else waits], stderr=stderr)

    monkeypatch.setattr(local_cluster.subprocess, "Popen", start)
    threading.Timer(2.0, os.kill, (os.getpid(), signum)).start()  # the parent's, after process 1 ended
    cfg = OmegaConf.create({"distributed": {"local_processes": 2, "run_timeout_s": 60, "heartbeat_s": 10},
                            "devices": {"cpu_count": 8}, "mesh": {"spec": "auto", "devices": None}})
    metrics = local_cluster.run_local_processes(cfg, out)
    assert metrics["status"] == status and metrics["process_exit_codes"] == [-signal.SIGKILL, -signum], metrics
    stop = "interrupted by Ctrl-C (SIGINT)" if status == "interrupted" else "preempted by SIGTERM"
    assert metrics["error"] == (
        f"{stop} while the processes were starting up, before training (nothing trained: no checkpoint to save); "
        f"continue with: python launch.py distributed=local train.resume=auto hydra.run.dir={out}")


@pytest.mark.slow  # an end-to-end run (a training or dry run, or processes)
@pytest.mark.parametrize("moment", ["checking", "starting"])
def test_a_stop_while_the_parent_starts_its_local_processes_reaches_them_and_starts_no_more(tmp_path, monkeypatch,
                                                                                          moment):
    # Was: a SIGTERM before the parent took the signals over to pass them on (while it checked the job, and while it
    # started its processes) was the run's watch's alone: no process heard of it, each started and trained on (here
    # until the run bound stopped them, 5 s later: "stopped at distributed.run_timeout_s=5 s", no stop signal).
    from gensbi_sharding.harness import local_cluster
    from gensbi_sharding.harness.run import run

    out = tmp_path / "run"
    out.mkdir()
    as_hydra_job(monkeypatch, out, ["distributed=local", "distributed.run_timeout_s=5"])
    real_popen, real_check, started = subprocess.Popen, local_cluster.model_group_problem, []

    def check(*args):  # the parent's last check of the job, before any process starts
        os.kill(os.getpid(), signal.SIGTERM)
        return real_check(*args)

    def start(command, env, pass_fds, stderr):
        started.append(command)
        child = real_popen([sys.executable, "-c", "import time; time.sleep(30)"], stderr=stderr)  # starting up
        if moment == "starting":  # as the first process starts
            os.kill(os.getpid(), signal.SIGTERM)
        return child

    monkeypatch.setattr(local_cluster.subprocess, "Popen", start)
    if moment == "checking":
        monkeypatch.setattr(local_cluster, "model_group_problem", check)
    metrics = run(compose_tiny("distributed=local", "distributed.run_timeout_s=5"))
    assert len(started) == {"checking": 0, "starting": 1}[moment]  # none starts after the stop
    assert metrics["status"] == "preempted" and metrics["stop_signal"] == signal.SIGTERM, metrics.get("error")
    assert metrics["process_exit_codes"] == [-signal.SIGTERM] * len(started)
    assert metrics["error"] == (
        "preempted by SIGTERM while the processes were starting up, before training (nothing trained: no checkpoint "
        "to save); continue with: python launch.py distributed=local distributed.run_timeout_s=5 train.resume=auto "
        f"hydra.run.dir={out}")
    assert json.loads((out / "metrics.json").read_text())["error"] == metrics["error"]


@pytest.mark.slow  # an end-to-end run (a training or dry run, or processes)
def test_the_run_bound_reached_while_the_local_processes_start_up_is_named_with_a_bound_they_can_start_within(
        tmp_path, monkeypatch):
    # Was, for distributed=local distributed.run_timeout_s=1: "preempted by SIGTERM while the processes were
    # starting up ...; continue with: ... distributed.run_timeout_s=1 ...", stop_signal SIGTERM (handed on as a
    # preemption): no signal came, and the command stopped at the same bound again, every attempt.
    from gensbi_sharding.harness import local_cluster

    out = tmp_path / "run"
    out.mkdir()
    as_hydra_job(monkeypatch, out, ["distributed=local", "distributed.run_timeout_s=1"])
    real_popen = subprocess.Popen
    monkeypatch.setattr(local_cluster.subprocess, "Popen", lambda command, env, pass_fds, stderr: real_popen(
        [sys.executable, "-c", "import time; time.sleep(30)"], stderr=stderr))  # never past start-up
    cfg = OmegaConf.create({"distributed": {"local_processes": 2, "run_timeout_s": 1, "heartbeat_s": 1},
                            "devices": {"cpu_count": 8}, "mesh": {"spec": "auto", "devices": None}})
    metrics = local_cluster.run_local_processes(cfg, out)
    assert metrics["status"] == "preempted" and metrics["stop_signal"] is None
    assert metrics["error"] == (
        "stopped at distributed.run_timeout_s=1 s while the processes were starting up, before training (nothing "
        "trained: no checkpoint to save); continue with: python launch.py distributed=local "
        f"distributed.run_timeout_s=120 train.resume=auto hydra.run.dir={out}")
    assert metrics["process_exit_codes"] == [-signal.SIGTERM] * 2
    # the record carries the command as its own field too, its bound raised as the error words it (session 74)
    from gensbi_sharding.harness.continue_field import CONTINUE_FIELD

    assert metrics[CONTINUE_FIELD] == ("python launch.py distributed=local distributed.run_timeout_s=120 "
                                       f"train.resume=auto hydra.run.dir={out}")


@pytest.mark.slow
def test_ctrl_c_of_a_local_processes_sweep_writes_its_summary_and_the_whole_sweep_command(
        tmp_path, monkeypatch, caplog):
    # Was: Ctrl-C in job 0 of `-m distributed=local rule=fsdp,tensor` ended the sweep with no sweep_summary.*
    # (a one-process sweep writes it, with a "not run" row) and without the command that continues it whole.
    from hydra.types import RunMode

    from gensbi_sharding.harness import local_cluster
    from gensbi_sharding.harness.run import run

    sweep = tmp_path / "sweep"
    (sweep / "0" / ".hydra").mkdir(parents=True)
    OmegaConf.save(OmegaConf.create(["distributed=local", "rule=fsdp"]), sweep / "0" / ".hydra" / "overrides.yaml")
    OmegaConf.save({"hydra": {"overrides": {"task": ["distributed=local", "rule=fsdp,tensor"]}}},
                   sweep / "multirun.yaml")
    as_hydra_job(monkeypatch, sweep / "0", ["distributed=local", "rule=fsdp"], mode=RunMode.MULTIRUN)
    monkeypatch.setattr(sys, "argv", ["launch.py", "-m", "distributed=local", "rule=fsdp,tensor",
                                      f"hydra.sweep.dir={sweep}"])
    real_popen = subprocess.Popen

    def child(command, env, pass_fds, stderr):  # a process that stops as for Ctrl-C (exit 130), once both started
        if "distributed.process_id=1" in command:
            threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        return real_popen([sys.executable, "-c", "import signal, sys, time; "
                           "signal.signal(signal.SIGTERM, lambda *a: sys.exit(130)); time.sleep(30)"], stderr=stderr)

    monkeypatch.setattr(local_cluster.subprocess, "Popen", child)
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"), pytest.raises(KeyboardInterrupt):
        run(compose_tiny("distributed=local", "rule=fsdp"))
    assert json.loads((sweep / "0" / "metrics.json").read_text())["status"] == "interrupted"
    rows = (sweep / "sweep_summary.csv").read_text().splitlines()
    assert [row.split(",")[:2] + [row.split(",")[-2]] for row in rows[1:]] == [
        ["0", "fsdp", "interrupted"], ["1", "tensor", "not run"]]
    assert (f"to continue the whole sweep, this job and those not started: python launch.py -m distributed=local "
            f"rule=fsdp,tensor train.resume=auto hydra.sweep.dir={sweep}") in caplog.messages


@pytest.mark.slow  # an end-to-end run (a training or dry run, or processes)
def test_the_run_bound_says_on_the_console_to_raise_it_when_continuing(tmp_path, monkeypatch, caplog):
    # Was: only metrics.json said "raise distributed.run_timeout_s for the rest"; the console showed the
    # processes' "continue with: ... distributed.run_timeout_s=30 ...", which stops every attempt at 30 s again.

    from gensbi_sharding.harness import local_cluster

    out = tmp_path / "run"
    out.mkdir()
    as_hydra_job(monkeypatch, out, ["distributed=local", "distributed.run_timeout_s=1"])
    real_popen = subprocess.Popen
    record = {"status": "preempted", "error": "preempted by SIGTERM at step 11"}
    stopped = (f"import json, signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: (json.dump("
               f"{record!r}, open({str(out / 'metrics.json')!r}, 'w')), sys.exit(75))); "
               "time.sleep(30)")  # as process 0 stops: its record, exit 75
    monkeypatch.setattr(local_cluster.subprocess, "Popen", lambda command, env, pass_fds, stderr: real_popen(
        [sys.executable, "-c", stopped], stderr=stderr))
    cfg = OmegaConf.create({"distributed": {"local_processes": 2, "run_timeout_s": 1, "heartbeat_s": 1},
                            "devices": {"cpu_count": 8}, "mesh": {"spec": "auto", "devices": None}})
    with caplog.at_level(logging.INFO):
        metrics = local_cluster.run_local_processes(cfg, out)
    assert metrics["status"] == "preempted" and metrics["process_exit_codes"] == [75, 75]
    assert metrics["error"] == ("stopped at distributed.run_timeout_s=1 s: preempted by SIGTERM at step 11; raise "
                                "distributed.run_timeout_s for the rest")
    assert caplog.messages[-1] == ("when you continue, raise distributed.run_timeout_s (e.g. "
                                   "distributed.run_timeout_s=2): with 1 s every attempt stops there again")


def test_a_peer_dying_mid_collective_is_said_without_xlas_repeated_wrappers(tmp_path):
    # A SIGKILLed process 1 left process 0 with XLA's error, "Error dispatching computation: " 13 times over before
    # the cause, in its console line, metrics.json and the parent's "process 0 reported: ..." line.
    from gensbi_sharding.harness import stop_record

    err = RuntimeError("INTERNAL: " + "Error dispatching computation: " * 13
                       + "Gloo AllGather failed: [pair.cc:538] Read error [127.0.0.1]:15071: Connection reset by peer")
    assert stop_record.failure_error(tmp_path, [], err) == (
        "RuntimeError: INTERNAL: Error dispatching computation: Gloo AllGather failed: [pair.cc:538] Read error "
        "[127.0.0.1]:15071: Connection reset by peer")
    assert stop_record.exception_text(ValueError("a: b: a: b")) == "ValueError: a: b: a: b"  # not back to back


@pytest.mark.slow
def test_a_process_killed_before_any_checkpoint_while_process_0_reports_names_the_command_to_rerun(tmp_path,
                                                                                                 monkeypatch):
    # Was, process 1 SIGKILLed before the first save: "process 1 of 2 died (killed by SIGKILL) ...; process 0
    # reported: JaxRuntimeError: ... Connection closed by peer", and no command (one without process 0's report had it).
    from gensbi_sharding.harness import local_cluster

    out = tmp_path / "run"
    out.mkdir()
    as_hydra_job(monkeypatch, out, ["distributed=local", "train.steps=2000"])
    real_popen = subprocess.Popen
    lost = "JaxRuntimeError: UNKNOWN: Gloo AllGather failed: Connection closed by peer"

    def killed_child(command, env, pass_fds, stderr):  # rank 1 is killed; rank 0 records its error, then aborts
        rank = int(next(c for c in command if c.startswith("distributed.process_id=")).split("=")[1])
        record = f"open({str(out / 'metrics.json')!r}, 'w').write(json.dumps({{'status': 'error', 'error': {lost!r}}}))"
        code = ("import json, os, signal, time; time.sleep(0.1); os.kill(os.getpid(), signal.SIGKILL)" if rank else
                f"import json, os, signal, time; time.sleep(0.4); {record}; os.kill(os.getpid(), signal.SIGABRT)")
        return real_popen([sys.executable, "-c", code], stderr=stderr)

    monkeypatch.setattr(local_cluster.subprocess, "Popen", killed_child)
    cfg = OmegaConf.create({"distributed": {"local_processes": 2, "run_timeout_s": 60, "heartbeat_s": 1},
                            "devices": {"cpu_count": 8}, "mesh": {"spec": "auto", "devices": None}})
    error = local_cluster.run_local_processes(cfg, out)["error"]
    assert error.startswith("process 1 of 2 died (killed by SIGKILL)") and error.endswith(
        f"; process 0 reported: {lost}; it saved no checkpoint: run it again with: python launch.py distributed=local "
        f"train.steps=2000 train.resume=auto hydra.run.dir={out}"), error
