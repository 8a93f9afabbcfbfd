"""A sweep over tasks names each task's best job under its table (r79f): C2STs of different tasks do not compare, so
no job is best across them, but a user comparing models across tasks wants each task's best. Was: nothing said
(``best_said`` gave "" for jobs of several tasks)."""

from gensbi_sharding.harness.best_job import best_line, best_per_task
from gensbi_sharding.harness.summary import best_said


def _row(job, data, model, c2st, n=10_000, speed=1000.0, status="ok"):
    scored = [{"observation": 1, "n": n, "c2st_scores": [c2st] * 5}]
    return {"job": job, "metrics": {"status": status, "data": data, "model": model, "c2st": c2st,
                                    "c2st_observations": scored, "samples_per_s": speed}}


def _sweep():  # -m experiment=quick data=two_moons,slcp model=mlp,flux1: Hydra's job order
    return [_row("0", "two_moons", "mlp", 0.61), _row("1", "two_moons", "flux1", 0.55),
            _row("2", "slcp", "mlp", 0.83), _row("3", "slcp", "flux1", 0.91)]


def test_a_sweep_over_two_tasks_and_two_models_names_each_task_s_best():
    assert best_said(_sweep()) == ("best per task (a C2ST compares jobs of one task):\n"
                                   "  two_moons: job 1, C2ST 0.550\n  slcp: job 2, C2ST 0.830\n")


def test_a_task_whose_jobs_were_scored_unalike_names_none_the_others_theirs():
    rows = _sweep()
    rows[3] = _row("3", "slcp", "flux1", 0.7, n=1000)  # fewer samples read lower: not ranked beside 10,000's
    assert best_line(rows) == "best per task (a C2ST compares jobs of one task):\n  two_moons: job 1, C2ST 0.550"


def test_failed_jobs_and_ties_within_a_task_as_in_one_task_sweep():
    rows = _sweep()
    rows[1] = _row("1", "two_moons", "flux1", 0.55, status="error")
    rows[3] = _row("3", "slcp", "flux1", 0.8304, speed=2000.0)
    assert best_line(rows) == ("best per task (a C2ST compares jobs of one task):\n  two_moons: job 0, C2ST 0.610\n"
                               "  slcp: job 2, C2ST 0.830 (job 3 reads the same to 3 decimals; the fastest of them: "
                               "job 3 at 2,000 samples/s)")


def test_one_task_or_no_score_says_what_it_said():
    rows = _sweep()
    assert best_line(rows[:2]) == "best: job 1, C2ST 0.550"
    assert best_per_task({r["job"]: r["metrics"] for r in rows[:2]}) == ""
    unscored = [{"job": r["job"], "metrics": {"status": "ok", "data": r["metrics"]["data"]}} for r in rows]
    assert best_line(unscored) == ""
