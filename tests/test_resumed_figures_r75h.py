"""An attempt resumed only to evaluate shows its compiled step's memory and collectives with its speed (REVIEW75B).

Was: a run continued at ``train.steps`` (``steps`` 0: nothing compiled, nothing trained) took its speed, compile and
loss from the last attempt that trained (``run_folder.TRAINING_FIGURES``), but not ``step_memory_bytes_per_device``
(r74) nor ``collective_bytes_per_step``/``collectives`` (r75): run_steps wrote them null, so the job's sweep row read
attempt 1's "step" and "samples/s" beside a blank "memory/device" and "collectives/step/device", and its
metrics.json kept no attempt's collectives at all. A user meets it as test_preemption does: SIGTERM during the
evaluation (training done, checkpoint saved), the same command again (``train.resume=auto``) evaluates only.
"""

import json

from omegaconf import OmegaConf

from gensbi_sharding.harness import run_folder
from gensbi_sharding.harness.summary_columns import TRAIN_COLUMNS

COLLECTIVES = {"all-reduce": {"count": 1, "bytes": 1_426_453}, "all-gather": {"count": 0, "bytes": 0}}


def _record(tmp_path, monkeypatch, previous):
    """What ``RunFolder.record`` writes for an attempt that only evaluated after ``previous``, as run_steps leaves
    its metrics (its training figures null)."""
    monkeypatch.setattr(run_folder, "settle_record", lambda *a, **k: None)  # no files of attempts to settle here
    cfg = OmegaConf.create({"train": {"resume": "auto", "steps": 30}, "dry_run": False,
                            "distributed": {"mode": "none", "process_id": None}})
    folder = run_folder.RunFolder(tmp_path, cfg)
    folder.claimed, folder.previous = True, previous  # claimed by this process, as run() does first
    metrics = dict(status="ok", wall_s=5.0, steps=0, resumed_from_step=30, c2st=0.7, samples_per_s=None,
                   median_step_s=None, speed_includes_warmup=None, step_memory_bytes_per_device=None,
                   collective_bytes_per_step=None, collectives=None)
    folder.record(metrics)
    return json.loads((tmp_path / "metrics.json").read_text())


def test_an_attempt_resumed_to_evaluate_keeps_the_memory_and_collectives_of_the_step_it_shows(tmp_path, monkeypatch):
    previous = dict(status="ok", wall_s=30.0, steps=30, final_step=30, compile_s=2.0, median_step_s=0.0267,
                    samples_per_s=9579.0, final_train_loss=1.3, speed_includes_warmup=False,
                    step_memory_bytes_per_device=4_892_896, collective_bytes_per_step=1_426_453,
                    collectives=COLLECTIVES)
    written = _record(tmp_path, monkeypatch, previous)
    assert written["training_figures_from_attempt"] == 1 and written["samples_per_s"] == 9579.0
    assert written["collective_bytes_per_step"] == 1_426_453 and written["collectives"] == COLLECTIVES
    assert written["step_memory_bytes_per_device"] == 4_892_896
    assert written["previous_attempts"][0]["collective_bytes_per_step"] == 1_426_453  # each attempt keeps its own
    cells = {c.name: c.text(written) for c in TRAIN_COLUMNS}
    assert (cells["collective_bytes_per_step"], cells["step_memory_bytes_per_device"]) == ("1.4 MB", "4.9 MB")


def test_an_attempt_resumed_after_one_recorded_before_r75_shows_none(tmp_path, monkeypatch):
    previous = dict(status="ok", wall_s=30.0, steps=30, final_step=30, compile_s=2.0, median_step_s=0.0267,
                    samples_per_s=9579.0, final_train_loss=1.3, speed_includes_warmup=False)  # an older record
    written = _record(tmp_path, monkeypatch, previous)
    assert written["samples_per_s"] == 9579.0
    assert written["collective_bytes_per_step"] is None and written["collectives"] is None  # null, never 0
    assert {c.name: c.text(written) for c in TRAIN_COLUMNS}["collective_bytes_per_step"] == ""


# End to end: test_preemption.py's test_a_signal_during_evaluation_stops_at_once_and_auto_resume_evaluates checks
# these figures on the resumed attempt (one pair of runs, not two).
