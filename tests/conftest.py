"""Every test runs on 8 simulated CPU devices, whatever machine it runs on.

The device count must be fixed before JAX's backend starts, so it is set here,
once, at collection time. Tests that need another count run in a subprocess.

The session also gets its own JAX compilation cache (deleted at exit), shared by its xdist workers and
with the runs they launch as subprocesses: many tests build the same tiny models and steps, and ``init_sharded``
jits a fresh closure per call, so a program with the same HLO is loaded instead of compiled again.
"""

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Compile fast, in this process and in every run a test launches (they inherit the environment): the tests'
# programs are tiny, so XLA's optimisation passes cost more than they save (measured on the launch-heavy tests:
# 9-12 % less wall time). Numbers compared within the suite are compiled alike on both sides.
os.environ["XLA_FLAGS"] = " ".join([os.environ.get("XLA_FLAGS", ""), "--xla_backend_optimization_level=0",
                                    "--xla_llvm_disable_expensive_passes=true"]).strip()

import pytest  # noqa: E402

# The shared helper modules assert too: rewrite their asserts as pytest does a test file's, so a failing check there
# shows its values (they are imported by test files, after this conftest).
pytest.register_assert_rewrite("faults_helpers", "library_helpers")

import jax  # noqa: E402

jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_num_cpu_devices", 8)
# One cache for the whole test session: pytest-xdist's workers inherit the environment of the process that
# starts them (this conftest ran there first), so both workers share it and a program one of them compiled is
# loaded by the other and by every run either launches. Only the process that made it removes it, at its exit:
# the xdist controller, which outlives its workers (or the single pytest process).
_CACHE_ENV = "GENSBI_SHARDING_TESTS_JAX_CACHE"
_COMPILATION_CACHE = os.environ.get(_CACHE_ENV)
if not _COMPILATION_CACHE or not os.path.isdir(_COMPILATION_CACHE):
    _COMPILATION_CACHE = tempfile.mkdtemp(prefix="gensbi_sharding_tests_jax_cache_")
    os.environ[_CACHE_ENV] = _COMPILATION_CACHE
    atexit.register(shutil.rmtree, _COMPILATION_CACHE, ignore_errors=True)
jax.config.update("jax_compilation_cache_dir", _COMPILATION_CACHE)
# Not every program: writing the many eager ops of a few ms each costs more than compiling them.
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.1)
# The runs tests launch as subprocesses share it (JAX reads its flags from the environment). A size
# bound turns on JAX's file lock, so processes running at once never read an entry half written.
jax.config.update("jax_compilation_cache_max_size", 4 * 2**30)
os.environ.update(JAX_COMPILATION_CACHE_DIR=_COMPILATION_CACHE, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0.1",
                  JAX_COMPILATION_CACHE_MAX_SIZE=str(4 * 2**30))


N_DEVICES = 8


@pytest.fixture(scope="session")
def compose_config():
    """``compose_config(*overrides, hydra=False)``: the composed config, as launch.py would see it.

    Each call opens and closes its own Hydra context, so no global Hydra state outlives
    a call (other modules, and in-process runs, start from a clean slate).

    A composition depends only on the overrides and the files of ``conf/``, so one composed
    before is handed out again, as a deep copy (a caller may change its copy): the files'
    tests compose the same ``group=option`` several times, and Hydra takes ~0.1 s a compose.
    Not kept: a composition that raised (it raises again), one with Hydra's own config (its
    ``hydra.runtime`` reads the working directory) and one with a ``hydra.searchpath`` (its
    files are the test's own, and may change between calls).
    """
    import copy

    from hydra import compose, initialize_config_dir

    from gensbi_sharding.harness.config import register_configs
    from gensbi_sharding.harness.groups import CONF

    register_configs()
    composed = {}

    def _compose(*overrides: str, hydra: bool = False):
        if not hydra and overrides in composed:
            return copy.deepcopy(composed[overrides])
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            cfg = compose("config", overrides=list(overrides), return_hydra_config=hydra)
        if not hydra and not any(o.lstrip("+~").startswith("hydra.searchpath") for o in overrides):
            composed[overrides] = copy.deepcopy(cfg)
        return cfg

    return _compose


@pytest.fixture(scope="session")
def devices():
    devs = jax.devices()
    assert len(devs) == N_DEVICES, f"conftest asked for {N_DEVICES} CPU devices, JAX has {len(devs)}"
    return devs


# The test files that take longest, longest first (seconds in `make test` on the 2-core machine). Under
# pytest-xdist (`make test`: --dist loadfile --no-loadscope-reorder) a worker that finishes a file takes the next
# one in collection order, so starting the long files first leaves the short ones to even out the two workers'
# ends. In xdist's default order (most tests first) files with few long tests came last: one worker could
# start test_local_processes.py (~90 s) as the other ran out of files. The files not listed take under
# ~8 s each: they come last, in alphabetical order. (Was, until round 42: the seconds of 2026-12-02 23:40, with
# test_user_round34.py and test_user_view.py (~73 and ~54 s now) 13th and 14th behind files of ~35 s. Filling the
# two workers with each of the two runs' seconds named below, that order gave sums of 1,149 and 1,100 s, and 1,094
# and 1,079 s; this one 1,124 and 1,125 s, and 1,086 and 1,086 s; for the fast subset's tests 447 and 423 s, and
# 388 and 414 s, against 437 and 433 s, and 401 and 401 s.)
LONGEST_FIRST = (  # seconds per file: the mean of two make test runs' junit (2026-12-03 12:12 and 13:35); the files
    # named for their subject in round 50 (tests moved out of test_user_faults.py, test_run_faults.py, ...): their tests'
    # seconds in the fresh clone's junit of 2026-12-04 16:43, times 1.75 (the dissolved files listed here took 216 s
    # there, 382 s here)
    "test_equivalence.py",  # ~260
    "test_preemption.py",  # ~260
    "test_launch.py",  # ~145
    "test_local_processes.py",  # ~100
    "test_param_dtype.py",  # ~90
    "test_init.py",  # ~89
    "test_refusal_fixes.py",  # ~82
    "test_config.py",  # ~67
    "test_setting_checks.py",  # ~67
    "test_dry_run.py",  # ~65
    "test_gensbi_models.py",  # ~64
    "test_checkpoint.py",  # ~60
    "test_user_view.py",  # ~54
    "test_resume_refusals.py",  # ~54
    "test_sbibm_runner.py",  # ~44
    "test_train.py",  # ~41
    "test_data_faults.py",  # ~33
    "test_readme_examples.py",  # ~31
    "test_suggested_defaults.py",  # ~30
    "test_sequential.py",  # ~29
    "test_data.py",  # ~27
    "test_checkpoint_commits.py",  # ~27
    "test_cross_process_checks.py",  # ~24
    "test_local_process_stops.py",  # ~24
    "test_override_types.py",  # ~24
    "test_gensbi_overrides.py",  # ~23
    "test_benchmark_arguments.py",  # ~22
    "test_sbibm_preset.py",  # ~22
    "test_untraceable_constructors.py",  # ~21
    "test_evaluate.py",  # ~20
    "test_start_imports.py",  # ~19
    "test_sweep_check.py",  # ~18
    "test_sweep_subdirs.py",  # ~18
    "test_list_settings.py",  # ~18
    "test_interrupts.py",  # ~18
    "test_gensbi_wrappers.py",  # ~17
    "test_sbibm_script_inputs.py",  # ~16
    "test_launch_interrupt.py",  # ~16
    "test_presets.py",  # ~16
    "test_override_dicts.py",  # ~15
    "test_multihost.py",  # ~14
    "test_watchdog.py",  # ~14
    "test_flax_idioms.py",  # ~13
    "test_report.py",  # ~11
    "test_override_prefixes.py",  # ~11
    "test_gensbi_harness_faults.py",  # ~10
    "test_summary.py",  # ~10
    "test_schedule.py",  # ~10
    "test_val_history_sets.py",  # ~10
    "test_sweep_not_started.py",  # ~10
    "test_rules.py",  # ~9
)


def pytest_collection_modifyitems(config, items):
    """In an xdist worker, order the files longest first (the tests of a file keep their order)."""
    if not hasattr(config, "workerinput"):
        return  # one process: the order does not change the run's length
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest stay alphabetical
