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
import sys
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Keep the bytecode of the project's modules (and pytest's rewritten test modules) for the session's later processes:
# where PYTHONDONTWRITEBYTECODE is set (the 2-core test machines set it), every fresh interpreter the suite starts
# (launch.py runs, their distributed=local processes, `python -c` checks, fork drivers) compiled gensbi_sharding's
# sources again: ~0.15 s of a refused launch.py's 0.9 s of CPU. Installed packages keep the bytecode pip wrote.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
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


def _cache_config_file_loads():
    """Parse each of the project's config files (``conf/``) and Hydra's own once per test process, and let Hydra's
    compositions share the one ``ConfigStore``: as launch.py does (``harness.config_loads``), from collection on,
    since the harness and the tests compose thousands of times in process (a test's own files, in its tmp_path, are
    read as before)."""
    from gensbi_sharding.harness.config_loads import keep_parsed_config_files, share_the_config_store

    keep_parsed_config_files()
    share_the_config_store()


_cache_config_file_loads()


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


@pytest.fixture(autouse=True)
def _one_process_console():
    """Each test starts with the console of one process: a multi-process run made in a test's own process
    (``distributed.process_id=1``) tags every later log line ``[process 1/2]`` (``run`` sets that for the job's life),
    which a later test in the same worker read in its captured messages."""
    yield
    console = sys.modules.get("gensbi_sharding.harness.console")  # imported by a test: else nothing was set
    if console is not None:
        console.set_process(0, 1)


@pytest.fixture(scope="session")
def devices():
    devs = jax.devices()
    assert len(devs) == N_DEVICES, f"conftest asked for {N_DEVICES} CPU devices, JAX has {len(devs)}"
    return devs


# The test files that take longest, longest first. Under pytest-xdist (`make test`: --dist loadfile
# --no-loadscope-reorder) a worker that finishes a file takes the next one in collection order, so starting the long
# files first leaves the short ones to even out the two workers' ends (in xdist's default order, most tests first,
# one worker could start a ~90 s file as the other ran out of files). The files not listed take under ~5 s each
# (quiet): they come last, in alphabetical order. Seconds per file (one worker's) from the junit of a quiet `make test`
# in a fresh clone (2026-12-05 19:07, session 60's end; xdist's scheduling simulated from it: ends 650/649 s, were
# 648/652). LONGEST_FIRST_FAST: the seconds per file of `make test-fast`'s tests (-m "not slow"), from its run in a
# fresh clone under load (/tmp/x/check_fast.xml, session 71's end: 985 worker-seconds), less the tests session 72 marked
# slow (every one over ~0.5 s, and a parametrised family's cases past its fast_cases(n)): 523 of them left, so each
# file's ~seconds here are about twice a quiet machine's. Hydra compositions and the sbibm script's checks lead it.
LONGEST_FIRST = (
    "test_equivalence.py",  # ~149
    "test_preemption.py",  # ~146
    "test_local_processes.py",  # ~75
    "test_launch.py",  # ~65
    "test_user_files_r69t.py",  # ~65 (a clone of the checkout, a tiny run, the tests it breaks run there)
    "test_gensbi_models.py",  # ~44
    "test_param_dtype.py",  # ~40
    "test_dry_run.py",  # ~39
    "test_setting_checks.py",  # ~39
    "test_init.py",  # ~35
    "test_train.py",  # ~33
    "test_resume_refusals.py",  # ~32
    "test_sequential.py",  # ~26
    "test_refusal_fixes.py",  # ~26
    "test_checkpoint.py",  # ~25
    "test_config.py",  # ~24
    "test_sbibm_runner.py",  # ~22
    "test_evaluate.py",  # ~21
    "test_own_observation.py",  # ~18
    "test_user_view.py",  # ~18
    "test_state_check.py",  # ~17
    "test_fork_timeouts.py",  # ~15
    "test_readme_examples.py",  # ~15
    "test_local_process_stops.py",  # ~14
    "test_benchmark_cli.py",  # ~13
    "test_checkpoint_commits.py",  # ~13
    "test_launch_interrupt.py",  # ~12
    "test_sbibm_preset.py",  # ~11
    "test_sweep_subdirs.py",  # ~11
    "test_flax_idioms.py",  # ~11
    "test_start_imports.py",  # ~11
    "test_cross_process_checks.py",  # ~11
    "test_sweep_check.py",  # ~10
    "test_checkpoint_inputs.py",  # ~10
    "test_gensbi_wrappers.py",  # ~10
    "test_data_faults.py",  # ~10
    "test_untraceable_constructors.py",  # ~9
    "test_run_report.py",  # ~9
    "test_data.py",  # ~9
    "test_multihost.py",  # ~8
    "test_watchdog.py",  # ~8
    "test_interrupts.py",  # ~7
    "test_memory_check.py",  # ~7
    "test_console.py",  # ~7
    "test_presets.py",  # ~7
    "test_summary.py",  # ~7
    "test_observation_checks.py",  # ~7
    "test_docs_pages.py",  # ~6
    "test_models.py",  # ~6
    "test_list_settings.py",  # ~6
    "test_suggested_defaults.py",  # ~6
    "test_continued_runs.py",  # ~6
    "test_jax_unstarted.py",  # ~6
    "test_val_history_sets.py",  # ~6
)
LONGEST_FIRST_FAST = (
    "test_sbibm_runner.py",  # ~65
    "test_config.py",  # ~39
    "test_refusal_fixes.py",  # ~24
    "test_checkpoint_inputs.py",  # ~23
    "test_checkpoint.py",  # ~21 (with its resumed-equals-uninterrupted run)
    "test_equivalence.py",  # ~17 (its two kept rows: each a train-step compile)
    "test_setting_checks.py",  # ~20
    "test_summary.py",  # ~19
    "test_override_types.py",  # ~15
    "test_resume_refusals.py",  # ~14
    "test_sequential.py",  # ~13
    "test_gensbi_overrides.py",  # ~9
    "test_own_observation.py",  # ~8
    "test_continued_runs.py",  # ~7
    "test_observation_checks.py",  # ~7
    "test_data_faults.py",  # ~7
    "test_gensbi_harness_faults.py",  # ~6
    "test_sweep_check.py",  # ~6
    "test_init_sharded_inputs.py",  # ~6
    "test_flax_idioms.py",  # ~5
    "test_library_workflow.py",  # ~5
    "test_batch_inputs.py",  # ~5
    "test_suggested_defaults.py",  # ~5
    "test_hydra_walker_r67h.py",  # ~5
    "test_presets.py",  # ~4
    "test_rules.py",  # ~4
    "test_optimizer_inputs.py",  # ~4
    "test_train.py",  # ~4
    "test_group_compose_r67h.py",  # ~3
    "test_hydra_text_entry_fix_r68l.py",  # ~3
    "test_unparsed_overrides_r66f.py",  # ~3
    "test_override_prefixes.py",  # ~3
    "test_list_settings.py",  # ~3
    "test_resume_dtype_r70b.py",  # ~3
    "test_preemption.py",  # ~3
    "test_import_graph.py",  # ~3
    "test_hydra_start_r67h.py",  # ~3
    "test_models.py",  # ~3
    "test_report.py",  # ~3
    "test_runs_one_scan_r70b.py",  # ~3
    "test_sweep_hints.py",  # ~3
    "test_hydra_nulls_r64fix.py",  # ~3
    "test_constrain_inputs.py",  # ~3
    "test_hydra_mode_values_r68l.py",  # ~3
    "test_override_dicts.py",  # ~3
    "test_gensbi_wrappers.py",  # ~3
    "test_evaluate.py",  # ~3
)


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makeitem(collector, name, obj):
    """``@pytest.mark.fast_cases(n)`` on a parametrised test: its first ``n`` cases (in definition order) stay in
    ``make test-fast``, the rest get ``@pytest.mark.slow``. A family of cases that each compose and check a config
    (~0.5-1 s apiece on 2 cores) keeps a few in the quick check, which still covers its code path, and leaves the
    others to ``make test``, which runs them all; one line on the test instead of a ``pytest.param`` per case.

    Marked here, where one test's cases are made, all of them, before ``--lf``, a node id or ``-k`` picks some: a
    case's mark depends on its place in the family only. (Counted over the session's collected items instead, as
    session 72 first did, a case past ``n`` that ``--lf`` or its node id selected alone came first, so ``-m slow``
    left it out and ``-m "not slow"`` ran it.)"""
    made = yield
    cases = [item for item in made if isinstance(item, pytest.Function)] if isinstance(made, list) else []
    marker = cases[0].get_closest_marker("fast_cases") if cases else None
    if marker is None:
        return made
    n = marker.args[0] if len(marker.args) == 1 and not marker.kwargs else None
    if not hasattr(cases[0], "callspec") or not isinstance(n, int) or isinstance(n, bool) or n < 0:
        # misused, it would keep every case fast unsaid (no parametrize) or fail as an IndexError at collection
        raise TypeError(f"{cases[0].nodeid}: fast_cases(n) takes one int n >= 0 and goes on a parametrised test, "
                        f"got fast_cases{marker.args}{'' if hasattr(cases[0], 'callspec') else ' on a plain test'}")
    for case in cases[n:]:
        case.add_marker(pytest.mark.slow)
    return made


def pytest_collection_modifyitems(config, items):
    """Slow tests get one rerun of a coordination-service abort (``abort_reruns``); in an xdist worker, order the files
    longest first (the tests of a file keep their order)."""
    from abort_reruns import add_abort_reruns

    add_abort_reruns(items)
    if not hasattr(config, "workerinput"):
        return  # one process: the order does not change the run's length
    fast = (config.getoption("markexpr", "") or "").replace(" ", "") == "notslow"
    rank = {name: i for i, name in enumerate(LONGEST_FIRST_FAST if fast else LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest stay alphabetical


@pytest.fixture
def proc_takes_no_new_name():
    """Skips unless /proc answers a new folder with ENOENT, as Linux's does (the case the /proc messages name)."""
    try:
        os.mkdir("/proc/gensbi-probe")
    except FileNotFoundError:  # Linux's /proc
        return
    except OSError as err:
        pytest.skip(f"/proc refuses a new folder otherwise here ({err.strerror})")
    os.rmdir("/proc/gensbi-probe")  # no /proc here: "/" took it
    pytest.skip("/proc takes a new folder here")


def pytest_report_header(config):
    """The versions a run tested, in its header: a fresh install takes the newest releases the bounds allow, and
    jax/jaxlib 0.12.1 (newer than the working tree's) hung CI's two-process tests while the working tree passed."""
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    return "installed: " + ", ".join(f"{name} {installed(name)}" for name in
                                     ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "hydra-core", "gensbi"))
