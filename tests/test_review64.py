"""Faults found reviewing session 64's first batch (nearby inputs its fixes did not reach)."""

import os
import subprocess
import sys

import pytest

# GenSBI's recipes import matplotlib (gensbi.recipes' __init__), which raises on an MPLBACKEND it does not know.
GENSBI_CALL = """
import jax.numpy as jnp
from flax import nnx
from gensbi_sharding.harness.models.flux1 import make_flux1
from gensbi_sharding.harness.models.simformer import make_simformer
models = [make_flux1(dim_theta=2, dim_x=3, rngs=nnx.Rngs(0), num_heads=2, axes_dim=[4, 0], depth=1,
                     depth_single_blocks=1, mlp_ratio=2),
          make_simformer(dim_theta=2, dim_x=3, rngs=nnx.Rngs(0), val_emb_dim=8, id_emb_dim=4, cond_emb_dim=4,
                         num_heads=4, qkv_features=8, depth=1, fourier_features=8, mlp_ratio=2)]
# Jitted, as a run calls them: the models' calls import what they import either way (gensbi.recipes, which imports
# matplotlib), at ~40 % less CPU than op by op
print([nnx.jit(lambda model, *inputs: model(*inputs))(model, jnp.zeros((2, 2)), jnp.zeros((2, 3)), jnp.zeros((2,)))
       .shape for model in models])
"""


@pytest.mark.slow  # a fresh process (the variable is read at matplotlib's first import): JAX, two models traced
def test_gensbi_s_models_run_under_an_mplbackend_matplotlib_does_not_know():
    # Was: MPLBACKEND=nonexistent python launch.py experiment=quick model=flux1 (or simformer) ended at step 0 with
    # "ValueError: Key backend: 'nonexistent' is not a valid value for backend" (agg_figure covered the plots only).
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"} | {"MPLBACKEND": "nonexistent"}
    done = subprocess.run([sys.executable, "-c", GENSBI_CALL], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[-2] == "[(2, 2), (2, 2)]"
    warned = [line for line in done.stderr.splitlines() if "MPLBACKEND" in line]  # logging's prefix is JAX's setup
    assert len(warned) == 1 and warned[0].endswith(
        "MPLBACKEND=nonexistent is not a backend matplotlib knows: ignored (the harness draws its PNG files with Agg, "
        "whatever it names); unset it, or set MPLBACKEND=agg"), warned


@pytest.mark.parametrize("typed", ["Gaussian_Random_Field", "GAUSSIAN_RANDOM_FIELD"])
def test_a_task_sbibm_jax_ships_typed_in_another_case_is_named_so_not_taken_for_a_typo(typed):
    # Was: "unknown data 'Gaussian_Random_Field' (data.name=Gaussian_Random_Field); ...; set
    # data.name=gaussian_mixture": another task, the fault ee4fd31 fixed for the name in its own case.
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.name_hints import registered_name_problem

    cfg = OmegaConf.create({"model": {"name": "mlp"}, "data": {"name": typed}, "rule": {"name": "replicated"}})
    problem = registered_name_problem(cfg)
    assert problem.startswith(f"unknown data '{typed}' (data.name={typed}; sbibm_jax's task gaussian_random_field, "
                              "which the harness does not register); registered: bernoulli_glm, "), problem
    assert f"; set data.name=two_moons, or drop data.name={typed} and choose one with data=<name>; " in problem


@pytest.mark.slow
def test_a_run_of_a_conf_model_continued_without_its_option_is_offered_the_option_not_another_version(tmp_path):
    # Was (dcc6a9d/0f396b4): its record lost, 'launch.py experiment=quick seed=0 hydra.run.dir=<a stopped run of
    # model=transformer>' was told "the settings it saved, which this version's model=transformer lacks
    # (model.embed=32, model.heads=4, ...): continue it with the version of gensbi_sharding that saved it", though this
    # version's transformer has them: the saved fields were compared with the typed command's model (the mlp).
    from omegaconf import OmegaConf

    from faults_helpers import saved_checkpoint, under_command
    from gensbi_sharding.harness.checkpoint_settings import lacked_settings, saved_settings_overrides
    from gensbi_sharding.harness.outputs import write_json
    from gensbi_sharding.harness.run_folder import ensure_fresh

    run = tmp_path / "run"
    typed = ["experiment=quick", "seed=0"]
    config = under_command([*typed, "model=transformer"], lambda cfg: OmegaConf.to_container(cfg, resolve=True))
    saved_checkpoint(run, config, {})
    write_json(run / "metrics.json", {"status": "interrupted", "final_step": 8})
    assert lacked_settings(run, typed) is None
    assert saved_settings_overrides(run, typed) == [*typed, "model=transformer"]
    with pytest.raises(FileExistsError) as err:
        ensure_fresh(run, overrides=typed)
    assert "lacks" not in str(err.value) and " experiment=quick seed=0 model=transformer " in str(err.value), err.value


class _Builder:
    def make(self, *, dim_theta, dim_x, rngs, hidden=64):  # no partition_axis
        raise AssertionError("never built: refused before")


def test_a_bound_method_registered_as_a_model_factory_is_named_with_its_file():
    # Was: "model=built's factory _Builder.make takes no keyword partition_axis, ..." with no file (a partial, a class
    # and a callable object got theirs: _where looked up the file of a bound method's type, a builtin's).
    from gensbi_sharding.harness.factory_keywords import factory_keyword_problem

    problem = factory_keyword_problem("built", _Builder().make, {"name": "built", "init": "eager", "hidden": 64})
    assert problem.startswith(f"model=built's factory _Builder.make ({os.path.relpath(__file__)}) takes no keyword "
                              "partition_axis"), problem
