"""A completed run's refusal names the step its newest checkpoint holds, not ``final_step`` of its metrics.json.

Was: for a run whose final step folder (20) had been deleted (disk space; ``train.keep`` lowered by hand), "to
train it further from its final checkpoint (step 20) ...: train.steps=<more than 20>", though the command resumes
from step 15 and train.steps=20 would do.
"""

from __future__ import annotations

import pytest

from gensbi_sharding.harness.outputs import write_json
from gensbi_sharding.harness.run_folder import ensure_fresh


def _passing_command(printed: str):
    """The overrides of a printed ``python launch.py ...`` command, which the launch checks must pass, and the config
    they compose."""
    import shlex

    from faults_helpers import under_command
    from gensbi_sharding.harness.command_checks import command_problem

    args = shlex.split(printed)[2:]
    assert command_problem(args) is None
    return args, under_command(args, lambda cfg: cfg)


def test_the_train_further_hint_names_the_newest_step_folder(tmp_path):
    run = tmp_path / "run"
    for step in (10, 15):
        (run / "checkpoints" / str(step)).mkdir(parents=True)
    (run / "checkpoints" / "20.orbax-checkpoint-tmp-1").mkdir()  # a save cut short: no step
    write_json(run / "metrics.json", {"status": "ok", "final_step": 20})
    with pytest.raises(FileExistsError) as err:
        ensure_fresh(run, resume_auto=True, steps=20)
    assert str(err.value).endswith(
        f"; to train it further from its final checkpoint (step 15) into a new folder: the same command with "
        f"train.steps=20 train.resume={run} hydra.run.dir={run}-steps20")


def _early_stopped_failure(tmp_path):
    """``(folder, outside, error)``: a run early stopping ended at step 300 of ``train.steps=1000`` (patience 3, cosine),
    whose posterior draws then all fell outside the prior (``outside``, the evaluation's SamplingError): the error its evaluation ends with."""
    from omegaconf import OmegaConf

    from faults_helpers import under_command
    from gensbi_sharding.harness.stop_record import failure_error
    from gensbi_sharding.harness.weights_failure import SamplingError

    out = tmp_path / "run"
    (out / "checkpoints" / "300").mkdir(parents=True)
    (out / ".hydra").mkdir()
    OmegaConf.save({"train": {"steps": 1000, "learning_rate": 1e-3, "schedule": "cosine", "warmup_steps": 0,
                              "patience": 3}}, out / ".hydra" / "config.yaml")
    outside = SamplingError("only 0.00% of 12800 posterior draws lie inside the prior's support", outside=True)
    command = ("experiment=quick", "train.steps=1000", "train.patience=3", f"hydra.run.dir={out}")
    error = under_command(command, lambda cfg: failure_error(out, [], outside))
    return out, outside, error


@pytest.mark.slow
def test_training_an_early_stopped_runs_weights_further_prints_every_override_it_needs(tmp_path):
    # Was: "... train.steps=2000 train.resume=auto hydra.run.dir=...; ... early stopping (train.patience=3) ends it
    # again at a validation without a new best: add train.patience=0 to train every step": the command as printed
    # stopped again. Now it sets train.patience=0 itself, and runs as printed: the command checks pass it, and it
    # composes those settings.
    import re
    import shlex

    from faults_helpers import under_command
    from gensbi_sharding.harness.command_checks import command_problem
    from gensbi_sharding.harness.stop_record import failure_error
    from gensbi_sharding.harness.job_check import job_problem

    out, outside, error = _early_stopped_failure(tmp_path)
    printed = re.search(r"further in this folder with: (python launch\.py .*?) \(twice", error)[1]
    assert printed == (f"python launch.py experiment=quick train.steps=2000 train.patience=0 train.resume=auto "
                       f"hydra.run.dir={out}"), error
    assert "train.patience=0: early stopping (train.patience=3) would end it again" in error
    args, cfg = _passing_command(printed)
    assert (cfg.train.steps, cfg.train.patience, cfg.train.resume) == (2000, 0, "auto")
    assert job_problem(cfg) is None
    # From Python: the same settings of cfg
    assert "run(cfg) with cfg.train.steps=2000, cfg.train.patience=0, cfg.train.resume='auto' and " in \
        failure_error(out, [], outside)


def test_training_an_early_stopped_completed_run_further_sets_train_patience_0(tmp_path):
    # Was: "... train.steps=1000 train.resume=<run> hydra.run.dir=<run>-steps1000": resumed at step 300 with the run's
    # own train.patience=3, the new run stopped again at a validation without a new best. Runs as printed.
    import shlex

    from faults_helpers import under_command
    from gensbi_sharding.harness.command_checks import command_problem

    run = tmp_path / "run"
    (run / "checkpoints" / "300").mkdir(parents=True)
    write_json(run / "metrics.json", {"status": "ok", "final_step": 300, "stopped_early": True})
    typed = ["experiment=quick", "train.steps=1000", "train.patience=3"]
    with pytest.raises(FileExistsError) as err:
        ensure_fresh(run, resume_auto=True, steps=1000, overrides=typed)
    printed = str(err.value).split("into a new folder: ")[1]
    assert printed == (f"python launch.py experiment=quick train.steps=1000 train.patience=0 train.resume={run} "
                       f"hydra.run.dir={run}-steps1000")
    args, cfg = _passing_command(printed)
    assert (cfg.train.steps, cfg.train.patience, cfg.train.resume) == (1000, 0, str(run))
    # a run that trained every step it asked for keeps its patience
    write_json(run / "metrics.json", {"status": "ok", "final_step": 300, "stopped_early": False})
    with pytest.raises(FileExistsError) as err:
        ensure_fresh(run, resume_auto=True, steps=300, overrides=typed)
    assert "experiment=quick train.patience=3 train.steps=600 train.resume=" in str(err.value)


def test_train_further_names_more_steps_than_an_early_stopped_run_asked_for_and_what_the_schedule_does(tmp_path):
    # Was: train.steps twice the checkpoint's step, 600 for a run early stopping ended at step 300 of train.steps=1000:
    # fewer steps than the run asked for, and the jump of its cosine learning rate at the resume step unsaid.
    import math
    import re

    out, outside, error = _early_stopped_failure(tmp_path)
    further = re.search(r"further in this folder with: (.*?); or train afresh", error)[1]
    assert further.startswith("python launch.py experiment=quick train.steps=2000 train.patience=0 train.resume=auto "
                              f"hydra.run.dir={out} (twice the train.steps=1000 it was launched with: it stopped "
                              "early at step 300)")
    old, new = (1e-3 * (1 + math.cos(math.pi * 300 / steps)) / 2 for steps in (1000, 2000))
    assert f"its cosine schedule is redrawn to end at step 2000: the learning rate at step 300 goes from {old:.3g} " \
           f"to {new:.3g}, then decays to 0" in further
    assert further.endswith("; train.patience=0: early stopping (train.patience=3) would end it again at a validation "
                            "without a new best")


@pytest.mark.slow
def test_train_further_carries_the_saved_runs_settings_not_the_refused_commands(tmp_path):
    # Was: 'launch.py experiment=quick seed=1 hydra.run.dir=<sweep>/0' (job 0 of a seed=0 sweep) was told "to train it
    # further ...: python launch.py experiment=quick seed=1 train.steps=40 train.resume=<sweep>/0 ...": pasted, it
    # resumed the seed-0 weights on seed 1's held-out pairs and draws (early stopping afresh). Now the saved run's own.
    import shlex

    from omegaconf import OmegaConf

    from faults_helpers import under_command
    from gensbi_sharding.harness.command_checks import command_problem
    from gensbi_sharding.harness.job_check import job_problem

    run = tmp_path / "sw" / "0"
    (run / "checkpoints" / "20").mkdir(parents=True)
    (run / ".hydra").mkdir()
    OmegaConf.save(OmegaConf.create(["experiment=quick", "seed=0"]), run / ".hydra" / "overrides.yaml")
    (tmp_path / "sw" / "multirun.yaml").write_text("hydra:\n  overrides:\n    task: ['experiment=quick', 'seed=0']\n")
    write_json(run / "metrics.json", {"status": "ok", "final_step": 20})
    with pytest.raises(FileExistsError) as err:
        ensure_fresh(run, steps=20, overrides=["experiment=quick", "seed=1"])
    printed = str(err.value).split("into a new folder: ")[1]
    assert printed == (f"python launch.py experiment=quick seed=0 train.steps=40 train.resume={run} "
                       f"hydra.run.dir={tmp_path / 'sw-0-steps40'}")
    args, cfg = _passing_command(printed)
    assert (cfg.seed, cfg.train.steps, cfg.train.resume) == (0, 40, str(run))
    assert under_command(args, job_problem) is None


@pytest.mark.slow
def test_continuing_a_stopped_run_carries_its_settings_not_the_refused_commands(tmp_path):
    # Was: 'launch.py experiment=quick seed=1 hydra.run.dir=<a stopped seed=0 run>' was told "rerun with
    # train.resume=auto to continue it in this folder": pasted, the seed-0 weights went on with seed 1's held-out pairs
    # and draws. Now the command its record holds; the same settings (train.steps aside): the short advice as before.
    import shlex

    from faults_helpers import under_command
    from gensbi_sharding.harness.command_checks import command_problem
    from gensbi_sharding.harness.job_check import job_problem

    run = tmp_path / "run"
    (run / "checkpoints" / "10").mkdir(parents=True)
    (run / ".hydra").mkdir()
    (run / ".hydra" / "overrides.yaml").write_text("- experiment=quick\n- seed=0\n")
    write_json(run / "metrics.json", {"status": "interrupted", "final_step": 10})
    with pytest.raises(FileExistsError) as err:
        ensure_fresh(run, overrides=["experiment=quick", "seed=1"])
    printed = str(err.value).split("start it again in this folder (it saved no complete checkpoint: it trains from "
                                   "step 0) with the settings it was launched with: ")[1]
    printed = printed.removesuffix(", or choose another hydra.run.dir")
    assert printed == f"python launch.py experiment=quick seed=0 train.resume=auto hydra.run.dir={run}"
    args, cfg = _passing_command(printed)
    assert (cfg.seed, cfg.train.resume) == (0, "auto")
    assert under_command(args, job_problem) is None
    with pytest.raises(FileExistsError) as err:  # the same settings, more steps: the command plus train.resume=auto
        ensure_fresh(run, steps=40, overrides=["seed=0", "experiment=quick", "train.steps=40"])
    assert str(err.value).endswith("; rerun with train.resume=auto to start it again in this folder (it saved no "
                                   "complete checkpoint: it trains from step 0), or choose another hydra.run.dir")


def test_continuing_a_killed_runs_checkpoints_carries_its_settings_not_the_refused_commands(tmp_path):
    # Was: 'launch.py experiment=quick seed=1 hydra.run.dir=<a killed seed=0 run>' was told "continue it here with
    # the same command plus train.resume=auto": seed=1 over the seed-0 weights. Now the command its record holds.
    import shlex

    from faults_helpers import under_command
    from gensbi_sharding.harness.command_checks import command_problem

    run = tmp_path / "run"
    (run / "checkpoints" / "10").mkdir(parents=True)  # no metrics.json: killed
    (run / ".hydra").mkdir()
    (run / ".hydra" / "overrides.yaml").write_text("- experiment=quick\n- seed=0\n")
    with pytest.raises(FileExistsError) as err:
        ensure_fresh(run, overrides=["experiment=quick", "seed=1"])
    printed = str(err.value).split("continue it here with the settings it was launched with: ")[1].split(", or in")[0]
    assert printed == f"python launch.py experiment=quick seed=0 train.resume=auto hydra.run.dir={run}"
    args = shlex.split(printed)[2:]
    assert command_problem(args) is None and under_command(args, lambda cfg: cfg.seed) == 0
    with pytest.raises(FileExistsError) as err:  # the same settings: as before
        ensure_fresh(run, overrides=["experiment=quick", "seed=0"])
    assert "; continue it here with the same command plus train.resume=auto, or in a new folder with " in str(err.value)


def test_continuing_a_stopped_run_of_ones_own_preset_carries_its_search_path(tmp_path):
    # Was: 'launch.py experiment=quick seed=1 hydra.run.dir=<a stopped run of hydra.searchpath=[file://my_conf]
    # model=small seed=0>' was told "... with the settings it was launched with: python launch.py model=small seed=0
    # train.resume=auto ...": the refused command's search path (none), so Hydra could not find model=small pasted.
    # Now the search path of the run's own record (.hydra/hydra.yaml).
    import shlex

    from faults_helpers import under_command
    from gensbi_sharding.harness.command_checks import command_problem

    conf = tmp_path / "my_conf" / "model"
    conf.mkdir(parents=True)
    (conf / "small.yaml").write_text("defaults:\n  - /mlp_schema\n  - _self_\nwidth: 8\n")
    run = tmp_path / "run"
    (run / "checkpoints" / "10").mkdir(parents=True)
    (run / ".hydra").mkdir()
    (run / ".hydra" / "overrides.yaml").write_text("- experiment=quick\n- model=small\n- seed=0\n")
    (run / ".hydra" / "hydra.yaml").write_text(f"hydra:\n  overrides:\n    hydra:\n    - hydra.searchpath=[file://"
                                               f"{tmp_path / 'my_conf'}]\n    - hydra.run.dir={run}\n")
    write_json(run / "metrics.json", {"status": "interrupted", "final_step": 10})
    with pytest.raises(FileExistsError) as err:
        ensure_fresh(run, overrides=["experiment=quick", "seed=1"])
    printed = str(err.value).split("start it again in this folder (it saved no complete checkpoint: it trains from "
                                   "step 0) with the settings it was launched with: ")[1]
    printed = printed.removesuffix(", or choose another hydra.run.dir")
    assert printed == (f"python launch.py 'hydra.searchpath=[file://{tmp_path / 'my_conf'}]' experiment=quick "
                       f"model=small seed=0 train.resume=auto hydra.run.dir={run}"), printed
    args, cfg = _passing_command(printed)
    assert (cfg.model.width, cfg.seed, cfg.train.resume) == (8, 0, "auto")
