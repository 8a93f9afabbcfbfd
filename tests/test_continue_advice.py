"""The continue-here advice of a stopped run's folder: the saved run's own settings, ready to paste.

Was: a folder whose Hydra record (``.hydra/overrides.yaml``) was missing was told "rerun with train.resume=auto"
whatever was typed, so ``seed=1`` over a seed-0 run continued the seed-0 weights on seed 1's held-out pairs and draws.
"""

from __future__ import annotations

import shlex

import pytest
from omegaconf import OmegaConf

from faults_helpers import saved_checkpoint, under_command
from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.outputs import write_json
from gensbi_sharding.harness.run_folder import ensure_fresh


def _stopped_run_without_record(tmp_path, status="interrupted"):
    """A run of ``experiment=quick seed=0`` stopped at step 8 (``status``; None: killed, no metrics.json), its
    ``.hydra/overrides.yaml`` lost: only its checkpoint's saved config says how it ran."""
    run = tmp_path / "run"
    config = under_command(["experiment=quick", "seed=0"], lambda cfg: OmegaConf.to_container(cfg, resolve=True))
    saved_checkpoint(run, config, {})
    (run / ".hydra").mkdir()
    (run / ".hydra" / "overrides.yaml").write_text("- experiment=quick\n- seed: [")  # unreadable
    if status is not None:
        write_json(run / "metrics.json", {"status": status, "final_step": 8})
    return run


@pytest.mark.slow
@pytest.mark.parametrize("status", ["interrupted", None])
def test_continuing_a_run_without_its_record_carries_its_checkpoints_saved_settings(tmp_path, status):
    run = _stopped_run_without_record(tmp_path, status)
    with pytest.raises(FileExistsError) as err:
        ensure_fresh(run, overrides=["experiment=quick", "seed=1"])
    printed = str(err.value).split("with the settings it was launched with: ")[1].split(", or ")[0]
    assert printed == f"python launch.py experiment=quick seed=0 train.resume=auto hydra.run.dir={run}"
    args = shlex.split(printed)[2:]
    assert command_problem(args) is None  # pasted: it passes the launch's checks and composes the saved seed
    assert under_command(args, lambda cfg: (cfg.seed, cfg.train.resume, cfg.model.width)) == (0, "auto", 32)
    with pytest.raises(FileExistsError) as err:  # the saved settings typed (more steps too): the short advice
        ensure_fresh(run, steps=40, overrides=["experiment=quick", "train.steps=40"])
    assert "launched with" not in str(err.value) and "train.resume=auto" in str(err.value)


@pytest.mark.slow
def test_continuing_a_run_of_ones_own_preset_without_its_record_carries_its_checkpoints_saved_settings(tmp_path):
    # Was: 'launch.py hydra.searchpath=[file://my_conf] model=small experiment=quick seed=1 hydra.run.dir=<a stopped
    # seed=0 run of it, its overrides.yaml lost>' was told "rerun with train.resume=auto" (the search path dropped
    # from the composition, model=small composed to nothing), which pasted continued the seed-0 weights on seed 1's
    # held-out pairs and draws; now the saved settings, the search path kept.
    (tmp_path / "my_conf" / "model").mkdir(parents=True)
    (tmp_path / "my_conf" / "model" / "small.yaml").write_text("defaults:\n  - mlp\n  - _self_\nwidth: 8\n")
    search = f"hydra.searchpath=[file://{tmp_path / 'my_conf'}]"
    run = tmp_path / "run"
    config = under_command([search, "model=small", "experiment=quick", "seed=0"],
                           lambda cfg: OmegaConf.to_container(cfg, resolve=True))
    saved_checkpoint(run, config, {})
    write_json(run / "metrics.json", {"status": "interrupted", "final_step": 8})
    with pytest.raises(FileExistsError) as err:
        ensure_fresh(run, overrides=[search, "model=small", "experiment=quick", "seed=1"])
    printed = str(err.value).split("with the settings it was launched with: ")[1].split(", or ")[0]
    assert printed == (f"python launch.py {shlex.quote(search)} model=small experiment=quick seed=0 train.resume=auto "
                       f"hydra.run.dir={run}")
    args = shlex.split(printed)[2:]
    assert command_problem(args) is None
    assert under_command(args, lambda cfg: (cfg.seed, cfg.model.width)) == (0, 8)


@pytest.mark.slow
def test_continuing_a_run_without_its_record_writes_a_saved_text_hydra_reads_back(tmp_path):
    # Was: a saved text Hydra's grammar reads otherwise ('distributed.coordinator_address=[fe80::1]:1234', typed
    # quoted) was written bare, its command composed to nothing, and 'launch.py experiment=quick seed=1 hydra.run.dir=
    # <that stopped seed=0 run, overrides.yaml lost>' was told "rerun with train.resume=auto" (the seed-0 weights on
    # seed 1's pairs); now it is quoted for Hydra, as the run's folder is.
    run = tmp_path / "run"
    address = "distributed.coordinator_address='[fe80::1]:1234'"
    config = under_command(["experiment=quick", "seed=0", address],
                           lambda cfg: OmegaConf.to_container(cfg, resolve=True))
    saved_checkpoint(run, config, {})
    write_json(run / "metrics.json", {"status": "interrupted", "final_step": 8})
    with pytest.raises(FileExistsError) as err:
        ensure_fresh(run, overrides=["experiment=quick", "seed=1"])
    printed = str(err.value).split("with the settings it was launched with: ")[1].split(", or ")[0]
    args = shlex.split(printed)[2:]
    assert under_command(args, lambda cfg: (cfg.seed, cfg.distributed.coordinator_address)) == (0, "[fe80::1]:1234")


def test_continue_here_and_continue_them_all_commands_set_the_runs_x64_setting(tmp_path, monkeypatch):
    # Was: 'JAX_ENABLE_X64=1 launch.py experiment=quick train.steps=16 hydra.run.dir=<a run stopped without it>' was
    # told "rerun with train.resume=auto" (a sweep's job alike; with seed=1 typed, its own command bare), which pasted
    # in the same shell was refused: "checkpoint ... was trained with JAX_ENABLE_X64 off ...". The train-further
    # command carried the setting; now every continue command does.
    import jax

    from gensbi_sharding.harness.sweep_hints import job_command

    on = bool(jax.config.jax_enable_x64)
    prefix = "JAX_ENABLE_X64=1 " if not on else "env -u JAX_ENABLE_X64 "
    sweep = tmp_path / "sweep"
    run = sweep / "0"
    saved_checkpoint(run, {"seed": 0}, {})
    (run / ".hydra").mkdir()
    (run / ".hydra" / "overrides.yaml").write_text("- experiment=quick\n- seed=0\n")
    for x64, lead in ((not on, prefix), (on, "")):  # the same setting: nothing (was: nothing either way)
        write_json(run / "metrics.json", {"status": "interrupted", "final_step": 8, "jax_enable_x64": x64})
        with pytest.raises(FileExistsError) as err:
            ensure_fresh(run, steps=16, overrides=["experiment=quick", "seed=0", "train.steps=16"])
        said = str(err.value).split("; ", 1)[1]
        assert said == (f"continue it in this folder: {prefix}python launch.py experiment=quick seed=0 train.steps=16 "
                        f"train.resume=auto hydra.run.dir={run}, or choose another hydra.run.dir" if lead else
                        "rerun with train.resume=auto to continue it in this folder, or choose another hydra.run.dir")
        with pytest.raises(FileExistsError) as err:  # another seed typed: its own settings, led alike
            ensure_fresh(run, steps=16, overrides=["experiment=quick", "seed=1", "train.steps=16"])
        assert (f"with the settings it was launched with: {lead}python launch.py experiment=quick seed=0 "
                f"train.resume=auto hydra.run.dir={run}, or") in str(err.value)
        monkeypatch.setattr("sys.argv", ["launch.py", "-m", "experiment=quick", "seed=0,1"])
        with pytest.raises(FileExistsError) as err:  # a sweep none of whose jobs completed: the sweep's command
            ensure_fresh(run, steps=16, overrides=["experiment=quick", "seed=0"], multirun=True)
        assert (f"continue it with the rest of the sweep in its folder: {prefix}python launch.py -m experiment=quick "
                f"seed=0,1 train.resume=auto hydra.sweep.dir={sweep}, or choose" in str(err.value)) == bool(lead)
        # each job's own command (a sweep holding a completed job continues them one by one)
        assert job_command(["experiment=quick", "seed=0"], run, multirun=True) == (
            f"{lead}python launch.py experiment=quick seed=0 train.resume=auto hydra.mode=RUN hydra.run.dir={run}")
    args = shlex.split(f"{prefix}python launch.py -m experiment=quick seed=0,1 train.resume=auto")
    assert command_problem(args[args.index("launch.py") + 1:]) is None


def test_a_folder_whose_run_failed_before_saving_takes_the_next_command_whatever_its_train_resume(tmp_path):
    # Was: a run refused in its folder before it saved anything ('... train.resume=<run a> hydra.run.dir=<f>', <run a>
    # unreadable) left <f> usable only with that train.resume: the corrected command without it was refused "rerun
    # with train.resume=<run a> to run it again", which repeated the refusal. Now any command runs there, the earlier
    # attempt kept in its record (previous_attempts); a dry run still writes only into a fresh folder. A stopped one
    # (interrupted, preempted) is still continued only by its own train.resume (test_continued_runs: its requeue).
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text(f"- experiment=quick\n- train.resume={tmp_path / 'a'}\n")
    write_json(run / "metrics.json", {"status": "error", "error": "ConfigError: unreadable", "final_step": None})
    for resume in (None, "auto", str(tmp_path / "b")):
        assert ensure_fresh(run, resume=resume, overrides=["experiment=quick"])["error"] == "ConfigError: unreadable"
    with pytest.raises(FileExistsError, match="a dry run writes only into a fresh folder"):
        ensure_fresh(run, dry_run=True, overrides=["experiment=quick"])
    saved_checkpoint(run, {"seed": 0}, {})  # something saved: continued, never overwritten
    with pytest.raises(FileExistsError, match="; rerun with train.resume=auto to continue it in this folder, or "):
        ensure_fresh(run, overrides=["experiment=quick", f"train.resume={tmp_path / 'a'}"])


@pytest.mark.slow
def test_the_x64_refusal_of_a_setting_made_in_python_names_the_python_call(tmp_path, monkeypatch):
    # Was: jax.config.update("jax_enable_x64", True) then run(cfg) with train.resume=<a run without it> was told
    # "unset JAX_ENABLE_X64 to train it further", a variable never set; so, the variable set and overridden in Python,
    # "set JAX_ENABLE_X64=1", already set. Now the call that sets it; the variable where the variable set it.
    import jax

    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.resume_refusal import refuse_resume_settings
    from gensbi_sharding.harness.resume_settings import x64_prefix

    on = bool(jax.config.jax_enable_x64)
    run = tmp_path / "run"
    step_dir = saved_checkpoint(run, OmegaConf.to_container(compose_tiny("mesh=none"), resolve=True), {}, step=3)
    write_json(run / "metrics.json", {"status": "ok", "final_step": 3, "jax_enable_x64": not on})
    now = compose_tiny("mesh=none", f"train.resume={run}", "train.steps=6")
    monkeypatch.setenv("JAX_ENABLE_X64", "0" if on else "1")  # the variable says what the run had: Python overrode it
    with pytest.raises(ConfigError) as refused:
        refuse_resume_settings(step_dir, now)
    assert (f"; call jax.config.update('jax_enable_x64', {not on}) before run(cfg) (this process set it from Python) "
            f"to train it further, or start a new run without train.resume") in str(refused.value), refused.value
    assert x64_prefix(step_dir) == ("JAX_ENABLE_X64=1 " if not on else "env -u JAX_ENABLE_X64 ")
    monkeypatch.setenv("JAX_ENABLE_X64", "1" if on else "0")  # set by the variable: the variable named, as before
    with pytest.raises(ConfigError, match=f"; {'set JAX_ENABLE_X64=1' if not on else 'unset JAX_ENABLE_X64'} to "):
        refuse_resume_settings(step_dir, now)
