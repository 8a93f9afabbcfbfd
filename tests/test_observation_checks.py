"""The observations a run scores (``eval.observations``, ``data.num_observation``, ``eval.num_samples``) checked
before training: each refusal names the observation and the fix.
"""

import sys

import numpy as np
import pytest

from faults_helpers import assert_refused_before_training, hint, patch_task, run_tiny


def test_log_of_a_non_positive_observation_is_refused_before_training(tmp_path, devices):
    # two_moons' observation 1 holds a negative value: its log is NaN, so every posterior sample
    # was NaN, and the run failed after training with "fix the sampler".
    metrics = run_tiny(tmp_path / "a", "data.x_transform=log")
    assert_refused_before_training(metrics, tmp_path / "a", "data.x_transform=log needs positive data",
                                   "observation 1 of task 'two_moons'", "set data.x_transform=none")
    assert hint(metrics["error"], "data.x_transform") == "none"


def test_every_scored_observation_is_checked_before_training(monkeypatch, tmp_path, devices):
    patch_task(monkeypatch, {}, observation={2: [np.nan, 0.1]})
    metrics = run_tiny(tmp_path / "a", "eval.enabled=true", "eval.observations=[1,2]")
    assert_refused_before_training(metrics, tmp_path / "a", "observation 2 of task 'two_moons' holds "
                                   "non-finite values [nan, 0.1", "eval.observations")


def test_more_samples_than_the_reference_is_refused_before_training(tmp_path, devices):
    # C2ST compares as many rows of each: 20,000 samples were drawn and 10,000 silently scored. run(cfg) from Python:
    # the fix as the setting it sets (WORDS77B; was launch.py's "set eval.num_samples=10000").
    metrics = run_tiny(tmp_path / "a", "eval.enabled=true", "eval.num_samples=10001")
    assert_refused_before_training(metrics, tmp_path / "a", "eval.num_samples=10001 exceeds the 10000 "
                                   "reference posterior samples", "set cfg.eval.num_samples=10000")


def test_an_observation_beyond_the_task_is_refused_naming_the_range():
    # Was: accepted by validation, then a late error at the data step naming keys but no value.
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.config_checks import validate

    with pytest.raises(ConfigError) as err:
        validate(compose_tiny("data.num_observation=11"))
    assert str(err.value) == ("data.num_observation=11 is out of range: sbibm task 'two_moons' has observations "
                              "1..10; set data.num_observation=1 (or another of 1..10)")
    validate(compose_tiny("data.num_observation=10"))


@pytest.mark.slow  # an end-to-end run (resume, a stop, or processes)
def test_eval_observations_winning_over_num_observation_is_said_in_one_line(tmp_path, devices, caplog):
    # Was: eval.observations=[2] data.num_observation=3 scored only 2 without a word.
    import logging

    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.config_checks import scored_observations

    assert scored_observations(compose_tiny("eval.observations=[2,3]", "data.num_observation=3")) == ([2, 3], None)
    assert scored_observations(compose_tiny("data.num_observation=3")) == ([3], None)
    note = ("eval.observations=[2] is scored, not data.num_observation=3: eval.observations, when set, lists every "
            "observation scored (add 3 to it, or set eval.observations=null to score data.num_observation)")
    assert scored_observations(compose_tiny("eval.observations=[2]", "data.num_observation=3")) == ([2], note)
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        metrics = run_tiny(tmp_path / "run", "eval.enabled=true", "eval.observations=[2]", "data.num_observation=3",
                           "eval.num_samples=200", "eval.c2st_folds=2", "eval.ode_steps=2", "eval.plot=false")
    assert metrics["status"] == "ok" and [row["observation"] for row in metrics["c2st_observations"]] == [2]
    assert [r.getMessage() for r in caplog.records].count(note) == 1


def test_more_samples_than_the_reference_is_refused_by_the_config_checks():
    # Was: accepted by the config checks, then refused at step [3/7] inside the run's folder (a half-made run).
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.config_checks import validate

    with pytest.raises(ConfigError) as err:
        validate(compose_tiny("eval.enabled=true", "eval.num_samples=20000"))
    assert str(err.value) == ("eval.num_samples=20000 exceeds the 10000 reference posterior samples of task "
                              "'two_moons' (per observation) that C2ST compares them with, row for row; set "
                              "eval.num_samples=10000")
    assert hint(str(err.value), "eval.num_samples") == "10000"
    validate(compose_tiny("eval.enabled=true", "eval.num_samples=10000"))
    validate(compose_tiny("eval.enabled=false", "eval.num_samples=20000"))  # nothing scored: nothing drawn


@pytest.mark.slow  # loads every task's reference samples (80 files)
def test_the_reference_sample_count_the_config_checks_assume_is_every_tasks():
    from gensbi_sharding.harness.tasks import NUM_OBSERVATIONS, REFERENCE_SAMPLES, TASKS, get_task, reference_samples

    rows = {(name, k): len(reference_samples(get_task(name), k)) for name in TASKS
            for k in range(1, NUM_OBSERVATIONS + 1)}
    assert set(rows.values()) == {REFERENCE_SAMPLES}, rows


@pytest.mark.slow
def test_the_observation_files_the_config_checks_read_are_those_sbibm_jaxs_tasks_read():
    # log_observation_problem refuses data.x_transform=log before any folder is made, reading the package's files
    # without loading a task (sbibm_jax's tasks start JAX's backend): each file must hold what the task returns.
    from gensbi_sharding.harness.tasks import NUM_OBSERVATIONS, TASKS, get_task, observation, observation_file

    for name in TASKS:
        task = get_task(name)
        for k in range(1, NUM_OBSERVATIONS + 1):
            read = np.loadtxt(observation_file(name, k), delimiter=",", skiprows=1, dtype=np.float32, ndmin=1)
            np.testing.assert_array_equal(read, observation(task, k), err_msg=f"{name} {k}")


def test_the_log_check_reads_the_installed_packages_observations(tmp_path, monkeypatch):
    # Was: a table of the observations log could condition on (two_moons 7, 8, ...), which refused a run whose
    # installed sbibm_jax holds other observations: here two_moons' observation 1 is positive, slcp's 3 holds a 0.
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.job_check import job_problem

    for name, k, values in (("two_moons", 1, "0.5,0.25"), ("slcp", 3, "1.0,0.0")):
        folder = tmp_path / "sbibm_jax" / "tasks" / name / "files" / f"num_observation_{k}"
        folder.mkdir(parents=True)
        (folder / "observation.csv").write_text(f"data_1,data_2\n{values}\n")
    (tmp_path / "sbibm_jax" / "__init__.py").write_text("")
    monkeypatch.delitem(sys.modules, "sbibm_jax", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert job_problem(compose_tiny("data.x_transform=log")) is None
    assert job_problem(compose_tiny("data.x_transform=log", "data=slcp", "data.num_observation=3")) == (
        "ConfigError: data.x_transform=log needs positive data, but observation 3 of task 'slcp' holds 0: "
        "the posterior cannot be conditioned on its log; set data.x_transform=none (log suits positive data spanning "
        "decades, as data=lotka_volterra's)")
    # An observation the package holds no file of is the run's to check (it loads the task): no refusal here
    assert job_problem(compose_tiny("data.x_transform=log", "data=slcp", "data.num_observation=4")) is None


@pytest.mark.parametrize("overrides, refused", [
    # data.num_observation=1, read by the data step though nothing is scored
    (["data.x_transform=log"], (1, -0.639671, "data.num_observation=7")),
    (["data.x_transform=log", "data.num_observation=7"], None),
    (["data.x_transform=log", "data.num_observation=7", "eval.enabled=true", "eval.observations=[7,8]"], None),
    (["data.x_transform=log", "data.num_observation=7", "eval.enabled=true", "eval.observations=[7,1]"],
     (1, -0.639671, "eval.observations=[7]")),
    (["data.x_transform=log", "data.num_observation=9", "eval.enabled=true", "eval.observations=[7]"],
     (9, -0.545246, "data.num_observation=7")),
    (["data.x_transform=log", "eval.enabled=true", "eval.observations=[1,2]"],
     (1, -0.639671, "data.num_observation=7 eval.observations=[7,8]")),
    # data.num_observation one of those kept (was: =7 beside eval.observations=[8], which scores 8 alone: a note)
    (["data.x_transform=log", "eval.enabled=true", "eval.observations=[1,8]"],
     (1, -0.639671, "data.num_observation=8 eval.observations=[8]")),
    (["data.x_transform=log", "dry_run=true"], None),  # a dry run reads no observation
    (["data.x_transform=log", "data=slcp", "data.num_observation=3"], (3, -5.71116, None)),  # none positive
    (["data.x_transform=log", "data=lotka_volterra", "eval.enabled=true", "eval.observations=[1,10]"], None),
])
@pytest.mark.fast_cases(2)
def test_log_of_a_non_positive_observation_is_refused_by_the_check_before_any_folder(overrides, refused):
    # Was: left to the run (usable_observation, once the task was loaded), which refused it inside the folder Hydra
    # had made (.hydra/, .run.lock, launch.log, error.txt, metrics.json); a sweep ran its earlier jobs first.
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.config_checks import scored_observations
    from gensbi_sharding.harness.job_check import job_problem

    cfg = compose_tiny(*overrides)
    problem = job_problem(cfg)
    if refused is None:
        assert problem is None, problem
        return
    k, held, fix = refused  # was: "holds values <= 0", and data.x_transform=none the one fix
    assert problem == (
        f"ConfigError: data.x_transform=log needs positive data, but observation {k} of task "
        f"{cfg.data.name!r} holds {held:g}: the posterior cannot be conditioned on its log; set "
        "data.x_transform=none (log suits positive data spanning decades, as data=lotka_volterra's)" + (
            f", or keep it and read only observations of positive data (two_moons's 7, 8): {fix}" if fix else "")
    ), problem
    if fix:  # the second fix followed, the check passes
        assert job_problem(compose_tiny(*overrides, *fix.split())) is None
        # and the run scores data.num_observation, saying no "eval.observations=[8] is scored, not ..." note
        assert scored_observations(compose_tiny(*overrides, *fix.split()))[1] is None


@pytest.mark.parametrize("overrides", [
    [],  # data.num_observation=1, the data step's (nothing scored)
    ["eval.enabled=true", "eval.observations=[1,8]"],
    ["data.num_observation=9", "eval.enabled=true", "eval.observations=[8]"],  # the data step's, beside [8] scored
    ["data=slcp", "data.num_observation=3"],  # no observation of positive data: data.x_transform=none alone
])
def test_the_runs_own_log_check_says_what_the_check_before_any_folder_says(overrides):
    # Was: the run's check, once the task is loaded (a run from Python, or a file the check before any folder could
    # not read), offered only data.x_transform=none, not the observations a log can read.
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.config_checks import scored_observations
    from gensbi_sharding.harness.job_check import job_problem
    from gensbi_sharding.harness.tasks import check_evaluation, get_task, usable_observation

    cfg = compose_tiny("data.x_transform=log", *overrides)
    with pytest.raises(ValueError) as refused:
        if cfg.eval.enabled:  # as run() checks before training, then its data step (load_task)
            check_evaluation(cfg.data, cfg.eval, scored_observations(cfg)[0])
        usable_observation(get_task(cfg.data.name), cfg.data.num_observation, "log")
    assert f"ConfigError: {refused.value}" == job_problem(cfg)
    assert ("read only observations of positive data" in str(refused.value)) == (cfg.data.name == "two_moons")
