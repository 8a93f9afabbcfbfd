"""Every command printed for a run carries its ``jax_enable_x64`` (``x64_words.x64_lead``), from wherever printed.

Was: the lead only where the printing process's setting was not the run's, so the continue commands a 64-bit run
printed itself at a stop (``JAX_ENABLE_X64=1 python launch.py ...`` typed once) had none and were refused pasted in a
fresh shell; and a run killed before its ``metrics.json`` had no record of its setting at all.
"""

from __future__ import annotations

import contextlib

import pytest
from omegaconf import OmegaConf

from faults_helpers import compose_tiny, saved_checkpoint, under_command
from gensbi_sharding.harness.outputs import write_json


@contextlib.contextmanager
def _x64(on, monkeypatch):
    """This process computing in 64 bits (``on``) as ``JAX_ENABLE_X64`` gives it, put back after."""
    import jax

    before = bool(jax.config.jax_enable_x64)
    monkeypatch.setenv("JAX_ENABLE_X64", "1" if on else "0")
    jax.config.update("jax_enable_x64", on)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", before)


def _launched(run, *overrides):
    """``run``'s Hydra record of ``launch.py <overrides>``."""
    (run / ".hydra").mkdir(parents=True, exist_ok=True)
    OmegaConf.save(OmegaConf.create(list(overrides)), run / ".hydra" / "overrides.yaml")


def test_a_64_bit_runs_own_continue_commands_set_jax_enable_x64(tmp_path, monkeypatch):
    # The run's process (64 bits) prints them at its stop: each is led by JAX_ENABLE_X64=1, as pasted in a fresh shell
    # it must be (was: none; the same run's train-further command from another shell had it)
    from gensbi_sharding.harness.sweep_continue import whole_sweep_hint
    from gensbi_sharding.harness.sweep_hints import job_command

    run = tmp_path / "sweep" / "0"
    saved_checkpoint(run, {"seed": 0}, {}, step=4)
    _launched(run, "experiment=quick", "seed=0")
    write_json(run / "metrics.json", {"status": "interrupted", "final_step": 4, "jax_enable_x64": True})
    with _x64(True, monkeypatch):
        assert job_command(["experiment=quick", "seed=0"], run, multirun=True) == (
            f"JAX_ENABLE_X64=1 python launch.py experiment=quick seed=0 train.resume=auto hydra.mode=RUN "
            f"hydra.run.dir={run}")
        whole = whole_sweep_hint(run, ["launch.py", "-m", "experiment=quick", "seed=0,1"], started=False)
    assert whole.endswith(": JAX_ENABLE_X64=1 python launch.py -m experiment=quick seed=0,1 train.resume=auto "
                          f"hydra.sweep.dir={run.parent}"), whole
    with _x64(False, monkeypatch):  # a 32-bit run (set from Python) in a shell that exports the variable: taken off
        monkeypatch.setenv("JAX_ENABLE_X64", "1")
        write_json(run / "metrics.json", {"status": "interrupted", "final_step": 4, "jax_enable_x64": False})
        command = job_command(["experiment=quick", "seed=0"], run, multirun=False)
        assert command.startswith("env -u JAX_ENABLE_X64 python launch.py "), command
        monkeypatch.delenv("JAX_ENABLE_X64")  # nor exported: nothing to say
        assert job_command(["experiment=quick", "seed=0"], run, multirun=False).startswith("python launch.py ")


@pytest.mark.slow
def test_a_run_killed_before_its_metrics_says_its_x64_setting_from_its_launch(tmp_path, monkeypatch):
    # Killed (SIGKILL) after a checkpoint, before any metrics.json: its claim recorded the setting with its launch,
    # so the continue command carries it and a resume under the other setting is refused (was: neither)
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.resume_refusal import refuse_resume_settings
    from gensbi_sharding.harness.run_folder import RunFolder
    from gensbi_sharding.harness.sweep_hints import job_command

    run = tmp_path / "run"
    _launched(run, "experiment=quick", "seed=0")
    with _x64(True, monkeypatch):
        folder = under_command(["experiment=quick", "seed=0"], lambda cfg: RunFolder(run, cfg))  # a launch's
        folder.claim()
        step_dir = saved_checkpoint(run, OmegaConf.to_container(compose_tiny("mesh=none"), resolve=True), {}, step=3)
        folder.release()  # killed: no metrics.json
    assert not (run / "metrics.json").exists()
    with _x64(False, monkeypatch):
        monkeypatch.delenv("JAX_ENABLE_X64")
        command = job_command(["experiment=quick", "seed=0"], run, multirun=False)
        assert command.startswith("JAX_ENABLE_X64=1 python launch.py "), command
        with pytest.raises(ConfigError, match="was trained with JAX_ENABLE_X64 on .*x64.yaml: jax_enable_x64 true"):
            refuse_resume_settings(step_dir, compose_tiny("mesh=none", f"train.resume={run}", "train.steps=6"))


def test_the_second_ctrl_c_of_a_64_bit_runs_first_attempt_names_a_command_that_sets_it(tmp_path, monkeypatch):
    # 'JAX_ENABLE_X64=1 launch.py experiment=quick distributed=local ...', Ctrl-C twice: "stopped at once, saved up
    # to step 50 ...; continue with: python launch.py ..." without the setting (no metrics.json yet, and no copy of an
    # earlier launch's record: its own .hydra/x64.yaml was not read); pasted in a fresh shell, refused
    from faults_helpers import as_hydra_job
    from gensbi_sharding.harness.launch_record import record_x64
    from gensbi_sharding.harness.stop_record import at_once_error

    run = tmp_path / "run"
    _launched(run, "experiment=quick", "distributed=local")
    record_x64(run, True)  # as its claim wrote it
    saved_checkpoint(run, {"seed": 0}, {}, step=50)
    as_hydra_job(monkeypatch, run, ["experiment=quick", "distributed=local"])
    with _x64(True, monkeypatch):
        said = at_once_error(run, 50)
    assert said.endswith(f"; continue with: JAX_ENABLE_X64=1 python launch.py experiment=quick distributed=local "
                         f"train.resume=auto hydra.run.dir={run}"), said
