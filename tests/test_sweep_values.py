"""Sweeps Hydra's basic sweeper cannot run, or that run no job, are refused in one line (harness/sweep_values.py).

Was: ``-m train.steps=interval(1,5)`` ended in Hydra's traceback (``BasicSweeper does not support sweep type :
INTERVAL_SWEEP``) after a callback's warning; ``range(1,5,0)`` in Python's ``ValueError`` traceback; a sweep with
no value (``range(5,1)``, ``model=glob(nope*)``, ``train.steps=glob(*)``) launched 0 jobs and exited 0.
"""

import subprocess
import sys
from pathlib import Path

import pytest

from gensbi_sharding.harness.sweep_values import command_sweep_problem, sweep_values_problem

ROOT = Path(__file__).resolve().parents[1]
INTERVAL = ("train.steps=interval(1,5){}: Hydra's basic sweeper cannot sweep an interval (a continuous range, for an "
            "optimizing sweeper such as Optuna's, which is not installed here); list the values to run instead, e.g. "
            "-m train.steps=range(1,6) (every whole number from 1 to 5) or choice(1,3,5)")
MODELS = "flux1, mlp, simformer, transformer"
SHUFFLE = ("{0}: shuffle(...) runs the jobs in a random order, different on every launch, so job i's folder would "
           "stand for other values when the sweep is continued (train.resume=auto) or summarised; list the values in the "
           "order to run them: {1}")


@pytest.mark.parametrize("args, message", [
    (["-m", "train.steps=interval(1,5)"], INTERVAL.format("")),
    (["train.steps=interval(1,5)"], INTERVAL.format("")),  # without -m too: Hydra's "requires --multirun" misled
    (["-m", "train.learning_rate=tag(lr,interval(0.001,0.01))"],
     "train.learning_rate=tag(lr,interval(0.001,0.01)): Hydra's basic sweeper cannot sweep an interval (a continuous "
     "range, for an optimizing sweeper such as Optuna's, which is not installed here); list the values to run "
     "instead, e.g. -m train.learning_rate=choice(0.001,0.0055,0.01) (the values to try)"),
    (["-m", "train.steps=range(5,1)"],
     "train.steps=range(5,1): the range has no value, so the sweep would run no job (range(start,stop,step) counts "
     "from start by step up to, not including, stop); e.g. train.steps=range(1,5)"),
    # Was "e.g. seed=range(0,0)": the range refused, offered as its fix
    (["-m", "seed=range(0,0)"],
     "seed=range(0,0): the range has no value, so the sweep would run no job (range(start,stop,step) counts "
     "from start by step up to, not including, stop); e.g. seed=range(0,1)"),
    (["-m", "train.steps=range(5,5,-1)"],
     "train.steps=range(5,5,-1): the range has no value, so the sweep would run no job (range(start,stop,step) counts "
     "from start by step up to, not including, stop); e.g. train.steps=range(5,6)"),
    (["-m", "train.steps=range(1,5,0)"],
     "train.steps=range(1,5,0): a range with step 0 never reaches its stop; give a step that does, e.g. "
     "train.steps=range(1,5)"),
    (["-m", "model=glob(nope*)"],
     f"model=glob(nope*): the glob matches none of model's options ({MODELS}), so the sweep would run no job; "
     "widen it, or list the options: -m model=flux1,mlp"),
    (["-m", "train.steps=glob(*)"],
     "train.steps=glob(*): glob(...) picks among a config group's options (model, data, rule, ...), and train.steps "
     "is no group, so the sweep would run no job; list the values instead, e.g. -m train.steps=1,2 or "
     "train.steps=range(1,3)"),
    # Was: Hydra ran the jobs in a random order; the harness numbers them in the listed one (train.resume=auto).
    (["-m", "train.steps=shuffle(range(1,4))"],
     SHUFFLE.format("train.steps=shuffle(range(1,4))", "train.steps=range(1,4)")),
    (["-m", "rule=shuffle(fsdp,tensor)"], SHUFFLE.format("rule=shuffle(fsdp,tensor)", "rule=fsdp,tensor")),
])
def test_a_sweep_that_cannot_run_or_runs_no_job_is_refused_naming_the_fix(args, message):
    assert command_sweep_problem(args) == message


@pytest.mark.parametrize("args", [
    ["-m", "train.steps=range(1,3)", "model=glob(*former)", "rule=fsdp,tensor", "seed=choice(0,1)"],
    ["-m", "hydra/sweeper=optuna", "train.steps=interval(1,5)"],  # another sweeper's to run (or refuse)
    ["train.steps=interval(1,5"],  # grammar_problem's
])
def test_sweeps_the_basic_sweeper_runs_pass(args):
    assert command_sweep_problem(args) is None


def test_a_preset_is_named_as_where_the_sweep_was_written():
    assert (sweep_values_problem(["train.steps=interval(1,5)"], where=" (in the preset's hydra.sweeper.params)")
            == INTERVAL.format(" (in the preset's hydra.sweeper.params)"))


@pytest.mark.slow
@pytest.mark.parametrize("preset", [False, True])
def test_launch_refuses_an_interval_sweep_in_one_line_writing_nothing(tmp_path, preset):
    args = ["-m", "experiment=quick", "train.steps=interval(1,5)"]
    if preset:  # a preset of one's own: checked once Hydra composed it, before the sweep folder is made
        (tmp_path / "conf" / "sweep").mkdir(parents=True)
        (tmp_path / "conf" / "sweep" / "mine.yaml").write_text(
            "# @package _global_\nhydra:\n  mode: MULTIRUN\n  sweeper:\n    params:\n      train.steps: interval(1,5)\n")
        args = [f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "sweep=mine"]
    proc = subprocess.run([sys.executable, "launch.py", *args, f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    where = " (in the preset's hydra.sweeper.params)" if preset else ""
    assert (proc.returncode, proc.stderr.strip().splitlines()[-1]) == (1, f"[ERROR] {INTERVAL.format(where)}")
    assert "Traceback" not in proc.stderr and "Warning" not in proc.stderr
    assert not (tmp_path / "sweep").exists()
