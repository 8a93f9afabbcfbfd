"""A model factory of one's own is checked against the keywords the run calls it with, before any folder is made."""

import os
from dataclasses import dataclass

import pytest
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from gensbi_sharding.harness import registry
from gensbi_sharding.harness.config import ConfigError, ModelConfig
from gensbi_sharding.harness.model_checks import check_model

GUIDE = " (docs/gensbi_models.md: A model of your own in the harness)"


def make_gated(*, dim_theta, dim_x, rngs, hidden=64):  # as a new user wrote it: no partition_axis
    raise AssertionError("never built: refused before")


def make_narrow(*, dim_theta, dim_x, rngs, partition_axis=None, hidden=64):
    raise AssertionError("never built: refused before")


def make_needy(*, dim_theta, dim_x, rngs, partition_axis, hidden=64, depth):
    raise AssertionError("never built: refused before")


def make_open(*, dim_theta, dim_x, rngs, **settings):
    raise AssertionError("never built here")


@pytest.fixture
def own_model(request):
    def register(name, factory):
        registry.register_model(name)(factory)
        request.addfinalizer(lambda: registry.unregister("model", name))
    return register


def test_a_factory_without_partition_axis_is_refused_naming_the_keyword_to_add(own_model):
    # Was: "[ERROR] TypeError: make_gated() got an unexpected keyword argument 'partition_axis'" once the run's
    # folder was made and the data simulated, "error after 11.8 s; traceback in outputs/.../error.txt".
    own_model("gated_t", make_gated)
    with pytest.raises(ConfigError) as refused:
        check_model(OmegaConf.create({"name": "gated_t", "init": "eager", "hidden": 64}))
    assert str(refused.value) == (
        f"model=gated_t's factory make_gated ({os.path.relpath(__file__)}) takes no keyword partition_axis, "
        "which the run passes every model's factory (partition_axis: the activation layout that activation= and the "
        "rule give, None without a mesh): add partition_axis=None to its keywords and pass it on to the layers" + GUIDE
    )


def test_a_schema_field_the_factory_lacks_and_a_keyword_nothing_passes_are_refused(own_model):
    own_model("narrow_t", make_narrow)
    own_model("needy_t", make_needy)
    own_model("open_t", make_open)
    with pytest.raises(ConfigError, match=r"takes no keyword width, which the run passes from model\.width \(a field "
                                          r"of its schema\): add width to its keywords, or drop the field"):
        check_model(OmegaConf.create({"name": "narrow_t", "init": "eager", "width": 8}))
    with pytest.raises(ConfigError) as refused:
        check_model(OmegaConf.create({"name": "needy_t", "init": "eager", "hidden": 8}))
    assert "needs keyword depth, which the run never passes (it passes dim_theta, dim_x, rngs, partition_axis and " \
           "the fields of model=needy_t's schema: hidden): give depth a default, or add it to the schema" \
           in str(refused.value)
    check_model(OmegaConf.create({"name": "open_t", "init": "eager", "width": 8}))  # **settings takes them all
    check_model(OmegaConf.create({"name": "mlp", "width": 8, "depth": 1, "init": "eager"}))  # the built-ins pass


def test_the_run_is_refused_by_the_check_before_its_folder(own_model, tmp_path):
    # The check Hydra's on_run_start makes before the run's folder (preflight.run_config_problem: job_problem)
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.job_check import job_problem

    @dataclass
    class GatedConfig(ModelConfig):
        name: str = "gated_t"
        hidden: int = 64

    own_model("gated_t", make_gated)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "gated_t.yaml").write_text("defaults:\n  - /gated_t_schema\n  - _self_\n")
    ConfigStore.instance().store(name="gated_t_schema", node=GatedConfig)
    try:
        problem = job_problem(compose_tiny(f"hydra.searchpath=[file://{tmp_path}]", "model=gated_t"))
    finally:
        ConfigStore.instance().repo.pop("gated_t_schema.yaml")
    assert problem is not None and "make_gated" in problem and "takes no keyword partition_axis" in problem, problem


def test_a_decorator_that_takes_partition_axis_itself_is_not_refused_by_the_wrapped_factorys_signature(own_model):
    # Was: inspect.signature followed functools.wraps to make_gated (no partition_axis) and refused
    # "takes no keyword partition_axis", though the decorator takes it and the call works.
    import functools

    def laid_out(factory):
        @functools.wraps(factory)
        def build(*, partition_axis=None, **keywords):
            return factory(**keywords)  # (a real one would lay the model's activations out by partition_axis)
        return build

    own_model("laid_t", laid_out(make_gated))
    check_model(OmegaConf.create({"name": "laid_t", "hidden": 8}))
    own_model("passing_t", functools.wraps(make_gated)(lambda *a, **k: make_gated(*a, **k)))
    with pytest.raises(ConfigError, match="takes no keyword partition_axis"):  # one that passes all on: the wrapped's
        check_model(OmegaConf.create({"name": "passing_t", "hidden": 8}))
