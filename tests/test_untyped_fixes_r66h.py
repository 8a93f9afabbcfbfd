"""A config loaded untyped (a run's .hydra/config.yaml, a dict) gets the range refusals' fixes a composed one gets,
so several refusals are listed together with the line that fixes all of them (r66)."""

import pytest
import yaml
from omegaconf import OmegaConf, open_dict

from faults_helpers import compose_tiny
from gensbi_sharding.harness.checked_fix import validate_every
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.refusal import fix_of, fixes_of


def _untyped(tmp_path, *edits, plain=False):
    """The tiny config as OmegaConf.load of a run's .hydra/config.yaml gives it (``plain``: as a dict, made a
    config), ``edits`` (``key=value``) set on it."""
    path = tmp_path / "config.yaml"
    path.write_text(OmegaConf.to_yaml(compose_tiny()))
    cfg = OmegaConf.load(path)
    cfg = OmegaConf.create(OmegaConf.to_container(cfg)) if plain else cfg
    for edit in edits:
        key, value = edit.split("=", 1)
        OmegaConf.update(cfg, key, yaml.safe_load(value), merge=False)
    return cfg


def _refusal(cfg):
    with pytest.raises(ConfigError) as refused:
        validate_every(cfg)
    return refused.value.args[0]


@pytest.mark.parametrize("plain", [False, True])
@pytest.mark.parametrize("edit, fix", [
    ("train.steps=-3", "train.steps=3000"),
    ("data.batch_size=0", "data.batch_size=256"),
    ("mesh.model_axis=0", "mesh.model_axis=1"),
    ("model.depth=0", "model.depth=3"),  # the model's section: its schema by model.name
    ("train.warmup_steps=-1", "train.warmup_steps=0"),
])
@pytest.mark.fast_cases(2)
def test_a_range_refusal_of_an_untyped_config_offers_the_fix_a_composed_one_does(tmp_path, plain, edit, fix):
    # Was: "train.steps=-3 must be >= 1" and no fix: the schema default was looked up on the section's type, dict
    refusal = _refusal(_untyped(tmp_path, edit, plain=plain))
    assert refusal == _refusal(compose_tiny(edit)) and refusal.endswith(f"; e.g. {fix}"), refusal
    assert fix_of(refusal) == fix
    validate_every(_untyped(tmp_path, edit, fix, plain=plain))  # the fix, set: it passes


@pytest.mark.slow
@pytest.mark.parametrize("plain", [False, True])
def test_several_refusals_of_an_untyped_config_are_listed_with_every_fix_together(tmp_path, plain):
    # Was: the first alone ("train.steps=-3 must be >= 1"), the next said once that was fixed
    edits = ("train.steps=-3", "seed=-1", "model.depth=0")
    refusal = _refusal(_untyped(tmp_path, *edits, plain=plain))
    assert refusal.splitlines() == ["3 settings are refused, each with its fix:",
                                    "  train.steps=-3 must be >= 1; e.g. train.steps=3000",
                                    "  seed=-1 must be >= 0; e.g. seed=0",
                                    "  model.depth=0 must be >= 1; e.g. model.depth=3",
                                    "  all fixed together: train.steps=3000 seed=0 model.depth=3"]
    assert refusal == _refusal(compose_tiny(*edits))
    validate_every(_untyped(tmp_path, *edits, *fixes_of(fix_of(refusal)), plain=plain))  # all fixed: it passes


def test_run_of_an_untyped_config_records_every_refusal_with_its_fix(tmp_path):
    from gensbi_sharding.harness.run import run

    cfg = _untyped(tmp_path, "train.steps=-3", "seed=-1")
    with open_dict(cfg):
        cfg.output_dir = str(tmp_path / "run")
    metrics = run(cfg)
    assert metrics["status"] == "error", metrics
    # run(cfg) from Python: the fixes as the settings it sets (WORDS77B; were launch.py's overrides)
    assert metrics["error"].splitlines()[-3:] == ["  train.steps=-3 must be >= 1; e.g. cfg.train.steps=3000",
                                                  "  seed=-1 must be >= 0; e.g. cfg.seed=0",
                                                  "  all fixed together: cfg.train.steps=3000 and cfg.seed=0"], \
        metrics["error"]
