"""A group swept without -m is not told to paste a list, which a config group refuses."""

import pytest

from gensbi_sharding.harness.override_types import override_problem


@pytest.mark.parametrize("command", ["rule=fsdp,tensor", "activation=none,rule"])
def test_a_group_swept_without_m_is_told_only_m(command):
    # Typed: python launch.py experiment=quick rule=fsdp,tensor. Was told "..., or one list for this run:
    # rule=[fsdp,tensor]", and pasting that was refused in turn ("rule takes one option per job, not a list").
    assert override_problem(command.split()) == (
        f"{command}: several values are a sweep, one job per value, which needs -m: python launch.py -m ... {command}")
    assert override_problem(["-m", command]) is None  # the fix it names passes


def test_a_rule_key_swept_without_m_still_offers_its_list():
    # rule.embed takes a list (several mesh axes): the list stays offered for a key inside the rule.
    assert override_problem(["rule.embed=data,model"]).endswith(", or one list for this run: rule.embed=[data,model]")
