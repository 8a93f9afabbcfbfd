"""The benchmark scripts' arguments and outputs: a bad argument stops at once naming it, every option says what
it is and its default, an out folder holding an earlier result is refused, peaks reported in MB.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from faults_helpers import REPO


BENCHMARK_BAD_ARGS = [
    # Was a traceback from deep inside (shard_model's ValueError, make_mesh's, shard_batch's, a median of
    # nothing, an UnboundLocalError, a missing .npz, Hydra's ConfigCompositionException), after the model
    # was built or a child process ran.
    ("step_overhead.py", ["--rule", "bogus"], "argument --rule: invalid choice: 'bogus' (choose from"),
    ("step_overhead.py", ["--model-axis", "3"],
     "argument --model-axis: 3 does not divide the 8 devices; choose one of [1, 2, 4, 8]"),
    ("step_overhead.py", ["--batch", "7"], "argument --batch: 7 does not split over the data-parallel size 4 "
                                           "(8 devices / --model-axis 2); e.g. --batch 8"),
    ("step_overhead.py", ["--blocks", "0"], "argument --blocks: 0 must be >= 1"),
    ("step_overhead.py", ["--steps", "0"], "argument --steps: 0 must be >= 1"),
    ("shard_model.py", ["--trials", "0"], "argument --trials: 0 must be >= 1"),
    ("init.py", ["--repeats", "0"], "argument --repeats: 0 must be >= 1"),
    ("init.py", ["--rule", "bogus"], "argument --rule: invalid choice: 'bogus' (choose from"),
    ("init.py", ["--model-axis", "3"], "argument --model-axis: 3 does not divide the 8 devices"),
    ("gensbi_pipeline.py", ["--steps", "10"], "argument --steps: 10 leaves no step to time after the first 20 "
                                              "(compilation); e.g. --steps 200"),
    # Was accepted: its one step after the first 20 ends no interval between batch requests, so GenSBI's time per
    # step was nan (numpy's "Mean of empty slice" warning) and the ratio nan, after the whole run.
    ("gensbi_pipeline.py", ["--steps", "21"], "argument --steps: 21 leaves no step to time after the first 20 "
                                              "(compilation); e.g. --steps 200"),
    # Was "e.g. 2" and "write 10" (review 46): each a value the --steps check above refused next.
    ("gensbi_pipeline.py", ["--steps", "-1e1"], "argument --steps: '-1e1' must be an integer >= 22; e.g. 200"),
    ("gensbi_pipeline.py", ["--steps", "1e1"], "argument --steps: '1e1' must be an integer >= 22; e.g. 200"),
    ("gensbi_pipeline.py", ["--steps", "0.5"], "argument --steps: '0.5' is not an integer; e.g. 200"),
    ("step_overhead.py", ["--batch", "-1e1"], "argument --batch: '-1e1' must be an integer >= 1; e.g. 256"),
    ("gensbi_pipeline.py", ["--steps", "30", "mesh.bogus=1"],
     "harness overrides mesh.bogus=1: mesh.bogus is not a setting of mesh; its settings: spec, model_axis, devices"),
    # Was "model.depth (model=mlp): ...; e.g. model.depth=3": the default model's, where this script runs Flux1.
    ("gensbi_pipeline.py", ["--steps", "30", "model.depth=abc"],
     "harness overrides model.depth=abc: model.depth=abc: model.depth (model=flux1): Value 'abc' of type 'str' could "
     "not be converted to Integer; e.g. model.depth=2"),
]


#: The scripts whose cases are forked from one process that imported their modules once, and what they import inside
#: their functions too: step_overhead.py imports JAX and Flax before its arguments; gensbi_pipeline.py checks its
#: harness overrides with Hydra and the harness (JAX with it) before it runs anything; shard_model.py imports JAX
#: at its top. init.py's cases run as processes of their own: it checks its arguments before importing JAX, so
#: each takes ~0.1 s of CPU, where a child forked from that process spends more ending it.
FORKED = ("step_overhead.py", "gensbi_pipeline.py", "shard_model.py")


FORKED_IMPORTS = ("jax", "flax.nnx", "hydra", "omegaconf")


@pytest.fixture(scope="module")
def forked_benchmark_runs(tmp_path_factory):
    """``{(script, args): its run}`` for the cases of ``FORKED``'s scripts, all forked from one Python process that
    imported the scripts' third-party modules once (tests/fork_launch.py: ~1.3 s of CPU less per run; each still a
    process of its own, from its script's first line)."""
    from fork_launch import run_forked

    cases = [(script, args) for script, args, _ in BENCHMARK_BAD_ARGS if script in FORKED]
    root = tmp_path_factory.mktemp("benchmark_args")
    folders = [root / str(i) for i in range(len(cases))]
    for folder in [*folders, root / "fork"]:
        folder.mkdir()
    procs = run_forked([{"args": args, "cwd": folder, "script": REPO / "benchmarks" / script}
                        for (script, args), folder in zip(cases, folders)],
                       env={**os.environ, "JAX_PLATFORMS": "cpu"}, timeout=300, workdir=root / "fork",
                       script=REPO / "benchmarks" / FORKED[0], imports=FORKED_IMPORTS)
    return {(script, tuple(args)): proc for (script, args), proc in zip(cases, procs)}


@pytest.mark.slow
@pytest.mark.parametrize("script, args, message", BENCHMARK_BAD_ARGS)
def test_a_benchmark_with_a_bad_argument_stops_at_once_naming_it(tmp_path, request, script, args, message):
    if script in FORKED:
        proc = request.getfixturevalue("forked_benchmark_runs")[script, tuple(args)]
    else:
        proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / script), *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""  # nothing measured, nothing printed as a result
    assert message in proc.stderr.strip().splitlines()[-1], proc.stderr


def test_every_benchmark_option_says_what_it_is_and_its_default():
    # Was: `--help` of shard_model.py showed a bare `--layers LAYERS` (no meaning, no default) under the
    # docstring's first line only; a newcomer had to read the source for what the README's tables ran.
    import ast
    import importlib.util
    problems = []
    for path in sorted((REPO / "benchmarks").glob("*.py")):
        for call in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
                continue
            keywords = {k.arg for k in call.keywords}
            where = f"{path.name}:{call.lineno}"
            if call.func.attr == "ArgumentParser" and path.name != "cli_args.py":
                problems.append(f"{where}: argparse.ArgumentParser (use cli_args.new_parser)")
            if call.func.attr == "add_parser" and "formatter_class" not in keywords:
                problems.append(f"{where}: add_parser without formatter_class=HelpFormatter")
            if call.func.attr == "add_argument" and "help" not in keywords:
                problems.append(f"{where}: add_argument without help")
    assert problems == []
    spec = importlib.util.spec_from_file_location("cli_args_for_test", REPO / "benchmarks" / "cli_args.py")
    cli_args = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli_args)
    parser = cli_args.new_parser("What it measures.\n\nRun: ``python x.py [--layers 16]``\n    kept as written")
    parser.add_argument("--layers", type=int, default=16, help="Linear layers")
    text = parser.format_help()
    assert "Linear layers (default: 16)" in text
    assert "Run: ``python x.py [--layers 16]``\n    kept as written" in text  # the whole docstring, unwrapped


@pytest.mark.slow
@pytest.mark.parametrize("existing", ["file", "results"])
def test_gpu_check_refuses_an_out_folder_holding_an_earlier_result(tmp_path, existing):
    # Was: its runs were refused the used folder, and the readers printed the earlier check's numbers as new.
    out = tmp_path / "out"
    if existing == "file":
        out.write_text("")
    else:
        (out / "dry_run" / "0").mkdir(parents=True)
        (out / "dry_run" / "0" / "metrics.json").write_text('{"status": "ok"}')
    proc = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_check.sh")], cwd=REPO, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "OUT": str(out)})
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (f"OUT={out} is not an empty folder (an earlier check's results are never overwritten): "
                           "set OUT to a new folder\n")


@pytest.mark.slow  # an end-to-end run (a training or dry run, or processes)
@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="Linux /proc only")
def test_shard_model_benchmark_reports_its_peak_in_mb_not_mib(monkeypatch):
    """Its "peak (MB)" column divided /proc's KiB by 1024 (MiB, 4.9 % less), beside a model size in MB."""
    # The benchmark's own measure, in this process (a process of its own spent ~3 s of CPU importing).
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    for name in ("shard_model", "cli_args"):  # imported here only for this test, gone after it
        monkeypatch.delitem(sys.modules, name, raising=False)
    import shard_model as b

    # /proc's readings given (a real allocation's peak read 186-198 MB for 200 in the whole suite's busy workers, as
    # other threads freed memory during the call): 195,313 KiB above the start are 200,000,512 bytes
    readings = {"VmRSS": 500_000, "VmHWM": 500_000 + 195_313}
    monkeypatch.setattr(b, "resident_kb", lambda field: readings[field])
    assert 199.9 <= b.measured(lambda *args: None, b.Stack(1, 8), None, "replicated")[1] <= 200.1  # MB; MiB: 190.7
