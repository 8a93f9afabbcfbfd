"""The hint a refused sweep folder prints (harness/sweep_hints.py): never to run one sweep's jobs in another's folder.

Was: ``-m experiment=quick train.steps=2,3,4 hydra.sweep.dir=<a finished sweep of rule=fsdp,fsdp_tensor>`` was
refused (good), then advised "continue its unfinished job (1 never started) one by one: python launch.py
experiment=quick train.steps=4 train.resume=auto hydra.mode=RUN hydra.run.dir=<that sweep>/2": a job of the new sweep
written into the old sweep's folder, numbered as its third job, its summary mixing both.
"""

import pytest

from gensbi_sharding.harness.sweep_hints import unfinished_jobs_hint


def finished_sweep(root, jobs):
    for number, overrides in enumerate(jobs):
        (root / str(number) / ".hydra").mkdir(parents=True)
        (root / str(number) / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
        (root / str(number) / "metrics.json").write_text('{"status": "ok"}')
    return [root / str(number) for number in range(len(jobs))]


@pytest.mark.parametrize("ran, job0", [
    ([["rule=fsdp", "mesh.model_axis=8"], ["rule=fsdp_tensor", "mesh.model_axis=8"]], "train.steps unset"),
    ([["train.steps=5"], ["train.steps=6"]], "train.steps=5"),
])
def test_a_folder_of_another_sweep_is_named_and_never_offered_for_this_sweeps_jobs(tmp_path, ran, job0):
    runs = finished_sweep(tmp_path, ran)
    hint = unfinished_jobs_hint(runs, ("preempted",), [["train.steps=2"], ["train.steps=3"], ["train.steps=4"]],
                                sweep_dir=tmp_path)
    assert hint == (f"; {tmp_path} holds another sweep (its job 0, {tmp_path / '0'}, ran {job0}; this sweep's job 0 "
                    "is train.steps=2): run this sweep in another hydra.sweep.dir")


def test_the_same_sweep_grown_still_gets_its_never_started_job(tmp_path):
    runs = finished_sweep(tmp_path, [["train.steps=2"], ["train.steps=3"]])
    hint = unfinished_jobs_hint(runs, ("preempted",), [["train.steps=2"], ["train.steps=3"], ["train.steps=4"]],
                                sweep_dir=tmp_path)
    assert hint.endswith(f"(1 never started) one by one: python launch.py train.steps=4 train.resume=auto "
                         f"hydra.mode=RUN hydra.run.dir={tmp_path / '2'}")


@pytest.mark.parametrize("typed", ['data="two_moons"', "data='two_moons'"])
def test_a_quoted_value_is_the_same_job_as_the_bare_one(tmp_path, typed):
    # Was: `-m data=two_moons,slcp train.resume=auto` after `-m 'data="two_moons",slcp'` was refused ("job 0 of this
    # sweep (data=two_moons) would continue folder .../0, which ran data="two_moons""): the same task, quoted.
    from gensbi_sharding.harness.sweep_hints import moved_jobs_problem
    from gensbi_sharding.harness.sweep_plan import job_configuration

    finished_sweep(tmp_path, [[typed], ["data=slcp"]])
    assert job_configuration([typed]) == job_configuration(["data=two_moons"]) == {"data": "two_moons"}
    assert moved_jobs_problem(tmp_path, [["data=two_moons"], ["data=slcp"]]) is None
    assert "ran data=two_moons" in moved_jobs_problem(tmp_path, [["data=slcp"], ["data=two_moons"]])
