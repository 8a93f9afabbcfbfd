"""A group choice Hydra has no option for is named in one parenthesis, its value one word (group_compose).

Was: "rule has no option ${mesh} (which resolves to dict) (its options: ...)", two parentheses back to back; a value
resolving to one in parentheses read "(which resolves to (a)) (its options", and a choice typed in them "has no
option (x) (its options", the message's punctuation and the value's mixed.
"""

import shlex

import pytest

from checkout_files import options_on_disk, shipped_options
from gensbi_sharding.harness.command_checks import command_problem

# Hydra lists every rule on disk, a user's too (the README's conf/rule/my_rule.yaml), and the shipped ones are these
RULES = ", ".join(options_on_disk("rule"))
SHIPPED_RULES = ["fsdp", "fsdp_tensor", "replicated", "tensor"]
LOGS = "default, disabled, gensbi, none, stdout"


@pytest.mark.parametrize("typed, said", [
    ("rule=${mesh}", f"rule has no option ${{mesh}} (it resolves to dict; its options: {RULES}); pick one, e.g. "
                     "rule=replicated"),
    ("rule=${oc.env:NOPE,'(a)'}", f"rule has no option \"${{oc.env:NOPE,'(a)'}}\" (it resolves to '(a)'; its options: "
                                  f"{RULES}); pick one, e.g. rule=replicated"),
    ("hydra/job_logging='(x)'", f"hydra/job_logging has no option '(x)' (its options: {LOGS}); pick one, or leave "
                                "hydra/job_logging='(x)' out"),
    ("hydra/job_logging=''", f"hydra/job_logging has no option '' (its options: {LOGS}); pick one, or leave "
                             "hydra/job_logging='' out"),
])
@pytest.mark.fast_cases(2)
def test_a_choice_of_no_option_is_said_in_one_parenthesis(typed, said):
    problem = command_problem([typed])
    assert shipped_options("rule") == SHIPPED_RULES and set(SHIPPED_RULES) <= set(RULES.split(", "))
    assert problem == f"{typed}: {said}"
    assert "((" not in problem and "))" not in problem and ") (" not in problem
    if "e.g. " in problem:  # the fix, pasted
        assert command_problem(shlex.split(problem.rsplit("e.g. ", 1)[1])) is None
