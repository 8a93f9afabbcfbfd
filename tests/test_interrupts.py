"""Ctrl-C in a run and between a sweep's jobs: deferred, not dropped; named with the step it continues from; a
sweep's summary written as a preemption writes it.
"""

import csv
from pathlib import Path

import pytest

from faults_helpers import REPO


@pytest.mark.slow
def test_a_second_ctrl_c_landing_in_a_gc_callback_is_deferred_not_dropped(caplog):
    # Typed: Ctrl-C twice during a run (README, Preemption: "press it again to stop at once"). Was, on the console:
    # "Exception ignored in: <function _xla_gc_callback ...> Traceback ... KeyboardInterrupt": the second press
    # landed in JAX's gc callback (gc.callbacks), where Python prints the exception and drops it, as in a __del__
    # (which was deferred already); the run stopped only at the next step boundary, for the first press.
    import gc
    import logging
    import sys

    from gensbi_sharding.harness import interrupt_hold

    frames = []

    def callback(phase, info):  # as jax._src.lib's _xla_gc_callback: run by the collector, in the main thread
        frames.append(sys._getframe())

    gc.callbacks.append(callback)
    try:
        gc.collect()
        interrupt_hold.reset()
        with caplog.at_level(logging.WARNING, logger="gensbi_sharding"):
            assert interrupt_hold.defer_interrupt(frames[0]) is True
    finally:
        gc.callbacks.remove(callback)
        interrupt_hold.reset()
    assert "Ctrl-C again: stopping at the next checkpoint, or as the first asked" in caplog.text
    assert interrupt_hold.defer_interrupt(sys._getframe()) is False  # anywhere else: at once, as before


WHERE = ["as job 1 starts", "as job 0 ends", "again as the summary is written"]


def _ctrl_c_script(where: str, sweep: Path) -> str:
    """``launch.py -m train.steps=1,2,3`` into ``sweep``, run() stubbed, Ctrl-C landing ``where``."""
    hook = ("import gensbi_sharding.harness.summary as s\ns.SweepSummary.on_job_start = interrupted\n"
            if where != "as job 0 ends" else
            "import gensbi_sharding.harness.run_report as rr\nrr.final_line = interrupted\n")
    if where.startswith("again"):  # a second Ctrl-C cuts the summary short: no traceback, still exit 130
        hook += "s.refresh_sweep_summary = interrupted\n"
    script = ("import json\nimport gensbi_sharding.harness.run as r\n"
              "from gensbi_sharding.harness.run_folder import output_dir\ncalls = []\n"
              "def interrupted(*args, **kwargs):\n    if calls:\n        raise KeyboardInterrupt\n"
              "    return 'x'\n" + hook +
              "def fake(cfg):\n    calls.append(1)\n"
              "    (output_dir(cfg) / 'metrics.json').write_text(json.dumps({'status': 'ok', 'c2st': 0.5}))\n"
              "    return {'status': 'ok', 'c2st': 0.5}\nr.run = fake\nimport runpy, sys\n"
              f"sys.argv = ['launch.py', '-m', 'train.steps=1,2,3', 'hydra.sweep.dir={sweep}']\n"
              "runpy.run_path('launch.py', run_name='__main__')\n")
    return script


def _no_record_script(sweep: Path) -> str:
    """``launch.py -m train.steps=1,2`` into ``sweep``, run() stubbed: job 1 refused before its metrics.json."""
    return ("import json\nimport gensbi_sharding.harness.run as r\n"
            "from gensbi_sharding.harness.run_folder import output_dir\n"
            "def fake(cfg):\n    if cfg.train.steps == 2:\n"
            "        return {'status': 'error', 'error': 'FolderInUseError'}\n"
            "    (output_dir(cfg) / 'metrics.json').write_text(json.dumps({'status': 'ok', 'c2st': 0.5}))\n"
            "    return {'status': 'ok', 'c2st': 0.5}\nr.run = fake\nimport runpy, sys\n"
            f"sys.argv = ['launch.py', '-m', 'train.steps=1,2', 'hydra.sweep.dir={sweep}']\n"
            "runpy.run_path('launch.py', run_name='__main__')\n")


#: What ``launch.py -m`` imports inside its functions, with run() stubbed (none starts a thread or JAX's backend).
SWEEP_IMPORTS = ("hydra._internal.core_plugins.basic_sweeper", "hydra._internal.core_plugins.basic_launcher",
                 "hydra_plugins.hydra_submitit_launcher.submitit_launcher", "gensbi_sharding.harness.sweep_check",
                 "gensbi_sharding.harness.models", "gensbi_sharding.harness.simulation_data", "matplotlib.figure",
                 "matplotlib.backends.backend_agg", "mpl_toolkits.mplot3d", "PIL.Image")


@pytest.fixture(scope="module")
def stubbed_sweeps(tmp_path_factory):
    """``{case: (its process, its sweep folder)}``: each script above as ``python -c <script>`` in the repository
    would run it, forked one after the other from one process that imported launch.py's modules once
    (tests/fork_launch.py: each still a process of its own, from the script's first line; ~2 s of CPU less each).
    What a sweep imports inside launch.py's functions (Hydra's sweeper and launchers, the pre-check's modules, the
    summary's figure) is imported there once too (~0.3 s of CPU less each)."""
    import os

    from fork_launch import REPO as FORK_REPO, run_forked, script_imports

    root = tmp_path_factory.mktemp("stubbed_sweeps")
    (root / "run.py").write_text("import runpy, sys\nrunpy.run_path(sys.argv[1], run_name='__main__')\n")
    sweeps = {**{where: root / f"ctrl_c{i}" / "sweep" for i, where in enumerate(WHERE)},
              "no record": root / "no_record" / "sweep"}
    runs = []
    for i, (case, sweep) in enumerate(sweeps.items()):
        sweep.parent.mkdir()
        script = _no_record_script(sweep) if case == "no record" else _ctrl_c_script(case, sweep)
        (root / f"{i}.py").write_text(script)
        runs.append({"args": [str(root / f"{i}.py")], "cwd": REPO})
    (root / "fork").mkdir()
    procs = run_forked(runs, env=dict(os.environ), timeout=120 * len(runs), workdir=root / "fork",
                       script=root / "run.py", imports=(*script_imports(FORK_REPO / "launch.py"), *SWEEP_IMPORTS))
    return {case: (proc, sweeps[case]) for case, proc in zip(sweeps, procs)}


@pytest.mark.slow  # three launch.py sweeps (run() stubbed)
@pytest.mark.parametrize("where", WHERE)
def test_ctrl_c_between_a_sweeps_jobs_writes_its_summary_as_a_preemption_there_does(stubbed_sweeps, where):
    # launch.py -m train.steps=1,2,3, Ctrl-C after job 0 ended: was one line and no sweep_summary.* (Hydra's end of
    # sweep never came; a SIGTERM there wrote them). Now: the summary, jobs 1 and 2 'not run', how to continue, the
    # sweep's outcome last, as for SIGTERM. The Ctrl-C lands once Hydra made job 1's folder, or before.
    proc, sweep = stubbed_sweeps[where]
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 130 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    if where.startswith("again"):
        assert lines[-2:] == ["interrupted by Ctrl-C after 1 job(s) ended, each recorded in its folder's metrics.json",
                              "Ctrl-C again: the sweep's summary was not rewritten"], lines
        return
    later = "job 1 and those after it did not start" if where == "as job 1 starts" else "no later job started"
    assert lines[-3:] == [
        f"interrupted by Ctrl-C between the sweep's jobs: 1 job(s) ended, each recorded in its folder's metrics.json; "
        f"{later}",
        "to continue the rest of the sweep, a sweep folder holding completed jobs is never rerun as a whole: continue "
        f"its unfinished jobs (2 never started) one by one: python launch.py train.steps=2 train.resume=auto "
        f"hydra.mode=RUN hydra.run.dir={sweep / '1'} ; python launch.py train.steps=3 train.resume=auto hydra.mode=RUN "
        f"hydra.run.dir={sweep / '2'}",
        f"sweep stopped: 1 ok, 0 failed, 2 not run; sweep_summary.csv/.md/.png in {sweep}"], lines
    with open(sweep / "sweep_summary.csv", newline="") as f:
        rows = [(row["job"], row["train.steps"], row["status"]) for row in csv.DictReader(f)]
    assert rows == [("0", "1", "ok"), ("1", "2", "not run"), ("2", "3", "not run")]


@pytest.mark.slow  # one launch.py sweep (run() stubbed)
def test_a_sweeps_job_that_ended_without_a_record_is_a_row_of_its_summary(stubbed_sweeps):
    # A job refused before run() could write its metrics.json (its folder in use by another run): the summary left it
    # out and the sweep ended "sweep done: 1 ok, 0 failed" while it exited 1. Now its row says 'not run'.
    proc, sweep = stubbed_sweeps["no record"]
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert lines[-1].startswith("sweep stopped after ") and lines[-1].endswith(
        f": 1 ok, 0 failed, 1 not run; sweep_summary.csv/.md/.png in {sweep}"), lines
    with open(sweep / "sweep_summary.csv", newline="") as f:
        assert [(row["job"], row["status"]) for row in csv.DictReader(f)] == [("0", "ok"), ("1", "not run")]


def test_a_run_ctrl_c_stopped_at_once_names_the_step_it_continues_from(tmp_path):
    # Was "interrupted (Ctrl-C); continue with: ...": the first Ctrl-C's line names the step and its checkpoint
    # ("interrupted by Ctrl-C (SIGINT) at step 441; checkpoint ..."), the second's (at once) did not.
    from gensbi_sharding.harness.stop_record import at_once_error

    assert at_once_error(tmp_path, 4800) == (
        f"interrupted (Ctrl-C); stopped at once, saved up to step 4800 ({tmp_path / 'checkpoints' / '4800'}); continue "
        f"with: run(cfg) with cfg.train.resume='auto' and cfg.output_dir={str(tmp_path)!r} set in omegaconf.open_dict(cfg)")
    assert at_once_error(tmp_path, 40, "KeyboardInterrupt: c2st worker").startswith(
        "interrupted (Ctrl-C): KeyboardInterrupt: c2st worker; stopped at once, saved up to step 40 (")
    assert at_once_error(tmp_path, None) == "interrupted (Ctrl-C); stopped at once, with no checkpoint to continue from"
