"""Settings that name mesh axes (``activation.*``, the rule table) are refused with the config, at start-up.

Every mesh the harness builds has the axes ``("data", "model")`` (``rule_config.MESH_AXES``), so a setting naming
another is known bad before JAX starts its devices. Was: ``activation.batch_axis=nope`` passed ``validate``, the
run started its devices, simulated its data ([3/7]) and was refused only when building the model ([4/7]).
"""

import pytest

from faults_helpers import compose_tiny, run_tiny
from gensbi_sharding.harness import devices
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.config_checks import validate
from gensbi_sharding.harness.rule_config import MESH_AXES


@pytest.mark.slow
@pytest.mark.parametrize("override, message", [
    ("activation.batch_axis=nope", "activation: batch_axis=nope names mesh axis nope, which the mesh lacks "
                                   "(axes: data, model); set activation.batch_axis=null"),
    ("activation.head_axis=[data,pipe]", "activation: head_axis=[data,pipe] names mesh axis pipe, which the "
                                         "mesh lacks (axes: data, model); set activation.head_axis=[data] (or null: unsplit)"),
    ("rule.embed=nope", "rule.embed=nope (rule replicated+overrides) names mesh axis nope, which the mesh lacks; valid "
                        "values: data, model or null; set rule.embed=null"),
])
def test_a_setting_naming_no_mesh_axis_is_refused_by_validate(override, message):
    with pytest.raises(ConfigError) as err:
        validate(compose_tiny(override))
    assert str(err.value).startswith(message), str(err.value)
    for fine in ("activation.batch_axis=model", "activation.batch_axis=[data,model]", "activation.head_axis=null"):
        validate(compose_tiny(fine))


def test_without_a_mesh_or_constraints_nothing_is_named():
    # mesh=none places nothing and activation=none constrains nothing: the settings are unused, not refused
    validate(compose_tiny("mesh=none", "activation.batch_axis=nope"))
    validate(compose_tiny("activation=none", "activation.batch_axis=nope"))
    assert MESH_AXES == ("data", "model")


def test_the_run_is_refused_before_its_devices_start(tmp_path, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("devices started before the activation setting was checked")

    monkeypatch.setattr(devices, "configure_devices", never)  # run imports it when it starts the devices
    metrics = run_tiny(tmp_path / "run", "activation.batch_axis=nope")
    assert metrics["status"] == "error"
    assert metrics["error"].startswith("ConfigError: activation: batch_axis=nope names mesh axis nope")
