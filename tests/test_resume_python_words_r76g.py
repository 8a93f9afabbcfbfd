"""A resume refused inside ``run(cfg)`` (called from Python) names the settings a Python caller sets, as the folder's
refusals do (``python_words``; NOTEBOOK76's left item, FIX76 2).

Was: ``run(cfg)`` resuming a width-32 checkpoint with ``cfg.model.width=48`` recorded "... add model.width=32. ...; or
start a new run without train.resume": launch.py's overrides, which no Python call takes, where the same call's folder
refusal says "cfg.train.resume='auto' ... set in omegaconf.open_dict(cfg)". Under launch.py the words stay its own.
"""

import pytest
from omegaconf import OmegaConf

from faults_helpers import as_hydra_job, compose_tiny, run_tiny, saved_checkpoint
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.python_words import python_words

SAVED_WIDTH = ("the checkpoint was saved with model.width=32 (this run: model.width=48): {}. The saved weights compute "
               "that model, not this one; or start a new run {}")


@pytest.fixture(scope="module")
def width_32(tmp_path_factory):
    """A step folder saved with the tiny config (model.width=32; no training)."""
    config = OmegaConf.to_container(compose_tiny("train.steps=20"), resolve=True)
    return saved_checkpoint(tmp_path_factory.mktemp("saved") / "run", config, {})


@pytest.mark.slow  # a run(cfg) up to its resume check (devices, mesh: ~2 s on 2 cores)
def test_run_cfg_refuses_another_width_in_the_settings_it_sets(width_32, tmp_path):
    metrics = run_tiny(tmp_path / "again", f"train.resume={width_32}", "model.width=48")
    assert metrics["status"] == "error"
    assert metrics["error"] == "ConfigError: " + SAVED_WIDTH.format("set cfg.model.width=32",
                                                                    "with cfg.train.resume=None"), metrics["error"]


@pytest.mark.slow  # its checkpoint fixture (Orbax: ~2 s)
def test_under_launch_py_the_refusal_keeps_its_overrides(width_32, tmp_path, monkeypatch):
    from gensbi_sharding.harness.resume import check_resume_in_run

    cfg = compose_tiny(f"train.resume={width_32}", "model.width=48")
    as_hydra_job(monkeypatch, tmp_path / "again", ["experiment=quick", "model.width=48", f"train.resume={width_32}"])
    with pytest.raises(ConfigError) as refused:
        check_resume_in_run(width_32, cfg)
    assert str(refused.value) == SAVED_WIDTH.format("add model.width=32", "without train.resume")


@pytest.mark.parametrize("said, python", [
    # values: settings of cfg, each as Python reads it
    ("its arrays mean nothing otherwise; add train.schedule=constant train.warmup_steps=0, or start a new run",
     "its arrays mean nothing otherwise; set cfg.train.schedule='constant' and cfg.train.warmup_steps=0, or start a "
     "new run"),
    ("(this run: model.theta=1000): add model.theta=null model.axes_dim=[8,0]. The saved",
     "(this run: model.theta=1000): set cfg.model.theta=None and cfg.model.axes_dim=[8, 0]. The saved"),
    # a preset (a config group's option) or Hydra's own: the overrides to compose cfg with; its other way, settings
    ("(this run: model.width=128): add experiment=quick train.steps=40 (or model.width=32 model.depth=1). The",
     "(this run: model.width=128): add 'experiment=quick', 'train.steps=40' to the overrides cfg is composed with "
     "(or set cfg.model.width=32 and cfg.model.depth=1). The"),
    ("holds model=flux1 (this run: model=mlp): add 'hydra.searchpath=[file:///my conf]' model=my_flux1. ",
     "holds model=flux1 (this run: model=mlp): add 'hydra.searchpath=[file:///my conf]', 'model=my_flux1' to the "
     "overrides cfg is composed with. "),
    # another run's command line, quoted: as it ran
    ("add model.width=32; the run that saved it was launched with: experiment=quick train.steps=8",
     "set cfg.model.width=32; the run that saved it was launched with: experiment=quick train.steps=8"),
    # "add" not followed by overrides: prose
    ("add it to its keywords", "add it to its keywords"),
])
def test_a_fixs_overrides_in_python_words(said, python):
    assert python_words(said) == python
    assert python_words(python) == python  # said once: a refusal raised inside two in_python_words
