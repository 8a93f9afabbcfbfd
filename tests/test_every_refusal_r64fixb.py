"""run(cfg)'s config checks list every independent refused value at once, the mesh's too (r64, HARNFIX64B)."""

import pytest
import yaml
from omegaconf import OmegaConf

from faults_helpers import compose_tiny
from gensbi_sharding.harness.checked_fix import validate_every
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.refusal import fix_of, parts_of


def test_steps_and_a_model_axis_the_devices_refuse_are_listed_together_and_their_fixes_pass():
    cfg = compose_tiny("mesh=dict")
    cfg.train.steps, cfg.mesh.model_axis = -3, 3
    with pytest.raises(ConfigError) as caught:
        validate_every(cfg)  # was: "train.steps=-3 must be >= 1; e.g. train.steps=3000" alone
    problem = caught.value.args[0]
    assert parts_of(problem) == [
        "train.steps=-3 must be >= 1; e.g. train.steps=3000",
        "mesh.model_axis=3: 8 devices are not divisible by model_axis=3; set mesh.model_axis=2 (divisors of 8: "
        "[1, 2, 4, 8])"], problem
    assert fix_of(problem) == ("train.steps=3000", "mesh.model_axis=2")
    for fix in fix_of(problem):
        key, value = fix.split("=", 1)
        OmegaConf.update(cfg, key, yaml.safe_load(value))
    validate_every(cfg)  # all fixed together: it passes


def test_a_model_axis_alone_is_left_to_the_run_as_before():
    cfg = compose_tiny("mesh=dict")
    cfg.mesh.model_axis = 3
    validate_every(cfg)  # the run refuses it once its devices start, in its own words (as before)
