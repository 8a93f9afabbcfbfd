"""The legend under a sweep's table names the batch sizes of the jobs that measured a step only."""

import json

import pytest

from gensbi_sharding.harness.summary import write_summary


@pytest.mark.slow  # write_summary draws the sweep's plot
def test_a_failed_jobs_batch_is_not_named_among_the_measured(tmp_path):
    # Was: "(global batch 256, 512, data.batch_size)", 512 being the batch of a job refused before it timed a step
    for job, (rule, status, batch) in enumerate((("fsdp", "ok", 256), ("tensor", "error", 512))):
        folder = tmp_path / str(job)
        (folder / ".hydra").mkdir(parents=True)
        (folder / ".hydra" / "overrides.yaml").write_text(f"- rule={rule}\n")
        (folder / "metrics.json").write_text(json.dumps({
            "status": status, "rule": rule, "error": "ConfigError: refused", "median_step_s": 0.02 if status == "ok" else None,
            "config": {"data": {"batch_size": batch}, "dry_run": False}}))
    legend = write_summary(tmp_path, ["rule"]).legend
    assert "(global batch 256, data.batch_size)" in legend, legend
