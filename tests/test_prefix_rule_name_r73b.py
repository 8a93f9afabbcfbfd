"""``~rule.name``: the rule table's name (its label), refused as a name, not as a logical axis.

Was: "~rule.name: a rule's axis cannot be removed; set rule.name=null to leave it unsplit": ``name`` is no axis
(nothing is split or unsplit by it), and ``rule.name=null`` renames nothing (the run takes the rule file's name).
"""

from __future__ import annotations

import pytest

from gensbi_sharding.harness.override_prefixes import prefix_problem

NAME = "a rule's name cannot be removed (the console and metrics.json call the rule by it); drop"


@pytest.mark.parametrize("args", [["~rule.name"], ["rule=fsdp", "~rule.name"], ["~rule.name=replicated"]])
def test_removing_the_rules_name_is_refused_as_a_name(args):
    said = prefix_problem(args)
    assert said == f"{args[-1]}: {NAME} {args[-1]}"
    assert "axis" not in said and "unsplit" not in said


def test_removing_an_axis_is_still_refused_as_an_axis():
    assert prefix_problem(["~rule.embed"]) == ("~rule.embed: a rule's axis cannot be removed; set rule.embed=null to "
                                               "leave it unsplit")


@pytest.mark.parametrize("args", [["+rule.name=mine"], ["rule.name=mine"], ["+rule.embed=data"]])
def test_setting_or_adding_is_left_to_the_later_checks(args):
    assert prefix_problem(args) is None
