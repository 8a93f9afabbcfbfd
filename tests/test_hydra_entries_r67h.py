"""A key in one of Hydra's dict settings typed bare where Hydra's config lacks it: refused in one line naming ++.

Was (left alone by round 66's fuzz, found again in round 67's): ``hydra.job.env_set.N=1``, ``hydra.callbacks={a:1}``,
``hydra.job.env_set={A:1}`` passed every check, then Hydra's several-line "Could not override ... To append to your
config use +... Key 'N' is not in struct". The advice is checked as Hydra composes it.
"""

import shlex

import pytest
from hydra import compose, initialize_config_dir

from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.groups import CONF
from gensbi_sharding.harness.hydra_entries import hydra_entry_problem, hydra_type


def _hydra(overrides):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=True).hydra


@pytest.mark.slow
@pytest.mark.parametrize("arg, lacked", [("hydra.job.env_set.N=1", "hydra.job.env_set.N"),
                                         ("hydra.job.env_set={A:1}", "hydra.job.env_set.A"),
                                         ("hydra.callbacks={a:{_target_:gensbi_sharding.harness.summary.SweepSummary}}",
                                          "hydra.callbacks.a"),
                                         ("hydra.callbacks.sweep_summary.x=1", "hydra.callbacks.sweep_summary.x")])
def test_a_bare_key_hydra_lacks_names_plus_plus_and_the_fix_composes(arg, lacked):
    problem = command_problem([arg])
    fix = f"++{arg}"
    assert problem == (f"{arg}: Hydra's config holds no {lacked} to override, and a key typed without + must be there; "
                       f"to add it, write {shlex.quote(fix)}")
    pasted = shlex.split(problem.rsplit("; to add it, write ", 1)[1])
    assert pasted == [fix] and command_problem(pasted) is None  # the advice, pasted
    with pytest.raises(Exception, match="Could not override"):  # what Hydra said of the command as typed
        _hydra([arg])
    assert _hydra(pasted) is not None


def test_the_fix_adds_the_entry_hydra_then_holds():
    assert dict(_hydra(["++hydra.job.env_set.N=1"]).job.env_set) == {"N": "1"}


@pytest.mark.parametrize("arg", ["hydra.callbacks.sweep_summary._target_=x",
                                 "hydra.callbacks.sweep_summary={_target_:y}", "++hydra.job.env_set.N=1",
                                 "+hydra.job.env_set.N=1", "hydra.job.env_set={}", "hydra.job.chdir=true"])
@pytest.mark.fast_cases(2)
def test_a_key_hydra_holds_or_one_added_passes(arg):
    assert hydra_entry_problem([arg]) is None
    _hydra([arg])  # and Hydra composes it


def test_the_schema_walk_gives_a_dicts_entries_its_value_type_as_hydra_converts_them():
    from typing import Any, Dict, List

    assert hydra_type("hydra.job.env_set") == Dict[str, str] and hydra_type("hydra.job.env_set.N") is str
    assert hydra_type("hydra.callbacks.a") is Any and hydra_type("hydra.callbacks.a.b") is None
    assert hydra_type("hydra.searchpath") == List[str] and hydra_type("hydra.job.chdir") is not None
    assert _hydra(["++hydra.job.env_set.N=1"]).job.env_set.N == "1"  # str, as hydra_type says


@pytest.mark.slow
def test_a_yes_no_for_an_entry_hydra_lacks_is_quoted_with_plus_plus_and_composes():
    problem = command_problem(["hydra.job.env_set.OTHER=false"])  # was "hydra.job.env_set.OTHER='false'": refused
    pasted = shlex.split(problem.rsplit("quote it: ", 1)[1])
    assert pasted == ["++hydra.job.env_set.OTHER='false'"] and command_problem(pasted) is None
    assert _hydra(pasted).job.env_set.OTHER == "false"


# A preset's sweeper params are a dict too (found by this round's second fuzz): sweep=rules_x_model_axis
# hydra.sweeper.params.seed=1 passed every check, then Hydra's "Could not override 'hydra.sweeper.params.seed'".
@pytest.mark.slow
def test_a_sweeper_param_the_preset_lacks_typed_bare_names_plus_plus():
    args = ["sweep=rules_x_model_axis", "hydra.sweeper.params.seed=1"]
    assert command_problem(args) == ("hydra.sweeper.params.seed=1: Hydra's config holds no hydra.sweeper.params.seed "
                                     "to override, and a key typed without + must be there; to add it, write "
                                     "++hydra.sweeper.params.seed=1")
    with pytest.raises(Exception, match="Could not override"):
        _hydra(args)
    pasted = [args[0], "++hydra.sweeper.params.seed=1"]
    assert command_problem(pasted) is None and _hydra(pasted).sweeper.params.seed == "1"  # params are text
    assert command_problem([args[0], "hydra.sweeper.params.rule=fsdp"]) is None  # one the preset sets
