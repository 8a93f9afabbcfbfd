"""The speed a run reports leaves out the warm-up of the first dispatches when it has a single timing window.

Was: with one window (train.log_every >= train.steps) median_step_s was the window's mean step, the first step's
warm-up included (~4x low samples/s, no note), since the first window was left out only when another followed. Now
the single window is timed from its second step on; a run of one step, which cannot leave it out, says so in its log
line and in metrics.json (speed_includes_warmup).
"""

import json
import logging

import jax
import pytest

from faults_helpers import run_tiny
from gensbi_sharding.harness import train as T
from gensbi_sharding.harness.step_timer import StepTimer
from gensbi_sharding.harness.train_speed import steady_step_s
from test_train import batches, tiny_state


def test_steady_step_s_leaves_the_first_step_out_of_a_single_window():
    assert steady_step_s([(13.0, 4)], 10.0) == (1.0, False)  # was 13 / 4 = 3.25
    assert steady_step_s([(5.0, 4), (2.0, 2), (4.0, 2)], 3.0) == (1.5, False)  # several: the first window left out
    assert steady_step_s([(7.0, 1)], None) == (7.0, True)  # one step: nothing else to time
    assert steady_step_s([], None)[1] is False


@pytest.mark.slow
@pytest.mark.parametrize("log_every,clock,median", [
    (4, [0.0, 0.0, 10.0, 13.0, 13.0], 1.0),  # one window: 10 s of warm-up in step 1, then 1 s a step
    (2, [0.0, 0.0, 10.0, 10.0, 12.0, 12.0], 1.0),  # two windows: the first left out, as before
])
def test_the_training_loop_times_a_single_window_from_its_second_step(log_every, clock, median):
    model, optimizer, _ = tiny_state(ema_decay=0)
    functions, state = T.make_step_functions(model, optimizer, None)
    ticks = iter(clock)  # the clock read: made, window start, first step (one window only), each window end, start
    timer = StepTimer(clock=lambda: next(ticks), sync=jax.block_until_ready)
    result = T.train(functions, state, batches(), steps=4, key=jax.random.key(0), mesh=None, batch_size=16,
                     log_every=log_every, progress=False, timer=timer)
    assert result.median_step_s == median and result.samples_per_s == 16 / median
    assert result.speed_includes_warmup is False


@pytest.mark.slow
def test_a_one_step_run_says_its_speed_includes_the_warm_up(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        metrics = run_tiny(tmp_path, "train.steps=1", "train.log_every=1")
    assert metrics["speed_includes_warmup"] is True
    assert json.loads((tmp_path / "metrics.json").read_text())["speed_includes_warmup"] is True
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("compile "))
    assert "samples/s (one step timed: its warm-up included); train loss" in line, line


@pytest.mark.slow
def test_a_run_of_several_steps_in_one_window_reports_no_warm_up(tmp_path):
    metrics = run_tiny(tmp_path, "train.log_every=100")  # TINY's 8 steps in one window
    assert metrics["speed_includes_warmup"] is False and metrics["samples_per_s"] > 0


@pytest.mark.slow  # launch.py, one step, end to end (~10 s)
def test_launch_of_one_step_says_its_speed_includes_the_warm_up(tmp_path):
    import subprocess
    import sys

    from faults_helpers import LAUNCH, TINY

    done = subprocess.run([sys.executable, str(LAUNCH), *TINY, "train.steps=1", f"hydra.run.dir={tmp_path / 'run'}"],
                          cwd=LAUNCH.parent, capture_output=True, text=True, timeout=300)
    said = done.stdout + done.stderr
    assert done.returncode == 0 and "samples/s (one step timed: its warm-up included)" in said, said[-3000:]
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["speed_includes_warmup"] is True
