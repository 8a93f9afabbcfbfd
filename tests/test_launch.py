"""launch.py end to end: tiny real runs, sweeps, failures, and what a run leaves behind.

Each subprocess pays for a JAX start and a compile (~8 s), so the cases share runs:
one multirun covers every rule on two mesh shapes, one covers ``strict`` on and off (a job
that fails as it runs), one single run covers ``mesh=none``; a multirun with a third, invalid
mesh shape is refused whole before any job starts. Bad inputs fail before
training and cost about a second each. The last two tests run in this process, on
conftest's 8 devices.
"""

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import optax
import pytest
from flax import nnx
from hydra import compose, initialize_config_dir
from jax.sharding import NamedSharding, PartitionSpec as P
from omegaconf import OmegaConf, open_dict

import gensbi_sharding as contract
from gensbi_sharding.harness import registry, train
from gensbi_sharding.harness.config import register_configs
from gensbi_sharding.harness.ema import EMA

REPO = Path(__file__).resolve().parents[1]
LAUNCH = REPO / "launch.py"
# experiment=quick, smaller still: 4 steps, 768 simulations (one validation batch of 64).
TINY = ("experiment=quick", "train.steps=4", "train.log_every=2", "eval.num_samples=64",
        "eval.c2st_folds=2", "data.num_simulations=768")
RULES = ("replicated", "fsdp", "tensor", "fsdp_tensor")


def launch(*args: str, cwd: Path, multirun: bool = False) -> subprocess.CompletedProcess:
    """``python launch.py [-m] <TINY> <args>`` in ``cwd``, compact Hydra errors, CPU devices."""
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    env["JAX_PLATFORMS"] = "cpu"
    command = [sys.executable, str(LAUNCH), *(["-m"] if multirun else []), *TINY, *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=400)


def read_metrics(job_dir: Path) -> dict:
    return json.loads((job_dir / "metrics.json").read_text())


def sharding_txt(job_dir: Path) -> dict[str, str]:
    """``{path: placement}`` of the model's variables in sharding.txt's table."""
    lines = (job_dir / "sharding.txt").read_text().splitlines()
    return {line.split()[0].removeprefix("model/"): re.search(r"P\([^)]*\)|single device", line).group(0)
            for line in lines if line.startswith("model/")}


def spec_axes(spec: str) -> set[str]:
    """Mesh axes a printed PartitionSpec names."""
    return {axis for axis in ("data", "model") if repr(axis) in spec}


# ------------------------------------------------------------------ fixtures: shared runs

@pytest.fixture(scope="module")
def shared_launches(tmp_path_factory):
    """The launches the module's tests read (below; the bad inputs too), run as ``launch()`` would, forked one
    after the other from one Python process that imported launch.py's modules once (tests/fork_launch.py: ~1.5 s
    of CPU less per launch; each still a process of its own, from launch.py's first line):
    ``{name: (its launch, root)}``."""
    from fork_launch import run_forked
    from fork_server import RUN_IMPORTS

    roots = {name: tmp_path_factory.mktemp(name) for name in ("sweep", "none", "strict", "refused", "second")}
    commands = {
        # Every rule x model_axis 1, 2: 8 jobs in one process.
        "sweep": ["-m", *TINY, f"rule={','.join(RULES)}", "mesh.model_axis=1,2",
                  f"hydra.sweep.dir={roots['sweep'] / 'multirun'}"],
        # The same with model_axis 3 (invalid on 8 devices) first: refused before any job starts.
        "refused": ["-m", *TINY, f"rule={','.join(RULES)}", "mesh.model_axis=3,1,2",
                    f"hydra.sweep.dir={roots['refused'] / 'multirun'}"],
        "none": [*TINY, "mesh=none", "eval.plot=true", f"hydra.run.dir={roots['none'] / 'run'}"],
        # width 36 under fsdp on (8, 1): embed dims of 36 cannot split 8 ways, so strict=false replicates them.
        # Job 0's learning rate diverges as it trains (what no check before the sweep knows; strict=true is refused
        # before any job since state_check), job 1 trains. Its tests read the failed job, the lenient job's
        # placements and the summary, never a C2ST: no evaluation (~2 s of CPU).
        "strict": ["-m", *TINY, "rule=fsdp", "model.width=36", "train.learning_rate=1e25,3e-3", "eval.enabled=false",
                   f"hydra.sweep.dir={roots['strict'] / 'multirun'}"],
        # Another run (seed=1) into none's completed folder, once none has ended; the folder as this run found it
        # is copied to second/before first (second_run compares).
        "second": [*TINY, "mesh=none", "seed=1", f"hydra.run.dir={roots['none'] / 'run'}"],
    }
    # Each bad input (BAD_INPUTS, below) in a folder of its own too: bad_input_launches reads them.
    bad = tmp_path_factory.mktemp("bad_inputs")
    for i, override in enumerate(BAD_INPUTS):
        roots[override] = bad / str(i)
        roots[override].mkdir()
        commands[override] = [*TINY, override, f"hydra.run.dir={roots[override] / 'run'}"]
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    env["JAX_PLATFORMS"] = "cpu"
    fork = tmp_path_factory.mktemp("fork")
    snapshots = {"second": (roots["none"] / "run", roots["second"] / "before")}
    # What a training run imports inside its functions (and C2ST's scikit-learn), imported once in the forking
    # process rather than in each of the three that train (~2 s of CPU each).
    procs = run_forked([{"args": args, "cwd": roots[name], "snapshot": snapshots.get(name)}
                        for name, args in commands.items()], env=env, timeout=5 * 400, workdir=fork,
                       imports=(*RUN_IMPORTS, "sklearn.model_selection", "sklearn.neural_network", "threadpoolctl"))
    return {name: (proc, roots[name]) for name, proc in zip(commands, procs)}


@pytest.fixture(scope="module")
def sweep(shared_launches):
    """Every rule x model_axis 1, 2: 8 jobs in one process."""
    proc, root = shared_launches["sweep"]
    jobs = {}
    for metrics_path in (root / "multirun").glob("*/metrics.json"):
        m = json.loads(metrics_path.read_text())
        jobs[(m["config"]["rule"]["name"], m["config"]["mesh"]["model_axis"])] = metrics_path.parent
    assert len(jobs) == 8, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, root / "multirun", jobs


@pytest.fixture(scope="module")
def no_mesh_run(shared_launches):
    proc, root = shared_launches["none"]
    return proc, root / "run"


@pytest.fixture(scope="module")
def strict_sweep(shared_launches):
    """width 36 under fsdp on (8, 1): embed dims of 36 cannot split 8 ways. A diverging job, then one that trains."""
    proc, root = shared_launches["strict"]
    assert (root / "multirun" / "1" / "metrics.json").exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, root / "multirun"


def compose_tiny(*overrides: str):
    """The config launch.py composes from ``TINY`` plus ``overrides``."""
    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose("config", overrides=[*TINY, *overrides])


def tiny_model():
    """The model of a ``TINY`` run (two_moons: dim_theta = dim_x = 2), built as run.py builds it."""
    hparams = {k: v for k, v in OmegaConf.to_container(compose_tiny().model).items()
               if k not in ("name", "init")}
    return registry.get_model("mlp")(dim_theta=2, dim_x=2, rngs=nnx.Rngs(0), **hparams)


@pytest.fixture(scope="module")
def quick_model_shapes():
    """Shapes of the ``TINY`` run's parameters, by "a/b/c" path."""
    model = tiny_model()
    return {"/".join(map(str, path)): var.shape
            for path, var in nnx.to_flat_state(nnx.state(model, nnx.Param))}


# ------------------------------------------------------------------ (a) one tiny run per rule

@pytest.mark.slow
@pytest.mark.parametrize("rule,model_axis", [(r, a) for r in RULES for a in (1, 2)])
def test_rule_run_completes_with_its_outputs(sweep, rule, model_axis):
    _, _, jobs = sweep
    job = jobs[(rule, model_axis)]
    m = read_metrics(job)
    assert m["status"] == "ok", m.get("error")
    assert m["rule"] == rule and m["mesh_shape"] == [8 // model_axis, model_axis]
    assert m["mesh_axes"] == ["data", "model"] and m["device_count"] == 8
    assert m["data_parallel_size"] == 8 // model_axis
    assert isinstance(m["c2st"], float) and 0.0 <= m["c2st"] <= 1.0
    assert np.isfinite(m["final_train_loss"]) and np.isfinite(m["final_val_loss"])
    assert m["steps"] == 4 and m["fallbacks"] == {}
    assert m["device_peak_bytes"] is None  # XLA:CPU keeps no allocator statistics (GPU/TPU: bytes)
    losses = np.load(job / "train_losses.npz")["losses"]
    assert losses.shape == (4,) and np.all(np.isfinite(losses))
    posterior = np.load(job / "posterior_samples.npz")
    assert posterior["samples"].shape == (64, 2) and np.all(np.isfinite(posterior["samples"]))
    assert posterior["reference"].shape == (64, 2)
    assert sharding_txt(job) == m["placements"]


# Mesh axes each rule puts on each parameter of the quick MLP (the logical axes are in
# harness/models/mlp.py: kernels ("in"|"embed"|"mlp", "embed"|"mlp"|"out")).
def _expected_axes(rule: str, path: str) -> set[str]:
    embed = {"in_proj/kernel", "in_proj/bias", "blocks/0/norm/scale", "blocks/0/norm/bias",
             "blocks/0/up/kernel", "blocks/0/down/kernel", "blocks/0/down/bias",
             "out_norm/scale", "out_norm/bias", "out_proj/kernel"}
    mlp = {"blocks/0/up/kernel", "blocks/0/up/bias", "blocks/0/down/kernel"}
    axes = set()
    if rule in ("fsdp", "fsdp_tensor") and path in embed:
        axes.add("data")
    if rule in ("tensor", "fsdp_tensor") and path in mlp:
        axes.add("model")
    return axes


@pytest.mark.slow
@pytest.mark.parametrize("rule", RULES)
def test_rule_places_every_parameter_as_annotated(sweep, quick_model_shapes, rule):
    _, _, jobs = sweep
    placements = read_metrics(jobs[(rule, 2)])["placements"]
    assert set(placements) == set(quick_model_shapes)
    got = {path: spec_axes(spec) for path, spec in placements.items()}
    assert got == {path: _expected_axes(rule, path) for path in placements}


@pytest.mark.slow
def test_fsdp_splits_kernels_over_data_on_their_embed_dimension(sweep):
    _, _, jobs = sweep
    placements = read_metrics(jobs[("fsdp", 1)])["placements"]
    assert placements["in_proj/kernel"] == "P(None, 'data')"  # (in, embed)
    assert placements["blocks/0/up/kernel"] == "P('data', None)"  # (embed, mlp)
    assert placements["blocks/0/down/kernel"] == "P(None, 'data')"  # (mlp, embed)
    tensor = read_metrics(jobs[("tensor", 2)])["placements"]
    assert tensor["blocks/0/up/kernel"] == "P(None, 'model')"
    assert tensor["blocks/0/down/kernel"] == "P('model', None)"
    both = read_metrics(jobs[("fsdp_tensor", 2)])["placements"]
    assert both["blocks/0/up/kernel"] == "P('data', 'model')"


@pytest.mark.slow
@pytest.mark.parametrize("rule,model_axis", [(r, a) for r in RULES for a in (1, 2)])
def test_param_bytes_per_device_follow_the_placements(sweep, quick_model_shapes, rule, model_axis):
    # Every parameter is float32: each device holds size / (product of its split axes) of it.
    _, _, jobs = sweep
    m = read_metrics(jobs[(rule, model_axis)])
    sizes = {"data": 8 // model_axis, "model": model_axis}
    expected = sum(4 * int(np.prod(shape)) // int(np.prod([sizes[a] for a in spec_axes(m["placements"][p])]))
                   for p, shape in quick_model_shapes.items())
    assert m["param_count"] == sum(int(np.prod(s)) for s in quick_model_shapes.values())
    assert m["param_bytes_per_device"] == expected
    # AdamW keeps two moments placed like the params (plus a replicated step count).
    assert 2 * expected <= m["opt_bytes_per_device"] <= 2 * expected + 64


@pytest.mark.slow
def test_splitting_rules_hold_fewer_bytes_per_device_than_replicated(sweep):
    _, _, jobs = sweep
    replicated = read_metrics(jobs[("replicated", 1)])
    assert replicated["param_bytes_per_device"] == 4 * replicated["param_count"]
    fsdp = read_metrics(jobs[("fsdp", 1)])
    assert fsdp["param_bytes_per_device"] < replicated["param_bytes_per_device"] / 4
    assert fsdp["opt_bytes_per_device"] < replicated["opt_bytes_per_device"] / 4
    assert read_metrics(jobs[("tensor", 2)])["param_bytes_per_device"] < replicated["param_bytes_per_device"]


@pytest.mark.slow
def test_placement_does_not_change_the_math(sweep):
    # Same seed, same data: every rule and mesh trains the same model, up to float reordering.
    _, _, jobs = sweep
    ok = [read_metrics(job) for job in jobs.values() if read_metrics(job)["status"] == "ok"]
    assert len(ok) == 8
    losses = [m["final_train_loss"] for m in ok]
    np.testing.assert_allclose(losses, losses[0], rtol=1e-4)


# ------------------------------------------------------------------ (b) mesh=none

@pytest.mark.slow
def test_no_mesh_run(no_mesh_run):
    proc, run_dir = no_mesh_run
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    m = read_metrics(run_dir)
    assert m["status"] == "ok" and m["mesh_shape"] is None and m["mesh_axes"] is None
    assert m["data_parallel_size"] == 1 and m["fallbacks"] == {}
    assert m["param_bytes_per_device"] == 4 * m["param_count"]
    assert not any(spec_axes(spec) for spec in m["placements"].values())
    assert isinstance(m["c2st"], float) and 0.0 <= m["c2st"] <= 1.0
    assert f"C2ST {m['c2st']:.3f}" in proc.stdout
    assert (run_dir / "posterior.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for name in ("sharding.txt", "posterior_samples.npz", "train_losses.npz", "c2st.csv", ".hydra/config.yaml"):
        assert (run_dir / name).is_file(), name
    assert not (run_dir / "error.txt").exists()
    assert m["samples_outside_support"] == 0 and m["best_step"] == 4 and m["stopped_early"] is False


@pytest.mark.slow  # reads the launch.py run of no_mesh_run
def test_help_names_every_file_a_run_writes(no_mesh_run):
    # --help's Outputs left out c2st.csv and posterior_samples.npz (a new user's report).
    _, run_dir = no_mesh_run
    template = OmegaConf.to_container(OmegaConf.load(REPO / "conf" / "config.yaml"))["hydra"]["help"]["template"]
    block = template[template.index("one run:"):template.index("a sweep:")]
    named = set(re.findall(r"[\w]+\.(?:json|txt|log|csv|npz|png)|checkpoints/", block))
    written = {p.name + ("/" if p.is_dir() else "") for p in run_dir.iterdir() if not p.name.startswith(".")}
    assert named == written - {"error.txt"}, (named, written)


@pytest.mark.slow  # reads the launch.py run of no_mesh_run
def test_c2st_is_recomputed_from_the_npz(no_mesh_run):
    """posterior_samples.npz holds exactly the rows C2ST scored, the seed and the folds."""
    from gensbi_sharding.harness.evaluate import c2st_scores

    _, run_dir = no_mesh_run
    m, saved = read_metrics(run_dir), np.load(run_dir / "posterior_samples.npz")
    assert saved["samples"].shape == saved["reference"].shape == (64, 2)
    scores = c2st_scores(saved["samples"], saved["reference"], seed=int(saved["c2st_seed"]),
                         n_folds=int(saved["c2st_folds"]))
    assert float(scores.mean()) == m["c2st"] == float(saved["c2st"])
    np.testing.assert_array_equal(scores, saved["c2st_scores"])
    assert m["c2st_observations"][0]["c2st_scores"] == scores.tolist()


# ------------------------------------------------------------------ (c, d) the sweep summary

@pytest.mark.slow
def test_sweep_summary_has_one_row_per_job(sweep):
    proc, sweep_dir, _ = sweep
    with open(sweep_dir / "sweep_summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [row["job"] for row in rows] == [str(i) for i in range(8)]
    assert [row["rule"] for row in rows] == [r for r in RULES for _ in range(2)]
    shapes = [row["mesh_shape"] for row in rows if row["status"] == "ok"]
    assert shapes == ["8x1", "4x2"] * 4
    assert [row["status"] for row in rows] == ["ok", "ok"] * 4
    for row in rows:
        assert 0.0 <= float(row["c2st"]) <= 1.0 and float(row["samples_per_s"]) > 0
        assert int(row["param_bytes_per_device"]) > 0 and row["error"] == ""
    assert "Sweep summary (8 jobs, 0 failed)" in proc.stdout
    table = (sweep_dir / "sweep_summary.md").read_text()
    assert table.count("\n| ") == 8
    header = [cell.strip() for cell in table.splitlines()[0].split("|")[1:5]]
    assert header == ["job", "rule", "mesh.model_axis", "mesh"]  # the swept keys come right after the job


@pytest.mark.slow
def test_a_sweep_one_of_whose_jobs_is_refused_runs_none_and_names_each(shared_launches):
    # Was: each model_axis=3 job failed as its turn came, after the jobs before it had trained (12 jobs, 4 failed);
    # a sweep's jobs can take hours each, so every job's config is checked before the first starts.
    proc, root = shared_launches["refused"]
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr + proc.stdout and not re.search(r"\[\d+/\d+\]", proc.stdout)
    fix = "8 devices are not divisible by model_axis=3; set mesh.model_axis=2 (divisors of 8: [1, 2, 4, 8])"
    assert proc.stderr == ("[ERROR] this sweep's config is refused for 4 of the 12 jobs, before any job ran (nothing "
                           "was written); fix or drop the values named, then run the sweep again:\n" + "".join(
                               f"  job {3 * i} (rule={rule} mesh.model_axis=3): mesh.model_axis=3: {fix}\n"
                               for i, rule in enumerate(RULES))
                           # the sweep without its refused value (session 73: its jobs' own fix ran model_axis=2 twice)
                           + "or drop the values refused from the sweep: mesh.model_axis=1,2 "
                             "(was mesh.model_axis=3,1,2)\n")
    assert list(root.iterdir()) == []  # no sweep folder, lock or multirun.yaml


@pytest.mark.slow
def test_a_job_failing_as_it_runs_is_recorded_and_the_next_runs(strict_sweep):
    # What no check before the sweep can know (here: a learning rate that diverges; was: which variables the rule
    # cannot split under strict=true, refused before any job since state_check) still ends only its job.
    proc, sweep_dir = strict_sweep
    assert proc.returncode != 0
    failed, following = sweep_dir / "0", sweep_dir / "1"
    m = read_metrics(failed)
    assert m["status"] == "error" and "training diverged" in m["error"]
    assert (failed / "error.txt").is_file()
    after = read_metrics(following)
    assert after["config"]["train"]["learning_rate"] == 3e-3
    assert after["status"] == "ok" and after["mesh_shape"] == [8, 1]
    with open(sweep_dir / "sweep_summary.csv", newline="") as f:
        errors = [row["error"] for row in csv.DictReader(f) if row["status"] == "error"]
    assert len(errors) == 1 and "training diverged" in errors[0]
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    # One tag per error line in a multirun too (was "[ERROR] error: ...").
    tagged = [line for line in proc.stdout.splitlines() if line.startswith("[ERROR]")]
    assert len(tagged) == 1 and not any(line.startswith("[ERROR] error") for line in tagged)


@pytest.mark.slow
def test_summary_does_not_show_a_failed_jobs_mesh_as_none(strict_sweep):
    _, sweep_dir = strict_sweep
    with open(sweep_dir / "sweep_summary.csv", newline="") as f:
        failed = [row for row in csv.DictReader(f) if row["status"] == "error"]
    assert failed and all(row["mesh_shape"] != "none" for row in failed)


# ------------------------------------------------------------------ (e) bad input

BAD_INPUTS = {
    # override: fragments of the error (stdout + stderr), run-level (True: refused by the run's checks, which since
    # preflight.run_config_problem run before Hydra makes the run's folder: one [ERROR] line on stderr, nothing
    # written; was: metrics.json in the folder Hydra had made)
    "rule=nope": (["Could not find 'rule/nope'", "fsdp", "fsdp_tensor", "replicated", "tensor"], False),
    "mesh.spec=grid": (["mesh.spec=grid is not one of null, auto, dict"], True),
    "mesh.model_axis=3": (["8 devices are not divisible by model_axis=3"], True),
    "data.batch_size=20": (["batch size 20", "data-parallel size 8", "data.batch_size="], True),
    "model.name=nope": (["unknown model 'nope'", "flux1, mlp, simformer, transformer"], True),
    "data.name=nope": (["unknown data 'nope'", "lotka_volterra, sir, slcp, two_moons"], True),
    "mesh.modle_axis=2": (["mesh.modle_axis", "set mesh.model_axis=2"], False),
    "train.steps=ten": (["train.steps", "could not be converted to Integer"], False),
    # Was a traceback (InterpolationKeyError from the folder callback, then from run()). The fix is TINY's
    # experiment=quick's 20 steps (was the schema's 4000, which quick had changed).
    "train.steps=${data.nope}": (["train.steps=${data.nope} cannot be resolved", "e.g. train.steps=20,"], False),
}


@pytest.fixture(scope="module")
def bad_input_launches(shared_launches):
    """``{override: (its launch, its working folder)}``: each bad input launched as ``launch()`` does, in a
    folder of its own, forked with the module's other launches (shared_launches)."""
    return {override: shared_launches[override] for override in BAD_INPUTS}


@pytest.mark.slow
@pytest.mark.parametrize("override", list(BAD_INPUTS))
def test_bad_input_fails_in_one_line_before_training(bad_input_launches, override):
    fragments, run_level = BAD_INPUTS[override]
    proc, tmp_path = bad_input_launches[override]
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "Traceback" not in out
    for fragment in fragments:
        assert fragment in out, (fragment, out[-2000:])
    assert not re.search(r"\[\d+/\d+\] train", out)  # the train step never started
    assert not (tmp_path / "run" / "train_losses.npz").exists()
    if run_level:
        error_lines = [line for line in out.splitlines() if "[ERROR]" in line]
        assert len(error_lines) == 1 and all(f in error_lines[0] for f in fragments)
        assert error_lines[0].count("[ERROR]") == 1 and not error_lines[0].lower().startswith("[error] error")
        assert error_lines[0] in proc.stderr.splitlines()
    assert not (tmp_path / "run").exists()  # refused before Hydra makes the run's folder: nothing written


# ------------------------------------------------------------------ (f) strict

@pytest.mark.slow
def test_strict_turns_an_unsplittable_variable_into_an_error(strict_sweep, devices):
    # strict=true is refused by the check before any folder (was: by the run, inside job 0's folder of a sweep
    # 'strict=true,false', its launch.log holding every path; tests/test_state_check.py launches it).
    from gensbi_sharding.harness.job_check import job_problem

    proc, sweep_dir = strict_sweep
    lenient = read_metrics(sweep_dir / "1")
    strict = job_problem(compose_tiny("rule=fsdp", "model.width=36", "eval.enabled=false", "strict=true"))
    assert "strict=true and rule 'fsdp' cannot split 10 variable(s)" in strict
    # Grouped by reason (a few paths each), the reason saying the size that does not divide; every path in launch.log.
    assert ("blocks/0/down/bias, blocks/0/down/kernel, blocks/0/norm/bias and 7 more (size 36 of logical axis "
            "'embed' is not divisible by mesh axis 'data' of size 8; set rule.embed=null, or annotate this "
            "dimension None, or use a mesh with an axis of size 2 or 4 (here: data=8, model=1)) (every one: "
            "launch.log)") in strict
    assert all(f"  {path}: " in (sweep_dir / "1" / "launch.log").read_text()
               for path in ("in_proj/kernel", "blocks/0/norm/scale", "out_proj/kernel"))
    # strict=false: the same fallbacks are a warning and a list in metrics.json; the run completes.
    assert lenient["status"] == "ok"
    assert set(lenient["fallbacks"]) == {
        "in_proj/kernel", "in_proj/bias", "blocks/0/norm/scale", "blocks/0/norm/bias",
        "blocks/0/up/kernel", "blocks/0/down/kernel", "blocks/0/down/bias", "out_norm/scale",
        "out_norm/bias", "out_proj/kernel"}
    assert not any(spec_axes(spec) for spec in lenient["placements"].values())
    assert "in_proj/kernel" in (sweep_dir / "1" / "launch.log").read_text()


# ------------------------------------------------------------------ (g) never overwrite

@pytest.fixture(scope="module")
def second_run(no_mesh_run, shared_launches):
    """Another run (``seed=1``) into no_mesh_run's completed folder, and that folder's files before it."""
    proc, root = shared_launches["second"]
    before = {name: (root / "before" / name).read_bytes() for name in (
        "metrics.json", "sharding.txt", "train_losses.npz", "posterior.png", ".hydra/config.yaml")}
    return proc, before


@pytest.mark.slow
def test_second_run_into_a_completed_folder_is_refused(no_mesh_run, second_run):
    _, run_dir = no_mesh_run
    proc, before = second_run
    assert proc.returncode != 0
    assert "metrics.json already exists" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    outputs = ("metrics.json", "sharding.txt", "train_losses.npz", "posterior.png")
    assert {name: (run_dir / name).read_bytes() for name in outputs} == {name: before[name] for name in outputs}


@pytest.mark.slow
def test_second_run_leaves_the_first_runs_config_untouched(no_mesh_run, second_run):
    _, run_dir = no_mesh_run
    proc, before = second_run
    assert proc.returncode != 0
    assert (run_dir / ".hydra" / "config.yaml").read_bytes() == before[".hydra/config.yaml"]


# ------------------------------------------------------------------ (h, i) in this process

@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::gensbi_sharding.sharding.ExperimentalRuleWarning")
def test_train_step_transfers_nothing_but_the_batch(devices):
    mesh = contract.make_mesh(model_axis=2)
    model = tiny_model()
    contract.shard_model(model, mesh, "tensor")
    optimizer = nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param)
    contract.shard_model(optimizer, mesh, "tensor")
    functions, state = train.make_step_functions(model, optimizer, mesh, ema=EMA(model, 0.999))
    placed = jax.tree.map(lambda leaf: leaf.sharding, state)
    rng = np.random.default_rng(0)
    batches = [contract.shard_batch({"theta": rng.normal(size=(16, 2)).astype(np.float32),
                                     "x": rng.normal(size=(16, 2)).astype(np.float32)}, mesh)
               for _ in range(3)]
    key = contract.replicate(jax.random.key(0), mesh)
    with contract.mesh_context(mesh):
        compiled = functions.train_step.lower(state, batches[0], key).compile()
        losses = []
        with jax.transfer_guard("disallow"):
            for batch in batches:
                state, loss = compiled(state, batch, key)
                losses.append(loss)
    assert all(np.isfinite(float(loss)) for loss in losses)
    assert len({float(loss) for loss in losses}) == 3  # three different batches and step keys
    assert loss.sharding.is_equivalent_to(NamedSharding(mesh, P()), 0)
    assert jax.tree.map(lambda leaf: leaf.sharding, state) == placed  # placements stay fixed
    _, trained_optimizer, _ = nnx.merge(functions.graphdef, state)
    assert int(trained_optimizer.step[...]) == 3


@pytest.mark.slow
def test_run_leaves_no_mesh_active(devices, tmp_path):
    from gensbi_sharding.harness.run import run

    cfg = compose_tiny("mesh.model_axis=2", "rule=tensor")
    with open_dict(cfg):
        cfg.output_dir = str(tmp_path / "run")
    assert jax.sharding.get_abstract_mesh().empty
    metrics = run(cfg)
    assert metrics["status"] == "ok", metrics.get("error")
    assert metrics["mesh_shape"] == [4, 2]
    assert jax.sharding.get_abstract_mesh().empty
    assert read_metrics(tmp_path / "run")["status"] == "ok"
