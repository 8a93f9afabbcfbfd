"""The sweep table's C2ST cell says what its ± is a spread over, as the run's final line does.

Was: one observation's cell read ``0.891 ± 0.024`` (the sd of the classifier's 5 fold accuracies, not an uncertainty
of the posterior's score: another C2ST seed moves it by as much), next to a several-observation row's
``0.909 ± 0.024 over 3 obs.``; the CSV held ``c2st_sd_folds`` with no count of the folds it is over.
"""

import csv
import json

import pytest
from omegaconf import OmegaConf

from gensbi_sharding.harness.summary import write_summary
from gensbi_sharding.harness.summary_columns import TRAIN_COLUMNS, c2st_cell, c2st_folds

SCORES = [0.895, 0.91, 0.9, 0.9, 0.85]  # BREAK75's tiny run: C2ST 0.891, fold sd 0.0235


def _one(scores=SCORES, **extra):
    return {"status": "ok", "c2st": 0.891, "c2st_sd_folds": 0.02356,
            "c2st_observations": [{"observation": 1, "c2st": 0.891, "c2st_scores": scores}], **extra}


def test_one_observations_cell_names_the_folds_its_spread_is_over():
    assert c2st_cell(_one()) == "0.891 ± 0.024 over 5 folds"
    assert c2st_cell(_one(scores=[0.9, 0.882])) == "0.891 ± 0.024 over 2 folds"  # eval.c2st_folds=2: counted
    # No fold scores in the record: the job's eval.c2st_folds says how many
    assert c2st_cell({"c2st": 0.6, "c2st_sd_folds": 0.01, "config": {"eval": {"c2st_folds": 3}}}) == \
        "0.600 ± 0.010 over 3 folds"


def test_the_other_cells_are_as_before():
    several = {"c2st": 0.909, "c2st_sd_folds": 0.026, "c2st_sd_observations": 0.0243,
               "c2st_observations": [{"observation": k, "c2st_scores": SCORES} for k in (1, 2, 3)]}
    assert c2st_cell(several) == "0.909 ± 0.024 over 3 obs."  # over observations, not folds
    assert c2st_cell({"c2st": 0.891, "c2st_observations": [{"observation": 1, "c2st_scores": SCORES}]}) == "0.891"
    assert c2st_cell({"c2st": 0.891, "c2st_sd_folds": 0.02356}) == "0.891 ± 0.024"  # no count known: none made up
    assert c2st_cell({"c2st": None, "config": {"eval": {"c2st_folds": 5}}}) == ""
    assert c2st_folds({"c2st": None, "config": {"eval": {"c2st_folds": 5}}}) is None  # eval.enabled=false


def test_the_csv_has_the_fold_count_beside_the_sd():
    column = next(c for c in TRAIN_COLUMNS if c.name == "c2st_folds")
    assert (column.title, column.exact(_one()), column.exact({"c2st": None})) == ("", "5", "")  # CSV only
    names = [c.name for c in TRAIN_COLUMNS]
    assert names.index("c2st_folds") == names.index("c2st_sd_folds") + 1  # beside the sd it counts


@pytest.mark.slow  # draws the sweep's PNG too (~1.4 s on 2 cores)
def test_the_table_and_the_csv_say_the_fold_count(tmp_path):
    for job, metrics in enumerate((_one(), {"status": "ok", "c2st": None, "config": {"eval": {"c2st_folds": 5}}})):
        folder = tmp_path / str(job)
        (folder / ".hydra").mkdir(parents=True)
        OmegaConf.save(OmegaConf.create([f"seed={job}"]), folder / ".hydra" / "overrides.yaml")
        (folder / "metrics.json").write_text(json.dumps({"config": {"dry_run": False}, "mesh_shape": [8, 1],
                                                         "wall_s": 63.0, **metrics}))
    summary = write_summary(tmp_path, declared=["seed"])
    lines = summary.md_path.read_text().splitlines()
    at = [cell.strip() for cell in lines[0].split("|")].index("C2ST")
    assert [[cell.strip() for cell in line.split("|")][at] for line in lines[2:]] == ["0.891 ± 0.024 over 5 folds", ""]
    with open(summary.csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["c2st_sd_folds"], r["c2st_folds"]) for r in rows] == [("0.0236", "5"), ("", "")]
