"""The fixes hydra_values offers for one of Hydra's settings work when pasted into bash. Was: hydra.job.env_set=true
offered +hydra.job.env_set.MY_VAR="True", which the shell gives Hydra as a bare True (refused: a yes/no for a text
setting), and hydra.job.config.override_dirname.item_sep=[a] offered item_sep=, (kv_sep: kv_sep==), which Hydra's
grammar cannot read."""

from __future__ import annotations

import shlex

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.config import register_configs
from gensbi_sharding.harness.groups import CONF


def composed(arg: str):
    """The project's config as Hydra composes it with the override ``arg`` (Hydra's section included)."""
    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("config", overrides=[arg], return_hydra_config=True)


@pytest.mark.slow
@pytest.mark.parametrize("typed, after, key, value", [
    ("hydra.job.env_set=true", "set one by its name: ", "hydra.job.env_set.MY_VAR", "true"),
    ("hydra.job.env_set=1", "set one by its name: ", "hydra.job.env_set.MY_VAR", "1"),
    ("hydra.job.config.override_dirname.item_sep=[a]", "e.g. ", "hydra.job.config.override_dirname.item_sep", ","),
    ("hydra.job.config.override_dirname.kv_sep=[a]", "e.g. ", "hydra.job.config.override_dirname.kv_sep", "="),
])
def test_the_fix_pasted_into_bash_passes_and_hydra_gives_the_setting_its_text(typed, after, key, value):
    problem = command_problem([typed])
    words = shlex.split(problem.split(after, 1)[1].removesuffix(", or leave it out"))
    assert len(words) == 1, problem
    assert command_problem(words) is None, (problem, words)
    assert OmegaConf.select(composed(words[0]), key) == value


@pytest.mark.parametrize("typed, key, value", [
    ("hydra.job.env_set.N=1,2", "hydra.job.env_set.N", "1"),
    ("hydra.job.env_set.MY_FLAG=true,x", "hydra.job.env_set.MY_FLAG", "true"),
    ("+hydra.job.env_set.N=a,b", "hydra.job.env_set.N", "a"),
    ("hydra.job.chdir=true,false", "hydra.job.chdir", True),
])
@pytest.mark.fast_cases(2)
def test_a_refused_sweep_of_hydras_settings_gives_a_fix_hydra_runs(typed, key, value):
    # Was (earlier this round): an entry of env_set typed bare was given its fix bare (hydra.job.env_set.N="1"),
    # which Hydra refuses ("Could not override": env_set holds no N); ++ adds or overrides the entry.
    problem = command_problem(["-m", typed])
    words = shlex.split(problem.split("e.g. ", 1)[1])
    assert len(words) == 1 and command_problem(["-m", *words]) is None, (problem, words)
    assert OmegaConf.select(composed(words[0]), key) == value
