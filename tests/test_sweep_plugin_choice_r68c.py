"""The multirun check finds Hydra's own sweeper and launcher by their option names (hydra/sweeper=basic,
hydra/launcher=basic in ``hydra.runtime.choices``), not by their classes' private module paths."""

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

from gensbi_sharding.harness.config import register_configs
from gensbi_sharding.harness.sweep_check import sweep_config_problem
from test_sweep_check import CONF

MOVED = "hydra.core_plugins.basic_sweeper.BasicSweeper"  # where a later Hydra could keep the same basic sweeper


def refusal(sweeper_choice="basic", target=MOVED):
    register_configs()
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        master = compose("config", overrides=["experiment=quick"], return_hydra_config=True)
        with open_dict(master):
            master.hydra.overrides.task = ["experiment=quick", "train.steps=100,-5"]
            master.hydra.sweeper._target_ = target
            master.hydra.runtime.choices["hydra/sweeper"] = sweeper_choice
        return sweep_config_problem(master)


@pytest.mark.slow
def test_the_basic_sweeper_is_known_by_its_option_name_wherever_its_class_lives():
    # Was None: its class path compared with hydra._internal's, so the sweep's refused job went unchecked.
    assert "job 1 (train.steps=-5): ConfigError: train.steps=-5 must be >= 1" in refusal()


def test_another_sweeper_picks_its_jobs_as_it_goes_so_none_is_checked_before():
    assert refusal(sweeper_choice="optuna", target="hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper") \
        is None
