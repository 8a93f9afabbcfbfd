"""A sweep's best job is ranked only over C2STs scored alike, and each CSV row says on how many samples it was scored.

Found (USER78): `python launch.py -m experiment=quick eval.num_samples=40,400` trained the same weights twice (best val
loss 1.7339 both) and ended `best: job 0, C2ST 0.938`: the 40-sample job, whose classifier has less data to tell the
posterior from the reference (0.970 on 400), named best; `sample.py <that sweep>` pointed at it too. And
`sweep_summary.csv`, whose rows name what produced their numbers so rows of several sweeps compare, named the folds and
observations of each C2ST but not its sample count.
"""

import csv
import json

from omegaconf import OmegaConf

from gensbi_sharding.harness import best_job
from gensbi_sharding.harness.best_job import best_line, best_note, lowest
from gensbi_sharding.harness.summary import write_summary


def scored(c2st, n, observations=(1,), folds=2):
    """A completed job's record: its C2ST over ``observations``, each on ``n`` samples a side and ``folds`` folds."""
    return {"status": "ok", "data": "two_moons", "c2st": c2st, "best_val_loss": 1.7339, "samples_per_s": 1e4,
            "c2st_observations": [{"observation": k, "c2st": c2st, "c2st_scores": [c2st] * folds, "n": n}
                                  for k in observations]}


def write_job(sweep, job, override, record):
    (sweep / str(job) / ".hydra").mkdir(parents=True)
    OmegaConf.save(OmegaConf.create(["experiment=quick", override]), sweep / str(job) / ".hydra" / "overrides.yaml")
    (sweep / str(job) / "metrics.json").write_text(json.dumps(
        {"config": {"dry_run": False}, "mesh_shape": [8, 1], "wall_s": 3.0, **record}))
    (sweep / str(job) / "checkpoints" / "20").mkdir(parents=True)


def test_c2sts_of_other_sample_counts_observations_or_folds_name_no_best_job():
    """Before: ("C2ST", 0.938, [0]) for the first case, the lower-sample job named best."""
    for other in (scored(0.970, 400), scored(0.970, 40, observations=(2,)), scored(0.970, 40, folds=5)):
        assert lowest({0: scored(0.938, 40), 1: other}) is None
        assert best_line([{"job": 0, "metrics": scored(0.938, 40)}, {"job": 1, "metrics": other}]) == ""


def test_c2sts_scored_alike_still_name_the_best_job():
    assert lowest({0: scored(0.950, 100), 1: scored(0.945, 100)}) == ("C2ST", 0.945, [1])
    assert best_job.c2st_measure(scored(0.9, 100, observations=(1, 2))) == ((1, 100, 2), (2, 100, 2))
    assert best_job.c2st_measure({"c2st": 0.9}) == ()  # recorded before the per-observation rows: compared as before


def test_sample_py_of_such_a_sweep_names_no_job_as_the_best(tmp_path):
    """Before: "the lowest C2ST, 0.938: <sweep>/0 (jobs with a checkpoint: 0, 1)"."""
    write_job(tmp_path, 0, "eval.num_samples=40", scored(0.938, 40))
    write_job(tmp_path, 1, "eval.num_samples=400", scored(0.970, 400))
    assert best_note([tmp_path / "0", tmp_path / "1"]) == f"e.g. {tmp_path / '0'} (jobs with a checkpoint: 0, 1)"


def test_the_csv_names_each_c2sts_samples(tmp_path):
    """Before: no c2st_samples column (KeyError)."""
    write_job(tmp_path, 0, "eval.num_samples=40", scored(0.938, 40))
    write_job(tmp_path, 1, "eval.num_samples=400", scored(0.970, 400, observations=(1, 2)))
    write_job(tmp_path, 2, "eval.num_samples=0", {"status": "ok", "c2st": None})
    summary = write_summary(tmp_path, declared=["eval.num_samples"])
    with open(summary.csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [row["c2st_samples"] for row in rows] == ["40", "400", ""]
    assert "c2st_samples" not in summary.md_path.read_text()  # the printed table stays as it was


def test_the_csv_names_each_rows_rule_where_the_sweep_did_not_vary_it(tmp_path):
    """Found with the above: `-m model=mlp,transformer data=...` rows held params/device, optimizer/device and
    collectives with no word of the rule that split them (mesh_shape only): beside another sweep's rows under
    rule=fsdp they read as alike. Before: no rule column (KeyError). A sweep over rule keeps its one rule column."""
    for job, (model, rule) in enumerate((("mlp", "replicated"), ("transformer", "fsdp+overrides"))):
        write_job(tmp_path, job, f"model={model}", {**scored(0.9, 40), "rule": rule})
    summary = write_summary(tmp_path, declared=["model"])
    with open(summary.csv_path, newline="") as f:
        assert [row["rule"] for row in csv.DictReader(f)] == ["replicated", "fsdp+overrides"]
    for job in (0, 1):
        (tmp_path / str(job) / ".hydra" / "overrides.yaml").write_text(f"- rule={('fsdp', 'tensor')[job]}\n")
    summary = write_summary(tmp_path, declared=["rule"])
    with open(summary.csv_path, newline="") as f:
        header = next(csv.reader(f))
    assert header.count("rule") == 1 and header[1] == "rule"
