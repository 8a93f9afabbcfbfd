"""Hydra's settings it acts on as the job starts (hydra_start): an env_copy of a variable not set, a callback Hydra
cannot instantiate. Each refused in one line; was (found by round 67's fuzz) a KeyError traceback, "Cannot
instantiate config of type int", "Error locating target 'nope.X'" after every check had passed.
"""

import pytest

from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.hydra_start import callback_problem, env_copy_problem

NO_DICT = "a callback of Hydra's is a dict naming its class ({_target_: module.Class}), and a is not one; give one, " \
          "or leave it out"


def test_an_env_copy_of_a_variable_not_set_names_it(monkeypatch):
    monkeypatch.delenv("R67_NOPE_VAR", raising=False)
    monkeypatch.setenv("R67_SET_VAR", "1")
    arg = "hydra.job.env_copy=[R67_SET_VAR,R67_NOPE_VAR]"
    assert command_problem([arg]) == (f"{arg}: R67_NOPE_VAR is not set in this shell, and Hydra copies only a variable "
                                      "that is (it stopped with a KeyError); export R67_NOPE_VAR=<value> first, or "
                                      "leave it out")
    monkeypatch.setenv("R67_NOPE_VAR", "x")  # exported, as advised
    assert env_copy_problem([arg]) is None and command_problem([arg]) is None


@pytest.mark.parametrize("arg", ["++hydra.callbacks={a:1}", "+hydra.callbacks={a:1}", "++hydra.callbacks.a=1",
                                 "++hydra.callbacks.a={x:1}"])
def test_a_callback_that_is_no_class_dict_is_refused(arg):
    assert command_problem([arg]) == f"{arg}: {NO_DICT}"


@pytest.mark.parametrize("arg, target, reason", [
    ("++hydra.callbacks.a={_target_:nope.X}", "nope.X", "no module nope is installed"),
    ("hydra.callbacks.sweep_summary._target_=gensbi_sharding.harness.summary.Nope",
     "gensbi_sharding.harness.summary.Nope", "gensbi_sharding.harness.summary has no Nope")])
def test_a_callback_class_no_import_finds_is_named(arg, target, reason):
    name = "a" if ".a=" in arg else "sweep_summary"
    assert command_problem([arg]) == (f"{arg}: Hydra cannot import the callback {name}'s class {target} ({reason}); "
                                      "give an importable module.Class, or leave it out")


@pytest.mark.parametrize("arg", ["++hydra.callbacks.a={_target_:gensbi_sharding.harness.summary.SweepSummary}",
                                 "hydra.callbacks.sweep_summary._target_=gensbi_sharding.harness.summary.SweepSummary",
                                 "hydra.callbacks={}", "hydra.job.env_copy=[]"])
@pytest.mark.fast_cases(2)
def test_callbacks_hydra_can_instantiate_pass(arg):
    assert callback_problem([arg]) is None and command_problem([arg]) is None
