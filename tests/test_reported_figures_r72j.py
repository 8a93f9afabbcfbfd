"""The four items REPORTS72 left of the numbers a run reports (REPORTS72B).

1. An attempt resumed only to evaluate (``train.steps`` reached: ``steps`` 0) takes its training figures from the last
   attempt that trained; was: without ``speed_includes_warmup``, so a one-step attempt's speed (its warm-up in it,
   ~4x low) read "(median step of attempt 1, which trained)" on the final line and bare in the sweep table.
"""

import json
from pathlib import Path

from omegaconf import OmegaConf

from gensbi_sharding.harness import run_folder
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
