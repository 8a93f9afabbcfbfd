"""A config loaded untyped (a run's .hydra/config.yaml) and edited is checked against the typed schema (r64)."""

import pytest
import yaml
from omegaconf import OmegaConf, open_dict

from faults_helpers import compose_tiny
from gensbi_sharding.harness.checked_fix import validate_every
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.refusal import fix_of, fixes_of


def _loaded(tmp_path):
    """The config as a run's own .hydra/config.yaml gives it back: OmegaConf.load, untyped."""
    path = tmp_path / "config.yaml"
    path.write_text(OmegaConf.to_yaml(compose_tiny()))
    return OmegaConf.load(path)


EDITS = {  # was: TypeError '>=' not supported / 'float' object cannot be interpreted as an integer / Missing key
    "train.steps='abc'": (lambda c: setattr(c.train, "steps", "abc"), "train.steps=abc: Value 'abc' of type 'str' "
                          "could not be converted to Integer; e.g. train.steps=3000"),
    "train.steps=2.5": (lambda c: setattr(c.train, "steps", 2.5), "train.steps=2.5: train.steps takes a whole number "
                        "(Value '2.5' of type 'float' could not be converted to Integer); e.g. train.steps=2"),
    "del eval.plot": (lambda c: c.eval.__delitem__("plot"), "eval.plot is missing from the config; set eval.plot=true "
                      "(its default), or put the key back"),
    "eval.observations=[1,'x']": (lambda c: setattr(c.eval, "observations", [1, "x"]), "eval.observations=[1,x]: "
                                  "Value 'x' of type 'str' could not be converted to Integer; e.g. "
                                  "eval.observations=null"),
    "model.width='wide'": (lambda c: setattr(c.model, "width", "wide"), "model.width=wide: Value 'wide' of type 'str' "
                           "could not be converted to Integer; e.g. model.width=128"),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_an_untyped_config_edited_is_refused_in_one_line_whose_fix_passes(tmp_path, edit):
    change, said = EDITS[edit]
    cfg = _loaded(tmp_path)
    validate_every(cfg)  # as loaded: it passes
    change(cfg)
    with pytest.raises(ConfigError) as caught:
        validate_every(cfg)
    message = str(caught.value)
    assert message == said and "\n" not in message
    fixes = fixes_of(fix_of(caught.value.args[0]))
    assert fixes, message
    with open_dict(cfg):
        for fix in fixes:
            key, value = fix.split("=", 1)
            OmegaConf.update(cfg, key, yaml.safe_load(value), merge=False)
    validate_every(cfg)  # the fix, set: it passes


def test_run_of_an_edited_untyped_config_records_the_one_line_refusal(tmp_path):
    from gensbi_sharding.harness.run import run

    cfg = _loaded(tmp_path)
    with open_dict(cfg):
        cfg.output_dir = str(tmp_path / "run")
    cfg.train.steps = "abc"
    metrics = run(cfg)  # was: TypeError '>=' not supported between instances of 'str' and 'int'
    assert metrics["status"] == "error", metrics
    # run(cfg) from Python: the fix as the setting it sets (WORDS77B; was launch.py's "e.g. train.steps=3000")
    assert "train.steps=abc: Value 'abc' of type 'str' could not be converted to Integer; e.g. cfg.train.steps=3000" \
        in metrics["error"], metrics["error"]


def test_a_model_name_naming_another_models_fields_is_said_so_with_the_model_they_fit(tmp_path):
    cfg = _loaded(tmp_path)
    cfg.model.name = "transformer"  # model=mlp's fields: named so, not "model.<field> is missing"
    with pytest.raises(ConfigError) as caught:
        validate_every(cfg)
    assert str(caught.value) == ("model.name=transformer does not fit the model settings in the config (those of "
                                 "mlp); set model.name=mlp, or the settings of transformer")
    cfg.model.name = "mlp"
    validate_every(cfg)
