"""A sweep's job folder named by ``hydra.sweep.subdir`` rather than by its number (``benchmarks/sbibm.py``'s kind:
``hydra.sweep.subdir=job``) that never ran is named as a folder, not as "job job of the sweep" (round 67's
walkthrough of the fresh-start line)."""

from test_fresh_start_r67u import _said, _sweep_job


def test_a_job_folder_not_named_by_a_number_is_named_as_a_folder(tmp_path, caplog):
    job = _sweep_job(tmp_path, "job")
    assert _said(job, caplog) == "train.resume=auto: the sweep's job in job/ has not run before: starting it fresh"
    assert _said(_sweep_job(tmp_path, "3"), caplog) == (
        "train.resume=auto: job 3 of the sweep has not run before: starting it fresh")  # a number: as before
