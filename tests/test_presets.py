"""Presets and help: ``experiment=quick`` composes with every model, schemas are no options,
``python launch.py --help`` opens with this app's own help.

Configs are composed in-process with Hydra's compose API (as launch.py composes them); the
help test runs launch.py in a process of its own, which never starts JAX's backend (about 2 s).
"""

import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from flax import nnx
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from gensbi_sharding.harness import registry
from gensbi_sharding.harness.config import register_configs
from gensbi_sharding.harness.config_checks import validate

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"
MODELS = sorted(p.stem for p in (CONF / "model").glob("*.yaml"))


def compose_with(*overrides: str):
    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("config", overrides=list(overrides))


def parameter_count(model_cfg) -> int:
    """Parameters of the model ``model_cfg`` describes, built abstractly for two_moons (2, 2)."""
    hparams = {k: v for k, v in OmegaConf.to_container(model_cfg).items() if k not in ("name", "init")}
    factory = registry.get_model(model_cfg.name)
    model = nnx.eval_shape(lambda: factory(dim_theta=2, dim_x=2, rngs=nnx.Rngs(0), **hparams))
    return sum(int(np.prod(leaf.shape)) for leaf in jax.tree.leaves(nnx.state(model, nnx.Param)))


def test_every_model_has_a_quick_preset():
    presets = sorted(p.stem for p in (CONF / "experiment_model" / "quick").glob("*.yaml"))
    assert MODELS and presets == MODELS, (
        "each conf/model/<name>.yaml needs conf/experiment_model/quick/<name>.yaml (its tiny sizes)")


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.fast_cases(1)
def test_quick_composes_with_every_model_and_shrinks_it(model):
    full = compose_with(f"model={model}")
    quick = compose_with("experiment=quick", f"model={model}")
    validate(quick)
    assert quick.model.name == model
    assert (quick.train.steps, quick.data.num_simulations, quick.eval.num_samples) == (20, 1024, 128)
    assert parameter_count(quick.model) * 4 <= parameter_count(full.model)


def test_quick_keeps_the_order_of_precedence():
    # The tiny preset overrides the model's file; the command line overrides both, in any order.
    cfg = compose_with("model.depth=3", "experiment=quick", "model=transformer")
    assert (cfg.model.name, cfg.model.embed, cfg.model.heads, cfg.model.depth) == ("transformer", 32, 4, 3)
    assert compose_with("experiment=quick").model.width == 32
    assert compose_with().model.width == 128  # no experiment: no preset


def test_schemas_are_not_options():
    compose_with()  # registers the schemas and leaves a config loader to ask
    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        options = GlobalHydra.instance().config_loader().get_group_options("model")
    assert sorted(options) == MODELS
    for schema in ("mlp_schema", "transformer_schema"):
        with pytest.raises(ConfigCompositionException, match=f"Could not find 'model/{schema}'"):
            compose_with(f"model={schema}")


@pytest.fixture(scope="module")
def help_and_hydra_config(tmp_path_factory):
    """``python launch.py --help`` and ``python launch.py --cfg hydra --resolve`` (in the repository, without
    HYDRA_FULL_ERROR), forked from one Python process that imported launch.py's modules once
    (tests/fork_launch.py: ~1.5 s of CPU less; each still a process of its own, from launch.py's first line)."""
    from fork_launch import run_forked

    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    return run_forked([{"args": ["--help"], "cwd": REPO}, {"args": ["--cfg", "hydra", "--resolve"], "cwd": REPO}],
                      env=env, timeout=240, workdir=tmp_path_factory.mktemp("fork"))


@pytest.mark.slow
def test_help_opens_with_the_apps_own_help(help_and_hydra_config):
    proc = help_and_hydra_config[0]
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("gensbi_sharding: train a flow-matching posterior")
    assert "_schema" not in proc.stdout and "Powered by Hydra" not in proc.stdout
    # Internal groups are no options either (was "experiment_model/quick: flux1, mlp, ...").
    assert "experiment_model" not in proc.stdout
    for group in ("mesh", "rule", "model", "data", "train", "eval", "experiment", "sweep"):
        options = sorted(p.stem for p in (CONF / group).glob("*.yaml"))
        assert f"{group}: {', '.join(options)}" in lines
    for text in ("make run ARGS=", "python launch.py mesh=dict mesh.model_axis=2 rule=tensor",
                 "experiment=quick model=transformer", "outputs/<date>/<time>/", "multirun/<date>/<time>/",
                 "--cfg job", "--hydra-help",
                 "docs/harness.md#every-setting-and-its-default",  # was: no pointer to a list of the settings
                 # Was "continue a run", the README's word for train.resume=auto in the run's own folder.
                 "train that run further, to step 8000,",
                 "in a new folder (repeat its experiment=, model and data overrides)"):
        assert text in proc.stdout, text


@pytest.mark.slow
def test_the_hydra_config_resolves_on_its_own(help_and_hydra_config):
    # Was a traceback: "Interpolation key 'verbose' not found" (the logging config read the job's key).
    proc = help_and_hydra_config[1]
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    resolved = OmegaConf.create(proc.stdout)
    assert resolved.hydra.job_logging.filters.console.verbose is False


@pytest.mark.slow
def test_launch_with_a_python_lacking_the_dependencies_says_what_to_run():
    # -S: no site-packages, as with a system Python that never installed the project.
    proc = subprocess.run([sys.executable, "-S", str(REPO / "launch.py"), "mesh=auto"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "is not installed for" in proc.stderr and "make run" in proc.stderr and ".venv/bin/python" in proc.stderr



@pytest.mark.slow
@pytest.mark.parametrize("script", ["sample.py", *(f"benchmarks/{name}.py" for name in (
    "gensbi_pipeline", "gensbi_scale", "init", "sbibm", "sequential", "shard_model", "step_overhead"))])
def test_scripts_run_by_a_python_lacking_the_dependencies_say_what_to_run(script):
    # Typed: python sample.py outputs/<date>/<time> x_o.npy (README), .venv not activated. Was: a traceback ending in
    # "ModuleNotFoundError: No module named 'numpy'" (launch.py alone said so in one line); every benchmark script
    # likewise (benchmarks/init.py imports its dependencies only as it runs: its --help needs none, so it runs).
    args = ["--width", "8", "--depth", "1", "--repeats", "1", "--timeout", "30"] if script.endswith("init.py") else ["--help"]
    proc = subprocess.run([sys.executable, "-S", str(REPO / script), *args], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1 and proc.stdout == "", proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith(f"{script}: ") and "is not installed for" in proc.stderr
    assert f".venv/bin/python {script}" in proc.stderr and "make run" in proc.stderr


def test_a_missing_module_of_the_checkout_keeps_its_traceback():
    # A module of this checkout missing is no environment to fix: the benchmark scripts' hook passes it on.
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from cli_args import missing_dependency_line
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    assert missing_dependency_line(ModuleNotFoundError("x", name="gensbi_sharding.harness.nope")) is None
    assert missing_dependency_line(ModuleNotFoundError("x", name="sbibm_checks")) is None  # a sibling script
    assert missing_dependency_line(ModuleNotFoundError("x", name=None)) is None
    assert "'optax' is not installed for" in missing_dependency_line(ModuleNotFoundError("x", name="optax.contrib"))

@pytest.mark.slow
def test_launch_ends_without_sweeping_the_objects_it_leaves():
    # Was: ~1 s of CPU after a run's last line in Python's finalisation, full collections over JAX's and Flax's
    # objects, with nothing left to free. A cycle that a collection at exit would free says so as it goes.
    script = ("import gc, os, runpy, sys\n"
              "gc.disable()  # no collection before the exit's: only Python's finalisation could sweep the cycle\n"
              "class Node:\n"
              "    def __del__(self):\n"
              "        os.write(2, b'swept at exit')\n"
              "node = Node()\n"
              "node.cycle = node\n"
              "del node\n"
              "sys.argv = ['launch.py', '--help']\n"
              "runpy.run_path('launch.py', run_name='__main__')\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "gensbi_sharding" in proc.stdout, proc.stderr[-2000:]
    assert "swept at exit" not in proc.stderr  # frozen at exit, never collected
