"""A preset group swept without -m (``sweep=glob(*)``, ``experiment=quick,sbibm``): refused in one line naming -m.

Was: the checks took the preset's own multirun as given (``CommandLine.multirun``), though Hydra must pick the preset
before it can read its mode: every check passed, then Hydra's "Sweep parameters 'sweep=glob(*)' requires --multirun"
or its several-line "Ambiguous value" (found by round 67's fuzz of the command line).
"""

import shlex

import pytest

from gensbi_sharding.harness.command_checks import command_problem


@pytest.mark.parametrize("arg", ["sweep=glob(*)", "experiment=quick,sbibm", "experiment=glob(q*)",
                                 "sweep=choice(rules_x_model_axis)"])
def test_a_swept_preset_without_m_names_m_and_the_fix_passes(arg):
    problem = command_problem([arg])
    assert problem == (f"{arg}: several values are a sweep, one job per value, which needs -m: python launch.py -m "
                       f"... {shlex.quote(arg)}")
    assert command_problem(["-m", arg]) is None  # the advice, pasted


def test_a_preset_that_turns_multirun_on_still_sweeps_other_keys():
    assert command_problem(["sweep=rules_x_model_axis"]) is None
    assert command_problem(["experiment=quick", "seed=0,1"]).endswith("-m ... seed=0,1")
