"""What a launch imports before its run needs it: ``launch.py --help`` and a refused command import no JAX.

Every launch paid JAX's and Flax's import (~1.3 s of CPU) at its first line, through the package's
``__init__`` (``gensbi_sharding.harness.config`` is inside it), ``--help``, a command its checks refuse and a
Hydra composition error too. Now each library name is imported when first read, and the harness imports JAX
where it starts the devices (``run_steps.run_steps``). A refusal that suggests another value for the key it refused
(``eval.num_samples=2.5`` -> 4) first puts that value through the run's own checks (``command_checks``), which
imported JAX, Flax and optax (~1.4 s of CPU) to list the registered model and data names and to split the
simulations (``harness.data``); now a built-in name is known from ``registry.BUILT_IN_MODELS`` and the task list,
and the split is ``harness.split_rows``'s. Each check runs in a fresh interpreter (this one has JAX already) and
reads its ``sys.modules``.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Imported by a run when it needs them (training, checkpoints, C2ST, plots, simulation, progress bar), never before.
HEAVY = ("jax", "flax", "optax", "orbax", "sklearn", "scipy", "matplotlib", "sbibm_jax", "equinox", "tqdm", "gensbi")


def imported_after(code: str) -> tuple[list[str], str | None]:
    """The ``HEAVY`` packages in ``sys.modules`` after ``code`` ran in a fresh interpreter (in the repository), and
    the code of the ``SystemExit`` it ended with (as text; None without one)."""
    probe = ("import json, sys\nstop = None\ntry:\n" + "".join(f"    {line}\n" for line in code.splitlines())
             + "except SystemExit as exit:\n    stop = str(exit.code)\n"
             + f"print(json.dumps([[m for m in {HEAVY!r} if m in sys.modules], stop]), file=sys.__stderr__)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    imported, stop = json.loads(done.stderr.strip().splitlines()[-1])
    return imported, stop


LAUNCH = "import runpy\nsys.argv = ['launch.py', {}]\nrunpy.run_path('launch.py', run_name='__main__')"


@pytest.mark.slow
@pytest.mark.parametrize("code, stop", [
    ("import gensbi_sharding", None),
    ("import gensbi_sharding.harness.config", None),
    # launch.py's module-level imports and checks, as a test or a tool imports it
    ("import runpy\nrunpy.run_path('launch.py', run_name='launch')", None),
    # Hydra's help, printed from inside hydra.main: every group and option, no run
    (LAUNCH.format("'--help'"), "0"),
    # refused by the command-line checks before Hydra composes (a misspelt group)
    (LAUNCH.format("'rul=fsdp'"), "[ERROR] rul=fsdp"),
    # refused with a suggested value the run's own checks pass (2 refused, 4 offered; train.steps=2): was JAX's import
    (LAUNCH.format("'experiment=quick', 'eval.num_samples=2.5'"),
     "[ERROR] eval.num_samples=2.5: eval.num_samples takes a whole number (Value '2.5' of type 'float' could not be "
     "converted to Integer); e.g. eval.num_samples=4 (eval.num_samples=2 is refused too: it must be >= 2 * "
     "eval.c2st_folds (eval.c2st_folds=2))"),
    (LAUNCH.format("'experiment=quick', 'train.steps=1.5'"), "[ERROR] train.steps=1.5: train.steps takes a whole "
     "number (Value '1.5' of type 'float' could not be converted to Integer); e.g. train.steps=2"),
])
def test_a_launch_imports_no_jax_before_its_run(code, stop):
    imported, stopped = imported_after(code)
    assert imported == []
    assert stopped is None if stop is None else (stopped or "").startswith(stop), stopped


@pytest.mark.slow
def test_a_library_name_is_imported_from_its_module_when_first_read():
    code = ("import gensbi_sharding as gs\nassert gs.sharding.Plan is gs.Plan and gs.nodes.is_int(3)\n"
            "from gensbi_sharding.mesh import make_mesh\n"
            "assert gs.make_mesh is make_mesh and 'make_mesh' in dir(gs)\n"
            "assert all(getattr(gs, name) is not None for name in gs.__all__)\n"
            "try:\n    gs.no_such_name\nexcept AttributeError as err:\n    assert 'no_such_name' in str(err)\n"
            "else:\n    raise AssertionError('no AttributeError')")
    assert imported_after(code) == (["jax", "flax", "optax"], None)


@pytest.mark.slow
def test_a_two_moons_simulation_imports_no_equinox():
    # Equinox (~0.2 s of CPU) was imported for its error type before every simulation; only diffrax's ODE tasks
    # (sir, lotka_volterra) run under it, and they import it themselves
    code = ("import jax\nfrom gensbi_sharding.harness import tasks\n"
            "theta, x = tasks.simulate(tasks.get_task('two_moons'), jax.random.key(0), 8)\n"
            "assert theta.shape == x.shape == (8, 2)")
    imported, stop = imported_after(code)
    assert "sbibm_jax" in imported and "equinox" not in imported and stop is None


@pytest.mark.slow
def test_the_memory_check_and_a_dry_run_take_a_tasks_sizes_from_task_dims(devices, monkeypatch, tmp_path):
    # Was: each built the sbibm task for its two sizes, importing sbibm_jax, numpyro and pandas (~1 s of CPU): a dry
    # run, which simulates nothing, and a run the memory check refuses, before its data step
    import sbibm_jax

    import gensbi_sharding as gs
    from faults_helpers import compose_tiny, run_tiny
    from gensbi_sharding.harness.memory_check import check_fits
    from gensbi_sharding.harness.rule_config import as_rule, rule_table

    def no_task(name):
        raise AssertionError(f"the sbibm task {name} was built for its sizes")

    monkeypatch.setattr(sbibm_jax, "get_task", no_task)  # what tasks.get_task calls (harness.data binds that one)
    cfg = compose_tiny()
    check_fits(cfg, gs.make_mesh(), as_rule(*rule_table(cfg.rule)))
    metrics = run_tiny(tmp_path / "dry", "dry_run=true")
    assert metrics["status"] == "ok" and metrics["dry_run"], metrics.get("error")


@pytest.mark.slow
def test_a_refused_batch_size_whose_suggestion_is_refused_too_imports_no_jax():
    # Was: data.batch_size=2.5 -> "e.g. data.batch_size=2", which the batch check refuses (not a multiple of the 8
    # devices); that check named its own fix through the library's batch.py, importing JAX and NumPy's array layer.
    # The one rule (nearest_batch_sizes) lives in the pure gensbi_sharding.batch_sizes, which batch.py uses too.
    import gensbi_sharding as gs
    from gensbi_sharding import batch, batch_sizes

    assert gs.nearest_batch_sizes is batch.nearest_batch_sizes is batch_sizes.nearest_batch_sizes
    imported, stop = imported_after(LAUNCH.format("'data.batch_size=2.5'"))
    assert imported == []
    assert stop.startswith("[ERROR] data.batch_size=2.5: data.batch_size takes a whole number"), stop
    assert "; e.g. data.batch_size=8 (data.batch_size=2 is refused too: it cannot be used" in stop, stop
    assert imported_after("from gensbi_sharding import nearest_batch_sizes\n"
                          "assert nearest_batch_sizes(10, 4) == (8, 12)") == ([], None)


@pytest.mark.slow
def test_a_launch_moves_its_imports_out_of_the_cycle_collectors_reach_before_hydra_runs_its_job():
    """launch.py's imports (Hydra, OmegaConf, the harness) are frozen (``gc.freeze``) before ``main()``: each full
    collection of a run walked them again (~0.2 s of CPU in a tiny run); was frozen only at exit. Read in a fresh
    interpreter, at ``--help``'s exit from inside ``main()``, before Python's exit handlers run."""
    probe = ("import gc, runpy, sys\nsys.argv = ['launch.py', '--help']\ntry:\n"
             "    runpy.run_path('launch.py', run_name='__main__')\nexcept SystemExit:\n    pass\n"
             "print(gc.get_freeze_count(), len(gc.get_objects()), file=sys.__stderr__)")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    frozen, collected = map(int, done.stderr.strip().splitlines()[-1].split())
    # the imports' objects frozen (~42,000), what --help made since (Hydra composing for it, ~16,000) not; was
    # ~400 frozen (by a library) against ~53,000
    assert frozen > collected
