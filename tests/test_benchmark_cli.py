"""The benchmark scripts besides ``sbibm.py`` (``init.py``, ``shard_model.py``, ``step_overhead.py``,
``gensbi_pipeline.py``, ``gensbi_scale.py``) used as someone reproducing the README's tables uses them."""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from faults_helpers import load_benchmark

REPO = Path(__file__).resolve().parents[1]
sys.path.append(str(REPO / "benchmarks"))  # the scripts' shared cli_args
SCRIPTS = sorted(p.name for p in (REPO / "benchmarks").glob("*.py") if 'if __name__ == "__main__":' in p.read_text())

# Runs each script as ``python benchmarks/<script> --help`` does (its folder first on sys.path), then asks
# where ``import gensbi_sharding`` now comes from.
PROBE = """
import importlib.util, runpy, sys
start = list(sys.path)
for script in sys.argv[1:]:
    sys.path[:] = [{benchmarks!r}] + start[1:]
    for name in [m for m in sys.modules if m.split(".")[0] in ("gensbi_sharding", "cli_args")]:
        del sys.modules[name]
    sys.argv = [script, "--help"]
    try:
        runpy.run_path({benchmarks!r} + "/" + script, run_name="__main__")
    except SystemExit:
        pass
    print(script, importlib.util.find_spec("gensbi_sharding").origin, flush=True)
"""


@pytest.mark.slow  # one interpreter importing JAX and GenSBI: about 5 s
def test_every_script_measures_this_checkout_not_an_installed_copy(tmp_path):
    # Was: python benchmarks/init.py (shard_model.py, step_overhead.py, gensbi_pipeline.py, gensbi_scale.py's
    # own imports) put only benchmarks/ on sys.path, so gensbi_sharding came from whatever the environment had
    # installed: another clone's editable install, or a non-editable copy of older code. Here such a copy
    # shadows the checkout the way site-packages does.
    shadow = tmp_path / "site" / "gensbi_sharding"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('the installed copy, not this checkout')\n")
    proc = subprocess.run([sys.executable, "-c", PROBE.format(benchmarks=str(REPO / "benchmarks")), *SCRIPTS],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path / "site"), "JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if line.split(" ", 1)[0] in SCRIPTS)
    assert SCRIPTS and found == {s: str(REPO / "gensbi_sharding" / "__init__.py") for s in SCRIPTS}


@pytest.mark.slow
def test_a_child_past_its_time_is_stopped_and_named_with_the_flag(tmp_path):
    # Was: gensbi_scale.py table and init.py waited for their children without a bound (a hung compile or
    # process kept the script forever); gensbi_scale.py init's 3600 s ended in a TimeoutExpired traceback.
    import time

    from cli_args import run_bounded

    start = time.perf_counter()
    with pytest.raises(SystemExit) as stop:
        run_bounded([sys.executable, "-c", "import time; time.sleep(60)"], timeout_s=0.5, what="the dry-run sweep")
    assert time.perf_counter() - start < 20
    assert str(stop.value) == ("the dry-run sweep ran past --timeout 0.5 s and was stopped; on a slower or busier "
                               "machine pass a larger one, e.g. --timeout 2")
    assert run_bounded([sys.executable, "-c", "print(6 * 7)"], timeout_s=60, what="x", capture_output=True,
                       text=True).stdout == "42\n"


@pytest.mark.parametrize("script, argv, waited", [("gensbi_scale", ["table", "--timeout", "7"], 7),
                                                  ("gensbi_scale", ["init"], 3600),
                                                  ("init", ["--timeout", "9", "--repeats", "1"], 9)])
def test_every_child_wait_of_a_script_is_bounded(monkeypatch, script, argv, waited):
    module = load_benchmark(script)
    seen = []

    def child(command, **kwargs):  # each child process a script starts: its bound, then a stop
        seen.append(kwargs.get("timeout"))
        raise subprocess.TimeoutExpired(command, kwargs.get("timeout"))

    monkeypatch.setattr(subprocess, "run", child)
    monkeypatch.setattr(sys, "argv", [f"{script}.py", *argv])
    with pytest.raises(SystemExit) as stop:
        module.main()
    assert seen == [waited] and f"ran past --timeout {waited} s" in str(stop.value)


@pytest.mark.parametrize("script, argv, offered", [("gensbi_scale", ["table", "--timeout", "1"], 3600),
                                                  ("gensbi_scale", ["init", "--timeout", "2000"], 8000),
                                                  ("init", ["--timeout", "9", "--repeats", "1"], 1800)])
def test_a_script_stopped_by_its_timeout_offers_one_no_shorter_than_its_default(monkeypatch, script, argv, offered):
    # gensbi_scale.py table --timeout 1: "the dry-run sweep ran past --timeout 1 s and was stopped; ... e.g.
    # --timeout 4", which, pasted, stops the sweep of minutes again; now at least the script's default.
    module = load_benchmark(script)

    def child(command, **kwargs):
        raise subprocess.TimeoutExpired(command, kwargs.get("timeout"))

    monkeypatch.setattr(subprocess, "run", child)
    monkeypatch.setattr(sys, "argv", [f"{script}.py", *argv])
    with pytest.raises(SystemExit) as stop:
        module.main()
    assert str(stop.value).endswith(f"pass a larger one, e.g. --timeout {offered}")


def test_gensbi_scale_table_names_its_sweep_folder_as_hydra_reads_it_back(monkeypatch, tmp_path):
    # Was: hydra.sweep.dir=<its temporary folder> as it is: under a TMPDIR with a space or parentheses
    # ("/tmp/my tmp (1)") Hydra's grammar refused the sweep the script started (round 43).
    from hydra.core.override_parser.overrides_parser import OverridesParser

    module = load_benchmark("gensbi_scale")
    odd = tmp_path / "my tmp (1)"
    odd.mkdir()
    monkeypatch.setenv("TMPDIR", str(odd))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    seen = []

    def child(command, **kwargs):
        seen.append(command)
        raise subprocess.TimeoutExpired(command, kwargs.get("timeout"))

    monkeypatch.setattr(subprocess, "run", child)
    monkeypatch.setattr(sys, "argv", ["gensbi_scale.py", "table", "--timeout", "7"])
    with pytest.raises(SystemExit):
        module.main()
    (given,) = [a for a in seen[0] if a.startswith("hydra.sweep.dir=")]
    parsed = OverridesParser.create().parse_overrides([given])[0]
    assert str(odd) in parsed.value() and parsed.value().startswith(str(odd))


@pytest.mark.parametrize("override, message", [
    # Were taken by the harness's side alone: its 5 steps (or batch 64, seed 3, 500 samples) against GenSBI's
    # 2000 steps, printed as one comparison "2000 steps"; mesh=auto trained the harness on 8 devices beside
    # GenSBI's one; model=mlp ended in an AttributeError traceback after the harness run.
    ("train.steps=5", "harness override train.steps=5: this script sets train.steps for both sides; use --steps"),
    ("data.batch_size=64", "sets data.batch_size for both sides; use --batch-size"),
    ("seed=3", "use --seed"), ("eval.num_samples=500", "use --num-samples"), ("++eval.c2st_folds=3", "use --folds"),
    ("mesh=auto", "sets mesh for both sides; leave it out (both sides train on one device, as GenSBI's pipeline does)"),
    ("model=mlp", "leave it out (the comparison is of GenSBI's Flux1 on both sides; its model.* fields may be set)"),
    ("data=slcp", "leave it out (the comparison is on two_moons at 10,000 simulations)"),
    ("eval.observations=[1,2]", "leave it out (both sides score one observation; data.num_observation picks it)"),
    ("eval.enabled=false", "leave it out (both sides are scored by C2ST)"),
])
def test_gensbi_pipeline_refuses_an_override_of_what_both_sides_share(monkeypatch, capsys, override, message):
    module = load_benchmark("gensbi_pipeline")
    monkeypatch.setattr(module, "harness_config", lambda *a: pytest.fail("the comparison started"))
    monkeypatch.setattr(sys, "argv", ["gensbi_pipeline.py", "--steps", "100", override])
    with pytest.raises(SystemExit) as stop:
        module.main()
    assert stop.value.code == 2 and message in capsys.readouterr().err


def test_gpu_check_bounds_every_command_it_waits_for():
    # Was: nvidia-smi, the JAX version check and the two readers of results ran unbounded (a wedged driver
    # hangs `import jax` on a GPU machine), and a run that wrote no metrics.json ended in a traceback.
    import re

    script = (REPO / "benchmarks" / "gpu_check.sh").read_text()
    commands = [line for line in script.splitlines()
                if re.match(r"\s*(if\s+)?(\w+=\S+\s+)*(timeout\s+\d+\s+)?(python3|nvidia-smi)\b", line)]
    assert len(commands) == 7 and all(re.search(r"\btimeout \d+ (python3|nvidia-smi)\b", c) for c in commands), commands
    assert "the run ended before writing it" in script


def test_gensbi_scale_table_ranks_no_sweep_that_died_part_way(monkeypatch):
    # Was: the sweep killed after 2 of its 12 jobs (out of memory, SIGKILL) printed a ranking of those 2, all
    # ok, as if it were the whole table.
    import json

    scale = load_benchmark("gensbi_scale")

    def sweep(cmd, **kwargs):
        out = Path(next(a for a in cmd if a.startswith("hydra.sweep.dir=")).split("=", 1)[1])
        for k, rule in enumerate(("replicated", "fsdp")):
            (out / str(k)).mkdir()
            (out / str(k) / "metrics.json").write_text(json.dumps({
                "status": "ok", "rule": rule, "config": {"rule": {"name": rule}, "mesh": {"model_axis": 1}}}))
        return subprocess.CompletedProcess(cmd, -9, "", "")

    monkeypatch.setattr(subprocess, "run", sweep)
    monkeypatch.setattr(scale, "count_params", lambda: pytest.fail("a ranking was made"))
    with pytest.raises(SystemExit) as stop:
        scale.table(argparse.Namespace(timeout=60))
    assert str(stop.value) == (
        "the dry-run sweep ended with exit -9 after 2 of 12 jobs, so no ranking; never run: rule=replicated "
        "mesh.model_axis=2, rule=replicated mesh.model_axis=4, rule=replicated mesh.model_axis=8, rule=fsdp "
        "mesh.model_axis=2, rule=fsdp mesh.model_axis=4, rule=fsdp mesh.model_axis=8, rule=tensor mesh.model_axis=1, "
        "rule=tensor mesh.model_axis=2, rule=tensor mesh.model_axis=4, rule=tensor mesh.model_axis=8 (no output)")


@pytest.mark.parametrize("argv, message", [
    # Were the harness's keys and fixes, which this script refuses in turn ("set eval.c2st_folds=5": "this script
    # sets eval.c2st_folds for both sides; use --folds").
    (["--folds", "1"], "--folds 1 must be >= 2 (cross-validation needs two folds); pass --folds 2"),
    (["--seed", "-1"], "--seed -1 must be >= 0; e.g. --seed 0"),
    # Were "argument --folds: 0 must be >= 1" and "--num-samples: 'abc' is not an integer; e.g. 2": values the
    # checks here refused next (--folds 1; --num-samples 2 < 2 * --folds), and "e.g. 2" for --batch-size too.
    (["--folds", "0"], "--folds 0 must be >= 2 (cross-validation needs two folds); pass --folds 2"),
    (["--num-samples", "0"], "--num-samples 0 must be >= 2 * --folds (--folds 5); pass --num-samples 10"),
    (["--num-samples", "abc"], "argument --num-samples: 'abc' is not an integer; e.g. 10000"),
    (["--batch-size", "abc"], "argument --batch-size: 'abc' is not an integer; e.g. 256"),
    # Was "e.g. 2", the fraction rounded: a value the check of --num-samples against 2 * --folds refused next.
    (["--num-samples", "2.5"], "argument --num-samples: '2.5' is not an integer; e.g. 10000"),
    # Was refused by the harness's run once JAX started: "harness run failed: ...", exit 1, after the same line logged.
    (["--batch-size", "100000"], "--batch-size 100000 cannot be used: the global batch size 100000 must be at most "
                                 "9000 (the 9000 training pairs); pass --batch-size 9000"),
    # Were refused by the harness's run, "harness run failed", exit 1 (argparse's refusals exit 2), suggesting the
    # schema's value, not the one this script's composition (data=two_moons) runs with: data.theta_transform=support.
    (["train.val_every=-1"], "train.val_every=-1 must be >= 0 (0: off); e.g. train.val_every=250"),
    (["data.theta_transform=bogus"], "data.theta_transform=bogus is not one of support, none; e.g. "
                                     "data.theta_transform=none"),
])
@pytest.mark.fast_cases(3)
def test_gensbi_pipeline_names_its_flags_where_the_harness_refuses_their_values(monkeypatch, capsys, argv, message):
    import gensbi_sharding.harness.run as harness_run

    module = load_benchmark("gensbi_pipeline")
    monkeypatch.setattr(harness_run, "run", lambda cfg: pytest.fail("the comparison started"))
    monkeypatch.setattr(sys, "argv", ["gensbi_pipeline.py", "--steps", "100", *argv])
    with pytest.raises(SystemExit) as stop:
        module.main()
    assert stop.value.code == 2 and capsys.readouterr().err.endswith(f"gensbi_pipeline.py: error: {message}\n")


@pytest.mark.parametrize("value", ["abc", "1.5"])
def test_gensbi_scale_names_a_timeout_a_sweep_can_finish_in(monkeypatch, capsys, value):
    # Was "'abc' is not an integer; e.g. 2" (and for '1.5', the fraction rounded, the same): two seconds, which stops
    # the sweep of dry runs before its first compiles.
    module = load_benchmark("gensbi_scale")
    monkeypatch.setattr(sys, "argv", ["gensbi_scale.py", "table", "--timeout", value])
    with pytest.raises(SystemExit) as stop:
        module.main()
    assert stop.value.code == 2
    assert capsys.readouterr().err.endswith(f"error: argument --timeout: '{value}' is not an integer; e.g. 3600\n")


def test_gensbi_pipeline_names_its_flags_in_the_harness_runs_own_failure(monkeypatch, caplog):
    import logging

    import gensbi_sharding.harness.run as harness_run

    module = load_benchmark("gensbi_pipeline")
    error = "ValueError: eval.c2st_folds=5 folds need 10 samples per class; set eval.num_samples=10"

    def failed(cfg):  # a failure only the run meets: its own line says it too
        logging.getLogger("gensbi_sharding").error("%s", error)
        return {"status": "error", "error": error}

    monkeypatch.setattr(harness_run, "run", failed)
    monkeypatch.setattr(sys, "argv", ["gensbi_pipeline.py", "--steps", "100"])
    with pytest.raises(SystemExit) as stop:
        module.main()
    message = "ValueError: --folds 5 folds need 10 samples per class; pass --num-samples 10"
    assert str(stop.value) == f"harness run failed: {message}"
    assert [r.getMessage() for r in caplog.records if r.name == "gensbi_sharding"] == [message]  # the harness's line
    assert not logging.getLogger("gensbi_sharding").filters  # taken off again


@pytest.mark.parametrize("message, flags", [
    ("data.batch_size=100000 cannot be used: the global batch size 100000 must be at most 9000 (the 9000 training "
     "pairs); set data.batch_size=9000", "--batch-size 100000 cannot be used: the global batch size 100000 must be "
     "at most 9000 (the 9000 training pairs); pass --batch-size 9000"),
    ("eval.num_samples=20000 exceeds the 10000 reference posterior samples; set eval.num_samples=10000",
     "--num-samples 20000 exceeds the 10000 reference posterior samples; pass --num-samples 10000"),
    ("train.steps=3000000000 is beyond int32", "--steps 3000000000 is beyond int32"),
    # Left as they are: another key ending alike, a prose "seed", a key this script leaves to overrides.
    ("data.seed=3, c2st_seed=0, the noise seed, model.depth=0", "data.seed=3, c2st_seed=0, the noise seed, model.depth=0"),
])
def test_gensbi_pipeline_words_the_harness_keys_it_sets_as_its_flags(message, flags):
    assert load_benchmark("gensbi_pipeline").in_flags(message) == flags


@pytest.mark.parametrize("script, argv, named", [
    # Was: each child aborted in XLA ("Check failed: buffer_.IsConcrete()", exit -6), printed as "eager failed"
    ("init", ["--width", "200000"], "--width 200000 --depth 8 --mlp-ratio 4: the model alone is 10240.0 GB of float32"),
    # Was: a child building a billion layers in Python, silent until --timeout (1800 s) stopped it
    ("init", ["--depth", "1000000000"], "--width 2048 --depth 1000000000 --mlp-ratio 4: the model alone is "
                                        "134217728.0 GB of float32"),
    # Was: jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 4000000000000 bytes (a traceback)
    ("shard_model", ["--width", "1000000"], "--layers 16 --width 1000000: the model alone is 64000.1 GB of float32"),
    # Was: ValueError: RESOURCE_EXHAUSTED: Out of memory allocating 72000000000000 bytes (a traceback)
    ("step_overhead", ["--width", "3000000"], "--width 3000000 --depth 3: the model alone is 432000.0 GB of float32"),
])
def test_a_model_beyond_the_hosts_memory_is_refused_as_its_flags_are_parsed(monkeypatch, capsys, script, argv, named):
    from gensbi_sharding.harness import memory_check

    module = load_benchmark(script)
    monkeypatch.setattr(memory_check, "host_available_bytes", lambda: 24 * 10**9)
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("started a child"))
    monkeypatch.setattr(sys, "argv", [f"{script}.py", *argv])
    with pytest.raises(SystemExit):
        module.main()
    smaller = {"init": "--width or --depth (the defaults, 2048 and 8, build 1.07 GB)",
               "shard_model": "--layers or --width (the defaults, 16 and 2048, build 269 MB)",
               "step_overhead": "--width or --depth (the defaults, 128 and 3, build 0.8 MB)"}[script]
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"{script}.py: error: {named}, the host has 24.0 GB available; pass a smaller {smaller}")


@pytest.mark.slow
@pytest.mark.skipif(any(__import__("importlib.util").util.find_spec(m) for m in ("jax_cuda12_plugin", "jax_cuda13_plugin")),
                    reason="CUDA is available here: JAX_PLATFORMS=cuda starts")
@pytest.mark.parametrize("script", ["shard_model.py", "step_overhead.py"])
def test_a_jax_platforms_not_here_is_named_in_one_line(script):
    # Was: JAX_PLATFORMS=cuda on a CPU machine (the scripts keep a JAX_PLATFORMS they find) ended each in a traceback
    # ending in a bare AssertionError.
    import os

    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / script)], capture_output=True, text=True,
                          timeout=180, env={**os.environ, "JAX_PLATFORMS": "cuda"})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        f"{script}: error: JAX_PLATFORMS=cuda is not available here: JAX has cpu; unset JAX_PLATFORMS for JAX's "
        "default, or set JAX_PLATFORMS=cpu")


@pytest.fixture
def frozen_heap():
    """The objects alive before the test moved out of the cycle collector's reach (``gc.freeze``) until it ends.

    shard_model.py's ``gc.collect()`` before each timed call (about 45 per run) walked every object the worker's
    earlier tests left alive: 6 s alone, 36-84 s late in a full worker. Frozen, a collection walks only what the
    script allocated itself, which is what the script collects it for (its earlier trials' copies)."""
    import gc

    gc.freeze()
    yield
    gc.unfreeze()


@pytest.mark.slow  # two whole benchmark runs, each gc.collect()-ing per call
def test_shard_model_judges_its_time_target_only_at_the_size_it_is_set_for(monkeypatch, capsys, devices,
                                                                            frozen_heap):
    # Was: --layers 1 --width 8 printed "targets (ours / reference <= 1.10 ...): met" (or NOT met, by noise): a
    # ratio of per-call overheads claimed as the placement target set for a >= 64M-parameter model.
    pytest.importorskip("gensbi")
    module = load_benchmark("shard_model")
    monkeypatch.setattr(sys, "argv", ["shard_model.py", "--layers", "1", "--width", "8", "--trials", "1"])
    assert module.main() == 0  # the same buffers kept: the one claim this size can judge
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == ("time target not judged: 72 parameters, under the 64M it is set for (a placement this small "
                       "is mostly per-call overhead; the defaults, --layers 16 --width 2048, judge it); same buffers "
                       "on a second call: met"), out[-1]
    assert not any(line.startswith("targets") for line in out)
    monkeypatch.setattr(module, "TARGET_PARAMS", 72)  # at the size it is set for, judged as before
    module.main()
    assert capsys.readouterr().out.splitlines()[-1].startswith(
        "targets (ours / reference <= 1.10 for every rule, same buffers on a second call): ")


@pytest.mark.slow
def test_step_overhead_judges_its_ratio_target_only_at_the_size_it_is_set_for(monkeypatch, capsys, devices):
    # Was: --blocks 1 --steps 1 --width 8 printed "target (ratio <= 1.05): met": a ratio of per-call overheads
    # claimed as the target set for the defaults' model (--width 128 --depth 3).
    module = load_benchmark("step_overhead")
    monkeypatch.setattr(sys, "argv", ["step_overhead.py", "--blocks", "1", "--steps", "1", "--width", "8"])
    assert module.main() == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == ("target not judged: 1,218 parameters, under the 203,778 it is set for (a step this small is "
                       "mostly per-call overhead; the defaults, --width 128 --depth 3, judge it)"), out[-1]
    assert not any(line.startswith("target (") for line in out)
    monkeypatch.setattr(module, "TARGET_PARAMS", 1_218)  # at the size it is set for, judged as before
    module.main()
    assert capsys.readouterr().out.splitlines()[-1] in ("target (ratio <= 1.05): met", "target (ratio <= 1.05): NOT met")


def test_benchmark_help_names_each_default_once():
    # Typed: python benchmarks/gensbi_scale.py --help. Was: "--timeout TIMEOUT  seconds the dry-run sweep ... may
    # run (default 3600) (default: 3600)": the help text said its default, and the scripts' formatter adds it again.
    import re

    for script in sorted((REPO / "benchmarks").glob("*.py")):
        source = script.read_text()
        if "new_parser" in source or "HelpFormatter" in source:  # cli_args's: argparse's defaults formatter
            assert not re.findall(r"help=[^\n]*\(default \d+\)", source), script.name


@pytest.mark.slow  # up to three subprocesses; on the old code each did its work first (a sweep, a child, a setup)
@pytest.mark.parametrize("argv", [["gensbi_scale.py", "table", "--timeout", "20"], ["gensbi_scale.py", "init"],
                                  ["gensbi_pipeline.py", "--steps", "22", "--num-samples", "100", "--folds", "2"]])
def test_a_script_that_needs_gensbi_says_so_in_one_line_before_any_work(tmp_path, argv):
    # Was, without the gensbi extra: table ran its 12 dry-run jobs and printed the missing package 12 times in one
    # line; init printed its table's header, then "benchmarks/-c: 'gensbi' is not installed"; gensbi_pipeline.py
    # simulated and ran the harness's setup, then said it twice. A package that raises as a missing one does
    # stands in for it (children inherit PYTHONPATH, as they would the Python that lacks it).
    (tmp_path / "gensbi").mkdir()
    (tmp_path / "gensbi" / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'gensbi'\", "
                                                     "name='gensbi')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, f"benchmarks/{argv[0]}", *argv[1:]], cwd=REPO, env=env, text=True,
                          capture_output=True, timeout=240)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (f"{argv[0]}: error: needs GenSBI, which is not installed for {sys.executable}: "
                           f"{sys.executable} -m pip install -e \".[gensbi]\" (make run installs it into .venv)\n")


@pytest.mark.slow
def test_ctrl_c_in_a_script_is_one_line_and_exit_code_130():
    # Was: step_overhead.py (shard_model.py, gensbi_pipeline.py) stopped by Ctrl-C printed a traceback into JAX.
    code = ("import sys; sys.argv = ['benchmarks/step_overhead.py']; sys.path.insert(0, 'benchmarks'); "
            "import cli_args; raise KeyboardInterrupt")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, text=True, capture_output=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (-signal.SIGINT, "")  # Python ends by SIGINT: a shell's 130
    assert proc.stderr == "benchmarks/step_overhead.py: stopped by Ctrl-C; run it again to measure\n"


def test_ctrl_c_while_a_scripts_child_runs_exits_130(monkeypatch, capsys):
    # Was exit code 1 (a failure: make and scripts could not tell a Ctrl-C from a crash), as a SystemExit's text.
    from cli_args import run_bounded

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(subprocess, "run", interrupted)
    with pytest.raises(SystemExit) as stop:
        run_bounded(["true"], timeout_s=5, what="the eager way")
    assert stop.value.code == 130
    assert capsys.readouterr().err == "the eager way: stopped by Ctrl-C; nothing of it was kept\n"


@pytest.mark.slow  # a whole benchmark run, gc.collect()-ing per call
def test_shard_model_names_the_parameter_count_it_places(monkeypatch, capsys, devices, frozen_heap):
    # Was "0.0M float32 parameters (0 MB)" at --layers 1 --width 8 (72), where its last line said 72 parameters.
    pytest.importorskip("gensbi")
    module = load_benchmark("shard_model")
    monkeypatch.setattr(sys, "argv", ["shard_model.py", "--layers", "1", "--width", "8", "--trials", "1"])
    module.main()
    assert capsys.readouterr().out.splitlines()[0] == (
        "72 float32 parameters (288 B), 8 devices, mesh {'data': 4, 'model': 2}, medians of 1 alternating trials")


@pytest.mark.slow
def test_a_module_of_the_scripts_run_as_one_names_the_script_to_run():
    # A new user's report: `python benchmarks/<f>.py --help` for each file there; the nine modules the scripts
    # import (cli_args.py, sbibm_plot.py, ...) printed nothing and exited 0, as if they had run.
    modules = sorted(p.name for p in (REPO / "benchmarks").glob("*.py") if p.name not in SCRIPTS)
    assert "sbibm_plot.py" in modules and "sequential_rounds.py" in modules and "sbibm.py" not in modules
    probe = ("import runpy, sys\nsys.path.insert(0, sys.argv[1])\nfor module in sys.argv[2:]:\n"
             "    sys.argv = [module, '--help']\n    try:\n"
             "        runpy.run_path(sys.path[0] + '/' + module, run_name='__main__')\n"
             "        print(module, 'ran')\n    except SystemExit as stop:\n        print(module, stop.code)\n")
    done = subprocess.run([sys.executable, "-c", probe, str(REPO / "benchmarks"), *modules], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    said = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert set(said) == set(modules), done.stderr
    for module in modules:
        script = "sequential.py" if module == "sequential_rounds.py" else "sbibm.py"
        assert said[module] == (f"{module} is a module the benchmark scripts import, not a script: run "
                                f"python benchmarks/{script} --help"), (module, said[module])


@pytest.mark.slow
def test_each_file_of_benchmarks_runs_with_python_dash_m_as_it_does_by_path():
    # Was: python -m benchmarks.sbibm_plot (any module the scripts import, and init, shard_model, step_overhead,
    # gensbi_pipeline) ended in "ModuleNotFoundError: No module named 'cli_args'"; python -m benchmarks.sbibm worked.
    # One real -m, then each file as -m runs it (runpy.run_module imports the package first), in one process.
    proc = subprocess.run([sys.executable, "-m", "benchmarks.sbibm_plot", "--help"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == ("sbibm_plot.py is a module the benchmark scripts import, not a script: run python "
                           "benchmarks/sbibm.py --help\n")
    names = sorted(p.stem for p in (REPO / "benchmarks").glob("*.py") if p.name != "__init__.py")
    probe = ("import contextlib, io, runpy, sys\nfor name in sys.argv[1:]:\n    sys.argv = [name, '--help']\n"
             "    try:\n        with contextlib.redirect_stdout(io.StringIO()) as out:\n"
             "            runpy.run_module('benchmarks.' + name, run_name='__main__', alter_sys=True)\n"
             "        print(name, 'ran')\n    except SystemExit as stop:\n"
             "        print(name, stop.code, 'usage:' in out.getvalue())\n")
    done = subprocess.run([sys.executable, "-c", probe, *names], cwd=REPO, capture_output=True, text=True, timeout=240)
    said = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert set(said) == set(names), done.stderr[-3000:]
    for name in names:
        script = "sequential.py" if name == "sequential_rounds" else "sbibm.py"
        assert said[name] == ("0 True" if f"{name}.py" in SCRIPTS else f"{name}.py is a module the benchmark scripts "
                              f"import, not a script: run python benchmarks/{script} --help False"), (name, said[name])
