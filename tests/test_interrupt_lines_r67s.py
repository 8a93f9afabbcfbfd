"""The lines a stopped job prints are true for it, and their advice works pasted (round 67's stop messages).

1. An interrupted dry run said "continue with: ... dry_run=true ... train.resume=auto", refused when pasted: it now
   names the command that runs it again, in a new folder (a dry run writes only into a fresh one).
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import time

import pytest

from faults_helpers import LAUNCH, TINY, under_command
from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.preemption import Preempted
from gensbi_sharding.harness.run_folder import ensure_fresh

# Ctrl-C (SIGINT to itself) at the run's first stop check: the folder's claim, before anything is built
AT_FIRST_CHECK = """
import runpy, signal, sys
from gensbi_sharding.harness import preemption
check = preemption.PreemptionWatch.check
def check_after_ctrl_c(self):
    if self.signum is None:
        signal.raise_signal(signal.SIGINT)
    return check(self)
preemption.PreemptionWatch.check = check_after_ctrl_c
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


class _Folder:
    """A run folder of a process that records nothing (``RunFolder``'s calls ``record_stop`` makes)."""
    owner = True

    def record(self, metrics, failure=None):
        pass

    def release(self):
        pass


def _launch(*args, prelude=None, bound=240):
    """``launch.py`` with ``args`` from the repository (as typed there), ``prelude`` run first: (output, exit code)."""
    done = subprocess.run([sys.executable, *(["-c", prelude] if prelude else []), str(LAUNCH), *args],
                          cwd=LAUNCH.parent, capture_output=True, text=True, timeout=bound)
    return done.stdout + done.stderr, done.returncode


def _pasted(command):
    """A printed ``python launch.py ...`` command run as pasted in the repository (python: this interpreter)."""
    words = shlex.split(command)
    assert words[:2] == ["python", "launch.py"], command
    return _launch(*words[2:])


def test_a_stopped_dry_runs_advice_runs_it_again_in_a_new_folder_and_passes_the_commands_checks(tmp_path):
    from gensbi_sharding.harness.run import record_stop

    out = tmp_path / "run"
    out.mkdir()
    overrides = [*TINY, "dry_run=true", f"hydra.run.dir={out}"]

    def stopped(cfg):
        metrics = {"status": "error", "config": {"dry_run": True}}
        record_stop(Preempted(signal.SIGTERM), metrics, out, time.perf_counter(), _Folder())
        return metrics

    metrics = under_command(overrides, stopped)
    stop, advice = metrics["error"].split("; ", 1)
    assert stop == "preempted by SIGTERM before training (nothing trained: no checkpoint to save)"
    assert advice.startswith("a dry run has nothing to continue: run it again with: python launch.py "), advice
    words = shlex.split(advice.split("run it again with: ", 1)[1])[2:]
    assert command_problem(words) is None  # was: "dry_run=true with train.resume=auto: ..."
    assert words == [*TINY, "dry_run=true", f"hydra.run.dir={tmp_path / 'run-again'}"]
    assert ensure_fresh(tmp_path / "run-again", dry_run=True) is None  # a folder the dry run takes


@pytest.mark.slow  # two dry runs of launch.py: stopped at its first check, then its printed command (~15 s on 2 cores)
def test_an_interrupted_dry_runs_printed_command_runs_it_again(tmp_path):
    said, code = _launch(*TINY, "dry_run=true", f"hydra.run.dir={tmp_path / 'run'}", prelude=AT_FIRST_CHECK)
    assert code == 130, said[-3000:]
    advice = [line for line in said.splitlines() if "run it again with: " in line]
    assert len(advice) == 1 and "a dry run has nothing to continue" in advice[0], said[-3000:]
    assert "train.resume" not in advice[0] and "continue with" not in said, said[-3000:]
    said, code = _pasted(advice[0].split("run it again with: ", 1)[1])
    assert code == 0 and "dry run done" in said, said[-3000:]
    assert json.loads((tmp_path / "run-again" / "metrics.json").read_text())["status"] == "ok"
