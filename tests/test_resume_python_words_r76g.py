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
from gensbi_sharding.harness.python_words import in_python_words

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


# WORDS77: a fix is said from data (python_words.fix_said), no longer by reading "add ..." back out of the finished
# text; the cases below are the same fixes, launch.py's words and the Python words unchanged.
@pytest.mark.parametrize("words, said, python", [
    # values: settings of cfg, each as Python reads it
    (["train.schedule=constant", "train.warmup_steps=0"], "add train.schedule=constant train.warmup_steps=0",
     "set cfg.train.schedule='constant' and cfg.train.warmup_steps=0"),
    (["model.theta=null", "model.axes_dim=[8,0]"], "add model.theta=null model.axes_dim=[8,0]",
     "set cfg.model.theta=None and cfg.model.axes_dim=[8, 0]"),
    # a preset (a config group's option) or Hydra's own: the overrides to compose cfg with
    (["experiment=quick", "train.steps=40"], "add experiment=quick train.steps=40",
     "add 'experiment=quick', 'train.steps=40' to the overrides cfg is composed with"),
    (["'hydra.searchpath=[file:///my conf]'", "model=my_flux1"],
     "add 'hydra.searchpath=[file:///my conf]' model=my_flux1",
     "add 'hydra.searchpath=[file:///my conf]', 'model=my_flux1' to the overrides cfg is composed with"),
])
def test_a_fixs_overrides_in_python_words(words, said, python):
    from gensbi_sharding.harness.python_words import fix_said, in_python_words

    assert fix_said(words) == said  # launch.py's words: no in_python_words
    with in_python_words():
        assert fix_said(words) == python


@pytest.mark.parametrize("said", [
    # another run's command line, quoted: as it ran; "add" is no override of the folder or resume: left as it is
    "add model.width=32; the run that saved it was launched with: experiment=quick train.steps=8",
    "add it to its keywords",
])
def test_python_words_leaves_what_it_does_not_reword(said):
    with pytest.raises(ConfigError) as refused, in_python_words():  # raised again only with cfg.output_dir named
        raise ConfigError(said)
    assert str(refused.value) == said
