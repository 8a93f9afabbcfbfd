"""A training sweep's printed table is followed by its best job (``summary.best_said``), which the table alone never
said; a sweep over tasks, or one no job of which scored, says nothing there."""

from gensbi_sharding.harness.summary import best_said


def _row(job, **metrics):
    return {"job": job, "metrics": {"status": "ok", "data": "two_moons", **metrics}}


def test_the_best_job_is_said_under_the_table_with_the_fastest_of_those_tied():
    rows = [_row("0", c2st=0.9804, samples_per_s=900.0), _row("1", c2st=0.9521, samples_per_s=3058.4),
            _row("2", c2st=0.9518, samples_per_s=4565.8), _row("3", status="error", c2st=0.5)]
    assert best_said(rows) == ("best: job 2, C2ST 0.952 (job 1 reads the same to 3 decimals; the fastest of them: "
                               "job 2 at 4,566 samples/s)\n")  # the lowest unrounded first
    assert best_said(rows[:1]) == "best: job 0, C2ST 0.980\n"


def test_no_best_job_over_tasks_nor_without_a_score():
    # a sweep over tasks: no best across them, each task's own best (r79f; was "": tests/test_best_per_task_r79f.py)
    assert best_said([_row("0", c2st=0.9), {"job": "1", "metrics": {"status": "ok", "data": "slcp", "c2st": 0.8}}]) == (
        "best per task (a C2ST compares jobs of one task):\n  two_moons: job 0, C2ST 0.900\n  slcp: job 1, C2ST 0.800\n")
    assert best_said([_row("0"), _row("1")]) == ""
    assert best_said([_row("0", best_val_loss=1.23456), _row("1", best_val_loss=2.0)]) == "best: job 0, best val loss 1.2346\n"
