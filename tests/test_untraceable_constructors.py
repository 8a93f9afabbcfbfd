"""A model constructor ``init_sharded`` cannot trace (Flux1 with pos1d ids): trained eagerly on a mesh, or refused
before any simulation where the config says it must be traced.
"""

import pytest

from faults_helpers import assert_refused_before_training, run_tiny


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
    # run(cfg) from Python: the fix as the setting it sets (WORDS77B; was launch.py's "e.g. model.init=eager").
    metrics = run_tiny(tmp_path / "a", *POS1D, "model.init=sharded")
    assert_refused_before_training(metrics, tmp_path / "a", "model.id_embedding_strategy=[pos1d,pos1d] with "
                                   "model.init=sharded: GenSBI's pos1d id embedding", "e.g. cfg.model.init='eager'")
    assert "non_finite_simulations" not in metrics and "val_pairs" not in metrics  # no simulation was made


# run(cfg) from Python: cfg's settings (FIX78; was launch.py's "drop dry_run=true and train it with model.init=eager")
@pytest.mark.parametrize("setting, fix", [(("model.init=eager", "dry_run=true"),
                                           "set cfg.dry_run=False and train it with cfg.model.init='eager'")])
def test_an_untraceable_constructor_is_refused_where_it_must_be_traced(tmp_path, devices, setting, fix):
    # Was refused once traced, after the simulations ("model=flux1 cannot be traced ... ConcretizationTypeError", a run
    # folder made): the dry run traces the constructor whatever model.init says, which the config tells as well.
    metrics = run_tiny(tmp_path / "a", *POS1D, *setting)
    assert_refused_before_training(metrics, tmp_path / "a", "model.id_embedding_strategy=[pos1d,pos1d] with "
                                   "dry_run=true: GenSBI's pos1d id embedding", fix)
    # The setting that causes it, and a strategy that can be traced, as run(cfg)'s caller sets it (WORDS77B; was
    # launch.py's "e.g. model.id_embedding_strategy=[absolute,absolute]")
    assert "e.g. cfg.model.id_embedding_strategy=['absolute', 'absolute']" in metrics["error"]
    assert "non_finite_simulations" not in metrics and "val_pairs" not in metrics  # no simulation was made
    assert "\n" not in metrics["error"]
