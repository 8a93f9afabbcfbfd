"""The C2ST spread on a run's last line says what it spreads over (review r75c).

With one observation scored, the ``±`` of ``done in ...: C2ST 0.891 ± 0.024`` is the standard deviation of the
classifier's fold accuracies (``c2st_sd_folds``), as the ``observation 1: ... over 5 folds`` line above it says; the
last line, the one a user copies, gave it with no label, so it read as the posterior's uncertainty. Rescoring the
same 500 vs 500 samples with C2ST seeds 0, 1 and 2 gave 0.891, 0.907 and 0.888: a verdict moves by about that much.
"""

from __future__ import annotations

from gensbi_sharding.harness.run_report import final_line


def _metrics(**extra):
    return {"status": "ok", "wall_s": 63.0, "c2st": 0.891, "c2st_sd_folds": 0.02356, "samples_per_s": 6581.07,
            **extra}


def test_one_observations_spread_is_named_as_over_its_folds(tmp_path):
    row = {"observation": 1, "c2st": 0.891, "c2st_sd_folds": 0.02356, "c2st_scores": [0.895, 0.91, 0.9, 0.9, 0.85]}
    line = final_line(_metrics(c2st_observations=[row]), tmp_path)
    assert line == (f"done in 63.0 s: C2ST 0.891 ± 0.024 over 5 folds, 6,581 samples/s (median step); "
                    f"outputs in {tmp_path}")


def test_the_fold_count_is_the_scored_ones(tmp_path):
    row = {"observation": 1, "c2st": 0.891, "c2st_sd_folds": 0.02356, "c2st_scores": [0.9, 0.88]}  # c2st_folds=2
    line = final_line(_metrics(c2st_observations=[row], support_acceptance=0.9080), tmp_path)
    assert line.startswith("done in 63.0 s: C2ST 0.891 ± 0.024 over 2 folds (91% of draws inside the prior kept, ")


def test_several_observations_keep_their_own_label(tmp_path):
    rows = [{"observation": k, "c2st": 0.9, "c2st_sd_folds": 0.01, "c2st_scores": [0.9] * 5} for k in (1, 2, 3)]
    line = final_line(_metrics(c2st_observations=rows, c2st_sd_observations=0.004), tmp_path)
    assert line.startswith("done in 63.0 s: C2ST 0.891 ± 0.004 over 3 observations, ")
    assert "folds" not in line


def test_no_spread_no_label(tmp_path):
    row = {"observation": 1, "c2st": 0.891, "c2st_scores": [0.891]}
    line = final_line(_metrics(c2st_sd_folds=None, c2st_observations=[row]), tmp_path)
    assert line.startswith("done in 63.0 s: C2ST 0.891, 6,581 samples/s")
