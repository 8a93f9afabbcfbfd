"""+ on one of Hydra's settings: refused only where Hydra refuses it ("Could not append to config. An item is already
at ..."): the setting holds a value before the overrides, and the value added is no dict or list, which Hydra merges
in. Was: every key of Hydra's schema refused, so +hydra.job.name=x (``???`` until Hydra names the job), +hydra.mode=RUN
(null) and +hydra.searchpath=[...] (a list), each of which Hydra runs, were refused before Hydra saw them."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.config import register_configs
from gensbi_sharding.harness.groups import CONF


def hydra_composes(arg: str) -> bool:
    """Whether Hydra composes the project's config with the override ``arg`` (its own verdict, no check of ours)."""
    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        try:
            compose("config", overrides=[arg], return_hydra_config=True)
        except Exception:  # noqa: BLE001 - Hydra's refusal, whatever its class
            return False
    return True


@pytest.mark.slow
@pytest.mark.parametrize("arg", ["+hydra.job.name=x", "+hydra.mode=RUN", "+hydra.searchpath=[file:///tmp]",
                                 "+hydra.job.env_copy=[HOME]", "+hydra.job.env_set={A:b}"])
def test_a_plus_hydra_runs_is_not_refused(arg):
    assert hydra_composes(arg)
    assert command_problem([arg]) is None


@pytest.mark.slow
@pytest.mark.parametrize("arg", ["+hydra.output_subdir=x", "+hydra.job.chdir=true", "+hydra.run.dir=runs/a"])
def test_a_plus_hydra_refuses_is_refused_with_the_override_that_runs(arg):
    assert not hydra_composes(arg)
    key = arg[1:].split("=", 1)[0]
    assert command_problem([arg]) == f"{arg}: {key} exists (+ adds a key the config lacks); write {arg[1:]}"
    assert hydra_composes(arg[1:]) and command_problem([arg[1:]]) is None
