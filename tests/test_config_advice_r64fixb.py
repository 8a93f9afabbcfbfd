"""Config refusals (r64, HARNFIX64B): advice that names a value passes every bound when pasted."""

import pytest

from gensbi_sharding.harness.command_checks import _config_problem
from gensbi_sharding.harness.refusal import fix_of, fixes_of


@pytest.mark.parametrize("args", [
    ["experiment=quick", "eval.c2st_folds=6000"],  # was: set num_samples=12000, then 10000: both below 2 * 6000
    ["experiment=quick", "eval.num_samples=20000", "eval.c2st_folds=6000"],  # was: set num_samples=10000: < 12000
    ["experiment=quick", "eval.c2st_folds=6000", "eval.enabled=false"],  # no reference samples read: 12000 passes
    ["experiment=quick", "eval.num_samples=20000"],
])
def test_the_num_samples_and_folds_advice_passes_when_pasted(args):
    problem = _config_problem(args, every=True)
    assert problem is not None and " is refused too" not in problem, problem
    fixes = fixes_of(fix_of(problem))
    assert fixes and all(f in problem for f in fixes), problem
    assert _config_problem([*args, *fixes], every=True) is None, (problem, fixes)


def test_folds_beyond_the_reference_samples_are_lowered_to_what_the_most_samples_support():
    problem = _config_problem(["experiment=quick", "eval.c2st_folds=6000"], every=True)
    assert problem.startswith("ConfigError: eval.num_samples=128 must be >= 2 * eval.c2st_folds "
                              "(eval.c2st_folds=6000); set eval.num_samples=10000 eval.c2st_folds=5000 "), problem
