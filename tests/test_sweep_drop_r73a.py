"""``sweep_drop.dropped_sweep``: the sweep a refused multirun can run instead, its refused values dropped.

``-m mesh.model_axis=2,3`` on 8 devices is refused with "set mesh.model_axis=2", which typed into the sweep runs the
same job twice (found trying the harness as a new user, session 73; for sweep_check.refused_jobs_message).
"""

from gensbi_sharding.harness.sweep_drop import dropped_sweep

STEPS = "train.steps=20"


def _jobs(*combos):
    return [[*combo, STEPS] for combo in combos]


def test_a_value_all_of_whose_jobs_are_refused_is_dropped():
    jobs = _jobs(["mesh.model_axis=2"], ["mesh.model_axis=3"])
    assert dropped_sweep([(1, jobs[1], "refused")], jobs) == (
        "or drop the values refused from the sweep: mesh.model_axis=2 (was mesh.model_axis=2,3)")


def test_two_keys_a_bad_value_of_one_drops_its_jobs_whatever_the_other():
    jobs = _jobs(*([f"rule={r}", f"mesh.model_axis={a}"] for a in (3, 1, 2) for r in ("tensor", "fsdp")))
    refused = [(n, jobs[n], "refused") for n in (0, 1)]  # model_axis=3, both rules
    assert dropped_sweep(refused, jobs) == (
        "or drop the values refused from the sweep: mesh.model_axis=1,2 (was mesh.model_axis=3,1,2)")


def test_a_refused_combination_of_values_that_run_elsewhere_offers_nothing():
    jobs = _jobs(*([f"rule={r}", f"mesh.model_axis={a}"] for a in (1, 4) for r in ("fsdp", "tensor")))
    assert dropped_sweep([(3, jobs[3], "refused")], jobs) == ""  # rule=tensor and model_axis=4 each run elsewhere


def test_every_job_refused_offers_nothing():
    jobs = _jobs(["seed=0"], ["seed=1"])
    assert dropped_sweep([(0, jobs[0], "x"), (1, jobs[1], "x")], jobs) == ""
