"""Factories of one's own as users write them (a data set's, an nnx.Module class, a functools.partial), checked
against the run's call before any folder, and named as written."""

import functools
import os

import pytest
from flax import nnx
from omegaconf import OmegaConf

from gensbi_sharding.harness import registry
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.model_checks import check_model

HERE = os.path.relpath(__file__)
DATA_GUIDE = " (docs/gensbi_models.md: A model or data set of your own in the harness)"


def load_noisy(*, num_simulations, val_fraction, seed, num_observation, theta_transform, x_transform,
               process_index):  # as a user wrote it: no process_count
    raise AssertionError("never called: refused before")


def make_gated(*, dim_theta, dim_x, rngs, hidden=64):  # no partition_axis
    raise AssertionError("never built: refused before")


class Gated(nnx.Module):  # the class itself as the factory, no partition_axis
    def __init__(self, *, dim_theta, dim_x, rngs, hidden=64):
        raise AssertionError("never built: refused before")


class GatedLaidOut(nnx.Module):
    def __init__(self, *, dim_theta, dim_x, rngs, partition_axis=None, hidden=64):
        raise AssertionError("never built here")


@pytest.fixture
def own(request):
    def register(kind, name, factory):
        (registry.register_model if kind == "model" else registry.register_data)(name)(factory)
        request.addfinalizer(lambda: registry.unregister(kind, name))
    return register


def test_a_data_factory_missing_a_keyword_is_refused_before_the_run_folder(own):
    # Typed: @register_data("noisy_t") on load_noisy, then python launch.py data=noisy_t eval.enabled=false. Was:
    # "TypeError: load_noisy() got an unexpected keyword argument 'process_count'" once the run's folder was made.
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.job_check import job_problem

    own("data", "noisy_t", load_noisy)
    problem = job_problem(compose_tiny("data.name=noisy_t", "eval.enabled=false", "data.theta_transform=none"))
    assert problem == (
        f"ConfigError: data=noisy_t's factory load_noisy ({HERE}) takes no keyword process_count, which the run "
        "passes every data set's factory (process_count: the number of shards): add process_count to its keywords"
        + DATA_GUIDE), problem


def test_a_data_factory_needing_a_keyword_nothing_passes_is_refused_and_a_good_one_passes(own):
    from gensbi_sharding.harness.factory_keywords import data_factory_keyword_problem, own_data_problem

    def needy(*, noise, **keywords):
        raise AssertionError("never called")

    assert data_factory_keyword_problem("needy_t", needy) == (
        f"data=needy_t's factory test_a_data_factory_needing_a_keyword_nothing_passes_is_refused_and_a_good_one_passes"
        f".<locals>.needy ({HERE}) needs keyword noise, which the run never passes (it passes num_simulations, "
        "val_fraction, seed, num_observation, theta_transform, x_transform, process_index, process_count): give noise "
        "a default" + DATA_GUIDE)
    assert own_data_problem("two_moons") is None  # load_task, by a functools.partial-free wrapper, takes them
    assert data_factory_keyword_problem("fine", functools.partial(load_noisy, process_count=1)) is None


def test_an_nnx_module_class_as_its_own_factory_is_checked(own):
    # Was: nnx's metaclass __call__(*args, **kwargs) hid __init__'s keywords: no check, a TypeError in the folder.
    own("model", "gated_cls_t", Gated)
    own("model", "laid_cls_t", GatedLaidOut)
    with pytest.raises(ConfigError) as refused:
        check_model(OmegaConf.create({"name": "gated_cls_t", "init": "eager", "hidden": 8}))
    assert str(refused.value).startswith(f"model=gated_cls_t's factory Gated ({HERE}) takes no keyword "
                                         "partition_axis, which the run passes"), str(refused.value)
    check_model(OmegaConf.create({"name": "laid_cls_t", "init": "eager", "hidden": 8}))
    with pytest.raises(ConfigError, match="GatedLaidOut .* takes no keyword width, which the run passes from model"):
        check_model(OmegaConf.create({"name": "laid_cls_t", "init": "eager", "width": 8}))


def test_a_partial_factory_is_named_as_written_not_by_its_repr(own):
    # Was: "model=part_t's factory functools.partial(<function make_gated at 0x7f...>, hidden=32) takes no ...".
    own("model", "part_t", functools.partial(make_gated, hidden=32))
    with pytest.raises(ConfigError) as refused:
        check_model(OmegaConf.create({"name": "part_t", "init": "eager"}))
    assert str(refused.value).startswith(f"model=part_t's factory functools.partial(make_gated, hidden=32) ({HERE}) "
                                         "takes no keyword partition_axis"), str(refused.value)
    with pytest.raises(ValueError) as taken:  # the registry's "already registered" alike
        registry.register_model("part_t")(make_gated)
    assert str(taken.value) == ("model 'part_t' is already registered (by functools.partial(test_factory_keywords_r64b"
                                ".make_gated, hidden=32)); pick another name")


class Builder:  # a callable object as the factory
    def __call__(self, *, dim_theta, dim_x, rngs, hidden=64):
        raise AssertionError("never built: refused before")


def test_a_callable_object_factory_is_named_by_its_class_and_file_not_its_address(own):
    # Was: "model=built_t's factory <test_factory_keywords_r64b.Builder object at 0x7f...> takes no keyword ...".
    own("model", "built_t", Builder())
    with pytest.raises(ConfigError) as refused:
        check_model(OmegaConf.create({"name": "built_t", "init": "eager"}))
    assert str(refused.value).startswith(f"model=built_t's factory a Builder object ({HERE}) takes no keyword "
                                         "partition_axis"), str(refused.value)
