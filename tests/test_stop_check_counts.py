"""Every process of a multi-process job makes the same stop checks: JAX's preemption sync point counts them."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import jax
import pytest
from jax.experimental import multihost_utils

from faults_helpers import compose_tiny
from gensbi_sharding.harness import run as run_module


@pytest.mark.parametrize("mode", ["explicit", "auto"])
def test_each_process_of_a_later_multirun_job_asks_the_sync_point_alike(tmp_path, monkeypatch, mode):
    # From a multirun's second job on JAX is started when run() begins: was, process 0 alone asked the sync point
    # at the folder's claim (explicit mode), its count one ahead of the others', so on a stop it would halt a
    # check earlier than they do.
    monkeypatch.setattr(jax.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    monkeypatch.setattr(run_module, "run_steps", lambda *args: {})  # the checks before the job's steps only
    from gensbi_sharding.harness.preemption import PreemptionWatch

    monkeypatch.setattr(multihost_utils, "broadcast_one_to_all", lambda words: words)  # the claim's, told: process 0's
    asked = {}
    for process in (0, 1):
        calls = asked[process] = []
        monkeypatch.setattr(PreemptionWatch, "prior_checks", 0)  # each a process of its own: no earlier job's checks
        monkeypatch.setattr(multihost_utils, "reached_preemption_sync_point", lambda n, c=calls: c.append(n) or False)
        run_module.run(compose_tiny(f"distributed.mode={mode}", f"distributed.process_id={process}",
                                    output_dir=tmp_path / "run"))
    assert asked[0] == asked[1] == [1, 2]  # the job's check, then its watch's closing question (the next job's ids
    # follow on from it: tests/test_multirun_stops_r64a.py)


@pytest.fixture(scope="module")
def worker_forks(tmp_path_factory):
    """Processes for ``_run_on_two_processes``, forked from one process that imported a run's modules once
    (tests/fork_server.py: ~2 s of CPU less per process, JAX's and the harness's imports); none starts JAX's backend,
    so each process starts its own, as ``python -c <worker>`` does."""
    from fork_server import ForkServer

    server = ForkServer(tmp_path_factory.mktemp("forks"), dict(os.environ))
    yield server
    server.close()


def _run_on_two_processes(worker, tmp_path, tag, forks=None):
    """Run a worker script as processes 0 and 1 of one job (a free local coordinator port, 300 s each): each
    ``python -c <worker> <process>``, or with ``forks`` (``worker_forks``) forked from it as that command would run.

    Returns each process's JSON printed after ``tag`` (e.g. ``"ASKED"``), or the tail of its output if it printed none.
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = worker.format(tests=str(Path(__file__).parent), address=f"127.0.0.1:{port}", out=str(tmp_path))
    if forks is not None:
        from fork_server import launch_together

        # The worker is the forked process's whole program: its argv as `python -c` sets it, and its end (as the end
        # of a `-c` script) is the process's, before the server's script (launch.py) would run.
        return _tagged([output for output, _ in launch_together(forks, [
            {"args": [], "cwd": Path.cwd(),
             "prelude": f"import sys\nsys.argv = ['-c', '{process}']\n{script}\nraise SystemExit(0)\n"}
            for process in (0, 1)], 300)], tag)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(process)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for process in (0, 1)]
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=300)[0])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return _tagged(outputs, tag)


def _tagged(outputs: list[str], tag: str) -> list:
    """Each output's JSON printed after ``tag``, or the output's tail if it printed none."""
    prefix = tag + " "
    return [json.loads(next(line for line in out.splitlines() if line.startswith(prefix))[len(prefix):])
            if prefix in out else out[-3000:] for out in outputs]


# Two jobs of one process each, as a multirun runs them in explicit mode: JAX started in the first, already joined
# as the second begins. Every sync-point question is recorded with its step id.
_WORKER = """
import json, sys
from jax.experimental import multihost_utils
sys.path.insert(0, {tests!r})
from faults_helpers import compose_tiny
from gensbi_sharding.harness.run import run

asked, ask = [], multihost_utils.reached_preemption_sync_point
multihost_utils.reached_preemption_sync_point = lambda n: asked.append(n) or ask(n)
process = int(sys.argv[1])
for job in (0, 1):
    metrics = run(compose_tiny("dry_run=true", "distributed.mode=explicit", "distributed.num_processes=2",
                               f"distributed.process_id={{process}}", "distributed.coordinator_address={address}",
                               "distributed.timeout_s=60", output_dir={out!r} + f"/{{job}}"))
    assert metrics["status"] == "ok", metrics.get("error")
print("ASKED", json.dumps(asked), flush=True)
"""


@pytest.mark.slow  # two processes of two dry runs each (about a minute on a busy 2-core machine)
def test_two_processes_of_an_explicit_multirun_ask_the_sync_point_alike(tmp_path, worker_forks):
    asked = _run_on_two_processes(_WORKER, tmp_path, "ASKED", worker_forks)
    assert asked[0] == asked[1] and asked[0], asked  # was: process 0 one question more, from the second job on


# Two jobs of two processes, as an explicit-mode multirun runs them: in the second (JAX started in the first), each
# process gets SIGTERM (a preemption notice; launch.py's Ctrl-C passes on as one) at its third sync-point question.
_SIGNALLED_WORKER = """
import json, os, signal, sys
from jax.experimental import multihost_utils
sys.path.insert(0, {tests!r})
from faults_helpers import compose_tiny
from gensbi_sharding.harness.run import run

ask, job, questions = multihost_utils.reached_preemption_sync_point, [0], [0]
def asked(n):
    questions[0] += job[0] == 1  # the second job's questions (their ids follow on from the first job's)
    if questions[0] == 3:
        os.kill(os.getpid(), signal.SIGTERM)
    return ask(n)
multihost_utils.reached_preemption_sync_point = asked
process, statuses = int(sys.argv[1]), []
# The first job only has to end "ok" with JAX started (its 8 steps, where 400 cost each process ~60 s of CPU on Gloo);
# the second has steps to spare after its stop at check 3, so a stop never heard of ends it "ok".
steps = ("train.steps=8", "train.steps=400")
for job[0] in (0, 1):
    statuses.append(run(compose_tiny("distributed.mode=explicit", "distributed.num_processes=2",
                                     f"distributed.process_id={{process}}", "distributed.coordinator_address={address}",
                                     "distributed.timeout_s=60", steps[job[0]], "eval.enabled=false",
                                     output_dir={out!r} + f"/{{job[0]}}"))["status"])
print("STATUSES", json.dumps(statuses), flush=True)
"""


@pytest.mark.slow  # two processes of two tiny jobs each; each bounded by 300 s
def test_a_preemption_notice_in_a_later_job_of_a_multirun_stops_every_process(tmp_path, worker_forks):
    # Was: the first job's watch, at its end, put the handler it found back over JAX's preemption service's SIGTERM
    # handler, and each later job's watch its own: the service never heard of a notice, the sync point never
    # answered, and the job trained on to its last step ("ok") on both processes, never stopping.
    statuses = _run_on_two_processes(_SIGNALLED_WORKER, tmp_path, "STATUSES", worker_forks)
    assert statuses == [["ok", "preempted"], ["ok", "preempted"]], statuses
