"""Round 44's faults, found by trying the harness as users do: a job continuing another run (``train.resume=<run>``).

``python launch.py train.resume=<run> train.steps=8000`` trains that run further in a new folder, and
``-m train.resume=<run a>,<run b> ...`` does it for several. Each test names what was typed, what happened, and
checks what happens now.
"""

import csv
import json

from omegaconf import OmegaConf

from gensbi_sharding.harness.summary import write_summary


def test_a_sweeps_summary_says_which_run_each_job_continued(tmp_path):
    # Was: `-m train.resume=<run a>,<run b> train.steps=3000` wrote a table with no train.resume column (how a job
    # ran was never a swept key): two rows alike but for their numbers, which run each continued said nowhere.
    jobs = [["train.steps=3000", "train.resume=/runs/a"], ["train.steps=3000", "train.resume=/runs/b"],
            ["train.steps=3000", "train.resume=/runs/c"]]
    for number, recorded in enumerate([["train.steps=3000", "train.resume=auto"], jobs[1]]):  # job 0 continued alone
        (tmp_path / str(number) / ".hydra").mkdir(parents=True)
        OmegaConf.save(OmegaConf.create(recorded), tmp_path / str(number) / ".hydra" / "overrides.yaml")
        (tmp_path / str(number) / "metrics.json").write_text(json.dumps({"config": {"dry_run": False},
                                                                          "status": "ok", "c2st": 0.6 + number / 10}))
    summary = write_summary(tmp_path, ["train.resume"], all_jobs=jobs)
    assert summary.keys == ["train.resume"]
    rows = list(csv.DictReader((tmp_path / "sweep_summary.csv").open()))
    assert [(r["job"], r["train.resume"], r["status"]) for r in rows] == [
        ("0", "/runs/a", "ok"), ("1", "/runs/b", "ok"), ("2", "/runs/c", "not run")]
    assert "| train.resume |" in summary.text and "/runs/b" in summary.text
    # Not declared (a job continued alone records train.resume=auto): still no column.
    assert write_summary(tmp_path, [], all_jobs=[j[:1] for j in jobs]).keys == []
