"""A refused rerun of a sweep lists its completed jobs by number: "0, 1, 2, 3, 4, ... (7 more)", not as strings.

Was "11 of its 12 jobs complete (0, 1, 10, 2, 3, ... (6 more))": the same sweep typed again in its folder, the
folders sorted as strings (found trying the harness as a new user, session 73; sample.py's and train.resume's lists
were fixed earlier, this one was not).
"""

import json

from gensbi_sharding.harness.console_lines import completed_jobs_lead


def test_completed_jobs_are_listed_by_number(tmp_path):
    jobs = []
    for k in range(12):
        (tmp_path / str(k)).mkdir()
        (tmp_path / str(k) / "metrics.json").write_text(json.dumps({"status": "ok" if k != 11 else "error"}))
        jobs.append(tmp_path / str(k))
    lead = completed_jobs_lead(tmp_path, sorted(jobs), jobs=12)  # sorted as paths: 0, 1, 10, 11, 2, ...
    assert lead == f"hydra.sweep.dir={tmp_path}: 11 of its 12 jobs complete (0, 1, 2, 3, 4, ... (6 more)); "


def test_job_number_key_orders_numbers_then_names():
    from gensbi_sharding.harness.runs_below import job_number_key

    names = ["10_fsdp", "b", "2", "1_fsdp", "10", "a", "1"]
    assert sorted(names, key=job_number_key) == ["1", "1_fsdp", "2", "10", "10_fsdp", "a", "b"]
