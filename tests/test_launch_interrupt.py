"""Ctrl-C before a run started ends launch.py in one line, exit 130 (launch.py's ``interrupted_before_run``).

Was: a Ctrl-C in the first seconds (importing JAX, registering the schema, Hydra composing) printed a
``KeyboardInterrupt`` traceback from inside an import, or "interrupted: the job's metrics.json records it",
which no job had written. The Ctrl-C is raised where it lands, deterministically, by patching that step.
"""

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINE = "interrupted by Ctrl-C before a run started: nothing was trained, and no folder holds this run's results"
RAISE = "def interrupted(*args, **kwargs):\n    raise KeyboardInterrupt\n"
PATCHES = {
    "importing": ("import builtins\nreal = builtins.__import__\n"
                  "def patched(name, *args, **kwargs):\n"
                  "    if name == 'hydra':\n        raise KeyboardInterrupt\n    return real(name, *args, **kwargs)\n"
                  "builtins.__import__ = patched\n"),
    "registering": RAISE + "import gensbi_sharding.harness.config as c\nc.register_configs = interrupted\n",
    "composing": RAISE + ("import gensbi_sharding.harness.folder_claim as f\n"
                          "f.RefuseCompletedRun.on_run_start = interrupted\n"),  # after Hydra composed, before run()
}
AFTER = ("interrupted by Ctrl-C between the sweep's jobs: 1 job(s) ended, each recorded in its folder's metrics.json; "
         "no later job started")  # then how to continue, and the sweep's summary (test_interrupts)


@pytest.fixture(scope="module")
def forks(tmp_path_factory):
    """The module's launch.py processes, forked from one process that imported launch.py's modules once
    (tests/fork_server.py: ~1.5 s of CPU less per launch); each runs its patch, then launch.py from its first line."""
    from fork_server import ForkServer

    # Its runs are stand-ins (no training): of what a run imports inside it, only the sweep summary's plot.
    server = ForkServer(tmp_path_factory.mktemp("forks"), dict(os.environ),
                        imports=("matplotlib.figure", "matplotlib.backends.backend_agg"))
    yield server
    server.close()


def launch(forks, patch: str, *args: str):
    """``python -c "<patch>; runpy.run_path('launch.py')" <args>`` in the repository, forked; its exit code,
    stdout and stderr (as ``subprocess.run`` gives them)."""
    proc = forks.launch(list(args), cwd=REPO, prelude=patch, argv0="launch.py", stderr_apart=True)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_launch_and_run_folder_agree_on_the_child_environment_variable():
    import launch
    from gensbi_sharding.harness.processes import LOCAL_CHILD_ENV

    assert launch.CHILD_ENV == LOCAL_CHILD_ENV


@pytest.mark.slow
@pytest.mark.parametrize("moment", sorted(PATCHES))
def test_ctrl_c_before_a_run_started_is_one_line_and_exit_130(tmp_path, moment, forks):
    args = ("experiment=quick", f"hydra.run.dir={tmp_path / 'run'}")
    if moment == "importing":  # a process of its own: launch.py's imports are its own (the fork server's are made)
        script = (PATCHES[moment] + "import runpy, sys\n"
                  f"sys.argv = ['launch.py', {', '.join(map(repr, args))}]\n"
                  "runpy.run_path('launch.py', run_name='__main__')\n")
        proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    else:
        proc = launch(forks, PATCHES[moment], *args)
    assert (proc.returncode, proc.stderr.strip().splitlines()[-1:]) == (130, [LINE]), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "run" / "metrics.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["registering", "composing"])
def test_ctrl_c_before_a_local_process_ran_ends_it_as_ctrl_cs_default_action_would(tmp_path, moment, forks):
    # Was: exit 130, as a distributed=local process that stopped at a step. A terminal's Ctrl-C reaches every
    # process: one still starting up ended so while another had started its run, and the parent, taking 130 for a
    # stop, waited out a stop's grace (120 s) for the other, which waited at the coordinator for the first. Ended by
    # the signal, the parent reads it as a process stopped before it joined, and ends the others at once.
    args = ("experiment=quick", f"hydra.run.dir={tmp_path / 'run'}")
    proc = forks.launch(list(args), cwd=REPO, prelude=PATCHES[moment], argv0="launch.py", stderr_apart=True,
                        env={"GENSBI_SHARDING_PARENT_FD": "-1"})  # launch.CHILD_ENV: never read before a run
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == -signal.SIGINT, err[-2000:]
    assert LINE not in err and "Traceback" not in err  # the parent says it once for its processes


@pytest.mark.slow
def test_ctrl_c_between_a_sweeps_jobs_names_the_jobs_that_ended(tmp_path, forks):
    # run() stands in for a job that ended; the Ctrl-C lands in its final line, before the next job starts.
    patch = (RAISE + "import gensbi_sharding.harness.run as r, gensbi_sharding.harness.run_report as rr\n"
             "r.run = lambda cfg: {'status': 'ok', 'c2st': 0.5}\nrr.final_line = interrupted\n")
    proc = launch(forks, patch, "-m", "train.steps=1,2", f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert (proc.returncode, AFTER in proc.stderr.strip().splitlines()) == (130, True), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("first", ["ok", "error"])
def test_sigterm_between_a_sweeps_jobs_stops_the_sweep_before_its_next_job(tmp_path, first, forks):
    # Was: the signal, held after job 0 ended, was taken over by job 1, which started only to record status
    # preempted (a stop it never saw). Now job 1 never starts: exit 75, its row 'not run', the commands that go on.
    sweep = tmp_path / "sweep"
    patch = ("import json, os, signal, pathlib\nimport gensbi_sharding.harness.run as r\n"
             "from gensbi_sharding.harness.run_folder import output_dir\ncalls = []\n"
             "def fake(cfg):\n    calls.append(1)\n    assert len(calls) == 1, 'a second job started'\n"
             f"    (output_dir(cfg) / 'metrics.json').write_text(json.dumps({{'status': '{first}'}}))\n"
             "    os.kill(os.getpid(), signal.SIGTERM)  # as the job ends, before the next one starts\n"
             f"    return {{'status': '{first}', 'c2st': 0.5, 'error': 'x'}}\n"
             "r.run = fake\n")
    proc = launch(forks, patch, "-m", "train.steps=1,2", f"hydra.sweep.dir={sweep}")
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert proc.returncode == 75 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert ("[WARNING] preempted by SIGTERM between the sweep's jobs: 1 job(s) ended, each recorded in its folder's "
            "metrics.json; job 1 and those after it did not start") in lines, lines
    if first == "ok":  # a sweep folder with a completed job: job 1's own command, in the folder Hydra gave it
        assert (f"to continue the rest of the sweep, a sweep folder holding completed jobs is never rerun as a whole: "
                f"continue its one unfinished job (never started) with: python launch.py train.steps=2 "
                f"train.resume=auto hydra.mode=RUN hydra.run.dir={sweep / '1'}") in lines, lines
    else:  # none completed: the whole sweep again, job 0 continued, job 1 started
        assert (f"to continue the whole sweep, its unfinished jobs and those not started: python launch.py -m "
                f"train.steps=1,2 train.resume=auto hydra.sweep.dir={sweep}") in lines, lines
    outcome = "stopped" if first == "ok" else "failed"  # sweep_end_line's word: a failed job says it first
    assert lines[-1] == (f"sweep {outcome}: {int(first == 'ok')} ok, {int(first == 'error')} failed, 1 not run; "
                         f"sweep_summary.csv/.md/.png in {sweep}"), lines
    assert not (sweep / "1" / "metrics.json").exists()  # no record of a job that never ran


@pytest.mark.slow  # a launched sweep of two tiny jobs, the first trained and evaluated
def test_ctrl_c_during_a_jobs_last_c2st_ends_it_finished_and_stops_the_sweep_before_the_next(tmp_path, forks):
    # launch.py's hold (signal_hold) took a Ctrl-C during job 0's last C2ST: that job ends finished, its score
    # whole, and job 1 never starts (the in-process test_preemption case holds the signal as launch.py does).
    # The C2ST waits for the test, which signals once it is in: no race with the run's other steps.
    sweep, inside, signalled = tmp_path / "sweep", tmp_path / "in_c2st", tmp_path / "signalled"
    patch = ("import pathlib, time\nimport gensbi_sharding.harness.evaluate as e\nreal, calls = e.c2st_scores, []\n"
             "def scores(*args, **kwargs):\n    calls.append(1)\n"
             f"    if len(calls) == 1:\n        pathlib.Path({str(inside)!r}).write_text('')\n"
             "        end = time.monotonic() + 120  # bounded: the test signals, then writes the file\n"
             f"        while not pathlib.Path({str(signalled)!r}).exists() and time.monotonic() < end:\n"
             "            time.sleep(0.01)\n"
             "    return real(*args, **kwargs)\n"
             "e.c2st_scores = scores\n")
    proc = forks.launch(["-m", "experiment=quick", "train.steps=8,9", "data.num_simulations=768",
                         f"hydra.sweep.dir={sweep}"], cwd=REPO, prelude=patch, argv0="launch.py", stderr_apart=True)
    try:
        while not inside.exists() and proc.poll() is None:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
    finally:
        signalled.write_text("")  # the C2ST goes on whatever happened
    out, err = proc.communicate(timeout=300)
    lines = (out + err).strip().splitlines()
    assert proc.returncode == 130 and "Traceback" not in err, (out + err)[-3000:]
    assert ("[WARNING] interrupted by Ctrl-C between the sweep's jobs: 1 job(s) ended, each recorded in its folder's "
            "metrics.json; job 1 and those after it did not start") in lines, "\n".join(lines[-12:])
    assert f"sweep stopped: 1 ok, 0 failed, 1 not run; sweep_summary.csv/.md/.png in {sweep}" in lines
    metrics = json.loads((sweep / "0" / "metrics.json").read_text())
    assert metrics["status"] == "ok" and "error" not in metrics and 0 < metrics["c2st"] <= 1, metrics
    assert [row["observation"] for row in metrics["c2st_observations"]] == [1]
    assert not (sweep / "1" / "metrics.json").exists()
    with open(sweep / "sweep_summary.csv", newline="") as f:
        assert [(row["job"], row["status"]) for row in csv.DictReader(f)] == [("0", "ok"), ("1", "not run")]
