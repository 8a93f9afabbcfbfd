"""``strict=true``'s fallbacks and a training state too big for the host are refused before any folder is made
(``harness/state_check``), in the words the run uses, with JAX's backend left unstarted.

Was: both were refused by the run once JAX had started its devices, inside a new ``outputs/<date>/<time>``
(``.hydra/``, ``.run.lock``, ``launch.log``, ``error.txt``, ``metrics.json``); a sweep ran its earlier jobs first.
"""

import os
import subprocess
import sys

import pytest

import gensbi_sharding as gs
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.rule_config import as_rule, rule_table

from faults_helpers import REPO, compose_tiny

GB = 10**9
STRICT = ("strict=true", "rule=fsdp", "model.width=36")  # embed 36 cannot split 8 ways: 10 variables fall back


def _run_refusal(cfg, check):
    """What the run's own check (``check(cfg, mesh, rule)`` on this process's 8 devices) raises, as job_problem
    words a ConfigError."""
    with pytest.raises(ConfigError) as err:
        check(cfg, gs.make_mesh(), as_rule(*rule_table(cfg.rule)))
    return f"ConfigError: {err.value}"


def _strict_in_run(cfg, mesh, rule):
    from gensbi_sharding.harness.model_plan import model_plan, trace_model
    from gensbi_sharding.harness.state import builder

    model = trace_model(builder(cfg, dim_theta=2, dim_x=2, partition_axis=None), cfg, needed_by="")
    model_plan(model, mesh, rule, strict=True)


@pytest.mark.slow
@pytest.mark.parametrize("extra", [(), ("dry_run=true",)])  # a dry run plans as strict=true does: refused too
def test_strict_fallbacks_are_refused_before_any_folder_as_the_run_refuses_them(devices, extra):
    from gensbi_sharding.harness.job_check import job_problem

    problem = job_problem(compose_tiny(*STRICT, *extra))
    assert problem == _run_refusal(compose_tiny(*STRICT), _strict_in_run)
    assert problem.startswith("ConfigError: strict=true and rule 'fsdp' cannot split 10 variable(s)")
    assert "Set mesh.model_axis=4 or 2 (every annotation honoured)" in problem, problem
    assert job_problem(compose_tiny(*STRICT[:-1], "model.width=32")) is None  # 32 splits 8 ways: nothing falls back
    assert job_problem(compose_tiny(*STRICT, "mesh=none")) is None  # no mesh: nothing to split


@pytest.mark.slow  # ~1 s on 2 cores
def test_a_state_too_big_is_refused_before_any_folder_as_the_run_refuses_it(devices, monkeypatch):
    from gensbi_sharding.harness import memory_check
    from gensbi_sharding.harness.job_check import job_problem

    monkeypatch.setattr(memory_check, "host_available_bytes", lambda: 16 * GB)  # as the run reads it
    cfg = compose_tiny("model.width=100000")
    problem = job_problem(cfg)
    assert problem == _run_refusal(cfg, memory_check.check_fits)
    assert problem.startswith("ConfigError: the training state cannot fit: model=mlp under rule 'replicated' needs "
                              "at least ") and "model.width=100000" in problem, problem
    assert job_problem(compose_tiny("model.width=100000", "dry_run=true")) is None  # a dry run allocates none
    assert job_problem(compose_tiny("model.width=64")) is None


def test_the_abstract_mesh_is_the_one_the_run_builds():
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.state_check import abstract_mesh

    def shape(**mesh):
        found = abstract_mesh(OmegaConf.create({"spec": "dict", "model_axis": 1, "devices": None, **mesh}), 8)
        return None if found is None else dict(found.shape)

    assert shape(spec=None) is None and shape(model_axis=3) is None  # no mesh; refused by the mesh check
    assert shape(spec="auto", model_axis=4) == {"data": 8, "model": 1}  # auto: every device on data
    assert shape(model_axis=2) == {"data": 4, "model": 2}
    assert shape(model_axis=2, devices=[0, 1, 2, 3]) == {"data": 2, "model": 2}


_LAUNCH_THEN_START = """
import runpy, sys
sys.argv = ["launch.py", *sys.argv[1:]]
try:
    runpy.run_path("launch.py", run_name="__main__")
except SystemExit as stop:
    print("exit", stop.code)
import jax
jax.config.update("jax_num_cpu_devices", 3)  # refused (RuntimeError) once the backend started
print(jax.device_count())
"""


def _launch(tmp_path, *args, script=_LAUNCH_THEN_START, platforms="cpu"):
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": platforms}
    env.pop("JAX_NUM_CPU_DEVICES", None)
    env.pop("JAX_PLATFORMS") if platforms is None else None  # as a user's shell has it: JAX probes every backend
    return subprocess.run([sys.executable, "-c", script, *args], cwd=REPO,
                          capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.slow
def test_a_strict_run_is_refused_before_its_folder_leaving_the_backend_unstarted(tmp_path):
    proc = _launch(tmp_path, "experiment=quick", *STRICT, f"hydra.run.dir={tmp_path / 'run'}")
    assert proc.stdout.split("\n")[-3:] == ["exit 1", "3", ""], proc.stdout + proc.stderr[-2000:]
    assert proc.stderr.startswith("[ERROR] strict=true and rule 'fsdp' cannot split 10 variable(s)")
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "run").exists()  # was: .hydra/, .run.lock, launch.log, error.txt, metrics.json


@pytest.mark.slow  # a sweep (refused before its first job: nothing trains)
def test_a_sweep_with_a_strict_job_is_refused_before_any_job_runs(tmp_path):
    proc = _launch(tmp_path, "-m", "experiment=quick", *STRICT[1:], "strict=false,true",
                   f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert proc.stdout.split("\n")[-3:] == ["exit 1", "3", ""], proc.stdout + proc.stderr[-2000:]
    assert proc.stderr.startswith("[ERROR] this sweep's config is refused for 1 of the 2 jobs, before any job ran")
    assert "  job 1 (strict=true): strict=true and rule 'fsdp' cannot split 10 variable(s)" in proc.stderr
    assert not (tmp_path / "sweep").exists()  # was: job 0 trained, then job 1 refused in its own folder


_CHECK_THEN_START = """
import math, sys
sys.path.insert(0, sys.argv[1])
from faults_helpers import compose_tiny
from gensbi_sharding.harness.job_check import job_problem
def check(models):  # strict=true (the plan), and a model above its preset's sizes (the state's memory)
    for model in models:
        for extra in (["strict=true"], ["model.depth=3"]):
            print(model, *extra, job_problem(compose_tiny(f"model={model}", "mesh.model_axis=2", "rule=tensor", *extra)))
check(["mlp", "transformer"])
import jax
jax.config.update("jax_num_cpu_devices", 3)  # refused (RuntimeError) once the backend started
check(["flux1", "simformer"])  # these start it, with the run's count (8, not 3): the run's own call accepts it
from gensbi_sharding.harness.devices import configure_devices
configure_devices(8)
import gensbi.models.tarflow.model as tarflow
print(jax.device_count(), math.isclose(float(tarflow._LOG2PI), math.log(2 * math.pi), rel_tol=1e-6))
"""


@pytest.mark.slow
def test_checking_every_built_in_model_leaves_the_run_its_device_count():
    # Was: `python launch.py experiment=quick model=flux1 strict=true` (or model.depth=3) was refused "devices.cpu_count=8
    # was asked for, but JAX's backend already started with 1 CPU devices": tracing flux1 before any folder started
    # JAX's backend (GenSBI's Flux1Params evaluates jnp at once), so the run could no longer set its device count.
    # mlp and transformer leave the backend unstarted; flux1 and simformer start it as the run does. And simformer's
    # check imported gensbi.models inside its trace: tarflow's _LOG2PI was left a leaked tracer (float() raised).
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu"}
    env.pop("JAX_NUM_CPU_DEVICES", None)
    proc = subprocess.run([sys.executable, "-c", _CHECK_THEN_START, str(REPO / "tests")], cwd=REPO,
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[-1] == "8 True" and len(lines) == 9, proc.stdout  # each model's runs would train: nothing refused
    assert all(line.endswith(" None") for line in lines[:-1]), proc.stdout


FLUX1_BIG = ("model=flux1", "model.axes_dim=[800000,0]")  # hidden size 4.8M: terabytes of state
FLUX1_STRICT = ("model=flux1", "model.num_heads=3", "model.axes_dim=[5,0]", "strict=true", "rule=tensor",
                "mesh.model_axis=8")  # widths of 15 and 30 cannot split 8 ways


@pytest.mark.slow
def test_flux1_is_checked_before_any_folder_as_the_run_checks_it(devices, monkeypatch):
    # Was: flux1 was left out of the check (GenSBI's Flux1Params evaluates jnp at once, which started JAX's backend),
    # so `launch.py model=flux1 model.axes_dim=[800000,0]` was refused only by its run, inside its new folder.
    from gensbi_sharding.harness import memory_check
    from gensbi_sharding.harness.job_check import job_problem

    monkeypatch.setattr(memory_check, "host_available_bytes", lambda: 16 * GB)  # as the run reads it
    cfg = compose_tiny(*FLUX1_BIG)
    problem = job_problem(cfg)
    assert problem == _run_refusal(cfg, memory_check.check_fits)
    assert problem.startswith("ConfigError: the training state cannot fit: model=flux1 under rule 'replicated' "
                              "needs at least ") and "model.axes_dim=[800000,0]" in problem, problem
    cfg = compose_tiny(*FLUX1_STRICT)
    strict = job_problem(cfg)
    with pytest.raises(ConfigError) as err:  # the run's plan on its 1 x 8 mesh
        _strict_in_run(cfg, gs.make_mesh(model_axis=8), as_rule(*rule_table(cfg.rule)))
    assert strict == f"ConfigError: {err.value}"
    assert strict.startswith("ConfigError: strict=true and rule 'tensor' cannot split 17 variable(s)"), strict
    assert job_problem(compose_tiny("model=flux1", "model.depth=3")) is None  # above its preset, but fits
    # The backend started with 8 devices here: a job asking for 4 is left to its run (refused there, in its words)
    assert job_problem(compose_tiny(*FLUX1_BIG, "devices.cpu_count=4")) is None


# the launch, then the device count its process started JAX's backend with (no attempt to change it)
_LAUNCH_THEN_COUNT = _LAUNCH_THEN_START.replace('jax.config.update("jax_num_cpu_devices", 3)  # refused (RuntimeError) '
                                                "once the backend started\n", "")


@pytest.mark.slow
def test_a_flux1_too_big_is_refused_before_its_folder(tmp_path):
    proc = _launch(tmp_path, "experiment=quick", *FLUX1_BIG, f"hydra.run.dir={tmp_path / 'run'}",
                   script=_LAUNCH_THEN_COUNT)
    assert proc.stdout.split("\n")[-3:] == ["exit 1", "8", ""], proc.stdout + proc.stderr[-2000:]  # the run's count
    assert proc.stderr.startswith("[ERROR] the training state cannot fit: model=flux1 "), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "run").exists()  # was: .hydra/, .run.lock, launch.log, error.txt, metrics.json


@pytest.mark.slow
def test_the_check_before_the_folder_prints_no_line_of_jax_probing_its_backends(tmp_path):
    # Was: with JAX_PLATFORMS unset (a user's shell), the flux1 check's backend start, under Hydra's logging before
    # the run, printed JAX's "[HYDRA] Unable to initialize backend 'tpu': ..." and "... 'proxy': ..." above the
    # refusal, lines no run printed before (its own start never shows them).
    proc = _launch(tmp_path, "experiment=quick", *FLUX1_BIG, f"hydra.run.dir={tmp_path / 'run'}", platforms=None)
    assert "exit 1" in proc.stdout, proc.stdout + proc.stderr[-2000:]
    assert "Unable to initialize backend" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert "[ERROR] the training state cannot fit: model=flux1 " in proc.stderr, proc.stderr


@pytest.mark.slow
def test_a_model_too_big_for_distributed_local_is_refused_before_its_folder_and_processes(tmp_path):
    # Was: 'launch.py model.width=100000 distributed=local distributed.local_processes=2' made its folder (error.txt,
    # launch.log, metrics.json), started both processes and each was refused after ~9 s; the check before the folder
    # ran for distributed=none only. Now the parent refuses it first, its JAX backend left unstarted.
    proc = _launch(tmp_path, "experiment=quick", "model.width=100000", "distributed=local",
                   "distributed.local_processes=2", f"hydra.run.dir={tmp_path / 'run'}")
    assert proc.stdout.split("\n")[-3:] == ["exit 1", "3", ""], proc.stdout + proc.stderr[-2000:]
    assert proc.stderr.startswith("[ERROR] the training state cannot fit: model=mlp "), proc.stderr
    assert "8 simulated devices" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "run").exists()


def test_every_built_in_model_is_checked_before_any_folder():
    from gensbi_sharding.harness.registry import BUILT_IN_MODELS
    from gensbi_sharding.harness.state_check import TRACED_STARTED, TRACED_UNSTARTED

    assert sorted(TRACED_UNSTARTED + TRACED_STARTED) == sorted(BUILT_IN_MODELS)  # was: all but flux1
