"""Reading a run's checkpoints or config, and refusing a run, leave JAX's backend unstarted (no JAX import where the
check needs none).
"""

import dataclasses
import os
import subprocess
import sys

import pytest
from faults_helpers import REPO, save_step
from test_start_imports import LAUNCH, imported_after


def _run_in_a_fresh_process(script: str, folder, with_tests: bool = False) -> subprocess.CompletedProcess:
    """Run ``script`` with ``folder`` as its argument in a fresh interpreter whose device count is unset (so that
    setting it after the check is refused if the check started JAX's backend); it must exit 0."""
    paths = [str(REPO), str(REPO / "tests")] if with_tests else [str(REPO)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    env.pop("JAX_NUM_CPU_DEVICES", None)
    proc = subprocess.run([sys.executable, "-c", script, str(folder)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


_LIST_THEN_START = """
import sys, jax
from gensbi_sharding.harness.resume_command import holds_checkpoint
from gensbi_sharding.checkpoint import committed_steps
print(holds_checkpoint(sys.argv[1]), committed_steps(sys.argv[1] + "/checkpoints"))
jax.config.update("jax_num_cpu_devices", 3)  # refused (RuntimeError) once the backend started
print(jax.device_count())
"""


@pytest.mark.slow
def test_listing_a_run_folders_checkpoints_leaves_jax_backend_unstarted(tmp_path):
    # Was: `python launch.py experiment=quick train.resume=auto hydra.run.dir=cont` (the command a preempted
    # continuation, launched with train.resume=<run>, printed) failed: "devices.cpu_count=8 was asked for, but JAX's
    # backend already started with 1 CPU devices": the folder check listed its checkpoints with an Orbax
    # CheckpointManager, whose constructor starts the backend, before the run set its device count (status error).
    out = tmp_path / "cont"
    save_step(out, 20)
    proc = _run_in_a_fresh_process(_LIST_THEN_START, str(out))
    assert proc.stdout.split("\n")[:2] == ["True [20]", "3"], proc.stdout


_READ_THEN_START = """
import sys, jax
from omegaconf import OmegaConf
from gensbi_sharding.checkpoint import saved_config, saved_info
from gensbi_sharding.harness import folder_claim
out = sys.argv[1]
print(saved_config(out)["train"]["resume"], saved_info(out))
config = OmegaConf.create({"hydra": {"run": {"dir": out}, "sweep": {"dir": None},
                                     "overrides": {"task": ["train.resume=a"]}},
                           "train": {"resume": "a", "steps": 3000}, "distributed": {"mode": "none", "process_id": None}})
callback = folder_claim.RefuseCompletedRun()
callback.on_run_start(config)  # launch.py's folder check of a requeue: reads the newest checkpoint's config
callback.on_run_end(config)
jax.config.update("jax_num_cpu_devices", 3)  # refused (RuntimeError) once the backend started
print(jax.device_count())
"""


@pytest.mark.slow
def test_reading_a_checkpoints_config_and_info_leaves_jax_backend_unstarted(tmp_path):
    # Was: checkpoint.saved_config / saved_info read the JSON item through an Orbax Checkpointer, which starts JAX's
    # backend: any check before a run sets its device count that read one (the requeue check did, until round 45
    # read it another way) made the run fail "devices.cpu_count=8 was asked for, but JAX's backend already started".
    from gensbi_sharding.harness import outputs

    out = tmp_path / "b"
    save_step(out, 30, resume="a", info={"n": 1})
    outputs.write_json(out / "metrics.json", {"status": "preempted", "stopped_at_step": 30})
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("JAX_NUM_CPU_DEVICES", None)
    proc = subprocess.run([sys.executable, "-c", _READ_THEN_START, str(out)], capture_output=True, text=True,
                          env=env, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split("\n")[:2] == ["a {'n': 1}", "3"], proc.stdout


@pytest.mark.slow
def test_a_refused_run_imports_no_jax_where_its_check_needs_none(tmp_path):
    # A range refusal needs no device: the check of the run's config before its folder is made imports no JAX
    # (was: resolve_cpu_count's module and the activation fields' check imported it, ~1 s).
    imported, stop = imported_after(LAUNCH.format(
        f"'experiment=quick', 'train.val_every=0', 'train.patience=5', 'hydra.run.dir={tmp_path / 'out'}'"))
    assert (imported, stop) == ([], "1")
    assert not (tmp_path / "out").exists()


def test_the_activation_fields_checked_without_jax_are_partition_axis_fields():
    # validate's check of the activation keys reads them from the config's schema (no JAX); they must stay the
    # library's PartitionAxis fields, in its order (the refusal lists them).
    from gensbi_sharding.activations import PartitionAxis
    from gensbi_sharding.harness.config import ActivationConfig

    assert tuple(f.name for f in dataclasses.fields(ActivationConfig) if f.name != "strategy") == PartitionAxis._fields


_RESUME_CHECK_THEN_START = """
import sys, jax
from faults_helpers import compose_tiny
from gensbi_sharding.harness.resume_source import resume_source_problem
resumed = compose_tiny("train.steps=12", "train.learning_rate=0.1", f"train.resume={sys.argv[1]}")
print(resume_source_problem(resumed, "elsewhere"))  # passes: another schedule is the run's to say (its rates: JAX)
print(resume_source_problem(compose_tiny("model.width=16", f"train.resume={sys.argv[1]}"), "elsewhere"))
jax.config.update("jax_num_cpu_devices", 3)  # refused (RuntimeError) once the backend started
print(jax.device_count())
"""


@pytest.mark.slow
def test_the_check_of_a_resumes_settings_before_its_folder_leaves_jax_backend_unstarted(tmp_path):
    # The settings a checkpoint refuses are checked before Hydra makes the run's folder (resume_settings), which is
    # before the run sets its device count: the check compares configs only (a first try at it also said what a
    # changed schedule does, which evaluates the rates with JAX).
    from omegaconf import OmegaConf

    from faults_helpers import compose_tiny, saved_checkpoint

    saved_checkpoint(tmp_path / "saved", OmegaConf.to_container(compose_tiny("train.steps=20"), resolve=True), {})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    env.pop("JAX_NUM_CPU_DEVICES", None)
    proc = subprocess.run([sys.executable, "-c", _RESUME_CHECK_THEN_START, str(tmp_path / "saved")],
                          capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split("\n")[:3] == [
        "None", "ConfigError: the checkpoint was saved with model.width=32 (this run: model.width=16): add "
        "model.width=32. The saved weights compute that model, not this one; or start a new run without "
        "train.resume", "3"], proc.stdout


_DAMAGE_THEN_START = """
import sys, jax
from pathlib import Path
from gensbi_sharding.checkpoint import step_damage
steps = Path(sys.argv[1]) / "checkpoints"
(steps / "8" / "arrays" / "manifest.ocdbt").unlink()  # its arrays' database: their metadata no longer reads
print(step_damage(steps / "4"), step_damage(steps / "8").split(" (")[0])
jax.config.update("jax_num_cpu_devices", 3)  # refused (RuntimeError) once the backend started
print(jax.device_count())
"""


@pytest.mark.slow
def test_the_librarys_check_of_a_step_leaves_jax_backend_unstarted(tmp_path):
    # Was: the harness read every array of every step in a child process before a resume's folder (seconds, a second
    # copy of the checkpoint in host memory), as reading them in the launching process would start the backend.
    # checkpoint.step_damage reads the arrays' metadata through a handler that asks the backend nothing.
    out = tmp_path / "run"
    for step in (4, 8):
        save_step(out, step)
    proc = _run_in_a_fresh_process(_DAMAGE_THEN_START, str(out))
    assert proc.stdout.split("\n")[:2] == ["None its 'arrays' item cannot be read", "3"], proc.stdout
