"""Naming a sweep's best job needs no plotting module (FIX77 3): ``best_job`` took ``status_word`` from ``plots``
(numpy, the Agg canvas helpers, loss windows); the status words now live in ``summary_legend``, which ``plots``
re-exports."""

import json
import sys

from gensbi_sharding.harness import plots, summary_legend
from gensbi_sharding.harness.best_job import best_note


def test_best_note_of_a_failed_job_runs_without_the_plots_module(tmp_path, monkeypatch):
    for job, record in (("0", {"status": "ok", "c2st": 0.9}),
                        ("1", {"status": "error", "stopped_at_step": 4, "continue_with": "python launch.py x=1",
                               "error": "boom; continue with: python launch.py x=1"})):
        (tmp_path / job / "checkpoints" / "4").mkdir(parents=True)
        (tmp_path / job / "metrics.json").write_text(json.dumps(record))
    monkeypatch.setitem(sys.modules, "gensbi_sharding.harness.plots", None)  # importing it now raises ImportError
    note = best_note([tmp_path / "0", tmp_path / "1"])
    assert note.endswith("job 1 failed at step 4 (its error in " f"{tmp_path / '1' / 'metrics.json'}): once that is "
                         "fixed, to continue it in its own folder: python launch.py x=1"), note


def test_plots_keeps_the_status_words_it_had():
    assert plots.status_word is summary_legend.status_word and plots.status_counts is summary_legend.status_counts
    assert summary_legend.status_counts(["ok", "error", "preempted", None]) == ", 2 failed, 1 preempted"
