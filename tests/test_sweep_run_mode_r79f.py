"""A fix that adds -m to a command typing hydra.mode=RUN says that hydra.mode=RUN goes too (r79f): followed as said
before, -m beside hydra.mode=RUN got Hydra's "Running Hydra app with --multirun, overriding with hydra.mode=MULTIRUN"
warning. Each failed before (the refusal named -m alone)."""

import pytest
from omegaconf import OmegaConf

from gensbi_sharding.harness.override_types import override_problem
from gensbi_sharding.harness.sweep_subdirs import unused_folder_problem


@pytest.mark.parametrize("args, said", [
    (["hydra.mode=RUN", "model=mlp,flux1"],
     "model=mlp,flux1: several values are a sweep, one job per value, which needs -m: python launch.py -m ... "
     "model=mlp,flux1 (without hydra.mode=RUN: -m overrides it)"),
    (["hydra.mode=RUN", "model=[mlp,flux1]"],
     "model=[mlp,flux1]: model takes one option per job, not a list (Hydra would merge them into one config); for one "
     "job per option, sweep them: python launch.py -m ... model=mlp,flux1 (without hydra.mode=RUN: -m overrides "
     "it)"),
])
def test_a_sweep_refused_without_m_says_hydra_mode_run_goes(args, said):
    assert str(override_problem(args)) == said


def test_without_hydra_mode_the_refusal_is_as_it_was():
    assert str(override_problem(["model=mlp,flux1"])) == (
        "model=mlp,flux1: several values are a sweep, one job per value, which needs -m: python launch.py -m ... "
        "model=mlp,flux1")


@pytest.mark.parametrize("typed, said", [
    ("hydra.sweep.subdir=a", "add -m with hydra.mode=RUN left out (python launch.py -m ...)"),
    ("hydra.sweep.dir=b", "or add -m with hydra.mode=RUN left out for a sweep"),
])
def test_a_multirun_setting_in_a_single_run_says_hydra_mode_run_goes(typed, said):
    config = OmegaConf.create({"hydra": {"overrides": {"hydra": ["hydra.mode=RUN", typed]}, "run": {"dir": "out"}}})
    assert said in unused_folder_problem(config, multirun=False)
