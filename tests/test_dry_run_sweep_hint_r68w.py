"""A stopped sweep of dry runs is told how to run it again, not to continue it (round 68, wave 2A).

Was: "to continue the whole sweep, this job and those not started: python launch.py -m ... dry_run=true
train.resume=auto hydra.sweep.dir=<sweep>" (or, once a job completed, each unfinished job's command with
train.resume=auto), refused pasted: a dry run continues nothing and takes only a fresh folder. Now: "a dry-run sweep has
nothing to continue: run it again with: python launch.py -m ... hydra.sweep.dir=<sweep>-again".
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from faults_helpers import LAUNCH, TINY
from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.sweep_continue import whole_sweep_hint

SWEEP = ["-m", *TINY, "dry_run=true", "seed=0,1"]
# Ctrl-C (SIGINT to itself) in the second job's compile: the first job completed
IN_SECOND_COMPILE = """
import runpy, signal, sys
import gensbi_sharding
report, calls = gensbi_sharding.compiled_report, []
def ctrl_c_in_compile(compiled):
    calls.append(1)
    if len(calls) == 2:
        signal.raise_signal(signal.SIGINT)
    return report(compiled)
gensbi_sharding.compiled_report = ctrl_c_in_compile
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _sweep_folder(sweep, dry_run):
    sweep.mkdir()
    OmegaConf.save(OmegaConf.create({"dry_run": dry_run, "hydra": {"overrides": {"task": ["seed=0,1"]}}}),
                   sweep / "multirun.yaml")


def test_a_dry_run_sweep_stopped_between_its_jobs_is_told_to_run_it_again_into_a_new_folder(tmp_path):
    sweep = tmp_path / "sweep"
    _sweep_folder(sweep, True)
    hint = whole_sweep_hint(sweep / "0", ["launch.py", *SWEEP, f"hydra.sweep.dir={sweep}"], started=False)
    assert hint.startswith("a dry-run sweep has nothing to continue: run it again with: "), hint  # was: continue
    words = shlex.split(hint.split("run it again with: ", 1)[1])
    words = words[words.index("launch.py") + 1:]  # after an env setting, if any
    assert words == [*SWEEP, f"hydra.sweep.dir={tmp_path / 'sweep-again'}"], hint
    assert command_problem(words) is None  # was: "dry_run=true with train.resume=auto: ..."


def test_a_training_sweep_is_still_told_to_continue(tmp_path):
    sweep = tmp_path / "sweep"
    _sweep_folder(sweep, False)
    hint = whole_sweep_hint(sweep / "0", ["launch.py", "-m", *TINY, "seed=0,1"], started=False)
    assert hint.startswith("to continue the whole sweep, its unfinished jobs and those not started: "), hint
    assert hint.endswith(f"train.resume=auto hydra.sweep.dir={sweep}"), hint


@pytest.mark.slow  # a sweep of two dry runs stopped in the second's compile, then its printed command (~20 s)
def test_a_dry_run_sweeps_printed_command_runs_it_again(tmp_path):
    sweep = tmp_path / "sweep"

    def launch(*args, prelude=None):
        done = subprocess.run([sys.executable, *(["-c", prelude] if prelude else []), str(LAUNCH), *args],
                              cwd=LAUNCH.parent, capture_output=True, text=True, timeout=300)
        return done.stdout + done.stderr, done.returncode

    said, code = launch(*SWEEP, f"hydra.sweep.dir={sweep}", prelude=IN_SECOND_COMPILE)
    assert code == 130, said[-3000:]
    advice = [line for line in said.splitlines() if line.startswith("a dry-run sweep has nothing to continue")]
    assert len(advice) == 1 and "train.resume" not in said, said[-3000:]
    words = shlex.split(advice[0].split("run it again with: ", 1)[1])
    assert words[:2] == ["python", "launch.py"], advice
    said, code = launch(*words[2:])
    assert code == 0, said[-3000:]
    assert [json.loads((tmp_path / "sweep-again" / job / "metrics.json").read_text())["status"]
            for job in ("0", "1")] == ["ok", "ok"]
