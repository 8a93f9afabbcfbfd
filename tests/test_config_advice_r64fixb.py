"""Config refusals (r64, HARNFIX64B): advice that names a value passes every bound when pasted."""

import pytest

from gensbi_sharding.harness.command_checks import config_problem
from gensbi_sharding.harness.refusal import fix_of, fixes_of


@pytest.mark.parametrize("args", [
    ["experiment=quick", "eval.c2st_folds=6000"],  # was: set num_samples=12000, then 10000: both below 2 * 6000
    ["experiment=quick", "eval.num_samples=20000", "eval.c2st_folds=6000"],  # was: set num_samples=10000: < 12000
    ["experiment=quick", "eval.c2st_folds=6000", "eval.enabled=false"],  # no reference samples read: 12000 passes
    ["experiment=quick", "eval.num_samples=20000"],
])
@pytest.mark.fast_cases(1)
def test_the_num_samples_and_folds_advice_passes_when_pasted(args):
    problem = config_problem(args, every=True)
    assert problem is not None and " is refused too" not in problem, problem
    fixes = fixes_of(fix_of(problem))
    assert fixes and all(f in problem for f in fixes), problem
    assert config_problem([*args, *fixes], every=True) is None, (problem, fixes)


def test_folds_beyond_the_reference_samples_are_lowered_to_what_the_most_samples_support():
    problem = config_problem(["experiment=quick", "eval.c2st_folds=6000"], every=True)
    assert problem.startswith("ConfigError: eval.num_samples=128 must be >= 2 * eval.c2st_folds "
                              "(eval.c2st_folds=6000); set eval.num_samples=10000 eval.c2st_folds=5000 "), problem


def test_a_checked_fix_whose_own_fix_is_refused_in_turn_offers_no_value_that_fails():
    # The kind: a fix (a=12) refused by another bound (a <= 10), whose fix (a=10) the first bound refuses again.
    # Was: "...; set a=12, though a=12 is refused too: a=12 is above 10; set a=10", a=10 below 2 x 6 too.
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.checked_fix import with_checked_fix
    from gensbi_sharding.harness.refusal import Refusal

    def check(cfg):
        if cfg.a < 2 * cfg.b:
            return Refusal(f"a={cfg.a} must be >= 2 * b (b={cfg.b})", f"a={2 * cfg.b}")
        return Refusal(f"a={cfg.a} is above 10", "a=10") if cfg.a > 10 else None

    problem = with_checked_fix(OmegaConf.create({"a": 1, "b": 6}), check(OmegaConf.create({"a": 1, "b": 6})), check)
    assert problem == "a=1 must be >= 2 * b (b=6); set a=12, though a=12 is refused too: a=12 is above 10", problem
    # where the second fix passes, it is offered as before
    problem = with_checked_fix(OmegaConf.create({"a": 1, "b": 5}), check(OmegaConf.create({"a": 1, "b": 5})), check)
    assert problem == "a=1 must be >= 2 * b (b=5); set a=10", problem
