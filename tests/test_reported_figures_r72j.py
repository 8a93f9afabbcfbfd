"""The four items REPORTS72 left of the numbers a run reports (REPORTS72B).

1. An attempt resumed only to evaluate (``train.steps`` reached: ``steps`` 0) takes its training figures from the last
   attempt that trained; was: without ``speed_includes_warmup``, so a one-step attempt's speed (its warm-up in it,
   ~4x low) read "(median step of attempt 1, which trained)" on the final line and bare in the sweep table.
2. The progress bar's ``samples_s`` of the window holding the first step held that step's warm-up, unsaid (a run's
   first bar line "samples_s=12443" against 21,726 on its final line). Now its time is left out where it was timed
   (a run of one window), and said where it was not: "samples_s=12443 (warm-up incl.)".
3. A lone launch.py run's final line "done in 94.3 s" counted from the run's start, not the command's: ~14 s of
   imports and Hydra's composing before it, unsaid. Now it counts from the process's start (launch.STARTED);
   metrics.json's wall_s stays the run's, and a sweep's jobs and run(cfg) from Python keep theirs.
"""

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from gensbi_sharding.harness import run_folder
from gensbi_sharding.harness.progress import window_rate
from gensbi_sharding.harness.run_report import final_line


def _eval_only_record(tmp_path, monkeypatch):
    """What ``record`` writes for an attempt that only evaluated after a one-step attempt."""
    monkeypatch.setattr(run_folder, "settle_record", lambda *a, **k: None)  # no files of attempts to settle here
    cfg = OmegaConf.create({"train": {"resume": "auto", "steps": 1}, "dry_run": False,
                            "distributed": {"mode": "none", "process_id": None}})
    folder = run_folder.RunFolder(tmp_path, cfg)
    folder.claimed = True  # claimed by this process, as run() does first
    folder.previous = dict(status="ok", wall_s=30.0, steps=1, final_step=1, compile_s=2.0, median_step_s=0.4,
                           samples_per_s=640.0, final_train_loss=1.5, speed_includes_warmup=True)
    metrics = dict(status="ok", wall_s=5.0, steps=0, resumed_from_step=1, c2st=0.7, samples_per_s=None,
                   speed_includes_warmup=None)  # run_steps: no flag where this attempt trained nothing
    folder.record(metrics)
    return metrics, json.loads((tmp_path / "metrics.json").read_text())


def test_an_attempt_resumed_to_evaluate_keeps_the_flag_of_the_speed_it_shows(tmp_path, monkeypatch):
    metrics, written = _eval_only_record(tmp_path, monkeypatch)
    assert written["samples_per_s"] == 640.0 and written["training_figures_from_attempt"] == 1
    assert written["speed_includes_warmup"] is True
    assert written["previous_attempts"][0]["speed_includes_warmup"] is True
    line = final_line(written, Path("out"))
    assert "640 samples/s (one step of attempt 1, which trained, its warm-up included)" in line, line


def test_the_first_windows_rate_leaves_out_the_warm_up_it_timed_and_says_the_one_it_did_not():
    assert window_rate(16, [(13.0, 4)], 10.0) == "16"  # one window: 10 s of warm-up, then 1 s a step (was "5")
    assert window_rate(16, [(10.0, 2)], None) == "3 (warm-up incl.)"  # first of several: not timed apart
    assert window_rate(16, [(10.0, 2), (2.0, 2)], None) == "16"  # a later window holds no warm-up
    assert window_rate(16, [(7.0, 1)], 7.0) == "2 (warm-up incl.)"  # one step: nothing after it to time


class _Bar:
    """The progress bar's postfixes, as train() sets them."""

    def __init__(self, **kwargs):
        self.rates = []

    def set_postfix(self, **postfix):
        self.rates.append(postfix["samples_s"])

    def update(self, n=1):
        pass

    def refresh(self):
        pass

    def close(self):
        pass


@pytest.mark.slow  # compiles a train step
@pytest.mark.parametrize("log_every,clock,rates", [
    (4, [0.0, 0.0, 10.0, 13.0, 13.0], ["16"]),  # one window: 10 s of warm-up in step 1, then 1 s a step (was "5")
    (2, [0.0, 0.0, 10.0, 10.0, 12.0, 12.0], ["3 (warm-up incl.)", "16"]),  # two: the first's warm-up said (was "3")
])
def test_the_progress_bar_shows_the_first_windows_rate_without_its_warm_up_or_says_it(monkeypatch, log_every, clock,
                                                                                      rates):
    import jax

    from gensbi_sharding.harness import train as T
    from gensbi_sharding.harness.step_timer import StepTimer
    from test_train import batches, tiny_state

    bars = []
    monkeypatch.setattr(T, "progress_bar", lambda **kwargs: bars.append(_Bar()) or bars[-1])
    model, optimizer, _ = tiny_state(ema_decay=0)
    functions, state = T.make_step_functions(model, optimizer, None)
    ticks = iter(clock)  # as test_train_speed_r70c.py reads them: made, window start, first step, each window's end
    timer = StepTimer(clock=lambda: next(ticks), sync=jax.block_until_ready)
    T.train(functions, state, batches(), steps=4, key=jax.random.key(0), mesh=None, batch_size=16,
            log_every=log_every, progress=False, timer=timer)
    assert [bar.rates for bar in bars] == [rates]


def test_a_lone_runs_final_line_counts_from_the_process_start(tmp_path, monkeypatch, caplog):
    import logging
    from types import SimpleNamespace

    import launch
    from faults_helpers import compose_tiny

    for state in ("failed_jobs", "running", "ran", "in_sweep"):  # launch.py's per-process lists, this test's own
        monkeypatch.setattr(launch, state, [])
    monkeypatch.setattr(launch, "STARTED", 1000.0)  # the process started at 1000 s; the run ends at 1108.6 s
    monkeypatch.setattr(launch, "time", SimpleNamespace(monotonic=lambda: 1108.6))
    record = dict(status="ok", wall_s=94.3, c2st=0.61, samples_per_s=1234.0)
    monkeypatch.setattr(launch, "run", lambda cfg: dict(record))
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        launch.main.__wrapped__(compose_tiny(output_dir=tmp_path / "run"))  # the function Hydra calls per job
    line = [r.getMessage() for r in caplog.records if r.name == "gensbi_sharding"][-1]
    assert line.startswith("done in 108.6 s: C2ST 0.610"), line  # was "done in 94.3 s"


def test_only_a_lone_run_of_launch_py_is_counted_from_the_process_start(monkeypatch):
    import launch

    record = dict(status="ok", wall_s=94.3)
    monkeypatch.setattr(launch, "STARTED", 1000.0)
    assert launch.counted_from_start(record, sweep=False, now=1108.6)["wall_s"] == pytest.approx(108.6)
    assert launch.counted_from_start(record, sweep=True, now=1108.6) == record  # a sweep's job: its own time
    refused = dict(status="error", wall_s=None)  # refused before it started: "error before it started", kept
    assert launch.counted_from_start(refused, sweep=False, now=1108.6) == refused
    monkeypatch.setattr(launch, "STARTED", None)  # launch.py imported (a notebook's main()): the run's own clock
    assert launch.counted_from_start(record, sweep=False, now=1108.6) == record
    assert record == dict(status="ok", wall_s=94.3)  # metrics.json's figure is never changed
