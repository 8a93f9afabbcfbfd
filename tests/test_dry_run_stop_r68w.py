"""A Ctrl-C during a dry run's compile stops the dry run (round 68, wave 2A).

Was: XLA's compile holds the main thread, so the Ctrl-C was heard as it ended ("received Ctrl-C: stopping at the next
step of the run"), yet the dry run had no step left to stop at: it printed its report, "dry run done", and exited 0
(``distributed=local`` too). Now the dry run checks for a stop between its stages, the compile's end included: status
interrupted, exit 130, and the advice that runs it again in a new folder.
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys

import pytest

from faults_helpers import LAUNCH, TINY, run_tiny

# Ctrl-C (SIGINT to itself) while XLA compiles the dry run's step: its handler runs as the compile returns
IN_COMPILE = """
import runpy, signal, sys
import gensbi_sharding
report = gensbi_sharding.compiled_report
def ctrl_c_in_compile(compiled):
    signal.raise_signal(signal.SIGINT)
    return report(compiled)
gensbi_sharding.compiled_report = ctrl_c_in_compile
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _launch(*args, prelude=None, bound=240):
    done = subprocess.run([sys.executable, *(["-c", prelude] if prelude else []), str(LAUNCH), *args],
                          cwd=LAUNCH.parent, capture_output=True, text=True, timeout=bound)
    return done.stdout + done.stderr, done.returncode


@pytest.mark.slow
def test_ctrl_c_during_the_compile_stops_the_dry_run_as_interrupted(tmp_path, monkeypatch):
    import gensbi_sharding

    report = gensbi_sharding.compiled_report

    def ctrl_c_in_compile(compiled):
        signal.raise_signal(signal.SIGINT)
        return report(compiled)

    monkeypatch.setattr(gensbi_sharding, "compiled_report", ctrl_c_in_compile)
    with pytest.raises(KeyboardInterrupt):  # was: returned, status "ok"
        run_tiny(tmp_path, "dry_run=true")
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["status"] == "interrupted", metrics.get("error")
    # was "... before training (nothing trained: no checkpoint to save); ...": a dry run never trains (round 70)
    assert metrics["error"].startswith("interrupted by Ctrl-C (SIGINT) during the dry run's compile (a dry run trains "
                                       "nothing: no checkpoint, no report); a dry run has nothing to continue: "), \
        metrics["error"]
    assert "dry_run" not in metrics  # no report: the compile's figures were not the run's to record


@pytest.mark.slow  # launch.py's dry run stopped in its compile, then its printed command (two dry runs, ~15 s)
def test_a_dry_run_ctrl_c_stopped_in_its_compile_exits_130_and_its_advice_runs_it_again(tmp_path):
    out = tmp_path / "run"
    said, code = _launch(*TINY, "dry_run=true", f"hydra.run.dir={out}", prelude=IN_COMPILE)
    assert code == 130, said[-3000:]  # was: 0
    assert "dry run done" not in said, said[-3000:]
    advice = [line for line in said.splitlines() if "run it again with: " in line]
    assert len(advice) == 1 and "train.resume" not in advice[0], said[-3000:]
    words = shlex.split(advice[0].split("run it again with: ", 1)[1])
    assert words[:2] == ["python", "launch.py"] and words[-1] == f"hydra.run.dir={out}-again", advice
    said, code = _launch(*words[2:])
    assert code == 0 and "dry run done" in said, said[-3000:]
    assert json.loads((tmp_path / "run-again" / "metrics.json").read_text())["status"] == "ok"


# distributed=local's parent: each process it starts runs CHILD_IN_COMPILE first, which asks the parent to stop (as a
# terminal's Ctrl-C reaches it; it passes the stop on) from inside that process's compile, then lets the compile end
PARENT_PASSING_ON = """
import runpy, subprocess, sys
from gensbi_sharding.harness import local_cluster
real = subprocess.Popen
def popen(command, **kwargs):
    return real([command[0], "-c", CHILD, *command[1:]], **kwargs)
local_cluster.subprocess = type("subprocess", (), {"Popen": staticmethod(popen), "PIPE": subprocess.PIPE})
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
CHILD_IN_COMPILE = """
import os, runpy, signal, sys, time
import gensbi_sharding
report = gensbi_sharding.compiled_report
def parent_ctrl_c_in_compile(compiled):
    if "distributed.process_id=0" in sys.argv:  # one Ctrl-C: two would stop the parent at once
        os.kill(os.getppid(), signal.SIGINT)
    told = os.environ["GENSBI_SHARDING_PARENT_SIGNAL_FILE"]  # parent_signal.PARENT_SIGNAL_ENV: written, then sent on
    for _ in range(600):
        if open(told).read().strip():
            break
        time.sleep(0.1)
    time.sleep(3)  # the parent's stop (SIGTERM) reaches this process, and JAX's service, while its compile lasts
    return report(compiled)
gensbi_sharding.compiled_report = parent_ctrl_c_in_compile
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.slow  # distributed=local's two processes, the parent's Ctrl-C heard in their compile (~20 s)
def test_a_local_dry_run_ctrl_c_stopped_in_its_compile_exits_130(tmp_path):
    out = tmp_path / "run"
    prelude = PARENT_PASSING_ON.replace("CHILD,", f"{CHILD_IN_COMPILE!r},")
    said, code = _launch(*TINY, "distributed=local", "dry_run=true", f"hydra.run.dir={out}", prelude=prelude)
    assert code == 130, said[-3000:]  # was: 0
    assert "dry run done" not in said, said[-3000:]
    assert json.loads((out / "metrics.json").read_text())["status"] == "interrupted"
    advice = [line for line in said.splitlines() if "run it again with: " in line]
    assert advice and "train.resume" not in advice[-1], said[-3000:]
    words = shlex.split(advice[-1].split("run it again with: ", 1)[1])
    assert words[:2] == ["python", "launch.py"] and words[-1] == f"hydra.run.dir={out}-again", advice
    assert "distributed=local" in words and "distributed.process_id=0" not in said, advice
