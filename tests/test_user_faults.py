"""Faults found by using the posterior-quality and output features as users do (issue 14, second round).

Each test reproduces one fault on the main it was found on, and checks the whole kind:
a setting whose consequence is known before training is refused before training, with a
message naming the value and the override that fixes it; nothing is written but the record.
"""

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from faults_helpers import REPO, hint, patch_task, registered, run_tiny
from gensbi_sharding.harness import data as D


def assert_refused_before_training(metrics: dict, out, *needles: str) -> None:
    assert metrics["status"] == "error", metrics
    for needle in needles:
        assert needle in metrics["error"], (needle, metrics["error"])
    assert not (out / "train_losses.npz").exists() and not (out / "checkpoints").exists()


# ------------------------------------------------- observations the transforms or the reference cannot serve

def test_log_of_a_non_positive_observation_is_refused_before_training(tmp_path, devices):
    # two_moons' observation 1 holds a negative value: its log is NaN, so every posterior sample
    # was NaN, and the run failed after training with "fix the sampler".
    metrics = run_tiny(tmp_path / "a", "data.x_transform=log")
    assert_refused_before_training(metrics, tmp_path / "a", "data.x_transform=log needs positive data",
                                   "observation 1 of task 'two_moons'", "set data.x_transform=none")
    assert hint(metrics["error"], "data.x_transform") == "none"


def test_every_scored_observation_is_checked_before_training(monkeypatch, tmp_path, devices):
    patch_task(monkeypatch, {}, observation={2: [np.nan, 0.1]})
    metrics = run_tiny(tmp_path / "a", "eval.enabled=true", "eval.observations=[1,2]")
    assert_refused_before_training(metrics, tmp_path / "a", "observation 2 of task 'two_moons' holds "
                                   "non-finite values [nan, 0.1", "eval.observations")


def test_more_samples_than_the_reference_is_refused_before_training(tmp_path, devices):
    # C2ST compares as many rows of each: 20,000 samples were drawn and 10,000 silently scored.
    metrics = run_tiny(tmp_path / "a", "eval.enabled=true", "eval.num_samples=10001")
    assert_refused_before_training(metrics, tmp_path / "a", "eval.num_samples=10001 exceeds the 10000 "
                                   "reference posterior samples", "set eval.num_samples=10000")


def test_simulations_outside_the_transform_domain_are_named_as_such(monkeypatch, caplog):
    patch_task(monkeypatch, {3: np.nan}, observation=[0.5, 0.5])  # a positive observation
    with caplog.at_level(logging.WARNING, logger="gensbi_sharding"):
        sims = D.load_task("two_moons", num_simulations=200, x_transform="log")
    assert (sims.x_train > 0).all() and (sims.x_val > 0).all()
    outside = sims.dropped_non_finite - 1
    assert outside > 50  # two_moons' data are mostly not positive
    assert (f"dropped {sims.dropped_non_finite} simulation(s) of task 'two_moons': 1 whose theta or x hold "
            f"NaN or inf, {outside} outside the domain of the transforms (data.x_transform=log needs x > 0"
            in caplog.text)


def test_no_simulation_inside_the_transform_domain_names_the_transform(monkeypatch):
    patch_task(monkeypatch, {}, observation=[0.5, 0.5])
    with pytest.raises(ValueError, match=r"outside the domain of the transforms.*set data\.x_transform=none"):
        D.load_task("two_moons", num_simulations=4, x_transform="log", seed=1)


# ------------------------------------------------- resuming under settings the checkpoint's weights do not mean

# The resumed runs the fixes lead to, by composed config: the three cases' fixes each compose the same config
# (train.ema_decay=0 on two_moons' own data settings), and a run of one config from one checkpoint ends alike.
_FOLLOWED = {}


def run_followed(out, *overrides: str) -> dict:
    """``run_tiny(out, *overrides)``, run once per composed config (the output folder aside): a case whose fix
    composes the config another case's fix ran reads that run's metrics."""
    from omegaconf import OmegaConf

    from faults_helpers import compose_tiny

    key = OmegaConf.to_yaml(compose_tiny(*overrides))
    if key not in _FOLLOWED:
        _FOLLOWED[key] = run_tiny(out, *overrides)
    return _FOLLOWED[key]


@pytest.fixture(scope="module")
def no_ema_run(tmp_path_factory, devices):
    out = tmp_path_factory.mktemp("no_ema")
    assert run_tiny(out, "train.ema_decay=0")["status"] == "ok"
    return out


@pytest.mark.slow  # end-to-end runs (run_tiny: a refused one per case, and the fixes' one)
@pytest.mark.parametrize("changed, fix", [
    # The EMA on or off: restore failed listing 12 "missing from the checkpoint" paths and pointing at a folder.
    (("train.ema_decay=0.999",), "train.ema_decay=0"),
    # Another parameter space or data space: the restore fitted and training went on, silently wrong.
    (("train.ema_decay=0", "data.theta_transform=support"), "data.theta_transform=none"),  # two_moons': none
    # Another task: a shape error listing paths, no word of data=.
    (("train.ema_decay=0", "data=slcp", "data.batch_size=64"), "data=two_moons"),
])
def test_resume_under_other_settings_names_the_override_that_fits(no_ema_run, tmp_path, changed, fix):
    out = tmp_path / "b"
    metrics = run_tiny(out, f"train.resume={no_ema_run}", "train.steps=16", *changed)
    assert_refused_before_training(metrics, out, f"add {fix}", str(no_ema_run / "checkpoints" / "8"))
    assert "missing from the checkpoint" not in metrics["error"]
    key, value = fix.split("=")
    # The fix replaces what it names; the data settings go with data= (the task's own defaults).
    followed = [o for o in changed if o.startswith("train.") and not o.startswith(key + "=")] + [fix]
    again = run_followed(tmp_path / "c", f"train.resume={no_ema_run}", "train.steps=16", *followed)
    assert again["status"] == "ok" and again["start_step"] == 8, again.get("error")


@pytest.mark.slow
def test_a_resume_on_other_simulations_keeps_the_checkpoints_z_scores(no_ema_run, tmp_path):
    # A resume with another data.num_simulations (or seed) recomputed the z-score statistics from the
    # new simulations, so the saved weights met shifted inputs and outputs without a word: the same
    # weights, evaluated at their own step, scored C2ST 0.883 with the original budget and 0.900 with 1000.
    from gensbi_sharding.checkpoint import saved_info
    from gensbi_sharding.harness.simulation_data import NORMALIZATION

    saved = saved_info(no_ema_run / "checkpoints" / "8")[NORMALIZATION]
    assert len(saved["theta_mean"]) == 2 and len(saved["x_std"]) == 2 and min(saved["theta_std"]) > 0
    scored = ("train.steps=8", "train.ema_decay=0", "eval.enabled=true", "eval.num_samples=300", "eval.c2st_folds=2")
    same = run_tiny(tmp_path / "same", f"train.resume={no_ema_run}", *scored)
    other = run_tiny(tmp_path / "other", f"train.resume={no_ema_run}", *scored, "data.num_simulations=1536")
    assert same["status"] == other["status"] == "ok", (same.get("error"), other.get("error"))
    samples = [np.load(t / "posterior_samples.npz")["samples"] for t in (tmp_path / "same", tmp_path / "other")]
    np.testing.assert_array_equal(samples[0], samples[1])  # the same weights in the same coordinates
    assert same["c2st"] == other["c2st"]


# ------------------------------------------------- the other benchmark scripts with bad arguments

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
    # Was "e.g. 2" and "write 10" (review 46): each a value the --steps check above refused next.
    ("gensbi_pipeline.py", ["--steps", "-1e1"], "argument --steps: '-1e1' must be an integer >= 21; e.g. 200"),
    ("gensbi_pipeline.py", ["--steps", "1e1"], "argument --steps: '1e1' must be an integer >= 21; e.g. 200"),
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


# ------------------------------------------------- benchmarks/sbibm.py with folders that are not what it needs

def sbibm_main():
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "sbibm_script", Path(__file__).resolve().parents[1] / "benchmarks" / "sbibm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


@pytest.mark.parametrize("argv, needle", [
    # A mistyped folder read as "no c2st.csv ...: run the benchmark first".
    (["table", "{tmp}/nope"], "{tmp}/nope does not exist"),
    # A file where a folder goes: FileExistsError's traceback (--out) or "no c2st.csv" (a job's file).
    (["table", "{tmp}/job", "--out", "{tmp}/job/metrics.json"], "--out {tmp}/job/metrics.json is a file"),
    (["table", "{tmp}/job/metrics.json"], "{tmp}/job/metrics.json is a file, not a folder"),
    (["run", "--root", "{tmp}/job/metrics.json", "--tasks", "two_moons", "--budgets", "1000"],
     "--root {tmp}/job/metrics.json is a file"),
])
def test_sbibm_script_names_a_folder_that_is_not_one(tmp_path, argv, needle):
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "metrics.json").write_text("{}")
    with pytest.raises(SystemExit) as stop:
        sbibm_main()([a.format(tmp=tmp_path) for a in argv])
    assert needle.format(tmp=tmp_path) in str(stop.value), str(stop.value)
    assert (tmp_path / "job" / "metrics.json").read_text() == "{}"  # nothing overwritten
    assert not (tmp_path / "job.failed").exists()


def fake_sbibm_job(folder, task, budget, observations, status="ok"):
    """A job folder as launch.py leaves it: its config, metrics.json's status and c2st.csv."""
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "config.yaml").write_text(f"data:\n  name: {task}\n  num_simulations: {budget}\n")
    (folder / "metrics.json").write_text(json.dumps({"status": status}))
    (folder / "c2st.csv").write_text("observation,c2st,c2st_sd_folds,c2st_scores,n\n" + "".join(
        f"{k},{c:.6f},0.010000,{c:.6f} {c:.6f},200\n" for k, c in observations))


def test_sbibm_run_never_counts_a_finished_job_of_other_settings_as_done(tmp_path, capsys, monkeypatch):
    # Was: "two_moons 1000: done, skipped" for a job that ran train.steps=20 when train.steps=40 was asked,
    # and the table then showed its results as those of the settings asked (exit 0).
    import subprocess

    job = tmp_path / "two_moons_1000" / "job"
    fake_sbibm_job(job, "two_moons", 1000, [(1, 0.6)])
    (job / ".hydra" / "overrides.yaml").write_text(
        "- experiment=sbibm\n- data=two_moons\n- data.num_simulations=1000\n- train.steps=20\n"
        "- eval.observations=[1,2]\n")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail(f"a job was started: {a}"))
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: pytest.fail(f"a job was started: {a}"))  # run's way now
    argv = ["run", "--root", str(tmp_path), "--tasks", "two_moons", "--budgets", "1000", "--"]
    with pytest.raises(SystemExit) as stop:
        sbibm_main()([*argv, "train.steps=40", "eval.observations=[1,2]"])
    assert capsys.readouterr().out.strip() == (
        "two_moons 1000: finished with other settings (train.steps=20, asked 40): not rerun, not counted; pass "
        f"another --root for these settings, or move {tmp_path / 'two_moons_1000'} aside to rerun it")
    assert str(stop.value) == (
        "1 job(s) finished with other settings than asked: two_moons 1000 (other settings) (each named above with the "
        "settings that differ); pass another --root for these settings, or move those jobs aside")
    sbibm_main()([*argv, "train.steps=20", "eval.observations=[1, 2]"])  # the settings it ran with, respelled
    assert capsys.readouterr().out.strip() == "two_moons 1000: done, skipped"
    assert (job / "metrics.json").read_text() == json.dumps({"status": "ok"})  # never moved nor overwritten


def test_sbibm_table_leaves_out_unfinished_jobs_naming_them(tmp_path, capsys):
    # Was: a job that failed (or was preempted) after scoring observation 1 of 2 made a row of its
    # one observation, read as the task's result; now it is left out and named.
    fake_sbibm_job(tmp_path / "two_moons_10000" / "job", "two_moons", 10000, [(1, 0.6), (2, 0.7)])
    fake_sbibm_job(tmp_path / "slcp_10000" / "job", "slcp", 10000, [(1, 0.55)], status="error")
    sbibm_main()(["table", str(tmp_path), "--out", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line][1:]
    # Its row says so (was missing, which read as never run).
    assert rows == ["| two_moons | 10,000 | 0.650 +- 0.071 (2 obs.) | 0.606 | 0.554 (SNPE) |",
                    "| slcp | 10,000 | not counted (status error) | 0.901 | 0.713 (SNLE) |"]
    assert f"left out {tmp_path / 'slcp_10000' / 'job'}: status error" in err


def test_sbibm_table_leaves_out_a_job_whose_metrics_json_is_damaged_naming_it(tmp_path, capsys):
    # Was a JSONDecodeError traceback: no table at all, and no word of which file.
    fake_sbibm_job(tmp_path / "two_moons_10000" / "job", "two_moons", 10000, [(1, 0.6), (2, 0.7)])
    fake_sbibm_job(tmp_path / "slcp_10000" / "job", "slcp", 10000, [(1, 0.55)])
    (tmp_path / "slcp_10000" / "job" / "metrics.json").write_text("{trunc")
    sbibm_main()(["table", str(tmp_path), "--out", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert "| two_moons | 10,000 | 0.650" in out and "| slcp | 10,000 | not counted (status damaged) |" in out
    job = tmp_path / "slcp_10000" / "job"
    assert f"left out {job}: status damaged ({job / 'metrics.json'} cannot be read)" in err


def test_sbibm_table_refuses_one_observation_scored_by_two_jobs(tmp_path):
    # Was: both jobs' rows were averaged: "(4 obs.)" for two observations, the spread over duplicates.
    fake_sbibm_job(tmp_path / "a" / "job", "two_moons", 500, [(1, 0.6), (2, 0.7)])
    fake_sbibm_job(tmp_path / "b" / "job", "two_moons", 500, [(1, 0.8)])
    with pytest.raises(SystemExit) as stop:
        sbibm_main()(["table", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "out")])
    assert str(stop.value) == (f"two_moons at 500 simulations, observation 1, is scored by two jobs, "
                               f"{tmp_path / 'a' / 'job'} and {tmp_path / 'b' / 'job'}: one table row averages one "
                               "run; pass the folders of one run per (task, budget)")
    assert not (tmp_path / "out").exists()


def test_sbibm_table_says_not_published_for_a_budget_sbibm_lacks(tmp_path, capsys):
    # Was: "| nan | nan (not published) |".
    fake_sbibm_job(tmp_path / "job", "two_moons", 500, [(1, 0.6)])
    sbibm_main()(["table", str(tmp_path), "--out", str(tmp_path / "out")])
    assert "| two_moons | 500 | 0.600 (1 obs., no spread) | not published | not published |" in capsys.readouterr().out


# ------------------------------------------------- every refused value names an override that is then accepted

BAD_VALUES = [
    ("mesh.model_axis=0",), ("data.num_simulations=0",), ("data.batch_size=-1",), ("data.num_observation=0",),
    ("data.val_fraction=1.5",), ("train.steps=0",), ("train.log_every=0",), ("train.learning_rate=0",),
    ("train.checkpoint_every=-1",), ("train.keep=0",), ("eval.c2st_folds=1",), ("eval.ode_steps=0",),
    ("eval.num_samples=5", "eval.c2st_folds=3"), ("eval.observations=[0,3]",), ("eval.c2st_jobs=0",),
    ("train.schedule=linear",), ("train.warmup_steps=4000",), ("train.ema_decay=1.0",), ("train.ema_decay=-0.5",),
    ("train.val_every=-1",), ("train.patience=-1",), ("train.val_draws=0",), ("data.theta_transform=logit",),
    ("data.x_transform=sqrt",), ("train.weight_decay=-1",), ("data.shards=0",), ("devices.cpu_count=0",),
    ("distributed.timeout_s=0",), ("distributed.heartbeat_s=0",), ("distributed.mode=mpi",), ("model.init=lazy",),
    # Scored twice and counted twice in the mean and spread over observations; files named _1 for the second.
    ("eval.observations=[1,1]",),
    # Early stopping without validations during training: silently never stopped.
    ("train.patience=3", "train.val_every=0"),
]


@pytest.mark.parametrize("overrides", BAD_VALUES, ids=lambda o: " ".join(o))
def test_every_refused_value_names_an_override_that_fixes_it(overrides):
    import re

    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.config_checks import validate

    bad = compose_tiny("train.steps=4000", *overrides)
    with pytest.raises(ConfigError) as err:
        validate(bad)
    message = str(err.value)
    assert overrides[0].split("=")[0] in message
    fixes = re.findall(r"(?:e\.g\.|set|add|use) ((?:[a-z_]+\.)+[a-z0-9_]+=(?:\[[^\]]*\]|[^\s;,)]+))", message)
    assert fixes, message
    followed = compose_tiny("train.steps=4000", *overrides, *fixes)
    validate(followed)  # the hint is enough: the run then passes validation


@pytest.mark.slow
def test_sbibm_run_exits_non_zero_naming_the_failed_job(tmp_path):
    # run's main in this process (its job still a launch.py process): a SystemExit with a message is what
    # `python benchmarks/sbibm.py run ...` ends with, printing it on stderr with exit status 1.
    with pytest.raises(SystemExit) as stop:  # a config error (train.ema_decay=2) is now refused before any job
        sbibm_main()(["run", "--root", str(tmp_path), "--tasks", "two_moons", "--budgets", "1000", "--",
                      "train.resume=/nonexistent/run"])
    assert isinstance(stop.value.code, str), stop.value.code  # exit status 1; was 0: a script could not tell
    assert "1 job(s) failed: two_moons 1000" in stop.value.code
    metrics = (tmp_path / "two_moons_1000" / "job" / "metrics.json").read_text()
    assert '"status": "error"' in metrics and "checkpoint path '/nonexistent/run' does not exist" in metrics


def test_sbibm_run_leaves_a_job_another_runner_is_writing_alone(tmp_path, capsys):
    """Two runners on one --root: the second moved the first's live folder aside, splitting its files."""
    import subprocess
    import sys

    job = tmp_path / "two_moons_1000" / "job"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from gensbi_sharding.harness.folder_lock import FolderLock; "
         f"lock = FolderLock({str(job)!r}); lock.acquire(); print('held', flush=True); time.sleep(120)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(SystemExit) as stop:
            sbibm_main()(["run", "--root", str(tmp_path), "--tasks", "two_moons", "--budgets", "1000"])
        assert stop.value.code not in (0, None)
        out = capsys.readouterr().out
        assert "two_moons 1000: skipped" in out and "in use by another run" in out, out
        assert job.is_dir() and not list(tmp_path.glob("two_moons_1000.failed-*"))  # left where it runs
    finally:
        holder.kill()
        holder.wait(timeout=30)


# ------------------------------------------------- a name no registry knows: the override, then how to register

#: Hydra's choices of launch.py's default config (compose() alone does not record them).
CHOICES = {"model": "mlp", "data": "two_moons", "rule": "replicated"}
UNKNOWN_NAMES = [  # (overrides, the value named, the names listed, the fix, the second option)
    (("model.name=nope",), "model.name=nope", "flux1, mlp, simformer, transformer", "model.name=mlp",
     "@register_model('nope')"),
    (("model=transformer", "model.name=mlpp"), "model.name=mlpp", "flux1, mlp, simformer, transformer",
     "model.name=transformer", "@register_model('mlpp')"),
    (("model.name=transformer",), "model.name=transformer", "model=mlp loaded", "model.name=mlp",
     "choose the model with model=transformer"),
    (("data.name=two_moon",), "data.name=two_moon", "sir, slcp, two_moons", "data.name=two_moons",
     "@register_data('two_moon')"),
    (("rule.name=nope",), "rule.name=nope", "fsdp, fsdp_tensor, replicated, tensor", "rule.name=replicated",
     "write conf/rule/nope.yaml"),
    (("rule.name=fsdp",), "rule.name=fsdp", "rule=replicated loaded", "rule=fsdp", None),
]


@pytest.mark.parametrize("overrides, named, listed, fix, second", UNKNOWN_NAMES, ids=lambda o: str(o))
def test_an_unknown_name_names_the_override_that_fixes_it(overrides, named, listed, fix, second):
    # Was: "unknown model 'nope'; known models: ... Register a new one with @register_model('nope')."
    import re

    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.config_checks import validate
    from gensbi_sharding.harness.name_hints import registered_name_problem

    choices = {**CHOICES, **dict(o.split("=") for o in overrides if "." not in o.split("=")[0])}
    message = registered_name_problem(compose_tiny(*overrides), choices)
    assert message and named in message and listed in message, message
    found = re.findall(r"(?:set|choose it with) ((?:[a-z_]+\.)?[a-z_]+=\w+)", message)
    assert found and found[0] == fix, message
    assert second is None or message.index(second) > message.index(fix)  # registering comes second
    if not named.startswith("rule."):  # only Hydra knows which file a rule table came from
        with pytest.raises(ConfigError, match=re.escape(named)):
            validate(compose_tiny(*overrides))
    followed = compose_tiny(*overrides, fix)  # the fix typed after the bad override is enough
    validate(followed)
    assert registered_name_problem(followed, {**choices, **dict([fix.split("=")] if "." not in fix else [])}) is None


def test_a_model_of_ones_own_is_told_every_step_and_its_borrowed_schema_is_named(tmp_path, request):
    # Was, for model=tiny (conf/model/tiny.yaml: /mlp_schema, name: tiny): "register it with
    # @register_model('tiny') and add conf/model/tiny.yaml" (a factory registered in the user's own module is
    # never imported); registered, "model.name=tiny does not fit the settings model=mlp loaded ...; choose the
    # model with model=tiny", the very choice the command made.
    from dataclasses import dataclass

    from hydra.core.config_store import ConfigStore

    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.config import MLPConfig
    from gensbi_sharding.harness.models.mlp import make_mlp
    from gensbi_sharding.harness.name_hints import registered_name_problem

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "tiny.yaml").write_text("defaults:\n  - /mlp_schema\n  - _self_\nname: tiny\n")
    search = f"hydra.searchpath=[file://{tmp_path}]"
    choices = {**CHOICES, "model": "tiny"}
    unknown = registered_name_problem(compose_tiny(search, "model=tiny"), choices)
    # Was "(model.name=tiny); ...; set model.name=mlp, or drop model.name=tiny": the user typed model=tiny.
    assert unknown.startswith("unknown model 'tiny' (model=tiny, whose file sets name: tiny); registered: flux1, "
                              "mlp, simformer, transformer; choose one with model=<name> (e.g. model=mlp) instead of "
                              "model=tiny; to add 'tiny', "), unknown
    assert "model.name" not in unknown
    assert unknown.endswith("to add 'tiny', register its factory with @register_model('tiny') in a module that "
                            "gensbi_sharding/harness/models/__init__.py imports, give it a schema in "
                            "gensbi_sharding/harness/config.py stored as tiny_schema, and add conf/model/tiny.yaml "
                            "listing /tiny_schema (README: A model of your own in the harness)"), unknown
    registered(request, "model", "tiny", lambda **kw: make_mlp(**kw))  # a factory of ones own, built as mlp
    borrowed = registered_name_problem(compose_tiny(search, "model=tiny"), choices)
    assert borrowed == (
        "model=tiny holds the fields of mlp (its defaults name /mlp_schema); a model of your own needs a schema of "
        "its own: a dataclass in gensbi_sharding/harness/config.py (as MLPConfig is mlp's) stored as tiny_schema by "
        "register_configs, listed in conf/model/tiny.yaml's defaults (README: A model of your own in the "
        "harness); or set name: mlp in that file to build mlp")

    @dataclass
    class TinyConfig(MLPConfig):
        name: str = "tiny"

    ConfigStore.instance().store(name="tiny_schema", node=TinyConfig)  # the steps it names, followed
    try:
        (tmp_path / "model" / "tiny.yaml").write_text("defaults:\n  - /tiny_schema\n  - _self_\nname: tiny\n")
        assert registered_name_problem(compose_tiny(search, "model=tiny"), choices) is None
    finally:
        ConfigStore.instance().repo.pop("tiny_schema.yaml")


def test_an_unknown_data_set_chosen_by_its_file_is_named_as_typed(tmp_path):
    # Was "(data.name=mysim); ...; set data.name=mysim, or drop data.name=mysim" for data=mysim (a file of the
    # user's own saying name: mysim): the fix named the bad value itself, and a key the user never typed.
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.name_hints import registered_name_problem

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "mysim.yaml").write_text("defaults:\n  - two_moons\n  - _self_\nname: mysim\n")
    cfg = compose_tiny(f"hydra.searchpath=[file://{tmp_path}]", "data=mysim")
    unknown = registered_name_problem(cfg, {**CHOICES, "data": "mysim"})
    assert unknown.startswith("unknown data 'mysim' (data=mysim, whose file sets name: mysim); registered: "), unknown
    assert "; choose one with data=<name> (e.g. data=two_moons) instead of data=mysim; to add 'mysim', " in unknown
    assert "data.name" not in unknown.split("; to add")[0]


def test_a_data_set_of_ones_own_is_refused_evaluation_before_training(request):
    # Was: trained every step, then "ValueError: unknown sbibm task 'mysim'; registered here: two_moons, ...
    # (e.g. data=slcp)" at evaluation, status error; eval.enabled=false, the fix, named nowhere.
    import dataclasses

    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.config_checks import validate
    from gensbi_sharding.harness.data import load_task

    from gensbi_sharding.harness.name_hints import registered_name_problem

    unknown = registered_name_problem(compose_tiny("data.name=mysim"), CHOICES)
    assert unknown.endswith(  # was "register it with @register_data('mysim') and add conf/data/mysim.yaml"
        "to add 'mysim', register its factory, returning a SimulationData (harness/simulation_data.py), with "
        "@register_data('mysim') in gensbi_sharding/harness/data.py or a module it imports, and add "
        "conf/data/mysim.yaml; with no sbibm reference posterior it trains with eval.enabled=false"), unknown
    registered(request, "data", "mysim",
               lambda **kw: dataclasses.replace(load_task("two_moons", **kw), name="mysim"))
    with pytest.raises(ConfigError) as err:
        validate(compose_tiny("data.name=mysim", "eval.enabled=true"))
    assert str(err.value) == (
        "data.name=mysim is a data set of your own, not an sbibm task: the evaluation (posterior samples scored by "
        "C2ST) reads sbibm's observations and reference posterior samples, which it has none of; set "
        "eval.enabled=false to train it (checkpoints and losses are written as usual)")
    validate(compose_tiny("data.name=mysim", "eval.enabled=false"))  # the fix it names
    validate(compose_tiny("data.name=mysim", "eval.enabled=true", "dry_run=true"))  # a dry run evaluates nothing


@pytest.mark.parametrize("override, fix", [
    ("rule.embed=modle", "rule.embed=model"), ("rule.embed=[data,modle]", "rule.embed=[data,model]"),
    ("activation.head_axis=modle", "activation.head_axis=model"), ("activation.head_axis=xyz", "activation.head_axis=null")])
def test_a_mesh_axis_the_mesh_lacks_names_the_override_that_fixes_it(override, fix):
    # Was "valid values: data, model or null" / "use one of them, a tuple of them, or None" (no override).
    from faults_helpers import compose_tiny
    from gensbi_sharding import make_mesh
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.rule_config import check_table_against_mesh, rule_table
    from gensbi_sharding.harness.state import partition_axis_for

    mesh = make_mesh(model_axis=2)

    def check(cfg):
        name, table = rule_table(cfg.rule)
        check_table_against_mesh(name, table, tuple(mesh.axis_names))
        partition_axis_for(cfg, table, mesh)

    with pytest.raises(ConfigError) as err:
        check(compose_tiny(override))
    assert f"set {fix}" in str(err.value), str(err.value)
    check(compose_tiny(override, fix))  # the hint, followed, passes


def test_a_scheduler_launcher_off_its_cluster_is_named_not_a_traceback():
    from gensbi_sharding.harness.preflight import launcher_problem

    slurm = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    message = launcher_problem(slurm, which=lambda command: None)
    assert message.startswith("hydra/launcher=slurm submits the jobs to SLURM, but `srun` and `sbatch` are not on "
                              "PATH")
    assert "but `sbatch` is not on PATH" in launcher_problem(slurm, which=lambda c: "/bin/srun" if c == "srun" else None)
    assert message.endswith("leave out hydra/launcher=slurm to run the jobs here one after another")
    assert launcher_problem(slurm, which=lambda command: f"/usr/bin/{command}") is None  # on a login node
    assert launcher_problem("hydra._internal.core_plugins.basic_launcher.BasicLauncher",
                            which=lambda command: None) is None


@pytest.mark.slow  # a launch.py process (refused before any folder: about 2 s)
def test_slurm_launcher_without_slurm_stops_before_writing_anything(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    env["PATH"] = str(Path(sys.executable).parent)  # python only: no srun here (nor on CI)
    proc = subprocess.run([sys.executable, str(REPO / "launch.py"), "-m", "hydra/launcher=slurm", "experiment=quick",
                           f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.stderr.strip().startswith("[ERROR] hydra/launcher=slurm submits the jobs to SLURM")
    assert list(tmp_path.iterdir()) == []  # no sweep folder, lock or multirun.yaml left behind


# ------------------------------------------------- issue 15, case 5: hints that contradict or stay silent

@pytest.mark.parametrize("value, message", [
    # No Hydra app running: run(cfg) from Python, in the settings it sets (round 48)
    ("Auto", "cfg.train.resume='Auto' is read as a folder name; to continue from this run's own folder, pass "
             "cfg.train.resume='auto' (lower case)"),
    ("''", "cfg.train.resume='' is empty: pass cfg.train.resume='auto' (this run's folder), a run or checkpoint "
           "folder, or leave it out to start fresh"),
])
def test_a_resume_hint_ends_without_a_contradicting_example(value, message):
    # Was: "...pass train.resume=auto (lower case); e.g. train.resume=null".
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.config_checks import validate

    with pytest.raises(ConfigError) as err:
        validate(compose_tiny(f"train.resume={value}"))
    assert str(err.value) == message


def test_an_observation_beyond_the_task_is_refused_naming_the_range():
    # Was: accepted by validation, then a late error at the data step naming keys but no value.
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.config_checks import validate

    with pytest.raises(ConfigError) as err:
        validate(compose_tiny("data.num_observation=11"))
    assert str(err.value) == ("data.num_observation=11 is out of range: sbibm task 'two_moons' has observations "
                              "1..10; set data.num_observation=1 (or another of 1..10)")
    validate(compose_tiny("data.num_observation=10"))


@pytest.mark.slow  # an end-to-end run (resume, a stop, or processes)
def test_eval_observations_winning_over_num_observation_is_said_in_one_line(tmp_path, devices, caplog):
    # Was: eval.observations=[2] data.num_observation=3 scored only 2 without a word.
    import logging

    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.config_checks import scored_observations

    assert scored_observations(compose_tiny("eval.observations=[2,3]", "data.num_observation=3")) == ([2, 3], None)
    assert scored_observations(compose_tiny("data.num_observation=3")) == ([3], None)
    note = ("eval.observations=[2] is scored, not data.num_observation=3: eval.observations, when set, lists every "
            "observation scored (add 3 to it, or set eval.observations=null to score data.num_observation)")
    assert scored_observations(compose_tiny("eval.observations=[2]", "data.num_observation=3")) == ([2], note)
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        metrics = run_tiny(tmp_path / "run", "eval.enabled=true", "eval.observations=[2]", "data.num_observation=3",
                           "eval.num_samples=200", "eval.c2st_folds=2", "eval.ode_steps=2", "eval.plot=false")
    assert metrics["status"] == "ok" and [row["observation"] for row in metrics["c2st_observations"]] == [2]
    assert [r.getMessage() for r in caplog.records].count(note) == 1


# ------------------------------------------------- a constructor that cannot be traced (GenSBI's pos1d ids)

POS1D = ("model=flux1", "model.num_heads=2", "model.axes_dim=[4,0]", "model.depth=1", "model.depth_single_blocks=1",
         "model.id_embedding_strategy=[pos1d,pos1d]", "mesh.model_axis=2")


@pytest.mark.slow  # an end-to-end run
def test_an_untraceable_constructor_trains_eagerly_on_a_mesh(tmp_path, devices):
    # GenSBI's pos1d embedding sizes its table with jnp.maximum of two ints: the plan traced the
    # constructor even with model.init=eager, so every run on a mesh ended in a JAX traceback.
    metrics = run_tiny(tmp_path / "a", *POS1D, "model.init=eager", "rule=fsdp")
    assert metrics["status"] == "ok", metrics.get("error")
    assert metrics["mesh_shape"] == [4, 2] and metrics["rule"] == "fsdp" and (tmp_path / "a" / "checkpoints").exists()


def test_an_untraceable_constructor_is_refused_before_any_simulation_when_the_config_says_so(tmp_path, devices):
    # Was refused once traced, after the simulations (model_plan's "cannot be traced"; kept for other models and
    # the dry run, below): pos1d with model.init=sharded is known from the config.
    metrics = run_tiny(tmp_path / "a", *POS1D, "model.init=sharded")
    assert_refused_before_training(metrics, tmp_path / "a", "model.id_embedding_strategy=[pos1d,pos1d] with "
                                   "model.init=sharded: GenSBI's pos1d id embedding", "e.g. model.init=eager")
    assert "non_finite_simulations" not in metrics and "val_pairs" not in metrics  # no simulation was made


@pytest.mark.parametrize("setting, fix", [(("model.init=eager", "dry_run=true"),
                                           "drop dry_run=true and train it with model.init=eager")])
def test_an_untraceable_constructor_is_refused_where_it_must_be_traced(tmp_path, devices, setting, fix):
    metrics = run_tiny(tmp_path / "a", *POS1D, *setting)
    assert_refused_before_training(metrics, tmp_path / "a", "model=flux1 cannot be traced",
                                   "ConcretizationTypeError", fix)
    # The setting that causes it, and the strategies that can be traced.
    assert ("cannot be traced (GenSBI's pos1d id embedding: model.id_embedding_strategy=[pos1d,pos1d]; absolute "
            "or rope1d can be traced)") in metrics["error"]
    assert "\n" not in metrics["error"]


@pytest.mark.slow  # an end-to-end run (a training or dry run, or processes)
@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="Linux /proc only")
def test_shard_model_benchmark_reports_its_peak_in_mb_not_mib(monkeypatch):
    """Its "peak (MB)" column divided /proc's KiB by 1024 (MiB, 4.9 % less), beside a model size in MB."""
    # The benchmark's own measure of this process (/proc/self; a process of its own spent ~3 s of CPU importing).
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    for name in ("shard_model", "cli_args"):  # imported here only for this test, gone after it
        monkeypatch.delitem(sys.modules, name, raising=False)
    import shard_model as b

    held = []
    place = lambda model, mesh, rule: held.append(np.ones(25_000_000))  # 200,000,000 bytes touched
    assert 198 <= b.measured(place, b.Stack(1, 8), None, "replicated")[1] <= 206  # MB; in MiB it read 190.7
